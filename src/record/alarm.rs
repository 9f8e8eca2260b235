//! The alarm outbox: events and their delivery state.

use super::RunId;
use crate::job::JobId;
use crate::policy::AlarmKind;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

/// Id of an alarm event in the outbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(transparent)]
pub struct AlarmId(pub i64);

/// Something an operator should hear about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct AlarmEvent {
    /// Kind.
    pub kind: AlarmKind,
    /// Job.
    pub job_id: JobId,
    /// Its handler.
    pub handler: String,
    /// The run, when there was one.
    pub run_id: Option<RunId>,
    /// The fire.
    pub fire_at: Timestamp,
    /// Zone the job's schedule uses (IANA name), for rendering `fire_at`.
    pub zone: String,
    /// 1-based attempt.
    pub attempt: u32,
    /// Attempts allowed per fire.
    pub max_attempts: u32,
    /// Node that ran it (or that detected the loss).
    pub node: String,
    /// Run duration in milliseconds, when known.
    pub duration_ms: Option<u64>,
    /// Error message.
    pub error: Option<String>,
    /// Whether a retry is scheduled.
    pub will_retry: bool,
    /// The job's next fire after this event.
    pub next_fire_at: Option<Timestamp>,
    /// Per-job recipients from the alarm policy.
    pub recipients: Vec<String>,
    /// When it happened (node clock at the moment of detection).
    pub occurred_at: Timestamp,
    /// Events of the same job and kind that a throttle suppressed since the last one
    /// delivered (0 when none; absent in events stored before it existed).
    #[serde(default)]
    pub suppressed: u32,
    /// For a misfire event, the scheduled fires the misfire stood for.
    #[serde(default)]
    pub covers: Option<super::FireSpan>,
    /// For a `blocked` event, the children the fire did not release.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<JobId>,
    /// For a `waiting` event, the parents of the job's join that have not released
    /// the instant (empty: the instant is whole, or the job waits for no parent, and
    /// the job itself has not taken it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_for: Vec<JobId>,
}

impl AlarmEvent {
    /// `fire_at` as a wall time in the job's zone, with the zone's abbreviation and
    /// offset (`2026-12-07 09:30:00 CET (+01:00)`); in UTC when the zone is unknown.
    pub fn fire_at_local(&self) -> String {
        local(self.fire_at, &self.zone)
    }

    /// `next_fire_at` rendered like [`fire_at_local`](Self::fire_at_local).
    pub fn next_fire_local(&self) -> Option<String> {
        self.next_fire_at.map(|t| local(t, &self.zone))
    }

    /// For a misfire event, the fires it stood for, in the job's zone:
    /// `12 scheduled fires from 2026-12-07 09:30:00 CET (+01:00) through 2026-12-07 09:30:11 CET (+01:00)`.
    pub fn covers_local(&self) -> Option<String> {
        self.covers.map(|c| {
            format!(
                "{} scheduled fire{} from {} through {}",
                c.fires,
                if c.fires == 1 { "" } else { "s" },
                local(c.first, &self.zone),
                local(c.through, &self.zone)
            )
        })
    }

    /// A one-line summary: `final_failure: job reports.daily (handler report) attempt 3/3`.
    pub fn summary(&self) -> String {
        format!(
            "{}: job {} (handler {}) attempt {}/{}",
            self.kind.as_str(),
            self.job_id,
            self.handler,
            self.attempt,
            self.max_attempts
        )
    }
}

fn local(t: Timestamp, zone: &str) -> String {
    let tz: chrono_tz::Tz = zone.parse().unwrap_or(chrono_tz::UTC);
    t.to_datetime()
        .with_timezone(&tz)
        .format("%Y-%m-%d %H:%M:%S %Z (%:z)")
        .to_string()
}

/// Delivery state of an alarm event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AlarmStatus {
    /// Waiting to be claimed.
    Pending,
    /// Claimed by one node, being delivered.
    Sending,
    /// Every alarm accepted it.
    Sent,
    /// Delivery failed; retried at `next_attempt_at` when that is set.
    Failed,
    /// No alarm needed to hear of it (none registered, or throttled).
    NotNeeded,
}

impl AlarmStatus {
    /// Stable lower-case name, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            AlarmStatus::Pending => "pending",
            AlarmStatus::Sending => "sending",
            AlarmStatus::Sent => "sent",
            AlarmStatus::Failed => "failed",
            AlarmStatus::NotNeeded => "not_needed",
        }
    }

    /// Inverse of [`as_str`](Self::as_str).
    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Pending,
            Self::Sending,
            Self::Sent,
            Self::Failed,
            Self::NotNeeded,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// An alarm event with its delivery state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct AlarmRecord {
    /// Id.
    pub id: AlarmId,
    /// The event.
    pub event: AlarmEvent,
    /// State.
    pub status: AlarmStatus,
    /// Delivery attempts so far (claims).
    pub attempts: u32,
    /// When a `Pending`/`Failed` event may next be claimed.
    pub next_attempt_at: Option<Timestamp>,
    /// Node holding the claim while `Sending`.
    pub claimed_by: Option<String>,
    /// When that claim lapses (store clock).
    pub claim_until: Option<Timestamp>,
    /// Last delivery error.
    pub last_error: Option<String>,
    /// When the event was stored.
    pub created_at: Timestamp,
}

/// How a claimed alarm's delivery ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlarmDelivery {
    /// Delivered.
    Sent,
    /// Nobody needed it.
    NotNeeded,
    /// Delivery failed; claimable again at `retry_at`, or never when `None`.
    Failed {
        /// The error.
        error: String,
        /// Next try.
        retry_at: Option<Timestamp>,
    },
}

impl AlarmDelivery {
    /// What a store writes for this delivery: the event's new status, the error to
    /// keep (failures only) and when it is claimable again (`None`: never).
    pub fn parts(&self) -> (AlarmStatus, Option<&str>, Option<Timestamp>) {
        match self {
            AlarmDelivery::Sent => (AlarmStatus::Sent, None, None),
            AlarmDelivery::NotNeeded => (AlarmStatus::NotNeeded, None, None),
            AlarmDelivery::Failed { error, retry_at } => {
                (AlarmStatus::Failed, Some(error.as_str()), *retry_at)
            }
        }
    }
}
