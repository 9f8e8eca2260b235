//! The links between jobs a definition declares: its children (which ends of its
//! fires release them) and the parents a join waits for; how they are checked. What
//! a release is and how the store keeps it is in [`dependency`](crate::dependency).

use crate::error::{Error, Result};
use crate::job_id::JobId;
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
