//! The links between jobs a definition declares: its children (which ends of its
//! fires release them) and the parents a join waits for; how they are checked. What
//! a release is and how the store keeps it is in [`dependency`](crate::dependency).

use crate::error::{Error, Result};
use crate::job_id::JobId;
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
}

/// The span of wall time a join's releases are joined over, instead of their exact
/// instant: a release counts for the window (an hour or a day of `zone`'s wall
/// clock) its upstream instant falls in, and the job runs once per window for which
/// every parent it waits for released it (see [`dependency`](crate::dependency)).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct JoinWindow {
    /// How long a window is.
    pub unit: WindowUnit,
    /// The IANA zone whose wall clock the windows follow (default UTC).
    #[serde(default = "utc")]
    pub zone: String,
}

fn utc() -> String {
    "UTC".to_string()
}

/// How long a [`JoinWindow`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum WindowUnit {
    /// A wall-clock hour (`10:00` to `11:00`).
    Hour,
    /// A calendar day, from its first instant (midnight, or the first wall time after
    /// a gap at midnight) to the next day's.
    Day,
}

impl JoinWindow {
    /// A window of `unit` in the zone named `zone`. Errors: [`Error::Invalid`] naming
    /// `job.join_window.zone`.
    pub fn new(unit: WindowUnit, zone: &str) -> Result<Self> {
        let w = JoinWindow {
            unit,
            zone: zone.to_string(),
        };
        w.tz()?;
        Ok(w)
    }

    fn tz(&self) -> Result<chrono_tz::Tz> {
        self.zone.parse().map_err(|_| {
            Error::invalid(
                "job.join_window.zone",
                &self.zone,
                "not an IANA time zone name",
            )
        })
    }

    /// The first instant of the window `at` falls in.
    pub fn start(&self, at: Timestamp) -> Timestamp {
        use chrono::{LocalResult, TimeZone, Timelike};
        let tz = self.tz().unwrap_or(chrono_tz::Tz::UTC);
        let Some(utc) = chrono::DateTime::from_timestamp_millis(at.as_millis()) else {
            return at;
        };
        let local = utc.with_timezone(&tz).naive_local();
        let floor = match self.unit {
            WindowUnit::Hour => local.date().and_hms_opt(local.hour(), 0, 0),
            WindowUnit::Day => local.date().and_hms_opt(0, 0, 0),
        };
        let Some(floor) = floor else { return at };
        // The wall time may be ambiguous (a repeated hour: the pass at or before
        // `at`) or in a gap (the window starts at the gap's end, the first wall time
        // after it, within two hours).
        let first = (0..=8).find_map(|q| {
            match tz.from_local_datetime(&(floor + chrono::Duration::minutes(15 * q))) {
                LocalResult::Single(t) => Some(t),
                LocalResult::Ambiguous(early, late) => {
                    Some(if late.timestamp_millis() <= at.as_millis() {
                        late
                    } else {
                        early
                    })
                }
                LocalResult::None => None,
            }
        });
        first.map_or(at, |t| {
            Timestamp::from_millis(t.timestamp_millis().min(at.as_millis()))
        })
    }
}

/// Checks a job's join window: a valid zone, and parents to join (`after`).
/// Errors: [`Error::Invalid`] naming `job.join_window`.
pub fn check_window(window: Option<&JoinWindow>, after: &[JobId]) -> Result<()> {
    let Some(w) = window else { return Ok(()) };
    w.tz()?;
    if after.is_empty() {
        return Err(Error::invalid(
            "job.join_window",
            format!("{:?} in {}", w.unit, w.zone),
            "a join window needs the parents it joins (`after`)",
        ));
    }
    Ok(())
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
