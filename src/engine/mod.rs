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
mod backoff;
mod batch;
mod config;
mod cycle;
mod finish;
mod fire;
pub mod instruments;
mod lines;
mod load;
mod maintenance;
mod metrics;
mod node;
mod plan;
mod poll;
mod scheduler;
mod services;
mod slots;
mod waiting;

pub use config::SchedulerConfig;
pub(crate) use metrics::bump;
pub use metrics::{EngineMetrics, MisfireCounts};
pub use scheduler::Doctor;

use crate::alarm::JobAlarm;
use crate::error::{Error, Result};
use crate::executor::{Executor, ExecutorGroup};
use crate::handler::IntoHandler;
use crate::local_executor::LocalExecutor;
use crate::lock::LockProvider;
use crate::store::JobStore;
pub(crate) use load::RunningEntry;
use node::Core;
pub(crate) use node::{Batchers, Handlers, Sweep};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

/// The name of the span a local run's fire goes through on its node (fields `job`,
/// `fire_at`, `attempt`, `node`, `token`, then `run_id` and `trigger` once the
/// store has started it). Events inside it go to the run's log through
/// [`run_log_layer`](crate::run_log_layer).
pub const RUN_SPAN: &str = "jobwheel.run";

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Builds a [`Scheduler`].
#[must_use = "a builder does nothing until `build()`"]
pub struct SchedulerBuilder {
    store: Option<Arc<dyn JobStore>>,
    locks: Option<Arc<dyn LockProvider>>,
    executor: Option<Arc<dyn Executor>>,
    alarms: Vec<Arc<dyn JobAlarm>>,
    handlers: Handlers,
    config: SchedulerConfig,
}

impl fmt::Debug for SchedulerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchedulerBuilder")
            .field("handlers", &self.handlers.local.keys().collect::<Vec<_>>())
            .field("groups", &self.handlers.groups.keys().collect::<Vec<_>>())
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
    pub fn backend(mut self, backend: crate::backends::connect::Backend) -> Self {
        self.store = Some(backend.store);
        self.locks = Some(backend.locks);
        self
    }
    /// The lock provider (required, or given by [`backend`](Self::backend)). When it
    /// is the store's own (its [`home`](LockProvider::home) is the store's
    /// [`JobLeases::home`](crate::store::JobLeases::home), as the `locks()` of the
    /// SQL and memory stores are), the scheduler keeps each job's lease in the job's
    /// row: a due fire is claimed and started in one write.
    pub fn locks(mut self, locks: impl LockProvider) -> Self {
        self.locks = Some(Arc::new(locks));
        self
    }
    /// The executor (default: [`LocalExecutor::default`], 64 fast slots and a slow
    /// lane of 16). Size the built-in one with
    /// `.executor(LocalExecutor::new(LocalExecutorConfig { .. })?)`.
    pub fn executor(mut self, executor: impl Executor) -> Self {
        self.executor = Some(Arc::new(executor));
        self
    }
    /// Registers a handler under `name`; jobs name it in [`Job::handler`](crate::Job::handler).
    /// Takes any [`JobHandler`](crate::JobHandler) (an `async fn(JobContext) -> JobResult` or such a
    /// closure), or a function that also takes the payload decoded as a type of its
    /// own: `async fn report(ctx: JobContext, p: ReportParams) -> JobResult` (see
    /// [`Typed`](crate::handler::Typed)).
    pub fn handler<M>(mut self, name: impl Into<String>, handler: impl IntoHandler<M>) -> Self {
        self.handlers
            .local
            .insert(name.into(), handler.into_handler());
        self
    }
    /// Dispatches the jobs that name this executor group (see
    /// [`Job::remote`](crate::Job::remote)) to its instances. A later group of the
    /// same name replaces an earlier one.
    pub fn remote(mut self, group: impl ExecutorGroup) -> Self {
        let group: Arc<dyn ExecutorGroup> = Arc::new(group);
        let name = group.name().to_string();
        self.handlers.remote.insert(name.clone(), group.clone());
        self.handlers.groups.insert(name, group);
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
    /// handler and no executor group is registered, `scheduler.store` or
    /// `scheduler.locks` when either is missing.
    pub fn build(self) -> Result<Scheduler> {
        self.config.validate()?;
        if self.handlers.local.is_empty() && self.handlers.groups.is_empty() {
            return Err(Error::invalid(
                "handler",
                "none",
                "register at least one handler or executor group",
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
        // A lock provider on the store's own tables: each job's lease is kept in the
        // job's row, so a claim, a start and a finish write one row.
        let row_leases = store
            .job_leases()
            .map(crate::store::JobLeases::home)
            .is_some_and(|home| locks.home().as_deref() == Some(home.as_str()));
        let locks: Arc<dyn LockProvider> = if row_leases {
            Arc::new(crate::store::JobRowLocks {
                store: store.clone(),
            })
        } else {
            locks
        };
        // Registered executor groups read their instances from this store.
        for group in self.handlers.remote.values() {
            group.attach(store.clone());
        }
        let config = self.config;
        let node_id: Arc<str> = config
            .node_id
            .clone()
            .unwrap_or_else(default_node_id)
            .into();
        let executor: Arc<dyn Executor> = match self.executor {
            Some(e) => e,
            None => Arc::new(LocalExecutor::default()),
        };
        Ok(Scheduler {
            core: Arc::new(Core::new(
                config,
                node_id,
                store,
                (locks, row_leases),
                executor,
                self.handlers,
                self.alarms,
            )),
        })
    }
}

pub(crate) fn host_name() -> String {
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
            handlers: Handlers::default(),
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
        if self.core.life.batch.get().is_some() {
            return Err(Error::AlreadyStarted {
                node: self.core.node_id.to_string(),
            });
        }
        instruments::describe();
        self.core.counters.bind();
        let _ = self.core.instruments.set(instruments::Handles::register(
            self.core.config.metric_job_labels,
        ));
        // Series known at start are listed from the first scrape, at zero.
        for alarm in &self.core.alarm.alarms {
            instruments::register_alarm(alarm.name());
        }
        for group in self.core.handlers.remote.keys() {
            instruments::register_group(group);
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
