//! Job dependencies: a job's **children**, each triggered once per fire of the job
//! that ends as the link asks, in the same atomic step that records the finish.
//!
//! A parent lists its children ([`Job::children`](crate::Job::children)); when a
//! fire of the parent ends for good (it succeeded, or failed with no retry left),
//! the engine puts one [`Release`] per matching child into the run's finish, and the
//! store writes them with the finish or not at all. A release is keyed by (child,
//! parent, the parent fire's instant): a second release with the same key is
//! ignored. The store queues releases per child and turns the oldest into the
//! child's next fire (trigger [`Upstream`](crate::TriggerKind::Upstream)) when the
//! child can take it — see [`rules::takes_release`](crate::store::rules::takes_release)
//! — so every release runs the child once, even when several arrive while it runs.
//! The run records which upstream run released it ([`FireContext::upstream`]).
//!
//! [`FireContext::upstream`]: crate::FireContext::upstream

use crate::error::{Error, Result};
use crate::job::JobId;
use crate::record::{RunId, RunStatus};
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

/// Most children one job may list.
pub const MAX_CHILDREN: usize = 32;

/// Most jobs the cycle check of an upsert reads through children before it refuses
/// the job as too large to check.
pub const MAX_GRAPH_READS: usize = 10_000;

/// One child of a job: the job to trigger and which ends of a parent's fire
/// trigger it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ChildLink {
    /// The child job. It need not exist when the parent is stored; a fire of the
    /// parent that ends while it does not exist releases nothing for it, and removing
    /// a job drops the releases queued for it.
    pub job: JobId,
    /// Which ends trigger it (default: success).
    #[serde(default)]
    pub on: ChildOn,
}

impl ChildLink {
    /// A link that triggers `job` when a fire of the parent succeeds.
    pub fn on_success(job: JobId) -> Self {
        ChildLink {
            job,
            on: ChildOn::Success,
        }
    }
}

/// Which ends of a parent's fire trigger a child.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ChildOn {
    /// The fire succeeded (at any attempt).
    #[default]
    Success,
    /// The fire failed for good: its last attempt failed, timed out, was cancelled
    /// or lost, and no retry follows. A run an operator killed counts.
    Failure,
    /// Either end.
    Always,
}

impl ChildOn {
    /// Stable lower-case name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ChildOn::Success => "success",
            ChildOn::Failure => "failure",
            ChildOn::Always => "always",
        }
    }

    /// Whether a fire whose run ended with `status` (and `will_retry`) triggers a
    /// child linked with this condition. A run that will be retried, a `misfired`
    /// record and a run given back unexecuted are not a fire's end and trigger
    /// nothing.
    pub fn matches(self, status: RunStatus, will_retry: bool) -> bool {
        if will_retry || matches!(status, RunStatus::Misfired | RunStatus::Returned) {
            return false;
        }
        let ok = status == RunStatus::Succeeded;
        let failed = status.is_failure();
        match self {
            ChildOn::Success => ok,
            ChildOn::Failure => failed,
            ChildOn::Always => ok || failed,
        }
    }
}

/// Checks a job's children: at most [`MAX_CHILDREN`], none twice, not the job
/// itself. Errors: [`Error::Invalid`] naming `job.children`.
pub fn check_children(id: &JobId, children: &[ChildLink]) -> Result<()> {
    if children.len() > MAX_CHILDREN {
        return Err(Error::invalid(
            "job.children",
            format!("{} children", children.len()),
            format!("at most {MAX_CHILDREN} children per job"),
        ));
    }
    for (i, c) in children.iter().enumerate() {
        if &c.job == id {
            return Err(Error::invalid(
                "job.children",
                c.job.as_str(),
                "a job cannot be its own child",
            ));
        }
        if children[..i].iter().any(|o| o.job == c.job) {
            return Err(Error::invalid(
                "job.children",
                c.job.as_str(),
                "listed twice",
            ));
        }
    }
    Ok(())
}

/// Checks a job's `after` list: at most [`MAX_CHILDREN`], none twice, not the job
/// itself. Errors: [`Error::Invalid`] naming `job.after`.
pub fn check_after(id: &JobId, after: &[JobId]) -> Result<()> {
    if after.len() > MAX_CHILDREN {
        return Err(Error::invalid(
            "job.after",
            format!("{} parents", after.len()),
            format!("at most {MAX_CHILDREN} parents per job"),
        ));
    }
    for (i, p) in after.iter().enumerate() {
        if p == id {
            return Err(Error::invalid(
                "job.after",
                p.as_str(),
                "a job cannot wait for itself",
            ));
        }
        if after[..i].contains(p) {
            return Err(Error::invalid("job.after", p.as_str(), "listed twice"));
        }
    }
    Ok(())
}

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
    /// released, one more than the upstream's otherwise. A fire at
    /// [`MAX_DEPTH`] releases nothing (a cycle that two concurrent upserts closed
    /// stops there).
    #[serde(default = "first_step")]
    pub depth: u32,
    /// The operator who released the instant in place of this parent (then `run`
    /// is 0 and `status` `succeeded`); absent for a release by a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_by: Option<String>,
}

fn first_step() -> u32 {
    1
}

/// The longest chain of releases: a fire released at this depth releases no child
/// (the engine logs an error), so a cycle the upsert check could not see (two
/// upserts that each closed half of it at once) runs at most this many times.
pub const MAX_DEPTH: u32 = 64;

/// A release a finish writes: `job` is to run for the upstream fire `from`.
///
/// The store keys it by (`job`, `from.job`, `from.fire_at`) and keeps it, with
/// `from` as JSON, until the job takes it (alone, or with the releases of the other
/// parents it waits for: [`rules::pick_release`](crate::store::rules::pick_release)),
/// and then makes the job due with trigger `Upstream` and a context whose
/// `upstream` lists the taken releases' runs ([`context_of`]).
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

/// The stored context of a fire released by the upstream runs `upstream` (each as
/// a store keeps it, JSON): `{"upstream":[…]}`, the runs in the order given.
pub fn context_of<S: AsRef<str>>(upstream: &[S]) -> String {
    let runs: Vec<&str> = upstream.iter().map(AsRef::as_ref).collect();
    format!("{{\"upstream\":[{}]}}", runs.join(","))
}

/// The releases a run of `parent` that ended `from.status` (with `will_retry`)
/// writes: one per child whose link matches, in the order the parent lists them.
///
/// None when `from.depth` is past [`MAX_DEPTH`].
pub fn releases_of(parent: &crate::Job, from: &UpstreamRun, will_retry: bool) -> Vec<Release> {
    if from.depth > MAX_DEPTH {
        return Vec::new();
    }
    parent
        .children()
        .iter()
        .filter(|c| c.on.matches(from.status, will_retry))
        .map(|c| Release::new(c.job.clone(), from.clone()))
        .collect()
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> JobId {
        JobId::new(s).unwrap()
    }

    #[test]
    fn only_a_fires_end_releases() {
        use RunStatus::*;
        assert!(ChildOn::Success.matches(Succeeded, false));
        assert!(!ChildOn::Success.matches(Failed, false));
        assert!(!ChildOn::Failure.matches(Failed, true), "a retry follows");
        assert!(ChildOn::Failure.matches(Lost, false));
        assert!(ChildOn::Always.matches(TimedOut, false));
        for s in [Misfired, Returned, Running] {
            assert!(!ChildOn::Always.matches(s, false), "{s:?}");
        }
    }

    #[test]
    fn children_are_checked() {
        let a = id("a");
        assert!(check_children(&a, &[ChildLink::on_success(id("b"))]).is_ok());
        let e = check_children(&a, &[ChildLink::on_success(id("a"))]).unwrap_err();
        assert!(e.to_string().contains("job.children"), "{e}");
        let twice = [
            ChildLink::on_success(id("b")),
            ChildLink::on_success(id("b")),
        ];
        assert!(check_children(&a, &twice).is_err());
        let many: Vec<_> = (0..=MAX_CHILDREN)
            .map(|i| ChildLink::on_success(id(&format!("c{i}"))))
            .collect();
        assert!(check_children(&a, &many).is_err());
    }
}
