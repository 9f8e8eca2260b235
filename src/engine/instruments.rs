//! What the engine reports through the [`metrics`] facade: an application installs
//! the exporter it wants (Prometheus, StatsD, OpenTelemetry …) and every instrument
//! below appears in it; without one, recording costs a few atomic reads. The names,
//! units and labels are the table in docs/book/src/architecture.md ("Metrics").
//!
//! Labels are low-cardinality: a run's outcome, a misfire policy, an executor group
//! (empty for the scheduler's own handlers), an alarm's name. Job ids and handlers
//! label runs' instruments only when
//! [`metric_job_labels`](crate::SchedulerConfig::metric_job_labels) is on.

use crate::job::Job;
use crate::policy::MisfirePolicy;
use crate::time::Timestamp;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Fires this node claimed (leases granted).
pub const FIRES_CLAIMED: &str = "jobwheel_fires_claimed_total";
/// Runs this node recorded as started.
pub const RUNS_STARTED: &str = "jobwheel_runs_started_total";
/// Starts the store refused (the fire was handled, changed or fenced meanwhile).
pub const STARTS_REFUSED: &str = "jobwheel_runs_start_refused_total";
/// Claimed fires given back unstarted (no slot freed up in time).
pub const FIRES_HANDED_BACK: &str = "jobwheel_fires_handed_back_total";
/// Started fires given back unexecuted (recorded `returned`).
pub const RUNS_RETURNED: &str = "jobwheel_runs_returned_total";
/// Runs whose finish this node wrote, by `outcome` (a run status: `succeeded`,
/// `failed`, `timed_out`, `cancelled`, `lost`, `misfired`).
pub const RUNS_FINISHED: &str = "jobwheel_runs_finished_total";
/// Finishes the store refused because a newer lease holder fenced this node out.
pub const FINISHES_REFUSED: &str = "jobwheel_runs_finish_refused_total";
/// Scheduled fires a misfire policy handled, by `policy` (`fire_once`, `skip`,
/// `catch_up`): a late run that stands for three missed fires counts 3.
pub const FIRES_MISFIRED: &str = "jobwheel_fires_misfired_total";
/// Store or lock calls that failed (and were retried), by `operation` (`due`,
/// `start_runs`, `finish_runs`, `renew`, `alarms`, `append_lines`, and each node
/// service by its name: `heartbeat`, `reap_nodes`, `run_retention`, …).
pub const BACKEND_ERRORS: &str = "jobwheel_backend_errors_total";
/// Stored rows this node could not read (skipped).
pub const CORRUPT_ROWS: &str = "jobwheel_corrupt_rows_total";
/// Leases lost while their run went on.
pub const LEASES_LOST: &str = "jobwheel_leases_lost_total";
/// Runs of dead nodes this node recorded as lost.
pub const RUNS_LOST: &str = "jobwheel_runs_lost_recorded_total";
/// Alarm events this node handled (delivered, failed, or not needed).
pub const ALARMS_HANDLED: &str = "jobwheel_alarms_handled_total";
/// Panics caught in the engine's own work.
pub const PANICS: &str = "jobwheel_panics_total";
/// Seconds from a fire's instant to its handler's start on this node: what "on
/// time" means. The sum of the two below.
pub const FIRE_LAG: &str = "jobwheel_fire_lag_seconds";
/// Seconds from a fire's instant to its run's start in the store (the scheduler's
/// share of the lag: polling, claiming, writing the start).
pub const CLAIM_LAG: &str = "jobwheel_claim_lag_seconds";
/// Seconds from a run's start in the store to its handler's start (the executor's
/// share: waiting for a slot).
pub const PICKUP: &str = "jobwheel_pickup_seconds";
/// Seconds a handler ran, by `outcome`.
pub const RUN_DURATION: &str = "jobwheel_run_duration_seconds";
/// Runs executing on this node now.
pub const RUNNING: &str = "jobwheel_running";
/// Fires due now and not yet started, as this node's last poll from the start of
/// the due index saw them (at most one page: the claim batch).
pub const DUE_BACKLOG: &str = "jobwheel_due_backlog";
/// Seconds since the instant of the oldest fire due and not yet started, as this
/// node's last poll from the start of the due index saw it (0 when none).
pub const OLDEST_DUE: &str = "jobwheel_oldest_due_age_seconds";
/// Seconds a store or lock call of the engine's took, by `operation` (`due`,
/// `start_runs`, `finish_runs`, `acquire`, `release`) and `backend` (`sqlite`,
/// `postgres`, `mysql`, `redis`, `memory`, or a custom store's name).
pub const STORE_CALL: &str = "jobwheel_store_call_seconds";
/// Fires asked for in one lease request (one poll's claim).
pub const CLAIM_BATCH: &str = "jobwheel_claim_batch_size";

/// Fires armed on this node now: claimed ahead of their instant, waiting on a timer.
pub const ARMED: &str = "jobwheel_armed";
/// Scheduler nodes whose last heartbeat is within the dead-node bound, as this
/// node's last heartbeat read the registry.
pub const LIVE_NODES: &str = "jobwheel_live_nodes";
/// Executor instances of a `group` this node dispatches to that schedulers send runs
/// to now (fixed members, or registered ones beating within the group's bound).
pub const LIVE_EXECUTORS: &str = "jobwheel_live_executors";
/// Alarm deliveries by `alarm` (its name) and `result` (`delivered`, `failed`).
pub const ALARM_DELIVERIES: &str = "jobwheel_alarm_deliveries_total";
/// Seconds a run request to an executor instance took to be answered, by `group`
/// (the dispatch, not the run).
pub const DISPATCH: &str = "jobwheel_dispatch_seconds";
/// Run requests an executor instance refused or did not answer, by `group` and
/// `reason` (the instance's error code: `busy`, `discarded`, `unknown_handler`,
/// `overloaded`, `bad_signature` …, or `unreachable`).
pub const DISPATCH_REFUSED: &str = "jobwheel_dispatch_refused_total";

/// Every instrument: name, kind, unit, help text (as the exporters show it).
pub const ALL: &[(&str, &str, &str, &str)] = &[
    (FIRES_CLAIMED, "counter", "", "Fires this node claimed."),
    (
        RUNS_STARTED,
        "counter",
        "",
        "Runs this node recorded as started.",
    ),
    (
        STARTS_REFUSED,
        "counter",
        "",
        "Starts the store refused: the fire was handled, changed or fenced meanwhile.",
    ),
    (
        FIRES_HANDED_BACK,
        "counter",
        "",
        "Claimed fires given back unstarted: no slot freed up in time.",
    ),
    (
        RUNS_RETURNED,
        "counter",
        "",
        "Started fires given back unexecuted (recorded returned).",
    ),
    (
        RUNS_FINISHED,
        "counter",
        "",
        "Runs whose finish this node wrote, by outcome.",
    ),
    (
        FINISHES_REFUSED,
        "counter",
        "",
        "Finishes refused: a newer lease holder fenced this node out.",
    ),
    (
        FIRES_MISFIRED,
        "counter",
        "",
        "Scheduled fires a misfire policy handled, by policy.",
    ),
    (
        BACKEND_ERRORS,
        "counter",
        "",
        "Store or lock calls that failed and were retried, by operation.",
    ),
    (
        CORRUPT_ROWS,
        "counter",
        "",
        "Stored rows this node could not read and skipped.",
    ),
    (
        LEASES_LOST,
        "counter",
        "",
        "Leases lost while their run went on.",
    ),
    (
        RUNS_LOST,
        "counter",
        "",
        "Runs of dead nodes this node recorded as lost.",
    ),
    (
        ALARMS_HANDLED,
        "counter",
        "",
        "Alarm events this node handled.",
    ),
    (
        PANICS,
        "counter",
        "",
        "Panics caught in the engine's own work.",
    ),
    (
        FIRE_LAG,
        "histogram",
        "seconds",
        "From a fire's instant to its handler's start.",
    ),
    (
        CLAIM_LAG,
        "histogram",
        "seconds",
        "From a fire's instant to its run's start in the store.",
    ),
    (
        PICKUP,
        "histogram",
        "seconds",
        "From a run's start in the store to its handler's start.",
    ),
    (
        RUN_DURATION,
        "histogram",
        "seconds",
        "How long handlers ran, by outcome.",
    ),
    (RUNNING, "gauge", "", "Runs executing on this node now."),
    (
        DUE_BACKLOG,
        "gauge",
        "",
        "Fires due now and not started, as this node's last poll saw them (one page at most).",
    ),
    (
        OLDEST_DUE,
        "gauge",
        "seconds",
        "Age of the oldest fire due and not started, as this node's last poll saw it.",
    ),
    (
        STORE_CALL,
        "histogram",
        "seconds",
        "Store and lock calls of the engine, by operation and backend.",
    ),
    (
        CLAIM_BATCH,
        "histogram",
        "",
        "Fires asked for in one lease request.",
    ),
    (
        ARMED,
        "gauge",
        "",
        "Fires armed on this node, waiting for their instant.",
    ),
    (
        LIVE_NODES,
        "gauge",
        "",
        "Scheduler nodes with a recent heartbeat, as this node read the registry.",
    ),
    (
        LIVE_EXECUTORS,
        "gauge",
        "",
        "Live executor instances per group this node dispatches to.",
    ),
    (
        ALARM_DELIVERIES,
        "counter",
        "",
        "Alarm deliveries by alarm and result.",
    ),
    (
        DISPATCH,
        "histogram",
        "seconds",
        "Run requests to executor instances, by group: until the instance answered.",
    ),
    (
        DISPATCH_REFUSED,
        "counter",
        "",
        "Run requests an executor instance refused or did not answer, by group and reason.",
    ),
];

/// Outcomes a finished run is counted under.
const OUTCOMES: [&str; 7] = [
    "succeeded",
    "failed",
    "timed_out",
    "cancelled",
    "lost",
    "misfired",
    "returned",
];
/// Policies a misfired fire is counted under.
const POLICIES: [&str; 3] = ["fire_once", "skip", "catch_up"];

/// Gives every instrument its unit and help text in the installed recorder (once
/// per scheduler start; the series themselves are registered by the scheduler's
/// `Handles` and named counters at start, so a scrape lists them before their first
/// event).
pub(crate) fn describe() {
    for &(name, kind, unit, help) in ALL {
        let unit = (unit == "seconds").then_some(::metrics::Unit::Seconds);
        match (kind, unit) {
            ("counter", _) => ::metrics::describe_counter!(name, help),
            ("gauge", _) => ::metrics::describe_gauge!(name, help),
            (_, Some(u)) => ::metrics::describe_histogram!(name, u, help),
            _ => ::metrics::describe_histogram!(name, help),
        }
    }
}

/// The instruments of one label set of runs: a job's `group` (empty for the
/// scheduler's own handlers), and with job labels on, its `job` and `handler`.
pub(crate) struct RunInstruments {
    fire_lag: ::metrics::Histogram,
    claim_lag: ::metrics::Histogram,
    pickup: ::metrics::Histogram,
    run_duration: Vec<::metrics::Histogram>,
    finished: Vec<::metrics::Counter>,
    misfired: Vec<::metrics::Counter>,
}

/// A label set: (group, job, handler).
type LabelSet = (String, Option<String>, Option<String>);

impl RunInstruments {
    fn register(set: &LabelSet) -> RunInstruments {
        let mut labels = vec![::metrics::Label::new("group", set.0.clone())];
        if let (Some(job), Some(handler)) = (&set.1, &set.2) {
            labels.push(::metrics::Label::new("job", job.clone()));
            labels.push(::metrics::Label::new("handler", handler.clone()));
        }
        let with = |k: &'static str, v: &'static str| {
            let mut l = labels.clone();
            l.push(::metrics::Label::new(k, v));
            l
        };
        RunInstruments {
            fire_lag: ::metrics::histogram!(FIRE_LAG, labels.clone()),
            claim_lag: ::metrics::histogram!(CLAIM_LAG, labels.clone()),
            pickup: ::metrics::histogram!(PICKUP, labels.clone()),
            run_duration: OUTCOMES
                .iter()
                .map(|o| ::metrics::histogram!(RUN_DURATION, with("outcome", o)))
                .collect(),
            finished: OUTCOMES
                .iter()
                .map(|o| ::metrics::counter!(RUNS_FINISHED, with("outcome", o)))
                .collect(),
            misfired: POLICIES
                .iter()
                .map(|p| ::metrics::counter!(FIRES_MISFIRED, with("policy", p)))
                .collect(),
        }
    }

    fn noop() -> RunInstruments {
        RunInstruments {
            fire_lag: ::metrics::Histogram::noop(),
            claim_lag: ::metrics::Histogram::noop(),
            pickup: ::metrics::Histogram::noop(),
            run_duration: OUTCOMES
                .iter()
                .map(|_| ::metrics::Histogram::noop())
                .collect(),
            finished: OUTCOMES
                .iter()
                .map(|_| ::metrics::Counter::noop())
                .collect(),
            misfired: POLICIES
                .iter()
                .map(|_| ::metrics::Counter::noop())
                .collect(),
        }
    }

    /// `fires` scheduled fires handled by `p`.
    pub(crate) fn misfired(&self, p: MisfirePolicy, fires: u64) {
        let i = POLICIES.iter().position(|x| *x == policy(p)).unwrap_or(0);
        self.misfired[i].increment(fires);
    }

    /// A finish written, with its outcome.
    pub(crate) fn finished(&self, outcome: &'static str) {
        if let Some(i) = OUTCOMES.iter().position(|o| *o == outcome) {
            self.finished[i].increment(1);
        }
    }

    /// A handler starts at `now` for the fire of `fire_at` whose run the store
    /// started at `started_at`.
    pub(crate) fn handler_started(
        &self,
        fire_at: Timestamp,
        started_at: Timestamp,
        now: Timestamp,
    ) {
        self.fire_lag.record(seconds(fire_at, now));
        self.claim_lag.record(seconds(fire_at, started_at));
        self.pickup.record(seconds(started_at, now));
    }

    /// A handler ran for `took` and ended with `outcome`.
    pub(crate) fn ran(&self, outcome: &'static str, took: std::time::Duration) {
        if let Some(i) = OUTCOMES.iter().position(|o| *o == outcome) {
            self.run_duration[i].record(took.as_secs_f64());
        }
    }
}

/// The instruments a scheduler records, registered once when it starts with the
/// recorder installed then (so an event costs an atomic update, not a lookup):
/// install an exporter before `Scheduler::start`. Runs' instruments are registered
/// per label set the first time a run of it starts, and kept.
pub(crate) struct Handles {
    /// With `job` and `handler` labels on runs' instruments.
    job_labels: bool,
    /// Runs of the scheduler's own handlers, without job labels.
    local: Arc<RunInstruments>,
    /// Other label sets.
    sets: Mutex<HashMap<LabelSet, Arc<RunInstruments>>>,
    running: ::metrics::Gauge,
    armed: ::metrics::Gauge,
    due_backlog: ::metrics::Gauge,
    oldest_due: ::metrics::Gauge,
    live_nodes: ::metrics::Gauge,
    /// Registered (or noop) handles: whether to register more.
    live: bool,
}

impl Handles {
    /// Registers every instrument with the recorder installed now; `job_labels`
    /// labels runs' instruments with their job and handler too.
    pub(crate) fn register(job_labels: bool) -> Handles {
        Handles {
            job_labels,
            local: Arc::new(RunInstruments::register(&(String::new(), None, None))),
            sets: Mutex::default(),
            running: ::metrics::gauge!(RUNNING),
            armed: ::metrics::gauge!(ARMED),
            due_backlog: ::metrics::gauge!(DUE_BACKLOG),
            oldest_due: ::metrics::gauge!(OLDEST_DUE),
            live_nodes: ::metrics::gauge!(LIVE_NODES),
            live: true,
        }
    }

    /// Handles that record nothing (a scheduler not started).
    pub(crate) fn noop() -> Handles {
        Handles {
            job_labels: false,
            local: Arc::new(RunInstruments::noop()),
            sets: Mutex::default(),
            running: ::metrics::Gauge::noop(),
            armed: ::metrics::Gauge::noop(),
            due_backlog: ::metrics::Gauge::noop(),
            oldest_due: ::metrics::Gauge::noop(),
            live_nodes: ::metrics::Gauge::noop(),
            live: false,
        }
    }

    /// The instruments of `job`'s runs.
    pub(crate) fn for_job(&self, job: &Job) -> Arc<RunInstruments> {
        let group = job.remote().map(|r| r.group());
        if !self.live || (group.is_none() && !self.job_labels) {
            return self.local.clone();
        }
        let set: LabelSet = (
            group.unwrap_or_default().to_string(),
            self.job_labels.then(|| job.id().to_string()),
            self.job_labels.then(|| job.handler().to_string()),
        );
        let mut sets = super::lock(&self.sets);
        sets.entry(set)
            .or_insert_with_key(|set| Arc::new(RunInstruments::register(set)))
            .clone()
    }

    /// A poll from the start of the due index at `now` saw `waiting` fires due and
    /// not started, the oldest of them due at `oldest`.
    pub(crate) fn due(&self, waiting: usize, oldest: Option<Timestamp>, now: Timestamp) {
        self.due_backlog.set(waiting as f64);
        self.oldest_due
            .set(oldest.map_or(0.0, |at| seconds(at, now)));
    }

    /// `n` runs execute on this node now.
    pub(crate) fn running(&self, n: usize) {
        self.running.set(n as f64);
    }

    /// `n` fires are armed on this node now.
    pub(crate) fn armed(&self, n: usize) {
        self.armed.set(n as f64);
    }

    /// `n` scheduler nodes are live, as the registry read now says.
    pub(crate) fn live_nodes(&self, n: usize) {
        self.live_nodes.set(n as f64);
    }
}

/// `n` instances of executor group `group` are live.
pub(crate) fn live_executors(group: &str, n: usize) {
    ::metrics::gauge!(LIVE_EXECUTORS, "group" => group.to_string()).set(n as f64);
}

/// Registers alarm `alarm`'s delivery counters (at zero).
pub(crate) fn register_alarm(alarm: &str) {
    for result in ["delivered", "failed"] {
        ::metrics::counter!(ALARM_DELIVERIES, "alarm" => alarm.to_string(), "result" => result)
            .increment(0);
    }
}

/// Registers executor group `group`'s dispatch instruments (refusals at zero).
pub(crate) fn register_group(group: &str) {
    for reason in REFUSALS {
        ::metrics::counter!(DISPATCH_REFUSED, "group" => group.to_string(), "reason" => reason)
            .increment(0);
    }
    let _ = ::metrics::histogram!(DISPATCH, "group" => group.to_string());
    let _ = ::metrics::gauge!(LIVE_EXECUTORS, "group" => group.to_string());
}

/// Alarm `alarm` delivered an event (`delivered`) or failed to.
pub(crate) fn alarm_delivery(alarm: &str, delivered: bool) {
    let result = if delivered { "delivered" } else { "failed" };
    ::metrics::counter!(ALARM_DELIVERIES, "alarm" => alarm.to_string(), "result" => result)
        .increment(1);
}

#[cfg(feature = "remote")]
/// A run request to an instance of `group` was answered after `took`.
pub(crate) fn dispatched(group: &str, took: std::time::Duration) {
    ::metrics::histogram!(DISPATCH, "group" => group.to_string()).record(took.as_secs_f64());
}

/// Refusal codes of the executor protocol, and the engine's own reasons; an
/// instance's answer is not trusted to keep the label set small, so any other code
/// counts as `other`.
const REFUSALS: [&str; 15] = [
    "bad_request",
    "unsigned",
    "bad_signature",
    "skewed_timestamp",
    "replayed",
    "unknown_run",
    "conflict",
    "discarded",
    "too_large",
    "unknown_handler",
    "busy",
    "overloaded",
    "unauthentic",
    "unreachable",
    "other",
];

#[cfg(feature = "remote")]
/// A run request to an instance of `group` was refused for `reason` (a code of
/// [`REFUSALS`], or `other`).
pub(crate) fn dispatch_refused(group: &str, reason: &str) {
    let reason = REFUSALS
        .iter()
        .find(|r| **r == reason)
        .copied()
        .unwrap_or("other");
    ::metrics::counter!(DISPATCH_REFUSED, "group" => group.to_string(), "reason" => reason)
        .increment(1);
}

/// The label a misfire policy has.
fn policy(p: MisfirePolicy) -> &'static str {
    match p {
        MisfirePolicy::FireOnce => "fire_once",
        MisfirePolicy::Skip => "skip",
        MisfirePolicy::CatchUp { .. } => "catch_up",
    }
}

/// Seconds from `from` to `to`, none below zero (clocks of two machines).
fn seconds(from: Timestamp, to: Timestamp) -> f64 {
    (to.as_millis() - from.as_millis()).max(0) as f64 / 1_000.0
}

/// Runs `call` (the store or lock call `operation` on `backend`) in a `DEBUG` span
/// `jobwheel.store`, and records how long it took.
pub(crate) async fn timed<T>(
    operation: &'static str,
    backend: &'static str,
    call: impl std::future::Future<Output = T>,
) -> T {
    let started = std::time::Instant::now();
    let out = tracing::Instrument::instrument(
        call,
        tracing::debug_span!("jobwheel.store", operation, backend),
    )
    .await;
    ::metrics::histogram!(STORE_CALL, "operation" => operation, "backend" => backend)
        .record(started.elapsed().as_secs_f64());
    out
}

/// One lease request for `n` fires.
pub(crate) fn claim_batch(n: usize) {
    ::metrics::histogram!(CLAIM_BATCH).record(n as f64);
}
