//! `jobwheel jobs`: list, show, add, edit, copy, pause, resume, trigger, remove a
//! job, and show its dependencies, on a store.

use super::store::{actor, job_id, limit, time};
use super::{Failure, Outcome, print_json, table};
use crate::admin::views::JobView;
use crate::job::Job;
use crate::ops::Ops;
use crate::schedule::Schedule;
use crate::store::JobQuery;
use crate::time::Timestamp;
use clap::Subcommand;
use serde_json::json;
use std::time::Duration;

#[derive(Subcommand, Debug)]
pub(crate) enum JobsCommand {
    /// Jobs in id order.
    List {
        /// At most this many (1-10000).
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

/// Reads a job definition from `file` (`-`: standard input).
fn read_job(file: &str) -> Result<Job, Failure> {
    Ok(Job::from_json(&read_definition(file)?)?)
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

pub(crate) async fn jobs(ops: &Ops, command: JobsCommand, json: bool) -> Outcome {
    let store = ops.store();
    let who = actor();
    let done = |what: &str, id: &str| -> Outcome {
        if json {
            print_json(&json!({"job": id, "done": what}))
        } else {
            println!("{what} {}", table::escape(id));
            Ok(())
        }
    };
    match command {
        JobsCommand::List { limit: n, after } => {
            let query =
                JobQuery::new(limit("limit", n)?).after(after.as_deref().map(job_id).transpose()?);
            let page = store.list(&query).await?;
            if json {
                return print_json(&json!({
                    "jobs": page.items.iter().map(JobView::from).collect::<Vec<_>>(),
                    "unreadable": page.corrupt.iter().map(|c| &c.id).collect::<Vec<_>>(),
                }));
            }
            let rows: Vec<Vec<String>> = page
                .items
                .iter()
                .map(|r| {
                    vec![
                        r.job.id().to_string(),
                        r.job.handler().to_string(),
                        schedule(r.job.schedule()),
                        if r.job.enabled() { "yes" } else { "paused" }.to_string(),
                        time(r.next_fire_at()),
                        r.running
                            .map_or_else(|| "-".to_string(), |id| format!("run {}", id.0)),
                    ]
                })
                .collect();
            table::print(
                &[
                    "id",
                    "handler",
                    "schedule",
                    "enabled",
                    "next fire",
                    "running",
                ],
                &rows,
            );
            for c in &page.corrupt {
                println!(
                    "unreadable: {} ({})",
                    table::escape(&c.id),
                    table::escape(&c.reason)
                );
            }
            Ok(())
        }
        JobsCommand::Get { id } => {
            let rec = store
                .get(&job_id(&id)?)
                .await?
                .ok_or_else(|| Failure::NotFound(format!("no job {id:?}")))?;
            if json {
                return print_json(&JobView::from(&rec));
            }
            let definition = serde_json::to_string_pretty(&*rec.job)
                .map_err(|e| Failure::Failed(e.to_string()))?;
            println!(
                "next fire: {} ({})",
                time(rec.next_fire_at()),
                rec.next_trigger().as_str()
            );
            println!("attempt:   {}", rec.attempt());
            println!("updated:   {}", rec.updated_at);
            for line in definition.lines() {
                println!("{}", table::escape(line));
            }
            Ok(())
        }
        JobsCommand::Deps { id } => {
            let d = ops.dependencies(&who, &job_id(&id)?).await?;
            if json {
                return print_json(&d);
            }
            print_dependencies(&d);
            Ok(())
        }
        JobsCommand::Release { id, instant: at } => {
            let at = instant(&at)?;
            let parents = ops.release_instant(&who, &job_id(&id)?, at).await?;
            if json {
                return print_json(&json!({"job": id, "fire_at": at, "in_place_of": parents}));
            }
            let names: Vec<String> = parents.iter().map(ToString::to_string).collect();
            print_released(&id, at, &names);
            Ok(())
        }
        JobsCommand::Skip { id, instant: at } => {
            let at = instant(&at)?;
            let n = ops.skip_instant(&who, &job_id(&id)?, at).await?;
            if json {
                return print_json(&json!({"job": id, "fire_at": at, "dropped": n}));
            }
            println!(
                "skipped {} for {at} ({n} releases dropped)",
                table::escape(&id)
            );
            Ok(())
        }
        JobsCommand::Pause { id } => {
            ops.pause(&who, &job_id(&id)?).await?;
            done("paused", &id)
        }
        JobsCommand::Resume { id } => {
            ops.resume(&who, &job_id(&id)?).await?;
            done("resumed", &id)
        }
        JobsCommand::Trigger { id, payload } => {
            let payload = payload.as_deref().map(parse_payload).transpose()?;
            let record = ops.trigger(&who, &job_id(&id)?, payload).await?;
            if json {
                return print_json(
                    &json!({"job": id, "done": "triggered", "fire_at": record.next_fire_at()}),
                );
            }
            println!(
                "triggered {id}: a manual fire at {at}; a node starts its run within a poll (`jobwheel runs --job {id}` lists it)",
                id = table::escape(&id),
                at = time(record.next_fire_at()),
            );
            Ok(())
        }
        JobsCommand::Rm { id } => {
            if !ops.remove(&who, &job_id(&id)?).await? {
                return Err(Failure::NotFound(format!("no job {id:?}")));
            }
            done("removed", &id)
        }
        JobsCommand::Copy { id, to } => {
            if ops.copy(&who, &job_id(&id)?, &to).await? == crate::record::UpsertOutcome::Kept {
                return Err(Failure::Failed(format!("job {to:?} exists")));
            }
            done("copied", &to)
        }
        JobsCommand::Add { file } => {
            let job = read_job(&file)?;
            let id = job.id().to_string();
            if ops.create(&who, job).await? == crate::record::UpsertOutcome::Kept {
                return Err(Failure::Failed(format!(
                    "job {id:?} exists; edit it instead"
                )));
            }
            done("added", &id)
        }
        JobsCommand::Edit { id, file } => {
            let job = read_job(&file)?;
            ops.update(&who, &job_id(&id)?, job).await?;
            done("updated", &id)
        }
    }
}

/// How the listing shows a schedule.
fn schedule(s: &Schedule) -> String {
    match s {
        Schedule::Cron(c) => format!("cron {} {}", c.expr().as_str(), c.zone().name()),
        Schedule::Interval { every, .. } => format!("every {}", humantime(*every)),
        Schedule::Once { at } => format!("once {at}"),
        Schedule::Never => "never (fires when triggered)".to_string(),
    }
}

fn humantime(d: Duration) -> String {
    humantime_serde::re::humantime::format_duration(d).to_string()
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
