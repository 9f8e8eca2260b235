//! The [`JobHandler`] trait and what a handler sees of its run.

use crate::job::Job;
use crate::record::{RunId, TriggerKind};
use crate::time::Timestamp;
use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Everything a handler knows about the run it is executing.
#[derive(Clone, Debug)]
pub struct JobContext {
    /// The job definition, with the fire's payload: for a fire triggered with a
    /// payload override, that payload in place of the stored one.
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
    /// For a run that is one shard of a sharding broadcast (on an executor
    /// instance): which shard of how many; `None` otherwise.
    pub shard: Option<crate::placement::Shard>,
    /// The W3C `traceparent` of the run's span (feature `otel`, with an
    /// OpenTelemetry layer installed; `None` otherwise): pass it on in a handler's
    /// own calls to keep them in the run's trace. On a scheduler node it is what an
    /// executor instance's span for the run is made a child of.
    pub trace: Option<String>,
    /// For a fire released by upstream jobs (trigger
    /// [`Upstream`](crate::TriggerKind::Upstream)): the upstream runs that released
    /// it, with their fires' instants and how they ended; empty otherwise.
    pub upstream: Vec<crate::dependency::UpstreamRun>,
    /// Writes lines to this run's log directly (beside its `tracing` events, which
    /// [`run_log_layer`](crate::run_log_layer) captures): kept and bounded as they
    /// are, read back with the run. A context made by hand takes
    /// [`RunLogger::discard`](crate::RunLogger::discard).
    pub log: crate::capture::RunLogger,
    /// Where the run executed when that is not this node: a remote group's
    /// dispatcher names the executor instance it sent the run to, and the run's
    /// record keeps it ([`RunRecord::executor`](crate::record::RunRecord::executor)).
    /// A local handler leaves it empty; a context made by hand takes
    /// `ExecutedOn::default()`.
    pub executed_on: ExecutedOn,
}

/// The executor instances a run was sent to (see [`JobContext::executed_on`]):
/// shared by the clones of one run's context, so what a dispatcher records is what
/// the engine writes with the run's end.
#[derive(Clone, Debug, Default)]
pub struct ExecutedOn(Arc<std::sync::Mutex<Vec<String>>>);

impl ExecutedOn {
    /// The longest [`summary`](Self::summary) kept: a broadcast to more instances
    /// than fit keeps the first ones and a count of the rest.
    pub const MAX_BYTES: usize = 255;

    /// Records that the run (or one shard of it) was admitted by `instance`; an
    /// instance already recorded is not repeated.
    pub fn add(&self, instance: &str) {
        let mut v = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if !v.iter().any(|i| i == instance) {
            v.push(instance.to_string());
        }
    }

    /// The instances recorded, in the order they were.
    pub fn instances(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// What the run's record keeps: the instances joined by `, `, at most
    /// [`MAX_BYTES`](Self::MAX_BYTES) (the rest counted as `+N more`); `None` when
    /// none was recorded.
    pub fn summary(&self) -> Option<String> {
        let all = self.instances();
        let mut out = String::new();
        for (n, i) in all.iter().enumerate() {
            let sep = if out.is_empty() { "" } else { ", " };
            let rest = all.len() - n;
            let more = if rest > 1 {
                format!(", +{} more", rest - 1)
            } else {
                String::new()
            };
            if out.len() + sep.len() + i.len() + more.len() > Self::MAX_BYTES {
                out.push_str(&format!("{sep}+{rest} more"));
                break;
            }
            out.push_str(sep);
            out.push_str(i);
        }
        (!all.is_empty()).then_some(out)
    }
}

impl JobContext {
    /// The fire's payload: the job's own, or for a fire triggered with a payload
    /// override ([`Scheduler::trigger_now_with`](crate::Scheduler::trigger_now_with)),
    /// that payload (which is then also `job.payload()`).
    pub fn payload(&self) -> &Value {
        self.job.payload()
    }

    /// The fire's [payload](Self::payload) decoded as `T`. A payload that does not
    /// fit is a [permanent](JobError::permanent) error naming `T` and the mismatch, so
    /// `?` ends the run without retries.
    pub fn payload_as<T: DeserializeOwned>(&self) -> JobResult<T> {
        serde_path_to_error::deserialize(self.job.payload()).map_err(|e| {
            let path = e.path().to_string();
            JobError::msg(format!(
                "payload of job {} is not a {} (at `{path}`): {}",
                self.job.id(),
                std::any::type_name::<T>(),
                e.inner()
            ))
            .permanent()
        })
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

/// What a handler returns: `Ok(())`, or a [`JobError`] saying what failed and
/// whether to retry.
pub type JobResult<T = ()> = Result<T, JobError>;

/// What the engine does after a failed attempt, as the handler asked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryAdvice {
    /// Follow the job's [`RetryPolicy`](crate::RetryPolicy) (the default).
    #[default]
    Policy,
    /// Do not retry: the run is the final failure (with its alarm), and the schedule
    /// continues.
    Never,
    /// Retry after this delay instead of the policy's backoff, if the policy has
    /// attempts left.
    After(Duration),
}

/// The error a handler returns: what failed, with its whole source chain, and
/// whether to retry ([`permanent`](JobError::permanent),
/// [`retry_after`](JobError::retry_after)).
///
/// Anything that converts into `Box<dyn std::error::Error + Send + Sync>` converts
/// into it, so `?` works on any `std::error::Error + Send + Sync` (`sqlx::Error`,
/// `reqwest::Error`, `std::io::Error`, …), on `anyhow::Error`, and on `String` and
/// `&str`. The run log and alarms record [`chain`](JobError::chain): every message
/// from the outermost error to its root cause, joined by `": "`.
///
/// Like `anyhow::Error`, it does not implement `std::error::Error` itself (that is
/// what lets every error convert into it); [`source`](JobError::source) gives the
/// error it wraps.
#[derive(Clone)]
pub struct JobError {
    chain: String,
    source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
    retry: RetryAdvice,
    killed: bool,
}

impl JobError {
    /// An error with this message and no source.
    pub fn msg(message: impl fmt::Display) -> Self {
        JobError {
            chain: message.to_string(),
            source: None,
            retry: RetryAdvice::Policy,
            killed: false,
        }
    }

    /// The run was killed where it executed (an operator's kill reached the executor
    /// instance): the run is recorded `cancelled`, not retried, and raises an alarm
    /// only when the job's policy lists [`AlarmKind::Killed`](crate::AlarmKind::Killed).
    pub fn killed(message: impl fmt::Display) -> Self {
        JobError {
            killed: true,
            ..JobError::msg(message).permanent()
        }
    }

    /// Whether the run was [`killed`](JobError::killed).
    pub fn is_killed(&self) -> bool {
        self.killed
    }

    /// Wraps `error`, keeping its source chain.
    pub fn new(error: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) -> Self {
        let error: Arc<dyn std::error::Error + Send + Sync> = Arc::from(error.into());
        let mut chain = error.to_string();
        let mut next = error.source();
        let mut depth = 0;
        while let Some(cause) = next {
            let text = cause.to_string();
            // Wrappers often repeat their cause in their own message.
            if !chain.ends_with(&text) {
                chain.push_str(": ");
                chain.push_str(&text);
            }
            next = cause.source();
            depth += 1;
            if depth == 64 {
                break;
            }
        }
        JobError {
            chain,
            source: Some(error),
            retry: RetryAdvice::Policy,
            killed: false,
        }
    }

    /// Marks the error permanent: no retry, whatever the retry policy; the run is the
    /// fire's final failure and raises its alarm.
    #[must_use]
    pub fn permanent(mut self) -> Self {
        self.retry = RetryAdvice::Never;
        self
    }

    /// Asks for the next attempt after `delay` instead of the policy's backoff (once;
    /// later failures follow the policy again). Has no effect when the policy has no
    /// attempt left.
    #[must_use]
    pub fn retry_after(mut self, delay: Duration) -> Self {
        self.retry = RetryAdvice::After(delay);
        self
    }

    /// What the handler asked for the next attempt.
    pub fn retry(&self) -> RetryAdvice {
        self.retry
    }

    /// Whether the error is [`permanent`](JobError::permanent).
    pub fn is_permanent(&self) -> bool {
        self.retry == RetryAdvice::Never
    }

    /// The whole chain of messages, outermost first, joined by `": "`: what the run
    /// log records.
    pub fn chain(&self) -> &str {
        &self.chain
    }

    /// The error this one wraps, when it was made from one.
    pub fn source(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.source.as_deref()
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.chain)
    }
}

impl fmt::Debug for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobError")
            .field("chain", &self.chain)
            .field("retry", &self.retry)
            .field("killed", &self.killed)
            .finish()
    }
}

/// Equal when the chains, the advice and whether it was killed are equal.
impl PartialEq for JobError {
    fn eq(&self, other: &Self) -> bool {
        self.chain == other.chain && self.retry == other.retry && self.killed == other.killed
    }
}

impl Eq for JobError {}

impl<E: Into<Box<dyn std::error::Error + Send + Sync + 'static>>> From<E> for JobError {
    fn from(e: E) -> Self {
        JobError::new(e)
    }
}

/// Code that runs a job.
///
/// Any `Fn(JobContext) -> impl Future<Output = JobResult>` that is
/// `Send + Sync + 'static` is a handler, so async closures and `async fn`s work
/// directly; a function that also takes the payload as a type of its own is one
/// through [`Typed`] (which [`SchedulerBuilder::handler`](crate::SchedulerBuilder::handler)
/// applies by itself). A handler should return promptly once `ctx.cancel` is cancelled.
///
/// # Never block the runtime
///
/// Handlers run on the application's tokio runtime, beside every other job's timers.
/// A handler that blocks its thread (`std::thread::sleep`, synchronous file or network
/// I/O, a long computation) stalls every job scheduled on that worker: on a
/// `current_thread` runtime, all of them. Wrap such code in [`blocking`], which runs it
/// on tokio's blocking pool.
#[async_trait]
pub trait JobHandler: Send + Sync + 'static {
    /// Runs one attempt.
    async fn run(&self, ctx: JobContext) -> JobResult;
}

#[async_trait]
impl<F, Fut> JobHandler for F
where
    F: Fn(JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = JobResult> + Send + 'static,
{
    async fn run(&self, ctx: JobContext) -> JobResult {
        (self)(ctx).await
    }
}

/// A handler that takes the job's payload decoded as `P`: wraps any
/// `Fn(JobContext, P) -> impl Future<Output = JobResult>`. A payload that does not
/// decode as `P` fails the run [permanently](JobError::permanent), naming the type and
/// the serde error (retrying cannot fix it).
pub struct Typed<F, P> {
    f: F,
    _payload: PhantomData<fn() -> P>,
}

impl<F, P> Typed<F, P> {
    /// Wraps `f`.
    pub fn new(f: F) -> Self {
        Typed {
            f,
            _payload: PhantomData,
        }
    }
}

impl<F, P> fmt::Debug for Typed<F, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Typed<{}>", std::any::type_name::<P>())
    }
}

#[async_trait]
impl<F, Fut, P> JobHandler for Typed<F, P>
where
    F: Fn(JobContext, P) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = JobResult> + Send + 'static,
    P: DeserializeOwned + Send + 'static,
{
    async fn run(&self, ctx: JobContext) -> JobResult {
        let payload = ctx.payload_as::<P>()?;
        (self.f)(ctx, payload).await
    }
}

/// What [`SchedulerBuilder::handler`](crate::SchedulerBuilder::handler) accepts: any
/// [`JobHandler`] (marker [`Plain`]), or a function of the context and a typed payload
/// (marker [`WithPayload`], wrapped in [`Typed`]). The marker only guides type
/// inference; callers never name it.
pub trait IntoHandler<M>: Send + Sync + 'static {
    /// The handler.
    fn into_handler(self) -> Arc<dyn JobHandler>;
}

/// [`IntoHandler`] marker for a [`JobHandler`].
#[derive(Debug)]
pub enum Plain {}

/// [`IntoHandler`] marker for a function of the context and a payload of type `P`.
#[derive(Debug)]
pub struct WithPayload<P>(PhantomData<fn() -> P>);

impl<H: JobHandler> IntoHandler<Plain> for H {
    fn into_handler(self) -> Arc<dyn JobHandler> {
        Arc::new(self)
    }
}

impl<F, Fut, P> IntoHandler<WithPayload<P>> for F
where
    F: Fn(JobContext, P) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = JobResult> + Send + 'static,
    P: DeserializeOwned + Send + 'static,
{
    fn into_handler(self) -> Arc<dyn JobHandler> {
        Arc::new(Typed::new(self))
    }
}

/// A handler whose code blocks: runs `f` on tokio's blocking thread pool
/// (`spawn_blocking`), so it cannot stall the scheduler's timers or other jobs.
///
/// ```
/// use jobwheel::handler::blocking;
/// use jobwheel::{JobContext, JobResult};
///
/// fn compress(ctx: JobContext) -> JobResult {
///     std::thread::sleep(std::time::Duration::from_millis(10)); // stands for blocking work
///     if ctx.is_cancelled() {
///         return Ok(()); // timed out or shutting down: stop early
///     }
///     Ok(())
/// }
/// # let _ = jobwheel::Scheduler::builder().handler("compress", blocking(compress));
/// ```
///
/// A timeout or cancellation ends the run at once, but the thread keeps running `f`
/// until it returns (a thread cannot be stopped from outside): check
/// `ctx.is_cancelled()` in long loops. A panic in `f` is reported as a panicked run.
pub fn blocking<F>(f: F) -> Blocking<F>
where
    F: Fn(JobContext) -> JobResult + Send + Sync + 'static,
{
    Blocking { f: Arc::new(f) }
}

/// A blocking handler; see [`blocking`].
pub struct Blocking<F> {
    f: Arc<F>,
}

impl<F> fmt::Debug for Blocking<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Blocking")
    }
}

#[async_trait]
impl<F> JobHandler for Blocking<F>
where
    F: Fn(JobContext) -> JobResult + Send + Sync + 'static,
{
    async fn run(&self, ctx: JobContext) -> JobResult {
        let f = self.f.clone();
        match tokio::task::spawn_blocking(move || f(ctx)).await {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(JobError::msg(format!(
                "blocking handler did not finish: {e}"
            ))),
        }
    }
}
