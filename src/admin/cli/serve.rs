//! `jobwheel serve`, and the two helpers that make its accounts:
//! `hash-password` and `new-token`.

use super::{Failure, Outcome};
use crate::admin::auth::{hash_password, new_token, random_bytes};
use crate::admin::{Server, ServerConfig};
use clap::Args;
use std::path::{Path, PathBuf};

/// What `serve` logs without `RUST_LOG`: jobwheel's own events from `info` (start,
/// refused requests, failed logins and runs, misfires, unserved jobs), other crates'
/// from `warn`.
pub(crate) const DEFAULT_LOG: &str = "warn,jobwheel=info";

/// Sends `tracing` events to standard error, filtered by `RUST_LOG` (its syntax:
/// `debug`, `jobwheel=debug,sqlx=warn` …) or [`DEFAULT_LOG`]. A filter that does not
/// parse is said on standard error and the default used.
fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = match std::env::var("RUST_LOG") {
        Ok(v) if !v.trim().is_empty() => EnvFilter::try_new(&v).unwrap_or_else(|e| {
            eprintln!("jobwheel: RUST_LOG={v:?} is not a filter ({e}); logging {DEFAULT_LOG}");
            EnvFilter::new(DEFAULT_LOG)
        }),
        _ => EnvFilter::new(DEFAULT_LOG),
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// The configuration file `serve` reads from the working directory when none is
/// named, and writes on a first start.
const DEFAULT_CONFIG: &str = "jobwheel.toml";

/// `serve` reads the configuration file named by the global `--config`; without
/// it, `./jobwheel.toml`; when that does not exist either, a first start writes one
/// (an embedded SQLite store in the working directory, a generated secret, an
/// `admin` account with a generated password printed once, and an executor group
/// `default`).
#[derive(Args, Debug)]
pub(crate) struct ServeArgs {}

/// What a first start writes, and the password it generated.
fn first_config() -> (String, String) {
    let password = hex::encode(random_bytes(12));
    let text = format!(
        "# Written by the first `jobwheel serve` in this directory. Keep it private:\n\
         # it holds the secret that signs sessions and the executor group's secret.\n\
         # Reference: docs/book/src/server.md.\n\
         listen = \"127.0.0.1:8080\"\n\
         store = \"sqlite://jobwheel.db?mode=rwc\"\n\
         session_secret = \"{secret}\"\n\
         \n\
         [[users]]\n\
         name = \"admin\"\n\
         password_hash = \"{hash}\"\n\
         role = \"admin\"\n\
         \n\
         [[groups]]\n\
         name = \"default\"\n\
         secret = \"{group}\"\n",
        secret = hex::encode(random_bytes(32)),
        hash = hash_password(&password),
        group = hex::encode(random_bytes(24)),
    );
    (text, password)
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(text.as_bytes())
}

/// The file of an SQLite store URL (`sqlite://jobwheel.db?mode=rwc` →
/// `jobwheel.db`); `None` for another backend or an in-memory database.
fn sqlite_file(url: &str) -> Option<&Path> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let memory = path.is_empty() || path == ":memory:" || query.contains("mode=memory");
    (!memory).then(|| Path::new(path))
}

/// Makes the SQLite database private before the store opens it: a new file is
/// created with mode 0600 (SQLite gives its `-wal` and `-shm` files the database's
/// mode); an existing one readable by others is left as it is, with a warning.
fn private_database(url: &str) -> Result<(), Failure> {
    let Some(path) = sqlite_file(url) else {
        return Ok(());
    };
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            #[cfg(unix)]
            if let Ok(meta) = std::fs::metadata(path) {
                use std::os::unix::fs::PermissionsExt;
                if meta.permissions().mode() & 0o077 != 0 {
                    tracing::warn!(
                        path = %path.display(),
                        mode = format!("{:o}", meta.permissions().mode() & 0o777),
                        "the SQLite database is readable by other users; chmod 600 it"
                    );
                }
            }
            Ok(())
        }
        // A directory that does not exist or cannot be written: the store says so
        // when it opens the database.
        Err(_) => Ok(()),
    }
}

fn load(path: &Path) -> Result<ServerConfig, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Usage(format!("cannot read --config {}: {e}", path.display())))?;
    ServerConfig::from_toml(&text).map_err(|e| Failure::Usage(format!("{}: {e}", path.display())))
}

/// The configuration the commands on a store read: the file named, or
/// `./jobwheel.toml` when there is one (`None` otherwise), with the environment's
/// `JOBWHEEL_*` overrides.
pub(crate) fn found_config(named: Option<&Path>) -> Result<Option<ServerConfig>, Failure> {
    let mut config = match named {
        Some(path) => load(path)?,
        None if Path::new(DEFAULT_CONFIG).exists() => load(Path::new(DEFAULT_CONFIG))?,
        None => return Ok(None),
    };
    config.override_from(|k| std::env::var(k).ok())?;
    Ok(Some(config))
}

pub(crate) async fn run(
    _: &ServeArgs,
    named: Option<PathBuf>,
    url: Option<String>,
    prefix: Option<String>,
) -> Outcome {
    init_logging();
    let mut first_password = None;
    let mut config = match &named {
        Some(path) => load(path)?,
        None if Path::new(DEFAULT_CONFIG).exists() => load(Path::new(DEFAULT_CONFIG))?,
        None => {
            let (text, password) = first_config();
            write_private(Path::new(DEFAULT_CONFIG), &text)
                .map_err(|e| Failure::Failed(format!("cannot write {DEFAULT_CONFIG}: {e}")))?;
            first_password = Some(password);
            load(Path::new(DEFAULT_CONFIG))?
        }
    };
    config.override_from(|k| std::env::var(k).ok())?;
    if let Some(u) = url {
        config.store = u;
    }
    if prefix.is_some() {
        config.prefix = prefix;
    }
    private_database(&config.store)?;
    let server = Server::start(config.clone()).await?;
    let addr = server.local_addr();
    println!("jobwheel serving on http://{addr}");
    println!("  admin API:  http://{addr}/api/v1 (OpenAPI: /api/v1/openapi.json)");
    if !config.groups.is_empty() {
        println!("  executors register at http://{addr}/v1/registry/beat");
    }
    match first_password {
        Some(pw) => {
            println!("  first start: wrote {DEFAULT_CONFIG}; log in as admin with password {pw}");
            println!("  (shown once; change it with `jobwheel hash-password` and the file)");
            if let Some(g) = config.groups.first() {
                println!(
                    "  attach an executor: group {}, secret in {DEFAULT_CONFIG}",
                    g.name
                );
            }
        }
        None => println!("  log in with an account of the configuration (users / tokens)"),
    }
    shutdown_signal().await;
    println!("jobwheel: stopping");
    server.shutdown().await;
    Ok(())
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

#[derive(Args, Debug)]
pub(crate) struct HashPasswordArgs {
    /// Read the password from this environment variable instead of standard input.
    #[arg(long)]
    from_env: Option<String>,
}

/// Prints the argon2 hash of a password read from standard input (one line) or an
/// environment variable, for `users.password_hash`.
pub(crate) fn hash(args: &HashPasswordArgs) -> Outcome {
    let password = match &args.from_env {
        Some(var) => std::env::var(var)
            .map_err(|_| Failure::Usage(format!("invalid --from-env {var:?}: not set")))?,
        None => {
            let mut line = String::new();
            std::io::stdin()
                .read_line(&mut line)
                .map_err(|e| Failure::Failed(format!("cannot read standard input: {e}")))?;
            line.trim_end_matches(['\r', '\n']).to_string()
        }
    };
    if password.chars().count() < 8 {
        return Err(Failure::Usage(
            "invalid password: must be at least 8 characters".into(),
        ));
    }
    println!("{}", hash_password(&password));
    Ok(())
}

/// Prints a new API token and the `[[tokens]]` lines that accept it.
pub(crate) fn token(json: bool) -> Outcome {
    let (token, sha) = new_token();
    if json {
        return super::print_json(&serde_json::json!({"token": token, "sha256": sha}));
    }
    println!("token:  {token}");
    println!("config: sha256 = \"{sha}\"");
    Ok(())
}
