//! The verbs that read or change runs, nodes, executors and alarms (and what every
//! verb's tables share), written once against a [`Transport`]: on a store or through a server they send the same
//! admin API requests, print the same columns, and `--json` prints the API's answer
//! as it is.

use super::transport::Transport;
use super::{Outcome, print_json, table};
use clap::{Args, Subcommand};
use serde_json::Value;

/// `s` as one path segment or query value (percent-encoded).
pub(crate) fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
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
    /// At most this many (1-1000).
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
}

#[derive(Args, Debug)]
pub(crate) struct ExecutorsArgs {
    /// Only this group's instances.
    #[arg(long)]
    pub group: Option<String>,
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
    /// At most this many (1-1000).
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
}

/// A value as a table cell: `-` for null, strings as they are, arrays joined by
/// `,`.
pub(super) fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(text).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// A column of a table: the value at a JSON pointer, or one computed from the item.
pub(super) enum Col {
    /// The value at this JSON pointer.
    At(&'static str),
    /// What this function makes of the item.
    With(fn(&Value) -> String),
}

/// Prints `items` as a table of `columns`, or `whole` as JSON.
fn show(whole: &Value, items: &Value, columns: &[(&str, Col)], json: bool) -> Outcome {
    if json {
        return print_json(whole);
    }
    let rows: Vec<Vec<String>> = items
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|i| {
            columns
                .iter()
                .map(|(_, c)| match c {
                    Col::At(p) => text(i.pointer(p).unwrap_or(&Value::Null)),
                    Col::With(f) => f(i),
                })
                .collect()
        })
        .collect();
    let head: Vec<&str> = columns.iter().map(|c| c.0).collect();
    table::print(&head, &rows);
    Ok(())
}

/// Reads the page at `path` and prints its `items` as a table of `columns`, or the
/// page as JSON.
pub(super) async fn listed(
    api: &dyn Transport,
    path: &str,
    columns: &[(&str, Col)],
    json: bool,
) -> Outcome {
    let page = api.call("GET", path, None).await?;
    show(&page, &page["items"], columns, json)
}

/// Prints `v` as JSON, or `line` for people.
pub(super) fn said(v: &Value, json: bool, line: String) -> Outcome {
    if json {
        return print_json(v);
    }
    println!("{line}");
    Ok(())
}

/// How long a run took, from its JSON.
fn took(r: &Value) -> String {
    let at = |k: &str| {
        r[k].as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
    };
    match (at("started_at"), at("ended_at")) {
        (Some(s), Some(e)) => format!("{} ms", (e - s).num_milliseconds()),
        _ => "-".into(),
    }
}

/// `runs …`.
pub(crate) async fn runs(api: &dyn Transport, args: &RunsArgs, json: bool) -> Outcome {
    if let Some(RunsCommand::Kill { id }) = &args.action {
        let v = api.call("POST", &format!("/runs/{id}/kill"), None).await?;
        return said(
            &v,
            json,
            format!("killed run {id} on {}", text(&v["killed_on"])),
        );
    }
    if let Some(RunsCommand::Log { id, offset }) = &args.action {
        let v = api
            .call("GET", &format!("/runs/{id}/log?offset={offset}"), None)
            .await?;
        if json {
            return print_json(&v);
        }
        for l in v["log"]["lines"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            println!("{}", table::escape(l.as_str().unwrap_or_default()));
        }
        return Ok(());
    }
    let mut path = format!("/runs?limit={}", args.limit);
    if let Some(j) = &args.job {
        path.push_str(&format!("&job={}", enc(j)));
    }
    if let Some(s) = &args.status {
        path.push_str(&format!("&status={}", enc(s)));
    }
    listed(
        api,
        &path,
        &[
            ("run", Col::At("/id")),
            ("job", Col::At("/job_id")),
            ("fire", Col::At("/fire_at")),
            ("status", Col::At("/status")),
            ("trigger", Col::At("/trigger")),
            ("attempt", Col::At("/attempt")),
            ("started", Col::At("/started_at")),
            ("took", Col::With(took)),
            ("node", Col::At("/node")),
            ("executor", Col::At("/executor")),
            ("error", Col::At("/error")),
        ],
        json,
    )
    .await
}

/// `nodes`.
pub(crate) async fn nodes(api: &dyn Transport, json: bool) -> Outcome {
    listed(
        api,
        "/nodes",
        &[
            ("node", Col::At("/info/node_id")),
            ("host", Col::At("/info/host")),
            ("version", Col::At("/info/version")),
            ("slots", Col::At("/info/capacity")),
            ("started", Col::At("/info/started_at")),
            ("last beat", Col::At("/last_beat")),
        ],
        json,
    )
    .await
}

/// `executors`.
pub(crate) async fn executors(api: &dyn Transport, args: &ExecutorsArgs, json: bool) -> Outcome {
    let path = match &args.group {
        Some(g) => format!("/executors?group={}", enc(g)),
        None => "/executors".to_string(),
    };
    listed(
        api,
        &path,
        &[
            ("group", Col::At("/info/group")),
            ("address", Col::At("/info/address")),
            ("handlers", Col::At("/info/handlers")),
            ("capacity", Col::At("/info/capacity")),
            ("version", Col::At("/info/version")),
            ("last beat", Col::At("/last_beat")),
        ],
        json,
    )
    .await
}

/// `alarms …`.
pub(crate) async fn alarms(api: &dyn Transport, args: &AlarmsArgs, json: bool) -> Outcome {
    if let Some(action) = &args.action {
        let (id, verb, done) = match action {
            AlarmsCommand::Retry { id } => (id, "retry", "retried"),
            AlarmsCommand::Discard { id } => (id, "discard", "discarded"),
        };
        let v = api
            .call("POST", &format!("/alarms/{id}/{verb}"), None)
            .await?;
        return said(&v, json, format!("{done} alarm {id}"));
    }
    let mut path = format!("/alarms?limit={}", args.limit);
    if let Some(s) = &args.status {
        path.push_str(&format!("&status={}", enc(s)));
    }
    listed(
        api,
        &path,
        &[
            ("id", Col::At("/id")),
            ("job", Col::At("/event/job_id")),
            ("kind", Col::At("/event/kind")),
            ("status", Col::At("/status")),
            ("attempts", Col::At("/attempts")),
            ("created", Col::At("/created_at")),
            ("last error", Col::At("/last_error")),
        ],
        json,
    )
    .await
}
