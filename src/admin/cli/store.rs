//! The commands that read or change a store: `migrate`, `doctor`, `jobs`, `runs`,
//! `nodes`, `executors`, `alarms`. They talk to the store directly (no scheduler
//! node is started); every change goes through the operations layer as
//! `cli:$USER`, validated against the configuration file when one is read.

use super::{Failure, Outcome, print_json, table};
use crate::admin::config::ServerConfig;
use crate::backends::connect::BackendConfig;
use crate::job::{Job, JobId};
use crate::ops::{Actor, Doctor, Ops, RunKiller};
use crate::record::RunRecord;
use crate::record::RunStatus;
use crate::remote::RemoteGroup;
use crate::store::RunQuery;
use crate::store::{AlarmChange, JobStore};
use crate::time::Timestamp;
use clap::{Args, Subcommand};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Who the audit log names for a change made from this command line: `cli:` and
/// the operating system's user.
pub(crate) fn actor() -> Actor {
    Actor::cli(&std::env::var("USER").unwrap_or_else(|_| "unknown".into()))
}

/// Kills runs through the executor groups of the configuration file (their
/// instances, found in the store's registry, signed with the group's secret).
struct GroupKiller(HashMap<String, RemoteGroup>);

#[async_trait::async_trait]
impl RunKiller for GroupKiller {
    async fn kill(&self, run: &RunRecord, job: Option<&Job>) -> crate::error::Result<Vec<String>> {
        match job
            .and_then(Job::remote)
            .and_then(|t| self.0.get(t.group()))
        {
            Some(group) => group.kill_everywhere(run.id.0, run.token).await,
            None => Ok(Vec::new()),
        }
    }
}

/// The command line's operations on `store`: the payload limit of `config` (the
/// default without one), and its executor groups to kill runs with.
pub(crate) fn ops(
    store: Arc<dyn JobStore>,
    config: Option<&crate::admin::ServerConfig>,
) -> Result<Ops, Failure> {
    let mut ops = Ops::new(store.clone());
    if let Some(c) = config {
        let mut groups = HashMap::new();
        for g in &c.groups {
            let group = if g.addresses.is_empty() {
                RemoteGroup::registered(&g.name, &g.secret.0)?
            } else {
                RemoteGroup::fixed(&g.name, &g.secret.0, &g.addresses)?
            };
            group.attach(store.clone());
            groups.insert(g.name.clone(), group);
        }
        ops = ops
            .max_payload_bytes(c.max_payload_bytes)
            .killer(Arc::new(GroupKiller(groups)));
    }
    Ok(ops)
}

/// A change to one run.
#[derive(Subcommand, Debug)]
pub(crate) enum RunsCommand {
    /// Stops a running run on the executor instances of its group (against a store,
    /// the group's secret comes from the configuration file).
    Kill { id: i64 },
    /// Prints a run's log lines from an offset: a local run's from the store; a
    /// remote run's from its executor instance (through a server only).
    Log {
        id: i64,
        /// The first line wanted (0).
        #[arg(long, default_value_t = 0)]
        offset: u64,
    },
}

#[derive(Args, Debug)]
pub(crate) struct RunsArgs {
    #[command(subcommand)]
    pub(crate) action: Option<RunsCommand>,
    /// Only this job's runs.
    #[arg(long)]
    pub job: Option<String>,
    /// Only runs with this status (`running`, `succeeded`, `failed`, `timed_out`,
    /// `cancelled`, `lost`, `misfired`, `returned`).
    #[arg(long)]
    pub status: Option<String>,
    /// At most this many (1-10000).
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
}

#[derive(Args, Debug)]
pub(crate) struct ExecutorsArgs {
    /// Only this group's instances.
    #[arg(long)]
    pub group: Option<String>,
}

/// Connects to the store at `url`; runs pending migrations only when `migrate`.
pub(crate) async fn open(
    url: &str,
    prefix: Option<String>,
    migrate: bool,
) -> Result<Arc<dyn JobStore>, Failure> {
    let mut config = BackendConfig::new(url)
        .migrate(migrate)
        .max_connections(2)
        .connect_timeout(Duration::from_secs(10));
    if let Some(p) = prefix {
        config = config.prefix(p);
    }
    Ok(config.connect().await?.store)
}

/// Refuses a store whose schema is not this build's, naming `jobwheel migrate`
/// (a store never migrated has no tables, and its first query would only say that
/// a table does not exist). A store without versions (memory) passes.
pub(crate) async fn check_schema(store: &Arc<dyn JobStore>) -> Outcome {
    schema_outcome(store.name(), store.schema().await?)
}

/// [`check_schema`]'s answer for a store named `name` whose schema is `schema`.
fn schema_outcome(name: &str, schema: Option<crate::store::SchemaVersion>) -> Outcome {
    let Some(v) = schema else {
        return Ok(());
    };
    match v.found {
        Some(found) if found == v.known => Ok(()),
        Some(found) if found > v.known => Err(Failure::Failed(format!(
            "the store's schema is version {found}, newer than this jobwheel's {}: upgrade jobwheel",
            v.known
        ))),
        Some(found) => Err(Failure::Failed(format!(
            "the store's schema is version {found} of {}: run `jobwheel migrate` first",
            v.known
        ))),
        None => Err(Failure::Failed(format!(
            "the {name} store has no jobwheel tables yet: run `jobwheel migrate` first"
        ))),
    }
}

pub(super) fn limit(field: &str, n: usize) -> Result<usize, Failure> {
    if (1..=10_000).contains(&n) {
        Ok(n)
    } else {
        Err(Failure::Usage(format!(
            "invalid --{field} {n}: must be 1-10000"
        )))
    }
}

pub(super) fn job_id(id: &str) -> Result<JobId, Failure> {
    Ok(JobId::new(id)?)
}

pub(super) fn time(t: Option<Timestamp>) -> String {
    t.map_or_else(|| "-".to_string(), |t| t.to_string())
}

pub(crate) async fn migrated(store: &Arc<dyn JobStore>, json: bool) -> Outcome {
    if json {
        return print_json(&json!({"store": store.name(), "migrated": true}));
    }
    println!("{}: migrations applied", store.name());
    Ok(())
}

/// `config`: the `jobwheel.toml` read, when there is one: its alarms say whether
/// the jobs' alarm events reach anybody.
pub(crate) async fn doctor(
    store: &Arc<dyn JobStore>,
    config: Option<&ServerConfig>,
    json: bool,
) -> Outcome {
    let schema = store.schema().await?;
    if schema.is_some_and(|v| v.found.is_none()) {
        // Nothing to scan: say what to do rather than that a table is missing.
        return schema_outcome(store.name(), schema);
    }
    let before = Timestamp::now();
    let store_now = store.now().await?;
    let after = Timestamp::now();
    // The store read its clock between `before` and `after`: the skew is at most
    // off by that round trip.
    let mid = before + after.duration_since(before) / 2;
    let skew_ms = store_now.as_millis() - mid.as_millis();
    let found = Doctor::scan(&**store).await?;
    let nodes = store.nodes().await?.items;
    let silent: Vec<&str> = nodes
        .iter()
        .filter(|n| store_now.duration_since(n.last_beat) > Duration::from_secs(60))
        .map(|n| n.info.node_id.as_str())
        .collect();
    let schema_ok = schema.is_none_or(|v| v.found == Some(v.known));
    let alarms = config.map(|c| c.email_alarms.len() + c.webhook_alarms.len());
    let nobody = alarms == Some(0) && found.alarm_jobs > 0;
    let healthy = found.is_healthy() && silent.is_empty() && skew_ms.abs() < 1_000 && schema_ok;
    if json {
        let corrupt = |rows: &[crate::store::CorruptRow]| {
            rows.iter()
                .map(|r| json!({"kind": r.kind, "id": r.id, "reason": r.reason}))
                .collect::<Vec<_>>()
        };
        print_json(&json!({
            "healthy": healthy,
            "schema": schema,
            "clock_skew_ms": skew_ms,
            "corrupt_jobs": corrupt(&found.jobs),
            "corrupt_nodes": corrupt(&found.nodes),
            "nodes": nodes.len(),
            "silent_nodes": silent,
            "alarm_jobs": found.alarm_jobs,
            "alarms_configured": alarms,
        }))?;
    } else {
        match schema {
            Some(v) => println!(
                "schema: version {} of {} ({} migrations are numbered per backend; {} is the newest this jobwheel has){}",
                v.found
                    .map_or_else(|| "none".to_string(), |f| f.to_string()),
                v.known,
                store.name(),
                v.known,
                match v.found {
                    _ if schema_ok => "",
                    Some(f) if f > v.known => " — written by a newer jobwheel: upgrade this one",
                    _ => " — run jobwheel migrate",
                }
            ),
            None => println!("schema: not versioned ({})", store.name()),
        }
        println!(
            "clock: the store is {skew_ms} ms {} this machine",
            if skew_ms >= 0 { "ahead of" } else { "behind" }
        );
        println!(
            "nodes: {} ({} silent for over 60 s)",
            nodes.len(),
            silent.len()
        );
        for n in &silent {
            println!("  silent: {}", table::escape(n));
        }
        match alarms {
            Some(n) => println!(
                "alarms: {} job(s) name alarm events; jobwheel.toml configures {n} alarm(s){}",
                found.alarm_jobs,
                if nobody {
                    " — warning: their events are recorded not_needed and reach nobody; add [[email_alarms]] or [[webhook_alarms]]"
                } else {
                    ""
                }
            ),
            None => println!(
                "alarms: {} job(s) name alarm events (the alarms are each node's own: read the nodes' configuration)",
                found.alarm_jobs
            ),
        }
        println!(
            "unreadable rows: {} job(s), {} node(s)",
            found.jobs.len(),
            found.nodes.len()
        );
        for r in found.jobs.iter().chain(&found.nodes) {
            println!(
                "  {} {}: {}",
                r.kind,
                table::escape(&r.id),
                table::escape(&r.reason)
            );
        }
    }
    if healthy {
        Ok(())
    } else {
        Err(Failure::Failed("doctor found a problem (above)".into()))
    }
}

pub(crate) async fn runs(ops: &Ops, args: &RunsArgs, json: bool) -> Outcome {
    let store = ops.store();
    if let Some(RunsCommand::Kill { id }) = &args.action {
        let killed = ops.kill(&actor(), crate::record::RunId(*id)).await?;
        if json {
            return print_json(&json!({"run": id, "killed_on": killed}));
        }
        println!("killed run {id} on {}", table::escape(&killed.join(", ")));
        return Ok(());
    }
    if let Some(RunsCommand::Log { id, offset }) = &args.action {
        let (run, lines) = ops
            .run_lines(&actor(), crate::record::RunId(*id), *offset, 1000)
            .await?;
        if json {
            return print_json(&json!({"run": id, "lines": lines, "done": run.ended_at.is_some()}));
        }
        for l in &lines {
            println!("{}", table::escape(&l.line));
        }
        if lines.is_empty() && *offset == 0 {
            eprintln!(
                "run {id} has no stored log lines (a remote run's log is kept by its executor instance: ask through a server with --server)"
            );
        }
        return Ok(());
    }
    let mut query = RunQuery::new().limit(limit("limit", args.limit)?);
    if let Some(job) = &args.job {
        query = query.job(job_id(job)?);
    }
    if let Some(status) = &args.status {
        let s = RunStatus::parse(status).ok_or_else(|| {
            Failure::Usage(format!(
                "invalid --status {status:?}: one of {}",
                RunStatus::ALL.map(RunStatus::as_str).join(", ")
            ))
        })?;
        query = query.status(s);
    }
    let runs = store.runs(&query).await?;
    if json {
        return print_json(&runs);
    }
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            vec![
                r.id.0.to_string(),
                r.job_id.to_string(),
                r.fire_at.to_string(),
                r.status.as_str().to_string(),
                r.attempt.to_string(),
                r.node.clone(),
                r.executor.clone().unwrap_or_else(|| "-".into()),
                r.duration()
                    .map_or_else(|| "-".to_string(), |d| format!("{} ms", d.as_millis())),
                r.error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    table::print(
        &[
            "run", "job", "fire", "status", "attempt", "node", "executor", "took", "error",
        ],
        &rows,
    );
    Ok(())
}

pub(crate) async fn nodes(store: &Arc<dyn JobStore>, json: bool) -> Outcome {
    let page = store.nodes().await?;
    if json {
        return print_json(&page.items);
    }
    let rows: Vec<Vec<String>> = page
        .items
        .iter()
        .map(|n| {
            vec![
                n.info.node_id.clone(),
                n.info.host.clone(),
                n.info.version.clone(),
                n.info.capacity.to_string(),
                n.info.started_at.to_string(),
                n.last_beat.to_string(),
            ]
        })
        .collect();
    table::print(
        &["node", "host", "version", "slots", "started", "last beat"],
        &rows,
    );
    Ok(())
}

pub(crate) async fn executors(
    store: &Arc<dyn JobStore>,
    args: &ExecutorsArgs,
    json: bool,
) -> Outcome {
    let page = store.executors(args.group.as_deref()).await?;
    if json {
        return print_json(&page.items);
    }
    let rows: Vec<Vec<String>> = page
        .items
        .iter()
        .map(|e| {
            vec![
                e.info.group.clone(),
                e.info.address.clone(),
                e.info.handlers.join(","),
                e.info.capacity.to_string(),
                e.info.version.clone(),
                e.last_beat.to_string(),
            ]
        })
        .collect();
    table::print(
        &[
            "group",
            "address",
            "handlers",
            "capacity",
            "version",
            "last beat",
        ],
        &rows,
    );
    Ok(())
}

/// An operator's change to one alarm event.
#[derive(Subcommand, Debug)]
pub(crate) enum AlarmsCommand {
    /// Delivers a pending or failed event again now.
    Retry { id: i64 },
    /// Never delivers a pending or failed event.
    Discard { id: i64 },
}

#[derive(Args, Debug)]
pub(crate) struct AlarmsArgs {
    #[command(subcommand)]
    pub(crate) action: Option<AlarmsCommand>,
    /// Only events with this status (`pending`, `sending`, `sent`, `failed`,
    /// `not_needed`).
    #[arg(long)]
    pub status: Option<String>,
    /// At most this many (1-10000).
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
}

pub(crate) async fn alarms(ops: &Ops, args: &AlarmsArgs, json: bool) -> Outcome {
    let store = ops.store();
    if let Some(action) = &args.action {
        let (change, done) = match action {
            AlarmsCommand::Retry { id } => {
                (AlarmChange::Retry(crate::record::AlarmId(*id)), "retried")
            }
            AlarmsCommand::Discard { id } => (
                AlarmChange::Discard(crate::record::AlarmId(*id)),
                "discarded",
            ),
        };
        ops.alarm_change(&actor(), change).await?;
        let id = change.id().0;
        if json {
            return print_json(&json!({"alarm": id, "done": done}));
        }
        println!("{done} alarm {id}");
        return Ok(());
    }
    let status = args
        .status
        .as_deref()
        .map(|s| {
            crate::record::AlarmStatus::parse(s).ok_or_else(|| {
                Failure::Usage(format!("invalid --status {s:?}: not an alarm status"))
            })
        })
        .transpose()?;
    let query = crate::store::AlarmQuery::new(limit("limit", args.limit)?).status(status);
    let items = store.alarms(&query).await?;
    if json {
        return print_json(&items);
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|a| {
            vec![
                a.id.0.to_string(),
                a.event.job_id.to_string(),
                a.event.kind.as_str().to_string(),
                a.status.as_str().to_string(),
                a.attempts.to_string(),
                a.created_at.to_string(),
                a.last_error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    table::print(
        &[
            "id",
            "job",
            "kind",
            "status",
            "attempts",
            "created",
            "last error",
        ],
        &rows,
    );
    Ok(())
}
