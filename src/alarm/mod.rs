//! The [`JobAlarm`] trait: observers that tell people about failures.

use crate::record::AlarmEvent;
use async_trait::async_trait;
use std::fmt;
use std::sync::Arc;

/// Why an alarm could not deliver an event.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct AlarmError {
    /// What went wrong (must not contain secrets).
    pub message: String,
    /// Whether trying again later may succeed (the outbox retries with backoff).
    pub retryable: bool,
}

impl AlarmError {
    /// A failure worth retrying.
    pub fn retryable(message: impl fmt::Display) -> Self {
        AlarmError {
            message: message.to_string(),
            retryable: true,
        }
    }

    /// A failure that retrying will not fix.
    pub fn permanent(message: impl fmt::Display) -> Self {
        AlarmError {
            message: message.to_string(),
            retryable: false,
        }
    }
}

/// An observer of alarm events (e-mail, webhook, your own).
///
/// # Contract
///
/// `alarm` delivers one event and returns once it was accepted by the far side, or
/// with an [`AlarmError`]. It may be called more than once for the same event when
/// a previous delivery failed or its node died mid-delivery (at-least-once), so
/// receivers that care should de-duplicate on the event's job, kind and fire time.
/// It must not block for long: it runs off the scheduling path, but a slow alarm
/// delays the other alarms of the same event.
#[async_trait]
pub trait JobAlarm: Send + Sync + 'static {
    /// Name for logs and the outbox record.
    fn name(&self) -> &str;

    /// Delivers one event.
    async fn alarm(&self, event: &AlarmEvent) -> Result<(), AlarmError>;
}

#[async_trait]
impl<A: JobAlarm + ?Sized> JobAlarm for Arc<A> {
    fn name(&self) -> &str {
        (**self).name()
    }
    async fn alarm(&self, event: &AlarmEvent) -> Result<(), AlarmError> {
        (**self).alarm(event).await
    }
}

#[async_trait]
impl<A: JobAlarm + ?Sized> JobAlarm for Box<A> {
    fn name(&self) -> &str {
        (**self).name()
    }
    async fn alarm(&self, event: &AlarmEvent) -> Result<(), AlarmError> {
        (**self).alarm(event).await
    }
}

mod compose;
#[cfg(feature = "email")]
pub mod email;
#[cfg(feature = "webhook")]
pub mod webhook;

pub use compose::{Retrying, Throttled};
pub(crate) use compose::{Throttle, ThrottleDecision};
