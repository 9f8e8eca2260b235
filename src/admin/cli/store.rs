//! The command line on a store: opening it (its schema checked), `migrate` and
//! `doctor`, which only a store answers, and the operations the other verbs' admin
//! API is served over in this process (as `cli:$USER`, with the payload limit and
//! executor groups of the configuration file when one is read).

use super::{Failure, Outcome, print_json, table};
use crate::admin::config::ServerConfig;
use crate::backends::connect::BackendConfig;
use crate::job::Job;
use crate::ops::{Doctor, Ops, RunKiller};
use crate::record::RunRecord;
use crate::remote::RemoteGroup;
use crate::store::JobStore;
use crate::time::Timestamp;

use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// The operating system's user running the command line: a change it makes on a
/// store is audited as `cli:` and this name.
pub(crate) fn user() -> String {
    std::env::var("USER").unwrap_or_else(|_| "unknown".into())
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

/// The command line's operations on `store`, and the executor groups of `config`
/// (attached to the store's registry): its payload limit (the default without
/// one), and those groups to kill runs with.
pub(crate) fn ops(
    store: Arc<dyn JobStore>,
    config: Option<&crate::admin::ServerConfig>,
) -> Result<(Ops, Vec<RemoteGroup>), Failure> {
    let mut ops = Ops::new(store.clone());
    let mut groups = Vec::new();
    if let Some(c) = config {
        groups = crate::admin::serve::groups(c)?;
        for g in &groups {
            g.attach(store.clone());
        }
        let by_name = groups
            .iter()
            .map(|g| (g.name().to_string(), g.clone()))
            .collect();
        ops = ops
            .max_payload_bytes(c.max_payload_bytes)
            .killer(Arc::new(GroupKiller(by_name)));
    }
    Ok((ops, groups))
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
