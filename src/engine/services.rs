//! A node's services: the background work beside its fires, each a named service
//! with its own interval and its own backoff (River's maintenance services are the
//! model). One loop runs them in table order whenever one is due. A service that
//! fails is logged and counted under its name (`jobwheel_backend_errors_total{operation}`),
//! and tried again after a backoff no longer than its interval; the others keep
//! their rhythm, so a store that refuses one call never stops the heartbeat, the
//! recovery of dead nodes' runs or retention. A stopping node keeps only beating.
//!
//! Lease renewal, alarm delivery and the flushing of log lines have loops of their
//! own (`maintenance::renew_loop`, `alarms.rs`, `lines.rs`): they are woken by the
//! fire cycle, not by a clock.

use super::backoff::Backoff;
use super::config::SchedulerConfig;
use super::{Core, maintenance};
use crate::error::Result;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{Instant, sleep_until};
use tracing::{debug, info, warn};

/// How long a lease key nobody holds is kept after its last grant: a day, so a
/// later grant's token (the lock server's clock in µs) is past its last one even if
/// that clock steps back by up to a day.
const IDLE_LEASES: Duration = Duration::from_secs(86_400);
/// Most jobs one pass lets take a queued release.
const TAKE_PER_PASS: usize = 500;
/// How often the hourly services run.
const HOURLY: Duration = Duration::from_secs(3600);

/// One of a node's services.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Service {
    /// Registers or refreshes the node (every `heartbeat`).
    Heartbeat,
    /// Sets the live-node and live-executor gauges (every quarter beat).
    Census,
    /// Removes nodes silent for `heartbeat × dead_after_beats` (every quarter beat).
    ReapNodes,
    /// Takes over the running runs of dead nodes and records them lost (every
    /// quarter beat, so within a quarter beat of a node counting as dead).
    OrphanedRuns,
    /// Settles this node's starts whose answer was lost (every quarter beat).
    SettleStarts,
    /// Takes over runs recorded on this node that it no longer has in hand (every
    /// `heartbeat × dead_after_beats`).
    ReclaimRuns,
    /// Lets jobs take queued releases no write let them take (every quarter beat).
    TakeReleases,
    /// Raises the alarms of queued releases past their wait deadline (every beat).
    ReleaseDeadlines,
    /// Makes the run log's partitions of the days ahead (hourly).
    LogDays,
    /// Purges runs older than `run_retention`, by whole UTC days (hourly, when set).
    RunRetention,
    /// Forgets lease keys nobody held for a day (hourly).
    IdleLeases,
    /// Purges alarm events older than `alarm_retention` (hourly, when set).
    AlarmRetention,
}

impl Service {
    /// Every service, in the order a pass runs those that are due.
    pub(crate) const ALL: [Service; 12] = [
        Service::Heartbeat,
        Service::Census,
        Service::ReapNodes,
        Service::OrphanedRuns,
        Service::SettleStarts,
        Service::ReclaimRuns,
        Service::TakeReleases,
        Service::ReleaseDeadlines,
        Service::LogDays,
        Service::RunRetention,
        Service::IdleLeases,
        Service::AlarmRetention,
    ];

    /// Its name: in logs, and the `operation` its failures are counted under.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Service::Heartbeat => "heartbeat",
            Service::Census => "census",
            Service::ReapNodes => "reap_nodes",
            Service::OrphanedRuns => "orphaned_runs",
            Service::SettleStarts => "settle_starts",
            Service::ReclaimRuns => "reclaim_runs",
            Service::TakeReleases => "take_releases",
            Service::ReleaseDeadlines => "release_deadlines",
            Service::LogDays => "log_days",
            Service::RunRetention => "run_retention",
            Service::IdleLeases => "idle_leases",
            Service::AlarmRetention => "alarm_retention",
        }
    }

    /// Whether it judges other nodes dead, which a node may do only while its own
    /// beats are written: one whose last beat failed may be the one out of touch,
    /// and would reap itself when the store comes back before its next beat.
    fn judges_others(self) -> bool {
        matches!(self, Service::ReapNodes | Service::OrphanedRuns)
    }

    /// How long after a pass that succeeded it runs again.
    fn every(self, config: &SchedulerConfig) -> Duration {
        match self {
            Service::Heartbeat | Service::ReleaseDeadlines => config.heartbeat,
            Service::Census
            | Service::ReapNodes
            | Service::OrphanedRuns
            | Service::SettleStarts
            | Service::TakeReleases => config.heartbeat / 4,
            Service::ReclaimRuns => config.dead_after(),
            Service::LogDays
            | Service::RunRetention
            | Service::IdleLeases
            | Service::AlarmRetention => HOURLY,
        }
    }

    /// Does its work once.
    async fn run(self, core: &Arc<Core>) -> Result<()> {
        match self {
            Service::Heartbeat => maintenance::heartbeat_once(core).await,
            Service::Census => {
                maintenance::census(core).await;
                Ok(())
            }
            Service::ReapNodes => {
                for dead in core.store.reap_nodes(core.config.dead_after()).await? {
                    info!(node = %dead, "reaped a dead node");
                }
                Ok(())
            }
            Service::OrphanedRuns => maintenance::recover_orphans(core).await,
            Service::SettleStarts => maintenance::settle_doubts(core).await,
            Service::ReclaimRuns => maintenance::reclaim_own(core).await,
            Service::TakeReleases => {
                // Jobs able to take a queued release that no write let take it (a
                // PostgreSQL finish's follow-up transaction cut short, a release
                // queued while the job could not take it and nothing has written
                // the job since).
                let taken = core.store.take_releases(TAKE_PER_PASS).await?;
                if taken > 0 {
                    debug!(taken, "queued releases taken");
                }
                Ok(())
            }
            Service::ReleaseDeadlines => super::waiting::raise(core).await.map(|_| ()),
            Service::LogDays => core.store.prepare_log().await,
            Service::RunRetention => {
                if let Some(keep) = core.config.run_retention {
                    // Whole UTC days: a store with a day-partitioned log drops them whole.
                    let cutoff = maintenance::day_start(core.store.now().await? - keep);
                    let n = core.store.purge_runs(cutoff).await?;
                    info!(purged = n, before = %cutoff, "run retention");
                }
                Ok(())
            }
            Service::IdleLeases => {
                // Lease rows of keys nobody held for a day (every one-shot job
                // leaves one with a lock provider of its own).
                let n = core.locks.forget_idle(IDLE_LEASES).await?;
                if n > 0 {
                    info!(forgotten = n, "idle lease keys");
                }
                Ok(())
            }
            Service::AlarmRetention => {
                if let Some(keep) = core.config.alarm_retention {
                    let cutoff = core.store.now().await? - keep;
                    let n = core.store.purge_alarms(cutoff).await?;
                    info!(purged = n, before = %cutoff, "alarm retention");
                }
                Ok(())
            }
        }
    }
}

/// When a service runs next, and its backoff after failures.
struct Timing {
    service: Service,
    next: Instant,
    backoff: Backoff,
}

/// Runs the node's services until the background loops stop: each when it is due,
/// in table order, every one at once at the start.
pub(super) async fn service_loop(core: Arc<Core>) {
    let start = Instant::now();
    let mut table: Vec<Timing> = Service::ALL
        .into_iter()
        .map(|service| Timing {
            service,
            next: start,
            backoff: Backoff::default(),
        })
        .collect();
    // Whether the last beat was written (the first was, at start).
    let mut beating = true;
    loop {
        let now = Instant::now();
        for i in 0..table.len() {
            // The heartbeat is first: its next instant is set before the others read it.
            let next_beat = table[0].next;
            let s = &mut table[i];
            if s.next > now {
                continue;
            }
            let every = s.service.every(&core.config);
            if core.life.stop.is_cancelled() && s.service != Service::Heartbeat {
                // A stopping node only beats: its runs are settled by its shutdown.
                s.next = now + every;
                continue;
            }
            if s.service.judges_others() && !beating {
                // Right after this node's next beat (the heartbeat is first).
                s.next = next_beat;
                continue;
            }
            let done = s.service.run(&core).await;
            match &done {
                Ok(()) => {
                    s.backoff.reset();
                    s.next = now + every;
                }
                Err(e) => {
                    core.backend_error(s.service.name());
                    let retry_in = s.backoff.next_delay().min(every);
                    warn!(service = s.service.name(), error = %e, ?retry_in, "node service failed");
                    s.next = Instant::now() + retry_in;
                }
            }
            if s.service == Service::Heartbeat {
                beating = done.is_ok();
            }
        }
        let wake = table.iter().map(|s| s.next).min().unwrap_or(now);
        tokio::select! {
            _ = core.life.bg_stop.cancelled() => return,
            _ = sleep_until(wake) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Service;
    use crate::engine::SchedulerConfig;
    use std::time::Duration;

    #[test]
    fn every_service_has_its_own_name_and_a_positive_interval() {
        let config = SchedulerConfig::default();
        let mut names: Vec<&str> = Service::ALL.iter().map(|s| s.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Service::ALL.len());
        for s in Service::ALL {
            assert!(s.every(&config) >= Duration::from_secs(1), "{s:?}");
        }
        assert_eq!(Service::ALL[0], Service::Heartbeat, "a pass beats first");
    }
}
