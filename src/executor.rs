//! The [`Executor`] trait: where handlers run.

use crate::error::Result;
use crate::handler::{JobContext, JobError, JobHandler};
use crate::store::JobStore;
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;

/// How one execution ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The handler returned `Ok`.
    Succeeded,
    /// The handler returned an error (with its chain and retry advice).
    Failed(JobError),
    /// The handler ran past its timeout and was cancelled.
    TimedOut,
    /// The run was cancelled through its context (shutdown, lost lease).
    Cancelled,
    /// The handler panicked; the panic message.
    Panicked(String),
}

/// One execution to perform.
#[derive(Clone)]
pub struct Execution {
    /// The run's context.
    pub ctx: JobContext,
    /// The handler to call.
    pub handler: Arc<dyn JobHandler>,
    /// Cancel the run after this long.
    pub timeout: Option<Duration>,
}

impl std::fmt::Debug for Execution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Execution")
            .field("ctx", &self.ctx)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Runs handlers with bounded concurrency.
///
/// # Contract
///
/// * [`capacity`](Executor::capacity) is the number of executions it can start now
///   without queueing, and counts an execution from the first poll of its
///   [`execute`](Executor::execute) future. The engine hands it no more than that
///   (backpressure): due fires wait in the engine, in fire order, for a slot.
/// * [`execute`](Executor::execute) runs the handler to its end and reports how it
///   ended. It never panics: a handler panic becomes [`Outcome::Panicked`]. It
///   enforces `timeout` and reports cancellation through the context.
#[async_trait]
pub trait Executor: Send + Sync + 'static {
    /// Free slots.
    fn capacity(&self) -> usize;

    /// Runs one execution to its end.
    async fn execute(&self, execution: Execution) -> Outcome;
}

#[async_trait]
impl<E: Executor + ?Sized> Executor for Arc<E> {
    fn capacity(&self) -> usize {
        (**self).capacity()
    }
    async fn execute(&self, execution: Execution) -> Outcome {
        (**self).execute(execution).await
    }
}

/// The scheduler's side of a group of executor instances in other processes: it runs
/// the jobs whose [`RemoteTarget`](crate::placement::RemoteTarget) names the group,
/// as their handler (holding one of the node's slots while the run is away), and
/// answers for the group's instances. The engine knows a group only through this
/// trait; [`RemoteGroup`](crate::remote::RemoteGroup) (feature `remote`) is the
/// implementation that speaks the executor protocol.
#[async_trait]
pub trait ExecutorGroup: JobHandler {
    /// The group's name, as jobs name it.
    fn name(&self) -> &str;

    /// Called once, when the scheduler is built, with the store the group reads its
    /// registered instances from.
    fn attach(&self, store: Arc<dyn JobStore>);

    /// Asks every live instance to cancel run `run_id` (fenced by `token`) and
    /// returns the addresses of those that were running or queueing it; an instance
    /// that cannot be reached is passed over. Errors: the instances cannot be read.
    async fn kill_everywhere(&self, run_id: i64, token: u64) -> Result<Vec<String>>;

    /// How many instances get runs now (the live-executors gauge).
    async fn live_count(&self) -> Result<usize>;
}
