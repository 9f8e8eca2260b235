//! The [`Executor`] trait: where handlers run.

use crate::handler::{JobContext, JobError, JobHandler};
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
