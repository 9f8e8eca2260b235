//! [`LocalExecutor`]: runs handlers on the application's tokio runtime, and its
//! configuration [`LocalExecutorConfig`].

use crate::error::{Error, Result};
use crate::executor::{Execution, Executor, Outcome};
use crate::job::JobId;
use async_trait::async_trait;
use futures::FutureExt;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// The slow lane: jobs whose runs were repeatedly slow run apart, so they cannot
/// starve fast jobs (as XXL-JOB's fast and slow trigger pools).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct SlowLaneConfig {
    /// Slots of the slow lane (default 16), in addition to the fast lane's. 0: no
    /// slow lane; slow jobs share the fast lane.
    pub concurrency: usize,
    /// A run longer than this is slow (default 500 ms).
    #[serde(with = "humantime_serde")]
    pub slow_run: Duration,
    /// A job with more than this many slow runs within `window` moves to the slow
    /// lane (default 10).
    pub slow_runs: u32,
    /// The window (default 1 min).
    #[serde(with = "humantime_serde")]
    pub window: Duration,
}

impl Default for SlowLaneConfig {
    fn default() -> Self {
        SlowLaneConfig {
            concurrency: 16,
            slow_run: Duration::from_millis(500),
            slow_runs: 10,
            window: Duration::from_secs(60),
        }
    }
}

/// How a [`LocalExecutor`] is sized. Load it with serde like
/// [`SchedulerConfig`](crate::SchedulerConfig) (durations as `"500ms"`).
///
/// ```
/// let c: jobwheel::LocalExecutorConfig =
///     serde_json::from_str(r#"{"concurrency": 256, "slow_lane": {"slow_run": "2s"}}"#).unwrap();
/// assert_eq!(c.slow_lane.concurrency, 16);
/// let executor = jobwheel::LocalExecutor::new(c)?;
/// # Ok::<(), jobwheel::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct LocalExecutorConfig {
    /// Slots of the fast lane (default 64): the runs that may execute at once, besides
    /// the slow lane's.
    pub concurrency: usize,
    /// The slow lane.
    pub slow_lane: SlowLaneConfig,
}

impl Default for LocalExecutorConfig {
    fn default() -> Self {
        LocalExecutorConfig {
            concurrency: 64,
            slow_lane: SlowLaneConfig::default(),
        }
    }
}

setters!(SlowLaneConfig {
    concurrency: usize,
    slow_run: Duration,
    slow_runs: u32,
    window: Duration,
});

setters!(LocalExecutorConfig {
    concurrency: usize,
    slow_lane: SlowLaneConfig,
});

/// Semaphore permits: no more than a tokio semaphore holds.
fn permits(field: &'static str, n: usize) -> Result<()> {
    if n > Semaphore::MAX_PERMITS {
        return Err(Error::invalid(
            field,
            n,
            format!("must be at most {}", Semaphore::MAX_PERMITS),
        ));
    }
    Ok(())
}

impl LocalExecutorConfig {
    /// Checks every field. Errors: [`Error::Invalid`] naming
    /// `local_executor.<field>`: no fast slot, more slots than a semaphore holds, or a
    /// zero `slow_run` or `window`.
    pub fn validate(&self) -> Result<()> {
        if self.concurrency == 0 {
            return Err(Error::invalid(
                "local_executor.concurrency",
                0,
                "must be at least 1",
            ));
        }
        permits("local_executor.concurrency", self.concurrency)?;
        permits(
            "local_executor.slow_lane.concurrency",
            self.slow_lane.concurrency,
        )?;
        for (field, d) in [
            ("local_executor.slow_lane.slow_run", self.slow_lane.slow_run),
            ("local_executor.slow_lane.window", self.slow_lane.window),
        ] {
            if d.is_zero() {
                return Err(Error::invalid(field, "0s", "must be positive"));
            }
        }
        Ok(())
    }
}

/// Bounded local execution in two lanes.
///
/// * The **fast lane** has `concurrency` slots, the **slow lane** its own
///   `slow_lane.concurrency`. A job with more than `slow_runs` runs longer than
///   `slow_run` within `window` is slow until its recent runs are fast again.
/// * A slow job's run takes a slow-lane slot while one is free, and then none of the
///   fast lane's, so up to `slow_lane.concurrency` slow runs leave every fast slot to
///   fast jobs. When the slow lane is full it takes a fast slot like any job: a run
///   never queues inside the executor (where it would hold its lease without
///   running).
/// * [`capacity`](Executor::capacity) is the number of free fast-lane slots: any job
///   can start at once in the fast lane, and a slow one may start in the slow lane
///   instead. An execution started beyond the capacity (against the
///   [`Executor`] contract) waits for a fast slot.
/// * A run is cancelled (its future dropped) at its timeout ([`Outcome::TimedOut`]) or
///   when its context's token is cancelled ([`Outcome::Cancelled`]); a panic is caught
///   and reported as [`Outcome::Panicked`].
#[derive(Debug, Clone)]
pub struct LocalExecutor {
    fast: Arc<Semaphore>,
    slow: Arc<Semaphore>,
    lanes: SlowLaneConfig,
    history: Arc<Mutex<HashMap<JobId, VecDeque<Instant>>>>,
}

impl Default for LocalExecutor {
    /// The executor a scheduler uses when given none: [`LocalExecutorConfig::default`].
    fn default() -> Self {
        Self::new(LocalExecutorConfig::default()).expect("the default configuration is valid")
    }
}

impl LocalExecutor {
    /// An executor sized by `config`. Errors: [`Error::Invalid`] from
    /// [`LocalExecutorConfig::validate`].
    pub fn new(config: LocalExecutorConfig) -> Result<Self> {
        config.validate()?;
        Ok(LocalExecutor {
            fast: Arc::new(Semaphore::new(config.concurrency)),
            slow: Arc::new(Semaphore::new(config.slow_lane.concurrency)),
            lanes: config.slow_lane,
            history: Arc::default(),
        })
    }

    /// An executor with `concurrency` fast slots and the default slow lane.
    /// Errors: as [`new`](Self::new).
    pub fn with_concurrency(concurrency: usize) -> Result<Self> {
        Self::new(LocalExecutorConfig {
            concurrency,
            ..LocalExecutorConfig::default()
        })
    }

    /// Whether runs of `job` currently go to the slow lane.
    pub fn is_slow(&self, job: &JobId) -> bool {
        let mut h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        match h.get_mut(job) {
            Some(q) => {
                while q
                    .front()
                    .is_some_and(|t| now.duration_since(*t) > self.lanes.window)
                {
                    q.pop_front();
                }
                let slow = q.len() as u32 > self.lanes.slow_runs;
                if q.is_empty() {
                    h.remove(job);
                }
                slow
            }
            None => false,
        }
    }

    fn record(&self, job: &JobId, took: Duration) {
        if took > self.lanes.slow_run {
            let mut h = self.history.lock().unwrap_or_else(|e| e.into_inner());
            h.entry(job.clone()).or_default().push_back(Instant::now());
        }
    }
}

/// The message of a caught panic.
pub(crate) fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

#[async_trait]
impl Executor for LocalExecutor {
    fn capacity(&self) -> usize {
        self.fast.available_permits()
    }

    async fn execute(&self, e: Execution) -> Outcome {
        let job = e.ctx.job.id().clone();
        let cancel = e.ctx.cancel.clone();
        let slow = if self.is_slow(&job) {
            self.slow.clone().try_acquire_owned().ok()
        } else {
            None
        };
        let _permit = match slow {
            Some(p) => p,
            None => tokio::select! {
                p = self.fast.clone().acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => return Outcome::Cancelled,
                },
                _ = cancel.cancelled() => return Outcome::Cancelled,
            },
        };
        let started = Instant::now();
        let run = AssertUnwindSafe(e.handler.run(e.ctx.clone())).catch_unwind();
        let timeout = async {
            match e.timeout {
                Some(t) => tokio::time::sleep(t).await,
                None => std::future::pending().await,
            }
        };
        let outcome = tokio::select! {
            r = run => match r {
                Ok(Ok(())) => Outcome::Succeeded,
                Ok(Err(err)) => Outcome::Failed(err),
                Err(p) => Outcome::Panicked(panic_message(p)),
            },
            _ = timeout => {
                cancel.cancel();
                Outcome::TimedOut
            }
            _ = cancel.cancelled() => Outcome::Cancelled,
        };
        self.record(&job, started.elapsed());
        outcome
    }
}
