//! What ties a fire to the upstream fires that released it: the upstream run a
//! released fire names, a release a finish writes, and a release waiting in a queue
//! (see [`dependency`](crate::dependency)).

use super::{RunId, RunStatus};
use crate::job_id::JobId;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

/// The upstream run that released a fire, as the released run's context carries it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct UpstreamRun {
    /// The upstream (parent) job.
    pub job: JobId,
    /// The parent fire's logical instant: its own instant (the same for every
    /// attempt at it), or, for a parent fire that was itself released, the
    /// instant its upstream's carried — so every fire down a chain from one origin
    /// fire carries the origin's instant, and a fan-in joins its parents' releases
    /// by it.
    pub fire_at: Timestamp,
    /// The parent's run that ended the fire.
    pub run: RunId,
    /// How it ended.
    pub status: RunStatus,
    /// How many releases lead to this fire: 1 when the upstream fire was not itself
    /// released, one more than the upstream's otherwise. A fire at the longest chain
    /// (64, `dependency::MAX_DEPTH`) releases nothing: a cycle that two concurrent
    /// upserts closed stops there.
    #[serde(default = "first_step")]
    pub depth: u32,
    /// The operator who released the instant in place of this parent (then `run`
    /// is 0 and `status` `succeeded`); absent for a release by a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_by: Option<String>,
    /// For a release of a job with a [`JoinWindow`](crate::dependency::JoinWindow):
    /// the first instant of the window `fire_at` falls in, which keys the release
    /// and is the logical instant the released fire passes down; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<Timestamp>,
}

impl UpstreamRun {
    /// The instant the release is keyed and joined by: its window's start when it
    /// has one, else `fire_at`.
    pub fn key(&self) -> Timestamp {
        self.window.unwrap_or(self.fire_at)
    }
}

fn first_step() -> u32 {
    1
}

/// A release a finish writes: `job` is to run for the upstream fire `from`.
///
/// The store keys it by (`job`, `from.job`, `from.fire_at`) and keeps it, with
/// `from` as JSON, until the job takes it (alone, or with the releases of the other
/// parents it waits for: [`rules::pick_release`](crate::store::rules::pick_release)),
/// and then makes the job due with trigger `Upstream` and a context whose
/// `upstream` lists the taken releases' runs ([`context_of`](crate::dependency::context_of)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Release {
    /// The job released (the child).
    pub job: JobId,
    /// The upstream fire that released it.
    pub from: UpstreamRun,
    /// `from` as JSON, as the store keeps it.
    pub upstream: String,
}

impl Release {
    /// The release of `child` by `from`.
    pub fn new(child: JobId, from: UpstreamRun) -> Self {
        let upstream = serde_json::to_string(&from).unwrap_or_default();
        Release {
            job: child,
            from,
            upstream,
        }
    }
}

/// A release waiting in a job's queue, as a store lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct QueuedRelease {
    /// The released job.
    pub job: JobId,
    /// The upstream fire that released it.
    pub from: UpstreamRun,
    /// When the release was written (store clock).
    pub released_at: Timestamp,
    /// When a [`Waiting`](crate::AlarmKind::Waiting) alarm was raised for the
    /// job's releases of this instant ([`Jobs::alarm_waiting`]); `None`: none yet.
    ///
    /// [`Jobs::alarm_waiting`]: crate::store::Jobs::alarm_waiting
    #[serde(default)]
    pub alarmed_at: Option<Timestamp>,
}

impl QueuedRelease {
    /// The order [`Jobs::releases`](crate::store::Jobs::releases) lists releases in:
    /// oldest written first, then by upstream job and fire.
    pub fn list_order(&self) -> (Timestamp, &JobId, Timestamp) {
        (self.released_at, &self.from.job, self.from.fire_at)
    }
}
