//! Retry, misfire and alarm policies.
//!
//! The engine applies these; stores only record their results.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Exponential backoff for failed attempts.
///
/// Attempt `n` (1-based) fails → when `n < max_attempts` the job is due again after
/// `min(base × 2^min(n-1, 12), max_delay)`, shortened by up to `jitter` of itself;
/// otherwise the attempt count resets and the job returns to its schedule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(try_from = "RetryRepr", into = "RetryRepr")]
pub struct RetryPolicy {
    max_attempts: u32,
    base: Duration,
    max_delay: Duration,
    jitter: f64,
}

#[derive(Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
struct RetryRepr {
    #[serde(default = "default_attempts")]
    max_attempts: u32,
    #[serde(with = "humantime_serde", default = "default_base")]
    #[cfg_attr(feature = "openapi", schemars(with = "String"))]
    base: Duration,
    #[serde(with = "humantime_serde", default = "default_max_delay")]
    #[cfg_attr(feature = "openapi", schemars(with = "String"))]
    max_delay: Duration,
    #[serde(default)]
    jitter: f64,
}

fn default_attempts() -> u32 {
    3
}
fn default_base() -> Duration {
    Duration::from_secs(60)
}
fn default_max_delay() -> Duration {
    Duration::from_secs(3600)
}

impl Default for RetryPolicy {
    /// 3 attempts, 60 s base, 3600 s cap, no jitter.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: default_attempts(),
            base: default_base(),
            max_delay: default_max_delay(),
            jitter: 0.0,
        }
    }
}

impl RetryPolicy {
    /// A policy with the given attempts, base delay and cap, and no jitter.
    ///
    /// Errors: `retry.max_attempts` of 0, `retry.base` of zero, `retry.max_delay`
    /// shorter than `base`.
    pub fn new(max_attempts: u32, base: Duration, max_delay: Duration) -> Result<Self> {
        RetryPolicy {
            max_attempts,
            base,
            max_delay,
            jitter: 0.0,
        }
        .validated()
    }

    /// No retries: one attempt per fire.
    pub fn none() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// With jitter: each delay is multiplied by a random factor in `[1 - jitter, 1]`.
    /// Errors when `jitter` is outside `0..=1`.
    pub fn with_jitter(mut self, jitter: f64) -> Result<Self> {
        self.jitter = jitter;
        self.validated()
    }

    fn validated(self) -> Result<Self> {
        if self.max_attempts == 0 {
            return Err(Error::invalid(
                "retry.max_attempts",
                0,
                "must be at least 1",
            ));
        }
        crate::limits::duration("retry.base", self.base, crate::limits::MAX_SPAN)?;
        crate::limits::duration("retry.max_delay", self.max_delay, crate::limits::MAX_SPAN)?;
        if self.max_delay < self.base {
            return Err(Error::invalid(
                "retry.max_delay",
                format!("{:?}", self.max_delay),
                format!("must be at least retry.base ({:?})", self.base),
            ));
        }
        if !(0.0..=1.0).contains(&self.jitter) {
            return Err(Error::invalid(
                "retry.jitter",
                self.jitter,
                "must be within 0..=1",
            ));
        }
        Ok(self)
    }

    /// Attempts per fire, at least 1.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// Base delay.
    pub fn base(&self) -> Duration {
        self.base
    }

    /// Longest delay.
    pub fn max_delay(&self) -> Duration {
        self.max_delay
    }

    /// Jitter fraction.
    pub fn jitter(&self) -> f64 {
        self.jitter
    }

    /// Whether a fire whose attempt `n` (1-based) just failed gets another attempt.
    pub fn should_retry(&self, failed_attempt: u32) -> bool {
        failed_attempt < self.max_attempts
    }

    /// The delay before the next attempt after attempt `n` failed, without jitter:
    /// `min(base × 2^min(n-1, 12), max_delay)`.
    pub fn delay(&self, failed_attempt: u32) -> Duration {
        let exp = failed_attempt.saturating_sub(1).min(12);
        self.base
            .checked_mul(1 << exp)
            .map_or(self.max_delay, |d| d.min(self.max_delay))
    }

    /// [`delay`](Self::delay) with jitter applied using `unit`, a number in `[0, 1)`.
    pub fn delay_jittered(&self, failed_attempt: u32, unit: f64) -> Duration {
        self.delay(failed_attempt)
            .mul_f64(1.0 - self.jitter * unit.clamp(0.0, 1.0))
    }
}

impl TryFrom<RetryRepr> for RetryPolicy {
    type Error = Error;
    fn try_from(r: RetryRepr) -> Result<Self> {
        RetryPolicy {
            max_attempts: r.max_attempts,
            base: r.base,
            max_delay: r.max_delay,
            jitter: r.jitter,
        }
        .validated()
    }
}

impl From<RetryPolicy> for RetryRepr {
    fn from(p: RetryPolicy) -> Self {
        RetryRepr {
            max_attempts: p.max_attempts,
            base: p.base,
            max_delay: p.max_delay,
            jitter: p.jitter,
        }
    }
}

/// What to do with a fire that starts more than the misfire threshold late.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case", tag = "policy")]
#[non_exhaustive]
pub enum MisfirePolicy {
    /// Run once now, coalescing every missed fire into this one run.
    #[default]
    FireOnce,
    /// Record a `misfired` run without executing, and go to the next future fire.
    Skip,
    /// Run each missed fire in order, at most `max` of them (the oldest beyond that
    /// are recorded as one `misfired` run).
    CatchUp {
        /// Most missed fires to run, at least 1.
        max: u32,
    },
}

impl MisfirePolicy {
    pub(crate) fn validate(&self) -> Result<()> {
        match self {
            MisfirePolicy::CatchUp { max: 0 } => Err(Error::invalid(
                "misfire.max",
                0,
                "catch_up needs max of at least 1",
            )),
            _ => Ok(()),
        }
    }
}

/// Kinds of alarm events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AlarmKind {
    /// The last allowed attempt of a fire failed (retries exhausted).
    FinalFailure,
    /// Any attempt failed (including ones that will be retried).
    Failure,
    /// A run was lost: its node died or its lease expired while it ran.
    Lost,
    /// A fire misfired (started later than the threshold).
    Misfire,
    /// The first success after one or more failures.
    Recovery,
    /// An operator killed a run (not in the default policy).
    Killed,
    /// A fire failed for good and so did not release the children that run on its
    /// success (the event's `blocked` names them): they do not run for that fire.
    Blocked,
    /// A release waited in a job's queue past the job's
    /// [`wait_deadline`](crate::Job::wait_deadline) (the event's `waiting_for` names
    /// the parents of a join that have not released its instant); raised once per
    /// job and instant.
    Waiting,
}

impl AlarmKind {
    /// Every kind.
    pub const ALL: [AlarmKind; 8] = [
        AlarmKind::FinalFailure,
        AlarmKind::Failure,
        AlarmKind::Lost,
        AlarmKind::Misfire,
        AlarmKind::Recovery,
        AlarmKind::Killed,
        AlarmKind::Blocked,
        AlarmKind::Waiting,
    ];

    /// Stable lower-case name, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            AlarmKind::FinalFailure => "final_failure",
            AlarmKind::Failure => "failure",
            AlarmKind::Lost => "lost",
            AlarmKind::Misfire => "misfire",
            AlarmKind::Recovery => "recovery",
            AlarmKind::Killed => "killed",
            AlarmKind::Blocked => "blocked",
            AlarmKind::Waiting => "waiting",
        }
    }
}

/// Which events of a job raise alarms, and who hears of them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct AlarmPolicy {
    /// Kinds that raise an alarm. Default: final failure, lost run, misfires of at
    /// least [`misfire_min_fires`](Self::misfire_min_fires) fires, and children
    /// blocked by a final failure.
    pub events: Vec<AlarmKind>,
    /// A misfire raises an alarm (when [`AlarmKind::Misfire`] is listed) only when it
    /// stands for at least this many scheduled fires. Default 2: a misfire that
    /// coalesced or skipped more than one fire, so some fire did not run on its own;
    /// a single late fire that still ran does not page anyone. 1 alarms on every
    /// misfire.
    pub misfire_min_fires: u64,
    /// Extra recipients for this job (e-mail addresses for the e-mail alarm), as
    /// XXL-JOB's per-job alarm e-mail field.
    pub recipients: Vec<String>,
}

impl Default for AlarmPolicy {
    fn default() -> Self {
        AlarmPolicy {
            events: vec![
                AlarmKind::FinalFailure,
                AlarmKind::Lost,
                AlarmKind::Misfire,
                AlarmKind::Blocked,
                AlarmKind::Waiting,
            ],
            misfire_min_fires: 2,
            recipients: Vec::new(),
        }
    }
}

impl AlarmPolicy {
    /// No alarms at all.
    pub fn silent() -> Self {
        AlarmPolicy {
            events: Vec::new(),
            misfire_min_fires: 2,
            recipients: Vec::new(),
        }
    }

    /// Whether events of `kind` raise an alarm.
    pub fn wants(&self, kind: AlarmKind) -> bool {
        self.events.contains(&kind)
    }

    /// Whether a misfire that stands for `fires` scheduled fires raises an alarm.
    pub fn wants_misfire(&self, fires: u64) -> bool {
        self.wants(AlarmKind::Misfire) && fires >= self.misfire_min_fires
    }
}
