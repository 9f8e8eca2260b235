//! A fire's scheduling state: one value, held by the job record (its next fire),
//! the due fire, and a finish's next fire; and what a fire carries to its run.

use super::TriggerKind;
use crate::error::Result;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a fire carries to the run that executes it, besides its instant and
/// attempt: a manual trigger's payload override and the trace it was triggered in.
///
/// It travels whole, from the job record through the due fire and the start to the
/// run record, and through a retry or a fire given back to the next fire. Stores
/// keep it as one JSON value (absent when [empty](Self::is_empty)) with the job's
/// next fire and with each run, so a field added here needs no schema change: an
/// older row reads as the field's default, and an unknown field in a row is
/// ignored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(default)]
#[non_exhaustive]
pub struct FireContext {
    /// The payload of this fire when it is not the job's own (a manual trigger's
    /// override, kept by the retries of that fire); `None` runs the job's payload.
    pub payload: Option<Value>,
    /// The W3C `traceparent` of the span the fire was triggered in (feature `otel`,
    /// code or a request inside an OpenTelemetry trace): the run's first attempt is
    /// that span's child, and its retries are traces of their own linked to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// The upstream runs that released this fire (trigger
    /// [`Upstream`](super::TriggerKind::Upstream)); empty for any other fire.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub upstream: Vec<super::UpstreamRun>,
}

impl FireContext {
    /// A context carrying `payload` in place of the job's own (`None`: the job's).
    pub fn with_payload(payload: Option<Value>) -> FireContext {
        FireContext {
            payload,
            trace: None,
            upstream: Vec::new(),
        }
    }

    /// The context of a fire released by the upstream run `from`.
    pub fn released_by(from: super::UpstreamRun) -> FireContext {
        FireContext {
            upstream: vec![from],
            ..FireContext::default()
        }
    }

    /// Whether it carries nothing: a fire of the job as defined.
    pub fn is_empty(&self) -> bool {
        *self == FireContext::default()
    }

    /// As a store keeps it: JSON, or `None` when empty.
    pub fn to_stored(&self) -> Option<String> {
        (!self.is_empty()).then(|| serde_json::to_string(self).unwrap_or_default())
    }

    /// From what a store kept (`None` or empty text: an empty context). Text that is
    /// not a JSON object is [`Error::Invalid`](crate::Error::Invalid) naming
    /// `fire.context`.
    pub fn from_stored(text: Option<&str>) -> Result<FireContext> {
        match text {
            None | Some("") => Ok(FireContext::default()),
            Some(t) => serde_json::from_str(t)
                .map_err(|e| crate::error::Error::invalid("fire.context", t, e.to_string())),
        }
    }
}

/// A fire's scheduling state: when it is due, why, how many attempts at it failed so
/// far, where the schedule resumes once its retries end, and what it carries.
///
/// The job record holds its next fire as one ([`JobRecord::next`]), the store
/// returns it with a due fire ([`DueFire::fire`]), and a finish writes the next one
/// ([`FinishRun::next`]).
///
/// [`JobRecord::next`]: super::JobRecord::next
/// [`DueFire::fire`]: super::DueFire::fire
/// [`FinishRun::next`]: super::FinishRun::next
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct FireState {
    /// The fire's instant.
    pub at: Timestamp,
    /// Why it fires.
    pub trigger: TriggerKind,
    /// Failed attempts at this fire so far (0 when fresh); its run is attempt
    /// `attempt + 1`.
    pub attempt: u32,
    /// For a retry: the instant after which the job's schedule resumes once the
    /// retries end (the retried fire, or the end of the span a coalesced fire stood
    /// for), so the fires that come due during the backoff are handled by the misfire
    /// policy instead of disappearing. `None` for a scheduled or manual fire.
    pub resume_after: Option<Timestamp>,
    /// What the fire carries to its run.
    pub context: FireContext,
}

impl FireState {
    /// A fresh fire of the job's schedule at `at`.
    pub fn scheduled(at: Timestamp) -> FireState {
        FireState::fresh(at, TriggerKind::Schedule, FireContext::default())
    }

    /// A fresh fire at `at` with trigger `trigger` carrying `context`: attempt 0, no
    /// resume point.
    pub fn fresh(at: Timestamp, trigger: TriggerKind, context: FireContext) -> FireState {
        FireState {
            at,
            trigger,
            attempt: 0,
            resume_after: None,
            context,
        }
    }

    /// The fire's payload override, if any.
    pub fn payload(&self) -> Option<&Value> {
        self.context.payload.as_ref()
    }
}
