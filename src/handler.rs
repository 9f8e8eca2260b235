//! The [`JobHandler`] trait and what a handler sees of its run.

use crate::job::Job;
use crate::record::{RunId, TriggerKind};
use crate::time::Timestamp;
use async_trait::async_trait;
use serde_json::Value;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Everything a handler knows about the run it is executing.
#[derive(Clone, Debug)]
pub struct JobContext {
    /// The job definition.
    pub job: Arc<Job>,
    /// The run.
    pub run_id: RunId,
    /// The fire's scheduled instant.
    pub fire_at: Timestamp,
    /// 1-based attempt.
    pub attempt: u32,
    /// Why it runs.
    pub trigger: TriggerKind,
    /// Fencing token of the lease this run holds. A handler that writes to an
    /// external system can pass it along so that system can refuse stale writers.
    pub token: u64,
    /// Node running it.
    pub node_id: Arc<str>,
    /// Cancelled on timeout, on shutdown past the grace period, and when the lease is
    /// lost. A cancelled run's result is recorded as timed out or cancelled.
    pub cancel: CancellationToken,
    /// When the run's timeout expires, on tokio's clock.
    pub deadline: Option<tokio::time::Instant>,
}

impl JobContext {
    /// The job's payload.
    pub fn payload(&self) -> &Value {
        self.job.payload()
    }

    /// Whether the run has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Completes when the run is cancelled; for `tokio::select!`.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }
}

/// The error a handler returns: a message recorded in the run log and alarms.
///
/// Any `std::error::Error` converts into it with `?`.
#[derive(Clone, PartialEq, Eq)]
pub struct JobError {
    message: String,
}

impl JobError {
    /// An error with this message.
    pub fn msg(message: impl fmt::Display) -> Self {
        JobError {
            message: message.to_string(),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JobError({:?})", self.message)
    }
}

impl<E: std::error::Error> From<E> for JobError {
    fn from(e: E) -> Self {
        JobError::msg(e)
    }
}

/// Code that runs a job.
///
/// Any `Fn(JobContext) -> impl Future<Output = Result<(), JobError>>` that is
/// `Send + Sync + 'static` is a handler, so async closures work directly.
/// A handler should return promptly once `ctx.cancel` is cancelled.
#[async_trait]
pub trait JobHandler: Send + Sync + 'static {
    /// Runs one attempt.
    async fn run(&self, ctx: JobContext) -> Result<(), JobError>;
}

#[async_trait]
impl<F, Fut> JobHandler for F
where
    F: Fn(JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), JobError>> + Send + 'static,
{
    async fn run(&self, ctx: JobContext) -> Result<(), JobError> {
        (self)(ctx).await
    }
}
