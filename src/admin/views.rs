//! How the admin API and the command line show stored things as JSON.

use crate::job::Job;
use crate::record::{JobRecord, TriggerKind};
use crate::schedule::Schedule;
use crate::time::Timestamp;
use chrono::SecondsFormat;
use serde::Serialize;
use std::sync::Arc;

/// A job with its scheduling state.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct JobView {
    /// The definition (the same JSON that creates it).
    pub job: Arc<Job>,
    /// Bumped on every change of definition.
    pub version: u64,
    /// When it is next due; `None` when paused or nothing is left to fire.
    pub next_fire_at: Option<Timestamp>,
    /// Kind of the next fire (`schedule`, `retry`, `manual`, `misfire`, `upstream`).
    pub next_trigger: &'static str,
    /// Failed attempts of the current fire so far.
    pub attempt: u32,
    /// The next fire's payload when it is not the job's own (a manual trigger's
    /// override); `None` otherwise.
    pub next_payload: Option<serde_json::Value>,
    /// For a next fire released by upstream jobs: the runs (or operators) that
    /// released it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub next_upstream: Vec<crate::dependency::UpstreamRun>,
    /// The run in progress, if any.
    pub running: Option<i64>,
    /// When it was first stored (store clock).
    pub created_at: Timestamp,
    /// When its definition last changed (store clock).
    pub updated_at: Timestamp,
}

impl From<&JobRecord> for JobView {
    fn from(r: &JobRecord) -> Self {
        let next = r.next.as_ref();
        JobView {
            job: r.job.clone(),
            version: r.version,
            next_fire_at: next.map(|n| n.at),
            next_trigger: next.map_or(TriggerKind::Schedule, |n| n.trigger).as_str(),
            attempt: next.map_or(0, |n| n.attempt),
            next_payload: next.and_then(|n| n.context.payload.clone()),
            next_upstream: next.map(|n| n.context.upstream.clone()).unwrap_or_default(),
            running: r.running.map(|id| id.0),
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// One upcoming fire.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Fire {
    /// The instant.
    pub at: Timestamp,
    /// The same instant on the schedule's wall clock (its zone; UTC for intervals and
    /// one-shots), with its UTC offset.
    pub local: String,
}

/// Most fires a preview lists.
pub const MAX_FIRES: usize = 1_000;

/// The next `n` (at most [`MAX_FIRES`]) fires of `schedule` after `after`, computed
/// by the engine's own code (DST rules included).
pub fn next_fires(schedule: &Schedule, after: Timestamp, n: usize) -> Vec<Fire> {
    let zone = match schedule {
        Schedule::Cron(c) => c.zone(),
        _ => chrono_tz::UTC,
    };
    let mut fires = Vec::new();
    let mut t = after;
    while fires.len() < n.min(MAX_FIRES) {
        let Some(at) = schedule.next_after(t) else {
            break;
        };
        fires.push(Fire {
            at,
            local: at
                .to_datetime()
                .with_timezone(&zone)
                .to_rfc3339_opts(SecondsFormat::Secs, true),
        });
        t = at;
    }
    fires
}
