//! The state of one running node ([`Core`]), grouped by concern: what it was built
//! from, the store's clock, its load (slots and the fires it holds, in
//! [`load`](super::load)), the poller's place, alarm delivery, and its lifecycle.

use super::batch::Batcher;
use super::config::SchedulerConfig;
use super::load::Load;
use super::lock;
use super::metrics::{Counters, bump};
use crate::alarm::{JobAlarm, Throttle};
use crate::executor::Executor;
use crate::handler::JobHandler;
use crate::job::JobId;
use crate::lock::{Lease, LockProvider};
use crate::record::AlarmId;
use crate::store::{
    CorruptRow, DueKey, FinishOutcome, FinishRun, JobStore, StartOutcome, StartRun,
};
use crate::time::Timestamp;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// What runs a job on this node: a handler registered by name, or — for a job that
/// names a remote executor group — the group's dispatcher, which takes one of the
/// node's slots while it sends the run to an instance and waits for its result.
#[derive(Clone, Default)]
pub(crate) struct Handlers {
    pub(crate) local: HashMap<String, Arc<dyn JobHandler>>,
    pub(crate) groups: HashMap<String, Arc<dyn JobHandler>>,
    /// The executor groups, to reach their instances (a kill, the live count).
    pub(crate) remote: HashMap<String, Arc<dyn crate::executor::ExecutorGroup>>,
}

impl Handlers {
    /// The handler that runs `job` here, or the error saying what this node lacks:
    /// [`Error::UnknownGroup`](crate::Error::UnknownGroup) for a remote job,
    /// [`Error::UnknownHandler`](crate::Error::UnknownHandler) otherwise.
    pub(crate) fn for_job(
        &self,
        job: &crate::job::Job,
    ) -> crate::error::Result<&Arc<dyn JobHandler>> {
        match job.remote() {
            Some(target) => {
                self.groups
                    .get(target.group())
                    .ok_or_else(|| crate::error::Error::UnknownGroup {
                        group: target.group().to_string(),
                    })
            }
            None => {
                self.local
                    .get(job.handler())
                    .ok_or_else(|| crate::error::Error::UnknownHandler {
                        handler: job.handler().to_string(),
                    })
            }
        }
    }
}

/// One node of a scheduler: shared by its loops and fire tasks.
pub(crate) struct Core {
    pub(crate) config: SchedulerConfig,
    pub(crate) node_id: Arc<str>,
    pub(crate) host: String,
    pub(crate) store: Arc<dyn JobStore>,
    /// Where leases are taken, renewed and released: the scheduler's lock provider,
    /// or the store's job leases ([`JobRowLocks`](crate::store::JobRowLocks)) when
    /// `row_leases`.
    pub(crate) locks: Arc<dyn LockProvider>,
    /// Whether each job's lease is kept in the job's row: a due fire is then claimed
    /// and started in one call ([`JobLeases::claim_runs`](crate::store::JobLeases::claim_runs)),
    /// and a finish frees or keeps the lease in its own write.
    pub(crate) row_leases: bool,
    pub(crate) handlers: Handlers,
    /// The store's clock as this node reads it.
    pub(crate) clock: StoreClock,
    /// The executor and what this node holds: slots, armed jobs, running fires.
    pub(crate) load: Load,
    /// Where the poller stands.
    pub(crate) poll: PollState,
    /// Alarm delivery.
    pub(crate) alarm: AlarmState,
    /// Start, stop and the background tasks.
    pub(crate) life: Lifecycle,
    pub(crate) counters: Counters,
    /// The recorder's instruments, registered at start.
    pub(crate) instruments: std::sync::OnceLock<super::instruments::Handles>,
    /// Local runs' log lines on their way to the store.
    pub(crate) lines: Arc<super::lines::Lines>,
    /// Starts whose call failed, so the store may have recorded them or not; the
    /// maintenance loop settles them ([`Doubt`](super::maintenance::Doubt)).
    pub(crate) doubts: std::sync::Mutex<Vec<super::maintenance::Doubt>>,
}

impl Core {
    /// A store or lock call of `operation` (one of
    /// [`BACKEND_OPERATIONS`](super::metrics::BACKEND_OPERATIONS)) failed: counted in
    /// [`EngineMetrics`](super::EngineMetrics) and exported by operation.
    pub(crate) fn backend_error(&self, operation: &'static str) {
        super::bump(&self.counters.backend_errors);
        if self.instruments.get().is_some() {
            ::metrics::counter!(super::instruments::BACKEND_ERRORS, "operation" => operation)
                .increment(1);
        }
    }

    /// The instruments registered at start (recording nothing before).
    pub(crate) fn instruments(&self) -> &super::instruments::Handles {
        static NOOP: std::sync::LazyLock<super::instruments::Handles> =
            std::sync::LazyLock::new(super::instruments::Handles::noop);
        self.instruments.get().unwrap_or(&NOOP)
    }

    /// A node that is built but not started.
    pub(crate) fn new(
        config: SchedulerConfig,
        node_id: Arc<str>,
        store: Arc<dyn JobStore>,
        (locks, row_leases): (Arc<dyn LockProvider>, bool),
        executor: Arc<dyn Executor>,
        handlers: Handlers,
        alarms: Vec<Arc<dyn JobAlarm>>,
    ) -> Core {
        Core {
            alarm: AlarmState {
                throttle: config.alarm_throttle.map(Throttle::new),
                alarms,
                wake: Notify::new(),
                progress: Mutex::default(),
            },
            node_id,
            host: super::host_name(),
            store,
            locks,
            row_leases,
            handlers,
            clock: StoreClock {
                sync: Mutex::new((Timestamp::now(), Instant::now())),
            },
            load: Load::new(executor),
            poll: PollState {
                wake: Notify::new(),
                sweep: Mutex::default(),
                corrupt: Mutex::default(),
                unserved: Mutex::default(),
                contended: Default::default(),
            },
            life: Lifecycle {
                stop: CancellationToken::new(),
                bg_stop: CancellationToken::new(),
                kill: CancellationToken::new(),
                fires: TaskTracker::new(),
                background: TaskTracker::new(),
                batch: OnceLock::new(),
                started_at: OnceLock::new(),
            },
            counters: Counters::default(),
            instruments: std::sync::OnceLock::new(),
            lines: super::lines::Lines::new(config.log_lines),
            doubts: Default::default(),
            config,
        }
    }

    /// Counts and logs (once each) rows the store skipped because it could not read
    /// them.
    pub(crate) fn saw_corrupt(&self, rows: &[CorruptRow]) {
        if rows.is_empty() {
            return;
        }
        let mut seen = lock(&self.poll.corrupt);
        for row in rows {
            if seen.len() < 10_000 && seen.insert((row.kind, row.id.clone())) {
                bump(&self.counters.corrupt_rows);
                tracing::warn!(kind = row.kind, id = %row.id, reason = %row.reason, "a stored row cannot be read; it is skipped (Scheduler::doctor lists them)");
            }
        }
    }

    /// Logs (once per job, while this node lives) a fire overdue by more than the
    /// misfire threshold whose handler this node does not have: unless another node
    /// serves it, the job waits for a node that does.
    pub(crate) fn unserved(&self, fire: &crate::store::DueFire, now: Timestamp) {
        let threshold = fire
            .job
            .misfire_threshold()
            .unwrap_or(self.config.misfire_threshold);
        if now.duration_since(fire.fire.at) <= threshold {
            return;
        }
        let mut seen = lock(&self.poll.unserved);
        if seen.len() < 10_000 && seen.insert(fire.job_id.clone()) {
            bump(&self.counters.unserved_jobs);
            tracing::warn!(job = %fire.job_id, handler = fire.job.handler(), fire_at = %fire.fire.at, "a due job's handler is not registered on this node; it waits for a node that has it");
        }
    }

    /// Hands free executor slots to the fires in line, after telling the head of the
    /// line how far "near" reaches now: as many fires as the slots start within a
    /// twentieth of a poll interval ([`Load::starts_within`]). A near fire writes its
    /// start while it waits; if the node's runs turn out slower than its recent ones,
    /// a started fire whose slot does not free up in time is given back
    /// (`returned`). The rest of the line goes back after its wait.
    pub(crate) fn pump_slots(&self) {
        let load = &self.load;
        let near = load
            .starts_within(self.config.poll_interval / 20)
            .min(load.pace.started_within(self.config.poll_interval / 4));
        load.slots.set_near(near);
        load.slots.pump();
    }

    /// Wakes the poller when a poll was starved and half the line it claimed has a
    /// slot now (with no line: a slot is free), so the next claims are on their way
    /// before the line runs dry.
    pub(crate) fn wake_if_starved(&self) {
        let load = &self.load;
        let starved = load.starved.load(Ordering::SeqCst);
        if starved > 0
            && load.line_room((starved - 1) / 2) > 0
            && load.starved.swap(0, Ordering::SeqCst) > 0
        {
            self.poll.wake.notify_one();
        }
    }

    /// Wakes the poller after a job was stored or made due, `next` its place in the
    /// due order (`None`: nothing to fire); a sweep through a backlog restarts only
    /// when that place is at or before its cursor ([`PollState::rescan_before`]).
    pub(crate) fn changed(&self, next: Option<DueKey>) {
        if let Some(key) = next {
            self.poll.rescan_before(&key);
        }
        self.poll.wake.notify_one();
    }

    /// Wakes the poller to scan from the start of the due order: a job may have
    /// become due before the cursor of a sweep in progress.
    pub(crate) fn rescan(&self) {
        *lock(&self.poll.sweep) = Sweep::default();
        self.poll.wake.notify_one();
    }

    /// Runs `f`, catching a panic: counted in `panics`, logged with `what`, and
    /// returned as its message.
    pub(crate) fn guarded<T>(&self, what: &str, f: impl FnOnce() -> T) -> Result<T, String> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|p| self.caught(what, p))
    }

    /// Counts and logs a panic (payload `p`) caught while doing `what`; returns its
    /// message.
    pub(crate) fn caught(&self, what: &str, p: Box<dyn std::any::Any + Send>) -> String {
        let message = crate::local_executor::panic_message(p);
        bump(&self.counters.panics);
        tracing::error!(%message, "panic caught while {what}; recorded, the engine goes on");
        message
    }

    /// The batchers of a started node.
    pub(crate) fn batch(&self) -> &Batchers {
        self.life.batch.get().expect("batchers exist once started")
    }
}

/// A reading of the store's clock and the local instant it corresponds to: every
/// instant the engine compares with stored ones is on the store's clock.
pub(crate) struct StoreClock {
    pub(crate) sync: Mutex<(Timestamp, Instant)>,
}

impl StoreClock {
    /// The store's clock now, estimated from the last reading and the monotonic clock.
    pub(crate) fn now(&self) -> Timestamp {
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

    /// Records a new reading: the store said `t` at local instant `at`.
    pub(crate) fn set(&self, t: Timestamp, at: Instant) {
        *lock(&self.sync) = (t, at);
    }
}

/// The poller's place: what wakes it and where a sweep through a backlog stands.
pub(crate) struct PollState {
    /// Wakes the poller (a local upsert or trigger, a starved line emptied).
    pub(crate) wake: Notify,
    /// Where the next poll continues while due fires are paged through.
    pub(crate) sweep: Mutex<Sweep>,
    /// Stored rows this node met and could not read, `(kind, id)`, each logged once
    /// (at most 10,000 remembered).
    pub(crate) corrupt: Mutex<HashSet<(&'static str, String)>>,
    /// Overdue jobs whose handler this node lacks, each logged once (at most 10,000).
    pub(crate) unserved: Mutex<HashSet<JobId>>,
    /// Whether the last claim of due fires lost some to other nodes' claims (job
    /// leases): the next poll passes more candidates.
    pub(crate) contended: std::sync::atomic::AtomicBool,
}

impl PollState {
    /// Restarts the sweep from the beginning when `key` sorts at or before its
    /// cursor in the due order (instant, then job id): a job was just made due
    /// there (a rescheduled job whose lease this node gave back, a job stored or
    /// resumed), and the next poll must see it. A key behind the cursor is reached by
    /// the sweep itself; restarting for it would keep a node that stores a stream of
    /// jobs due at one instant at the head of the due order, where another node's
    /// line holds the fires, beside a free slot.
    pub(crate) fn rescan_before(&self, key: &DueKey) {
        let mut sweep = lock(&self.sweep);
        if sweep
            .cursor
            .as_ref()
            .is_some_and(|c| (key.fire_at, key.job_id.as_str()) <= (c.fire_at, c.job_id.as_str()))
        {
            *sweep = Sweep::default();
        }
    }
}

/// Where a sweep through a backlog of due fires stands.
#[derive(Default)]
pub(crate) struct Sweep {
    /// The key of the last due fire the previous full poll looked at; the next poll
    /// continues after it. `None`: from the start.
    pub(crate) cursor: Option<DueKey>,
    /// When the sweep started from the beginning of the due order.
    pub(crate) since: Option<Instant>,
}

/// Alarm delivery on this node.
pub(crate) struct AlarmState {
    /// The registered alarms; every one hears every event.
    pub(crate) alarms: Vec<Arc<dyn JobAlarm>>,
    /// Wakes the alarm dispatcher when a finish wrote alarm events.
    pub(crate) wake: Notify,
    /// The scheduler-wide alarm throttle (`config.alarm_throttle`).
    pub(crate) throttle: Option<Throttle>,
    /// Per event in delivery on this node: which registered alarms already took it,
    /// so a retry calls only the ones that failed.
    pub(crate) progress: Mutex<HashMap<AlarmId, Vec<bool>>>,
}

/// Start and stop: the tokens that stop each stage and the tasks they wait for.
pub(crate) struct Lifecycle {
    /// Stops claiming and arming.
    pub(crate) stop: CancellationToken,
    /// Stops the background loops (after running fires are done).
    pub(crate) bg_stop: CancellationToken,
    /// Cancels running handlers.
    pub(crate) kill: CancellationToken,
    pub(crate) fires: TaskTracker,
    pub(crate) background: TaskTracker,
    /// Set once started.
    pub(crate) batch: OnceLock<Batchers>,
    pub(crate) started_at: OnceLock<Timestamp>,
}

/// The batchers that group a node's store and lock calls; each makes one call per
/// batch, named here. (A poll claims and starts due fires with one call of its own,
/// `store.job_leases().claim_runs`, where the store keeps leases in its job rows.)
pub(crate) struct Batchers {
    /// `store.start_runs`: the start of a fire claimed ahead of its instant.
    pub(crate) start: Batcher<StartRun, StartOutcome>,
    /// `store.finish_runs`: a run's outcome, its job's next fire, its alarm events,
    /// its children's releases and (job leases) its lease, in one write.
    pub(crate) finish: Batcher<FinishRun, FinishOutcome>,
    /// `locks.release`: a lease given back without a finish.
    pub(crate) release: Batcher<Lease, bool>,
    /// `locks.renew`: a lease extended to cover the job's next fire (ttl: lookahead +
    /// lease ttl; the general path, where a finish leaves the lease alone).
    pub(crate) renew: Batcher<Lease, Option<Lease>>,
}
