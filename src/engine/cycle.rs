//! Starting and stopping a node: the batchers, the loops, graceful shutdown.

use super::batch::Batcher;
use super::instruments::timed;
use super::{Batchers, Core, ShutdownReport, lock, maintenance};
use crate::error::{Error, Result};
use crate::lock::Lease;
use crate::record::*;
use std::sync::Arc;
use std::time::Duration;
use tracing::{info, warn};

pub(super) async fn start(core: &Arc<Core>) -> Result<()> {
    let max = core.config.write_batch;
    let store = core.store.clone();
    let start = Batcher::spawn(max, move |reqs: Vec<StartRun>| {
        let store = store.clone();
        async move { timed("start_runs", store.name(), store.start_runs(&reqs)).await }
    });
    let store = core.store.clone();
    // Two finishes in flight: a node's finishes write the rows of runs it holds,
    // each in one batch, so they never wait for each other.
    let finish = Batcher::spawn_parallel(max, 2, move |reqs: Vec<FinishRun>| {
        let store = store.clone();
        async move { timed("finish_runs", store.name(), store.finish_runs(&reqs)).await }
    });
    let locks = core.locks.clone();
    let release = Batcher::spawn(max, move |leases: Vec<Lease>| {
        let locks = locks.clone();
        async move { timed("release", locks.name(), locks.release(&leases)).await }
    });
    let locks = core.locks.clone();
    let ttl = core.config.lookahead + core.config.lease_ttl;
    let renew = Batcher::spawn(max, move |leases: Vec<Lease>| {
        let locks = locks.clone();
        async move { locks.renew(&leases, ttl).await }
    });
    if core
        .life
        .batch
        .set(Batchers {
            start,
            finish,
            release,
            renew,
        })
        .is_err()
    {
        return Err(Error::AlreadyStarted {
            node: core.node_id.to_string(),
        });
    }
    let now = core.store.now().await?;
    let _ = core.life.started_at.set(now);
    maintenance::heartbeat_once(core).await?;
    info!(node = %core.node_id, store = core.store.name(), locks = core.locks.name(), "scheduler started");
    if core.alarm.alarms.is_empty() {
        alarms_go_nowhere(core).await;
    }
    core.life
        .background
        .spawn(super::poll::poll_loop(core.clone()));
    core.life
        .background
        .spawn(maintenance::renew_loop(core.clone()));
    core.life
        .background
        .spawn(super::services::service_loop(core.clone()));
    core.life
        .background
        .spawn(super::alarms::alarm_loop(core.clone()));
    core.life
        .background
        .spawn(super::lines::flush_loop(core.clone()));
    Ok(())
}

pub(super) async fn shutdown(core: &Arc<Core>) -> ShutdownReport {
    info!(node = %core.node_id, "shutdown: no more claims");
    core.life.stop.cancel();
    core.life.fires.close();
    let drained_in_grace = tokio::time::timeout(core.config.shutdown_grace, core.life.fires.wait())
        .await
        .is_ok();
    let mut cancelled = 0;
    if !drained_in_grace {
        cancelled = lock(&core.load.running).len();
        warn!(node = %core.node_id, cancelled, "shutdown: grace period over, cancelling runs");
        core.life.kill.cancel();
    }
    let drained = drained_in_grace
        || tokio::time::timeout(Duration::from_secs(10), core.life.fires.wait())
            .await
            .is_ok();
    // Starts whose answer was lost are settled while the batchers still write (a
    // few tries, 2 s at most: another node may hold a job's lease for a moment);
    // what is left is taken over by another node once this one has deregistered
    // (its runs are then orphans).
    for _ in 0..10 {
        if let Err(e) = super::maintenance::settle_doubts(core).await {
            warn!(node = %core.node_id, error = %e, "shutdown: could not settle starts whose answer was lost");
            break;
        }
        if lock(&core.doubts).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    core.life.bg_stop.cancel();
    core.life.background.close();
    core.life.background.wait().await;
    if let Err(e) = core.store.deregister(&core.node_id).await {
        warn!(node = %core.node_id, error = %e, "shutdown: could not deregister");
    }
    info!(node = %core.node_id, drained, cancelled, "scheduler stopped");
    ShutdownReport { cancelled, drained }
}

/// Warns once, at start, when no alarm is registered but stored jobs name alarm
/// events: their events would be recorded `not_needed` and reach nobody. Reads the
/// first page of jobs; a failed read says nothing.
async fn alarms_go_nowhere(core: &Core) {
    const PAGE: usize = 100;
    let Ok(page) = core.store.list(&crate::store::JobQuery::new(PAGE)).await else {
        return;
    };
    let named: Vec<&str> = page
        .items
        .iter()
        .filter(|r| !r.job.alarm().events.is_empty())
        .map(|r| r.job.id().as_str())
        .collect();
    if let Some(first) = named.first() {
        warn!(
            jobs = named.len(),
            first = %first,
            "no alarm is registered: the alarm events these jobs name (a final failure, a lost run, …) are recorded not_needed and reach nobody; add one (SchedulerBuilder::alarm, or [[email_alarms]] or [[webhook_alarms]] in jobwheel.toml)"
        );
    }
}
