//! The `jobwheel` program's verbs (feature `server`): `serve` (a scheduler node, the
//! admin API and the executor registration endpoint in one process) and a command
//! line over a jobwheel store or a running server. The binary is a thin main over
//! [`main`]; every change a verb makes goes through the operations layer
//! ([`Ops`](crate::ops::Ops)), as `cli:$USER` against a store or as the token's
//! owner through a server.
//!
//! ```text
//! jobwheel serve --config jobwheel.toml
//! jobwheel cron '0 30 9 ? * MON-FRI' --zone Asia/Shanghai --next 5
//! jobwheel --url postgres://app@db/app jobs list
//! jobwheel --url sqlite://jobs.db?mode=rwc --json runs --job report.daily --status failed
//! ```
//!
//! `jobs`, `runs`, `nodes`, `executors`, `alarms` and `access` talk to a running server instead
//! with `--server URL --token T` (or `JOBWHEEL_SERVER`, `JOBWHEEL_TOKEN`): its role
//! checks and audit apply.
//!
//! People get tables; scripts pass `--json` and get one JSON document on stdout.
//! Exit codes: 0 done; 1 the store or the operation failed (or `doctor` found a
//! problem); 2 bad usage or invalid input (the message names the argument and the
//! value); 3 the job named does not exist.

mod access;
mod cron;
mod jobs;
mod serve;
mod store;
mod table;
mod transport;
mod verbs;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Distributed scheduled jobs: inspect and operate a jobwheel store.
#[derive(Parser, Debug)]
#[command(name = "jobwheel", version, about, long_about = None)]
struct Cli {
    /// The store: `sqlite://jobs.db`, `postgres://…`, `mysql://…`, `redis://…`.
    #[arg(long, env = "JOBWHEEL_URL", global = true)]
    url: Option<String>,
    /// Table or key prefix of the store (the backend's default without it).
    #[arg(long, env = "JOBWHEEL_PREFIX", global = true)]
    prefix: Option<String>,
    /// One JSON document on stdout instead of a table.
    #[arg(long, global = true)]
    json: bool,
    /// A running server to talk to by its admin API instead of the store (`jobs`,
    /// `runs`, `nodes`, `executors`, `alarms`, `access`); needs `--token`.
    #[arg(long, env = "JOBWHEEL_SERVER", global = true)]
    server: Option<String>,
    /// An API token of the server (`Authorization: Bearer`).
    #[arg(long, env = "JOBWHEEL_TOKEN", global = true, hide_env_values = true)]
    token: Option<String>,
    /// The configuration file (TOML, as `serve` reads it). Without it,
    /// `./jobwheel.toml` when there is one: its store (unless `--url`), its payload
    /// limit and its executor groups (to kill runs) apply to the commands on a store.
    #[arg(long, env = "JOBWHEEL_CONFIG", global = true)]
    config: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The next fires of a cron expression in a time zone, and what it means.
    Cron(cron::CronArgs),
    /// Runs the store's pending migrations (other commands never change the schema).
    Migrate,
    /// Checks the store: its schema version, rows it cannot read, this machine's
    /// clock against the store's, nodes whose heartbeat stopped.
    Doctor,
    /// Jobs: list, show, add, edit, copy, pause, resume, trigger, remove.
    #[command(subcommand)]
    Jobs(jobs::JobsCommand),
    /// The run log, newest first; `runs kill ID` stops a running run.
    Runs(verbs::RunsArgs),
    /// Scheduler nodes and their heartbeats.
    Nodes,
    /// Registered executor instances.
    Executors(verbs::ExecutorsArgs),
    /// The alarm outbox, newest first; `alarms retry ID` and `alarms discard ID`
    /// act on one event.
    Alarms(verbs::AlarmsArgs),
    /// Accounts and API tokens added while servers run (kept hashed in the store):
    /// list, add, remove; no restart needed.
    #[command(subcommand)]
    Access(access::AccessCommand),
    /// Runs the server: a scheduler node for the configured executor groups, the
    /// admin API and the executor registration endpoint, until SIGTERM or Ctrl-C.
    Serve(serve::ServeArgs),
    /// Prints the argon2 hash of a password (read from standard input) for a
    /// `[[users]]` entry of the server's configuration.
    HashPassword(serve::HashPasswordArgs),
    /// Prints a new API token and the SHA-256 a `[[tokens]]` entry keeps of it.
    NewToken,
}

/// A failure, and the exit code it maps to.
#[derive(Debug)]
enum Failure {
    /// Bad usage or input: exit 2.
    Usage(String),
    /// The job named does not exist: exit 3.
    NotFound(String),
    /// The store or the operation failed: exit 1.
    Failed(String),
}

impl From<crate::error::Error> for Failure {
    fn from(e: crate::error::Error) -> Self {
        match e {
            crate::error::Error::Invalid { .. }
            | crate::error::Error::UnknownHandler { .. }
            | crate::error::Error::UnknownGroup { .. } => Failure::Usage(e.to_string()),
            crate::error::Error::NotFound { .. } => Failure::NotFound(e.to_string()),
            other => Failure::Failed(other.to_string()),
        }
    }
}

type Outcome = Result<(), Failure>;

/// Runs the program on this process's arguments; the exit code says how it went.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("jobwheel: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            let (code, message) = match f {
                Failure::Usage(m) => (2, m),
                Failure::NotFound(m) => (3, m),
                Failure::Failed(m) => (1, m),
            };
            eprintln!("jobwheel: {}", table::escape(&message));
            ExitCode::from(code)
        }
    }
}

async fn run(cli: Cli) -> Outcome {
    let json = cli.json;
    match cli.command {
        Command::Cron(args) => cron::run(&args, json),
        Command::Serve(args) => serve::run(&args, cli.config, cli.url, cli.prefix).await,
        Command::HashPassword(args) => serve::hash(&args),
        Command::NewToken => serve::token(json),
        command if cli.server.is_some() => {
            if matches!(command, Command::Migrate | Command::Doctor) {
                return Err(Failure::Usage(
                    "migrate and doctor work on the store: use --url, not --server".into(),
                ));
            }
            let server = cli.server.unwrap_or_default();
            verb(&transport::Api::new(&server, cli.token)?, command, json).await
        }
        command => {
            let config = serve::found_config(cli.config.as_deref())?;
            let url = cli
                .url
                .or_else(|| config.as_ref().map(|c| c.store.clone()))
                .ok_or_else(|| {
                    Failure::Usage(
                        "this command needs the store: --url, JOBWHEEL_URL or a jobwheel.toml"
                            .into(),
                    )
                })?;
            let prefix = cli
                .prefix
                .or_else(|| config.as_ref().and_then(|c| c.prefix.clone()));
            let migrate = matches!(command, Command::Migrate);
            let store = store::open(&url, prefix, migrate).await?;
            if !matches!(command, Command::Migrate | Command::Doctor) {
                store::check_schema(&store).await?;
            }
            match command {
                Command::Migrate => store::migrated(&store, json).await,
                Command::Doctor => store::doctor(&store, config.as_ref(), json).await,
                command => {
                    let (ops, groups) = store::ops(store.clone(), config.as_ref())?;
                    let local = transport::Local::new(ops, config.as_ref(), groups)?;
                    verb(&local, command, json).await
                }
            }
        }
    }
}

/// A verb of the admin API (`jobs`, `runs`, `nodes`, `executors`, `alarms`,
/// `access`), the same on a store and through a server.
async fn verb(api: &dyn transport::Transport, command: Command, json: bool) -> Outcome {
    match command {
        Command::Jobs(c) => jobs::jobs(api, c, json).await,
        Command::Runs(a) => verbs::runs(api, &a, json).await,
        Command::Nodes => verbs::nodes(api, json).await,
        Command::Executors(a) => verbs::executors(api, &a, json).await,
        Command::Alarms(a) => verbs::alarms(api, &a, json).await,
        Command::Access(c) => access::access(api, c, json).await,
        Command::Cron(_)
        | Command::Migrate
        | Command::Doctor
        | Command::Serve(_)
        | Command::HashPassword(_)
        | Command::NewToken => unreachable!("not a verb of the admin API"),
    }
}

/// Prints `value` as pretty JSON.
fn print_json(value: &impl serde::Serialize) -> Outcome {
    let text = serde_json::to_string_pretty(value).map_err(|e| Failure::Failed(e.to_string()))?;
    println!("{text}");
    Ok(())
}
