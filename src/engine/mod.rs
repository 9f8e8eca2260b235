//! The engine: a [`Scheduler`] wires a store, a lock provider, an executor, alarms
//! and handlers together and runs the fire cycle of DESIGN.md on the application's
//! tokio runtime.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> jobwheel::Result<()> {
//! use jobwheel::prelude::*;
//!
//! async fn hello(ctx: JobContext) -> JobResult {
//!     println!("fire {} of {}", ctx.fire_at, ctx.job.id());
//!     Ok(())
//! }
//!
//! let scheduler = Scheduler::builder()
//!     .backend(connect("memory:").await?)
//!     .handler("hello", hello)
//!     .build()?;
//! let running = scheduler.start().await?;
//! scheduler.upsert(Job::builder("greet", "hello", Schedule::cron("*/10 * * * * ?", "UTC")?).build()?).await?;
//! running.shutdown().await;
//! # Ok(()) }
//! ```

mod alarms;
mod api;
mod backoff;
mod batch;
mod config;
mod cycle;
mod fire;
mod maintenance;
mod metrics;
mod plan;
mod poll;
mod slots;

pub use api::Doctor;
pub use config::SchedulerConfig;
pub(crate) use metrics::{Counters, bump};
pub use metrics::{EngineMetrics, MisfireCounts};

use crate::alarm::JobAlarm;
use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::handler::{IntoHandler, JobHandler};
use crate::job::JobId;
use crate::local_executor::LocalExecutor;
use crate::lock::LockProvider;
use crate::record::*;
use crate::store::JobStore;
use crate::time::Timestamp;
use batch::Batcher;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where a sweep through a backlog of due fires stands.
#[derive(Default)]
pub(crate) struct Sweep {
    /// The key of the last due fire the previous full poll looked at; the next poll
    /// continues after it. `None`: from the start.
    pub(crate) cursor: Option<crate::record::DueKey>,
    /// When the sweep started from the beginning of the due order.
    pub(crate) since: Option<Instant>,
}

/// A run in progress on this node, watched by the lease renewer.
pub(crate) struct RunningEntry {
    pub(crate) lease: crate::lock::Lease,
    pub(crate) deadline: Instant,
    pub(crate) cancel: CancellationToken,
    pub(crate) lost: bool,
}

pub(crate) struct Batchers {
    pub(crate) start: Batcher<StartRun, StartOutcome>,
    pub(crate) finish: Batcher<FinishRun, FinishOutcome>,
    pub(crate) release: Batcher<crate::lock::Lease, bool>,
    /// Extends a lease to cover the job's next fire (ttl: lookahead + lease ttl).
    pub(crate) renew: Batcher<crate::lock::Lease, Option<crate::lock::Lease>>,
}

pub(crate) struct Core {
    pub(crate) store: Arc<dyn JobStore>,
    pub(crate) locks: Arc<dyn LockProvider>,
    pub(crate) executor: Arc<dyn Executor>,
    pub(crate) alarms: Vec<Arc<dyn JobAlarm>>,
    pub(crate) handlers: HashMap<String, Arc<dyn JobHandler>>,
    pub(crate) config: SchedulerConfig,
    pub(crate) node_id: Arc<str>,
    pub(crate) host: String,
    pub(crate) wake: Notify,
    /// Wakes the alarm dispatcher when a finish wrote alarm events.
    pub(crate) alarm_wake: Notify,
    /// The scheduler-wide alarm throttle (`config.alarm_throttle`).
    pub(crate) alarm_throttle: Option<crate::alarm::Throttle>,
    /// Per event in delivery on this node: which registered alarms already took it,
    /// so a retry calls only the ones that failed.
    pub(crate) alarm_progress: Mutex<HashMap<AlarmId, Vec<bool>>>,
    /// A reading of the store's clock and the local instant it corresponds to.
    pub(crate) sync: Mutex<(Timestamp, Instant)>,
    /// Jobs claimed by this node and not yet done.
    pub(crate) armed: Mutex<HashSet<JobId>>,
    /// Executor slots, handed to due fires in fire order.
    pub(crate) slots: Arc<slots::Slots>,
    /// Fires whose handler has ended and whose finish is being written: they hold
    /// their lease but no slot, and a poll counts them as busy so that a node never
    /// holds more leases than it has slots.
    pub(crate) finishing: AtomicUsize,
    /// Claimed fires waiting for their instant. They hold no slot; a poll arms no
    /// more of them than the node has free slots.
    pub(crate) ahead: AtomicUsize,
    /// Set (to the line, nonzero) when a poll left claimable fires for lack of free
    /// slots; the poller is woken once the line is empty. 0: not starved.
    pub(crate) starved: AtomicUsize,
    /// Set while the last poll saw due fires this node had no free slot for; a job
    /// then gives its lease back after a run instead of keeping it for its next fire,
    /// so every due job gets its turn in fire order and other nodes can take the rest.
    pub(crate) backlog: std::sync::atomic::AtomicBool,
    /// Where the next poll continues while due fires are paged through.
    pub(crate) sweep: Mutex<Sweep>,
    /// Stored rows this node met and could not read, `(kind, id)`, each logged once
    /// (at most 10,000 remembered).
    pub(crate) corrupt: Mutex<HashSet<(&'static str, String)>>,
    pub(crate) running: Mutex<HashMap<RunId, RunningEntry>>,
    /// Stops claiming and arming.
    pub(crate) stop: CancellationToken,
    /// Stops the background loops (after running fires are done).
    pub(crate) bg_stop: CancellationToken,
    /// Cancels running handlers.
    pub(crate) kill: CancellationToken,
    pub(crate) fires: TaskTracker,
    pub(crate) background: TaskTracker,
    pub(crate) batch: OnceLock<Batchers>,
    pub(crate) counters: Counters,
    pub(crate) started_at: OnceLock<Timestamp>,
}

impl Core {
    /// Executor slots not promised to a due fire of this node, less the fires still
    /// writing their finish.
    pub(crate) fn free_slots(&self) -> usize {
        self.slots
            .free()
            .saturating_sub(self.finishing.load(Ordering::SeqCst))
    }

    /// Due fires this node may still claim with a line of `line` fires waiting for
    /// slots: its free slots plus the line, less the due fires already waiting.
    pub(crate) fn line_room(&self, line: usize) -> usize {
        (self.executor.capacity() + line)
            .saturating_sub(self.slots.pending() + self.finishing.load(Ordering::SeqCst))
    }

    /// Counts and logs (once each) rows the store skipped because it could not read
    /// them.
    pub(crate) fn saw_corrupt(&self, rows: &[crate::store::CorruptRow]) {
        if rows.is_empty() {
            return;
        }
        let mut seen = lock(&self.corrupt);
        for row in rows {
            if seen.len() < 10_000 && seen.insert((row.kind, row.id.clone())) {
                bump(&self.counters.corrupt_rows);
                tracing::warn!(kind = row.kind, id = %row.id, reason = %row.reason, "a stored row cannot be read; it is skipped (Scheduler::doctor lists them)");
            }
        }
    }

    /// Wakes the poller when a poll was starved and every due fire it claimed has a
    /// slot now (the line is empty).
    pub(crate) fn wake_if_starved(&self) {
        if self.starved.load(Ordering::SeqCst) > 0
            && self.line_room(1) > 0
            && self.starved.swap(0, Ordering::SeqCst) > 0
        {
            self.wake.notify_one();
        }
    }

    /// Wakes the poller to scan from the start of the due order: a job may have
    /// become due before the cursor of a sweep in progress.
    pub(crate) fn rescan(&self) {
        *lock(&self.sweep) = Sweep::default();
        self.wake.notify_one();
    }

    /// Restarts the sweep from the beginning when `at` sorts at or before its
    /// cursor: this node just made a job due there (a rescheduled job whose lease it
    /// gave back), and the next poll must see it.
    pub(crate) fn rescan_before(&self, at: crate::time::Timestamp) {
        let mut sweep = lock(&self.sweep);
        if sweep.cursor.as_ref().is_some_and(|c| at <= c.fire_at) {
            *sweep = Sweep::default();
        }
    }

    /// The store's clock now, estimated from the last reading and the monotonic clock.
    pub(crate) fn store_now(&self) -> Timestamp {
        let (t, at) = *lock(&self.sync);
        t + at.elapsed()
    }

    /// The local instant at which the store's clock reads `t`.
    pub(crate) fn local_instant(&self, t: Timestamp) -> Instant {
        let (now, at) = *lock(&self.sync);
        if t >= now {
            at + t.duration_since(now)
        } else {
            at.checked_sub(now.duration_since(t)).unwrap_or(at)
        }
    }

    pub(crate) fn batch(&self) -> &Batchers {
        self.batch.get().expect("batchers exist once started")
    }
}

/// Builds a [`Scheduler`].
#[must_use = "a builder does nothing until `build()`"]
pub struct SchedulerBuilder {
    store: Option<Arc<dyn JobStore>>,
    locks: Option<Arc<dyn LockProvider>>,
    executor: Option<Arc<dyn Executor>>,
    alarms: Vec<Arc<dyn JobAlarm>>,
    handlers: HashMap<String, Arc<dyn JobHandler>>,
    config: SchedulerConfig,
}

impl fmt::Debug for SchedulerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchedulerBuilder")
            .field("handlers", &self.handlers.keys().collect::<Vec<_>>())
            .field(
                "alarms",
                &self
                    .alarms
                    .iter()
                    .map(|a| a.name().to_string())
                    .collect::<Vec<_>>(),
            )
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl SchedulerBuilder {
    /// The job store (required, or given by [`backend`](Self::backend)).
    pub fn store(mut self, store: impl JobStore) -> Self {
        self.store = Some(Arc::new(store));
        self
    }
    /// The store and lock provider of a [`Backend`](crate::Backend), as
    /// [`connect`](crate::connect()) returns them.
    pub fn backend(mut self, backend: crate::Backend) -> Self {
        self.store = Some(backend.store);
        self.locks = Some(backend.locks);
        self
    }
    /// The lock provider (required, or given by [`backend`](Self::backend)).
    pub fn locks(mut self, locks: impl LockProvider) -> Self {
        self.locks = Some(Arc::new(locks));
        self
    }
    /// The executor (default: a [`LocalExecutor`] sized by the config).
    pub fn executor(mut self, executor: impl Executor) -> Self {
        self.executor = Some(Arc::new(executor));
        self
    }
    /// Registers a handler under `name`; jobs name it in [`Job::handler`](crate::Job::handler).
    /// Takes any [`JobHandler`] (an `async fn(JobContext) -> JobResult` or such a
    /// closure), or a function that also takes the payload decoded as a type of its
    /// own: `async fn report(ctx: JobContext, p: ReportParams) -> JobResult` (see
    /// [`Typed`](crate::handler::Typed)).
    pub fn handler<M>(mut self, name: impl Into<String>, handler: impl IntoHandler<M>) -> Self {
        self.handlers.insert(name.into(), handler.into_handler());
        self
    }
    /// Adds an alarm; every alarm hears every alarm event.
    pub fn alarm(mut self, alarm: impl JobAlarm) -> Self {
        self.alarms.push(Arc::new(alarm));
        self
    }
    /// Replaces the configuration.
    pub fn config(mut self, config: SchedulerConfig) -> Self {
        self.config = config;
        self
    }

    /// Validates the configuration and builds the scheduler (not yet running).
    ///
    /// Errors: [`Error::Invalid`] naming the bad `config.*` field, `handler` when no
    /// handler is registered, `scheduler.store` or `scheduler.locks` when either is
    /// missing.
    pub fn build(self) -> Result<Scheduler> {
        self.config.validate()?;
        if self.handlers.is_empty() {
            return Err(Error::invalid(
                "handler",
                "none",
                "register at least one handler",
            ));
        }
        let missing = |what: &'static str| {
            Error::invalid(
                what,
                "none",
                "set it with .store(..) and .locks(..), or .backend(jobwheel::connect(url).await?)",
            )
        };
        let store = self.store.ok_or_else(|| missing("scheduler.store"))?;
        let locks = self.locks.ok_or_else(|| missing("scheduler.locks"))?;
        let config = self.config;
        let node_id: Arc<str> = config
            .node_id
            .clone()
            .unwrap_or_else(default_node_id)
            .into();
        if self.executor.is_some() {
            let local = SchedulerConfig::default();
            if config.concurrency != local.concurrency {
                return Err(Error::invalid(
                    "config.concurrency",
                    config.concurrency,
                    "sizes the built-in LocalExecutor only; a custom executor sizes itself",
                ));
            }
            if config.slow_lane != local.slow_lane {
                return Err(Error::invalid(
                    "config.slow_lane",
                    format!("{:?}", config.slow_lane),
                    "configures the built-in LocalExecutor only; a custom executor has its own",
                ));
            }
        }
        let executor: Arc<dyn Executor> = self.executor.unwrap_or_else(|| {
            Arc::new(LocalExecutor::new(
                config.concurrency,
                config.slow_lane.clone(),
            ))
        });
        Ok(Scheduler {
            core: Arc::new(Core {
                store,
                locks,
                slots: Arc::new(slots::Slots::new(executor.clone())),
                executor,
                alarms: self.alarms,
                handlers: self.handlers,
                alarm_throttle: config.alarm_throttle.map(crate::alarm::Throttle::new),
                config,
                node_id,
                host: host_name(),
                wake: Notify::new(),
                alarm_wake: Notify::new(),
                alarm_progress: Mutex::default(),
                sync: Mutex::new((Timestamp::now(), Instant::now())),
                armed: Mutex::default(),
                ahead: AtomicUsize::new(0),
                finishing: AtomicUsize::new(0),
                starved: AtomicUsize::new(0),
                backlog: std::sync::atomic::AtomicBool::new(false),
                sweep: Mutex::default(),
                corrupt: Mutex::default(),
                running: Mutex::default(),
                stop: CancellationToken::new(),
                bg_stop: CancellationToken::new(),
                kill: CancellationToken::new(),
                fires: TaskTracker::new(),
                background: TaskTracker::new(),
                batch: OnceLock::new(),
                counters: Counters::default(),
                started_at: OnceLock::new(),
            }),
        })
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

fn default_node_id() -> String {
    format!(
        "{}-{}-{:04x}",
        host_name(),
        std::process::id(),
        fastrand::u16(..)
    )
}

/// A scheduler: the operations on jobs and runs, usable before and after `start`.
///
/// Cloning shares the same scheduler. It keeps no global state: several schedulers
/// can run in one process (they behave as separate nodes).
#[derive(Clone)]
pub struct Scheduler {
    pub(crate) core: Arc<Core>,
}

impl fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler")
            .field("node_id", &self.core.node_id)
            .field("store", &self.core.store.name())
            .field("locks", &self.core.locks.name())
            .finish_non_exhaustive()
    }
}

impl Scheduler {
    /// Starts a builder.
    pub fn builder() -> SchedulerBuilder {
        SchedulerBuilder {
            store: None,
            locks: None,
            executor: None,
            alarms: Vec::new(),
            handlers: HashMap::new(),
            config: SchedulerConfig::default(),
        }
    }

    /// This node's id.
    pub fn node_id(&self) -> &str {
        &self.core.node_id
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn JobStore> {
        &self.core.store
    }

    /// Counters since start.
    pub fn metrics(&self) -> EngineMetrics {
        self.core.counters.snapshot()
    }

    /// Registers the node, then starts polling, the lease renewer, heartbeats, the
    /// alarm dispatcher and (when configured) run retention. Errors when already
    /// started or when the store cannot be reached for the first heartbeat.
    pub async fn start(&self) -> Result<SchedulerHandle> {
        if self.core.batch.get().is_some() {
            return Err(Error::AlreadyStarted {
                node: self.core.node_id.to_string(),
            });
        }
        cycle::start(&self.core).await?;
        Ok(SchedulerHandle {
            scheduler: self.clone(),
        })
    }
}

/// A running scheduler: what [`shutdown`](SchedulerHandle::shutdown) stops. The job
/// operations are on the [`Scheduler`] (a cheap clone), also reachable through
/// [`scheduler`](SchedulerHandle::scheduler).
///
/// Dropping it without `shutdown` stops nothing: the loops run until the runtime
/// ends, and running fires are neither drained nor recorded as cancelled.
#[derive(Debug)]
#[must_use = "a running scheduler is stopped gracefully only by `shutdown().await`"]
pub struct SchedulerHandle {
    scheduler: Scheduler,
}

/// What a graceful shutdown did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Runs still going at the end of the grace period, cancelled and recorded.
    pub cancelled: usize,
    /// Whether every fire task ended (its result written and lease released).
    pub drained: bool,
}

impl SchedulerHandle {
    /// The scheduler this handle runs, for the job operations.
    pub fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    /// Graceful shutdown: stop claiming, release the leases of fires not yet started,
    /// let running handlers finish for up to `config.shutdown_grace`, cancel and record
    /// the rest, release every lease, deregister the node.
    pub async fn shutdown(self) -> ShutdownReport {
        cycle::shutdown(&self.scheduler.core).await
    }
}
