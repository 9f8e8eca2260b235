//! `jobwheel jobs`: list, show, add, edit, copy, pause, resume, trigger, remove a
//! job, and show its dependencies (on a store or through a server, the same).

use super::transport::Transport;
use super::verbs::{Col, enc, listed, said, text};
use super::{Failure, Outcome, print_json, table};
use crate::schedule::Schedule;
use crate::time::Timestamp;
use clap::Subcommand;
use serde_json::Value;
use std::time::Duration;

#[derive(Subcommand, Debug)]
pub(crate) enum JobsCommand {
    /// Jobs in id order.
    List {
        /// At most this many (1-1000).
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Start after this id (the last id of the previous page).
        #[arg(long)]
        after: Option<String>,
    },
    /// One job, with its definition.
    Get { id: String },
    /// A job's dependencies: its children, the jobs whose children it is, and the
    /// releases queued for it (fires of its parents it has yet to run).
    Deps { id: String },
    /// Runs a job that waits for several parents once for an upstream instant, in
    /// place of the parents that have not released it.
    Release {
        id: String,
        /// The upstream instant (RFC 3339, as `jobs deps` lists it).
        #[arg(long)]
        instant: String,
    },
    /// Drops the releases queued for a job at an upstream instant: it does not run
    /// for it.
    Skip {
        id: String,
        /// The upstream instant (RFC 3339, as `jobs deps` lists it).
        #[arg(long)]
        instant: String,
    },
    /// Stops a job firing until resumed (a run in progress finishes).
    Pause { id: String },
    /// Resumes a paused job from its next fire after now.
    Resume { id: String },
    /// Runs a job now, once any run in progress has finished.
    Trigger {
        id: String,
        /// JSON to run this fire (and its retries) with in place of the job's payload.
        #[arg(long)]
        payload: Option<String>,
    },
    /// Removes a job (its runs stay in the log).
    Rm { id: String },
    /// Creates a copy of a job under another id (its schedule starts afresh); exit 1
    /// when a job with that id exists.
    Copy {
        id: String,
        /// The copy's id.
        #[arg(long)]
        to: String,
    },
    /// Creates a job from its JSON definition (`-` reads standard input); exit 1
    /// when a job with its id exists.
    Add {
        /// The definition: a file, or `-`.
        #[arg(long)]
        file: String,
    },
    /// Replaces a job's definition with the JSON given (its id must be `id`).
    Edit {
        id: String,
        /// The definition: a file, or `-`.
        #[arg(long)]
        file: String,
    },
}

/// The text of `file` (`-`: standard input).
pub(crate) fn read_definition(file: &str) -> Result<String, Failure> {
    if file == "-" {
        std::io::read_to_string(std::io::stdin())
            .map_err(|e| Failure::Usage(format!("cannot read standard input: {e}")))
    } else {
        std::fs::read_to_string(file)
            .map_err(|e| Failure::Usage(format!("cannot read --file {file:?}: {e}")))
    }
}

/// Reads `--payload`: JSON text. Exit 2 naming the option when it is not JSON.
pub(crate) fn parse_payload(text: &str) -> Result<serde_json::Value, Failure> {
    serde_json::from_str(text).map_err(|e| Failure::Usage(format!("--payload is not JSON: {e}")))
}

/// How a job's schedule reads in a table.
fn schedule(job: &Value) -> String {
    let Some(s) = job
        .pointer("/job/schedule")
        .and_then(|s| serde_json::from_value::<Schedule>(s.clone()).ok())
    else {
        return "-".into();
    };
    match s {
        Schedule::Cron(c) => format!("cron {} {}", c.expr().as_str(), c.zone().name()),
        Schedule::Interval { every, .. } => format!("every {}", humantime(every)),
        Schedule::Once { at } => format!("once {at}"),
        Schedule::Never => "never (fires when triggered)".to_string(),
    }
}

fn humantime(d: Duration) -> String {
    humantime_serde::re::humantime::format_duration(d).to_string()
}

const JOB_COLUMNS: &[(&str, Col)] = &[
    ("id", Col::At("/job/id")),
    ("handler", Col::At("/job/handler")),
    ("schedule", Col::With(schedule)),
    ("group", Col::At("/job/remote/group")),
    (
        "enabled",
        Col::With(|j| {
            if j.pointer("/job/enabled") == Some(&Value::Bool(false)) {
                "paused".into()
            } else {
                "yes".into()
            }
        }),
    ),
    ("next fire", Col::At("/next_fire_at")),
    (
        "running",
        Col::With(|j| match &j["running"] {
            Value::Null => "-".into(),
            id => format!("run {id}"),
        }),
    ),
];

/// `jobs …`.
pub(crate) async fn jobs(api: &dyn Transport, command: JobsCommand, json: bool) -> Outcome {
    // An id the store would refuse is a usage error naming it, before any request.
    let job = |id: &str| -> Result<String, Failure> {
        crate::job::JobId::new(id)?;
        Ok(format!("/jobs/{}", enc(id)))
    };
    match command {
        JobsCommand::List { limit, after } => {
            let mut path = format!("/jobs?limit={limit}");
            if let Some(a) = after {
                path.push_str(&format!("&after={}", enc(&a)));
            }
            listed(api, &path, JOB_COLUMNS, json).await
        }
        JobsCommand::Get { id } => {
            let v = api.call("GET", &job(&id)?, None).await?;
            if json {
                return print_json(&v);
            }
            println!(
                "next fire: {} ({})",
                text(&v["next_fire_at"]),
                text(&v["next_trigger"])
            );
            println!("attempt:   {}", text(&v["attempt"]));
            println!("updated:   {}", text(&v["updated_at"]));
            let definition = serde_json::to_string_pretty(&v["job"])
                .map_err(|e| Failure::Failed(e.to_string()))?;
            for line in definition.lines() {
                println!("{}", table::escape(line));
            }
            Ok(())
        }
        JobsCommand::Deps { id } => {
            let v = api
                .call("GET", &format!("{}/dependencies", job(&id)?), None)
                .await?;
            if json {
                return print_json(&v);
            }
            let d: crate::ops::Dependencies = serde_json::from_value(v)
                .map_err(|e| Failure::Failed(format!("unexpected answer: {e}")))?;
            print_dependencies(&d);
            Ok(())
        }
        JobsCommand::Release { id, instant: at } => {
            let at = instant(&at)?;
            let body = serde_json::json!({ "fire_at": at }).to_string();
            let v = api
                .call("POST", &format!("{}/release", job(&id)?), Some(body))
                .await?;
            if json {
                return print_json(&v);
            }
            let names: Vec<&str> = v["in_place_of"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            print_released(&id, at, &names);
            Ok(())
        }
        JobsCommand::Skip { id, instant: at } => {
            let at = instant(&at)?;
            let body = serde_json::json!({ "fire_at": at }).to_string();
            let v = api
                .call("POST", &format!("{}/skip", job(&id)?), Some(body))
                .await?;
            let line = format!(
                "skipped {} for {at} ({} releases dropped)",
                table::escape(&id),
                v["dropped"]
            );
            said(&v, json, line)
        }
        JobsCommand::Pause { id } => {
            let v = api
                .call("POST", &format!("{}/pause", job(&id)?), None)
                .await?;
            said(&v, json, format!("paused {}", table::escape(&id)))
        }
        JobsCommand::Resume { id } => {
            let v = api
                .call("POST", &format!("{}/resume", job(&id)?), None)
                .await?;
            let line = format!(
                "resumed {}: next fire {}",
                table::escape(&id),
                text(&v["next_fire_at"])
            );
            said(&v, json, line)
        }
        JobsCommand::Trigger { id, payload } => {
            let body = match payload.as_deref() {
                Some(p) => {
                    let payload = parse_payload(p)?;
                    Some(serde_json::json!({ "payload": payload }).to_string())
                }
                None => None,
            };
            let v = api
                .call("POST", &format!("{}/trigger", job(&id)?), body)
                .await?;
            let line = format!(
                "triggered {id}: a manual fire at {at}; a node starts its run within a poll (`jobwheel runs --job {id}` lists it)",
                id = table::escape(&id),
                at = text(&v["next_fire_at"]),
            );
            said(&v, json, line)
        }
        JobsCommand::Rm { id } => {
            let v = api.call("DELETE", &job(&id)?, None).await?;
            said(&v, json, format!("removed {}", table::escape(&id)))
        }
        JobsCommand::Add { file } => {
            let def = read_definition(&file)?;
            let v = api.call("POST", "/jobs", Some(def)).await?;
            let line = format!("added {}", table::escape(&text(&v["job"]["id"])));
            said(&v, json, line)
        }
        JobsCommand::Copy { id, to } => {
            let body = serde_json::json!({ "id": to }).to_string();
            let v = api
                .call("POST", &format!("{}/copy", job(&id)?), Some(body))
                .await?;
            said(
                &v,
                json,
                format!("copied {} to {}", table::escape(&id), table::escape(&to)),
            )
        }
        JobsCommand::Edit { id, file } => {
            let def = read_definition(&file)?;
            let v = api.call("PUT", &job(&id)?, Some(def)).await?;
            said(&v, json, format!("updated {}", table::escape(&id)))
        }
    }
}

/// Prints a job's dependencies as three short lists.
pub(super) fn print_dependencies(d: &crate::ops::Dependencies) {
    let links = |items: Vec<(String, &str)>| {
        if items.is_empty() {
            "none".to_string()
        } else {
            items
                .iter()
                .map(|(j, on)| format!("{} (on {on})", table::escape(j)))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    println!(
        "upstream:   {}{}",
        links(
            d.parents
                .iter()
                .map(|p| (p.job.to_string(), p.on.as_str()))
                .collect()
        ),
        if d.parents_complete {
            ""
        } else {
            " (only the first 10,000 jobs searched)"
        }
    );
    if !d.after.is_empty() {
        let names: Vec<String> = d.after.iter().map(ToString::to_string).collect();
        let over = d.join_window.as_ref().map_or_else(
            || "one instant".to_string(),
            |w| format!("each {:?} in {}", w.unit, w.zone).to_lowercase(),
        );
        println!(
            "waits for:  {} (all of them, for {})",
            table::escape(&names.join(", ")),
            table::escape(&over)
        );
    }
    println!(
        "downstream: {}",
        links(
            d.children
                .iter()
                .map(|c| (c.job.to_string(), c.on.as_str()))
                .collect()
        )
    );
    let rows: Vec<Vec<String>> = d
        .queued
        .iter()
        .map(|q| {
            vec![
                q.from.job.to_string(),
                q.from.fire_at.to_string(),
                q.from
                    .window
                    .map_or_else(|| "-".to_string(), |t| t.to_string()),
                q.from.run.to_string(),
                q.from.status.as_str().to_string(),
                q.released_at.to_string(),
                q.alarmed_at
                    .map_or_else(|| "-".to_string(), |t| t.to_string()),
            ]
        })
        .collect();
    println!("queued releases: {}", rows.len());
    if !rows.is_empty() {
        table::print(
            &[
                "upstream",
                "fire",
                "window",
                "run",
                "status",
                "released",
                "waiting alarm",
            ],
            &rows,
        );
    }
}

/// Reads `--instant`: RFC 3339 (any offset). Exit 2 naming the option otherwise.
pub(super) fn instant(text: &str) -> Result<Timestamp, Failure> {
    chrono::DateTime::parse_from_rfc3339(text.trim())
        .map(|d| Timestamp::from_datetime(&d))
        .map_err(|e| {
            Failure::Usage(format!(
                "--instant {text:?} is not an RFC 3339 instant: {e}"
            ))
        })
}

/// Prints what a release of `id` for `at` did: the parents released in place of.
pub(super) fn print_released<S: AsRef<str>>(id: &str, at: Timestamp, parents: &[S]) {
    let names: Vec<&str> = parents.iter().map(AsRef::as_ref).collect();
    println!(
        "released {} for {at} in place of {}",
        table::escape(id),
        if names.is_empty() {
            "no parent (every parent had released it)".to_string()
        } else {
            table::escape(&names.join(", "))
        }
    );
}
