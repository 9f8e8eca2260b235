//! The engine's counters: what [`Scheduler::metrics`](super::Scheduler::metrics) returns.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one scheduler since it started.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct EngineMetrics {
    /// Fires claimed (leases granted).
    pub claimed: u64,
    /// Runs recorded as started.
    pub started: u64,
    /// Starts the store refused (already handled, changed, fenced).
    pub start_refused: u64,
    /// Claimed fires given back unstarted because no executor slot freed up within
    /// half a poll interval of their instant (another node, or this one later, takes
    /// them).
    pub handed_back: u64,
    /// Started fires given back unexecuted (recorded `returned`) because no executor
    /// slot freed up within half a poll interval of their start: the node's
    /// runs turned out slower than its recent runs. The fire is due again at once.
    pub returned: u64,
    /// Runs whose finish was written.
    pub finished: u64,
    /// Finishes the store refused because a newer lease holder fenced this node out.
    pub finish_refused: u64,
    /// Leases lost while running (renewal refused or expired).
    pub leases_lost: u64,
    /// Runs of dead nodes recorded as lost by this node.
    pub lost_recovered: u64,
    /// Lost runs this node set out to record that another node had recorded first
    /// (not a fence: both nodes saw the same dead node).
    pub lost_already_recorded: u64,
    /// Scheduled fires the misfire policy handled, per policy (see [`MisfireCounts`]).
    pub misfired: MisfireCounts,
    /// Store or lock calls that failed and were retried.
    pub backend_errors: u64,
    /// Alarm events this node delivered (or recorded as not needed / failed).
    pub alarms_handled: u64,
    /// Distinct stored rows this node met and could not read (skipped; see
    /// [`Scheduler::doctor`](crate::Scheduler::doctor)).
    pub corrupt_rows: u64,
    /// Panics caught in the engine's own work on a fire or an alarm (planning, a
    /// custom executor, an alarm's `alarm` call). The run is recorded failed with the
    /// panic message, never left running; each is logged at error level.
    pub panics: u64,
    /// Distinct jobs this node found overdue past their misfire threshold whose
    /// handler it does not have (each logged once at warn): unless another node
    /// serves them, they wait.
    pub unserved_jobs: u64,
}

/// Scheduled fires that started later than their misfire threshold, per policy,
/// counted as the fires each misfire record stands for
/// ([`RunRecord::covers`](crate::RunRecord::covers)): a late run under `FireOnce`
/// counts itself and every fire it coalesced, a `misfired` record every fire it
/// skipped, a late run under `CatchUp` itself.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct MisfireCounts {
    /// Under [`MisfirePolicy::FireOnce`](crate::MisfirePolicy::FireOnce).
    pub fire_once: u64,
    /// Under [`MisfirePolicy::Skip`](crate::MisfirePolicy::Skip).
    pub skip: u64,
    /// Under [`MisfirePolicy::CatchUp`](crate::MisfirePolicy::CatchUp).
    pub catch_up: u64,
}

impl MisfireCounts {
    /// Every misfired fire, whatever the policy.
    pub fn total(&self) -> u64 {
        self.fire_once + self.skip + self.catch_up
    }
}

/// One of the live counters: its value here, and the instrument it also counts in
/// the installed `metrics` recorder (if it has one).
/// The operations of the fire cycle a failed store or lock call is counted under
/// (a node service's failures are counted under the service's name).
pub(crate) const BACKEND_OPERATIONS: [&str; 7] = [
    "due",
    "claim_runs",
    "start_runs",
    "finish_runs",
    "renew",
    "alarms",
    "append_lines",
];

pub(crate) struct Count {
    n: AtomicU64,
    name: Option<&'static str>,
    /// Its handle in the recorder installed when the scheduler started.
    handle: std::sync::OnceLock<::metrics::Counter>,
}

impl Count {
    const fn named(name: &'static str) -> Count {
        Count {
            n: AtomicU64::new(0),
            name: Some(name),
            handle: std::sync::OnceLock::new(),
        }
    }

    const fn unnamed() -> Count {
        Count {
            n: AtomicU64::new(0),
            name: None,
            handle: std::sync::OnceLock::new(),
        }
    }

    fn get(&self) -> u64 {
        self.n.load(Ordering::Relaxed)
    }
}

/// The live counters behind [`EngineMetrics`].
pub(crate) struct Counters {
    pub(crate) claimed: Count,
    pub(crate) started: Count,
    pub(crate) start_refused: Count,
    pub(crate) handed_back: Count,
    pub(crate) returned: Count,
    pub(crate) finished: Count,
    pub(crate) finish_refused: Count,
    pub(crate) leases_lost: Count,
    pub(crate) lost_recovered: Count,
    pub(crate) lost_already_recorded: Count,
    misfired_fire_once: Count,
    misfired_skip: Count,
    misfired_catch_up: Count,
    pub(crate) backend_errors: Count,
    pub(crate) alarms_handled: Count,
    pub(crate) corrupt_rows: Count,
    pub(crate) panics: Count,
    pub(crate) unserved_jobs: Count,
}

impl Default for Counters {
    fn default() -> Self {
        use super::instruments as i;
        Counters {
            claimed: Count::named(i::FIRES_CLAIMED),
            started: Count::named(i::RUNS_STARTED),
            start_refused: Count::named(i::STARTS_REFUSED),
            handed_back: Count::named(i::FIRES_HANDED_BACK),
            returned: Count::named(i::RUNS_RETURNED),
            // Counted with its outcome where the finish is written.
            finished: Count::unnamed(),
            finish_refused: Count::named(i::FINISHES_REFUSED),
            leases_lost: Count::named(i::LEASES_LOST),
            lost_recovered: Count::named(i::RUNS_LOST),
            lost_already_recorded: Count::unnamed(),
            // Counted with their policy by `misfired`.
            misfired_fire_once: Count::unnamed(),
            misfired_skip: Count::unnamed(),
            misfired_catch_up: Count::unnamed(),
            // Exported by operation (`Core::backend_error`), counted here in all.
            backend_errors: Count::unnamed(),
            alarms_handled: Count::named(i::ALARMS_HANDLED),
            corrupt_rows: Count::named(i::CORRUPT_ROWS),
            panics: Count::named(i::PANICS),
            unserved_jobs: Count::unnamed(),
        }
    }
}

/// Adds one to `c`, here and in the recorder installed when the scheduler started.
pub(crate) fn bump(c: &Count) {
    c.n.fetch_add(1, Ordering::Relaxed);
    if let Some(h) = c.handle.get() {
        h.increment(1);
    }
}

impl Counters {
    /// Registers the named counters with the recorder installed now (at start).
    pub(crate) fn bind(&self) {
        for c in [
            &self.claimed,
            &self.started,
            &self.start_refused,
            &self.handed_back,
            &self.returned,
            &self.finish_refused,
            &self.leases_lost,
            &self.lost_recovered,
            &self.alarms_handled,
            &self.corrupt_rows,
            &self.panics,
        ] {
            if let Some(name) = c.name {
                let _ = c.handle.set(::metrics::counter!(name));
            }
        }
        let services = super::services::Service::ALL.map(|s| s.name());
        for op in BACKEND_OPERATIONS.into_iter().chain(services) {
            ::metrics::counter!(super::instruments::BACKEND_ERRORS, "operation" => op).increment(0);
        }
    }

    /// Counts `fires` scheduled fires handled by `policy` (the recorder's count is
    /// the caller's: `Handles::misfired`).
    pub(crate) fn misfired(&self, policy: crate::policy::MisfirePolicy, fires: u64) {
        let c = match policy {
            crate::policy::MisfirePolicy::FireOnce => &self.misfired_fire_once,
            crate::policy::MisfirePolicy::Skip => &self.misfired_skip,
            crate::policy::MisfirePolicy::CatchUp { .. } => &self.misfired_catch_up,
        };
        c.n.fetch_add(fires, Ordering::Relaxed);
    }

    /// The counters' values now.
    pub(crate) fn snapshot(&self) -> EngineMetrics {
        let r = Count::get;
        EngineMetrics {
            claimed: r(&self.claimed),
            started: r(&self.started),
            start_refused: r(&self.start_refused),
            handed_back: r(&self.handed_back),
            returned: r(&self.returned),
            finished: r(&self.finished),
            finish_refused: r(&self.finish_refused),
            leases_lost: r(&self.leases_lost),
            lost_recovered: r(&self.lost_recovered),
            lost_already_recorded: r(&self.lost_already_recorded),
            misfired: MisfireCounts {
                fire_once: r(&self.misfired_fire_once),
                skip: r(&self.misfired_skip),
                catch_up: r(&self.misfired_catch_up),
            },
            backend_errors: r(&self.backend_errors),
            alarms_handled: r(&self.alarms_handled),
            corrupt_rows: r(&self.corrupt_rows),
            panics: r(&self.panics),
            unserved_jobs: r(&self.unserved_jobs),
        }
    }
}
