//! [`LocalExecutor`]: runs handlers on the application's tokio runtime.

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
pub struct SlowLaneConfig {
    /// Slots of the slow lane (default 16), in addition to the fast lane's.
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

/// Bounded local execution in two lanes.
///
/// * The **fast lane** has `concurrency` slots, the **slow lane** its own
///   `slow_lane.concurrency`. A job with more than `slow_runs` runs longer than
///   `slow_run` within `window` runs in the slow lane until its recent runs are fast
///   again, so slow jobs cannot take every slot from fast ones.
/// * [`capacity`](Executor::capacity) is the number of free fast-lane slots: any job
///   can start there at once. A job in the slow lane waits for a slow-lane slot and
///   takes none of the fast lane's, so it never lowers the capacity the engine sees.
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

impl LocalExecutor {
    /// `concurrency` fast slots plus the slow lane of `lanes`.
    pub fn new(concurrency: usize, lanes: SlowLaneConfig) -> Self {
        LocalExecutor {
            fast: Arc::new(Semaphore::new(concurrency)),
            slow: Arc::new(Semaphore::new(lanes.concurrency)),
            lanes,
            history: Arc::default(),
        }
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

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
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
        let lane = if self.is_slow(&job) {
            &self.slow
        } else {
            &self.fast
        };
        let cancel = e.ctx.cancel.clone();
        let _permit = tokio::select! {
            p = lane.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return Outcome::Cancelled,
            },
            _ = cancel.cancelled() => return Outcome::Cancelled,
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
