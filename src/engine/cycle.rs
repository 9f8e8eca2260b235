//! The fire cycle: poll → claim → timer → start → execute → finish → release.

use super::batch::Batcher;
use super::plan::{self, StartPlan};
use super::{Batchers, Core, RunningEntry, ShutdownReport, bump, lock, maintenance};
use crate::error::{Error, Result};
use crate::executor::{Execution, Outcome};
use crate::handler::JobContext;
use crate::lock::{Lease, LockRequest};
use crate::record::*;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::time::{Instant, sleep, sleep_until};
use tracing::{Instrument, debug, info, info_span, warn};

/// Exponential backoff for a loop whose backend call failed: 100 ms doubling to 5 s.
#[derive(Debug, Default)]
pub(crate) struct Backoff(u32);

impl Backoff {
    pub(crate) fn reset(&mut self) {
        self.0 = 0;
    }
    pub(crate) fn next_delay(&mut self) -> Duration {
        self.0 = (self.0 + 1).min(6);
        Duration::from_millis(100 << (self.0 - 1)).min(Duration::from_secs(5))
    }
}

pub(super) async fn start(core: &Arc<Core>) -> Result<()> {
    let max = core.config.write_batch;
    let store = core.store.clone();
    let start = Batcher::spawn(max, move |reqs: Vec<StartRun>| {
        let store = store.clone();
        async move { store.start_runs(&reqs).await }
    });
    let store = core.store.clone();
    let finish = Batcher::spawn(max, move |reqs: Vec<FinishRun>| {
        let store = store.clone();
        async move { store.finish_runs(&reqs).await }
    });
    let locks = core.locks.clone();
    let release = Batcher::spawn(max, move |leases: Vec<Lease>| {
        let locks = locks.clone();
        async move { locks.release(&leases).await }
    });
    let locks = core.locks.clone();
    let ttl = core.config.lookahead + core.config.lease_ttl;
    let renew = Batcher::spawn(max, move |leases: Vec<Lease>| {
        let locks = locks.clone();
        async move { locks.renew(&leases, ttl).await }
    });
    if core
        .batch
        .set(Batchers {
            start,
            finish,
            release,
            renew,
        })
        .is_err()
    {
        return Err(Error::invalid(
            "scheduler",
            &*core.node_id,
            "already started",
        ));
    }
    let now = core.store.now().await?;
    let _ = core.started_at.set(now);
    maintenance::heartbeat_once(core).await?;
    info!(node = %core.node_id, store = core.store.name(), locks = core.locks.name(), "scheduler started");
    core.background.spawn(poll_loop(core.clone()));
    core.background.spawn(maintenance::renew_loop(core.clone()));
    core.background
        .spawn(maintenance::heartbeat_loop(core.clone()));
    core.background
        .spawn(super::alarms::alarm_loop(core.clone()));
    Ok(())
}

pub(super) async fn shutdown(core: &Arc<Core>) -> ShutdownReport {
    info!(node = %core.node_id, "shutdown: no more claims");
    core.stop.cancel();
    core.fires.close();
    let drained_in_grace = tokio::time::timeout(core.config.shutdown_grace, core.fires.wait())
        .await
        .is_ok();
    let mut cancelled = 0;
    if !drained_in_grace {
        cancelled = lock(&core.running).len();
        warn!(node = %core.node_id, cancelled, "shutdown: grace period over, cancelling runs");
        core.kill.cancel();
    }
    let drained = drained_in_grace
        || tokio::time::timeout(Duration::from_secs(10), core.fires.wait())
            .await
            .is_ok();
    core.bg_stop.cancel();
    core.background.close();
    core.background.wait().await;
    if let Err(e) = core.store.deregister(&core.node_id).await {
        warn!(node = %core.node_id, error = %e, "shutdown: could not deregister");
    }
    info!(node = %core.node_id, drained, cancelled, "scheduler stopped");
    ShutdownReport { cancelled, drained }
}

/// What a poll found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Polled {
    /// Everything due within the lookahead was seen.
    Done,
    /// The batch was full: more may be due, poll again at once.
    More,
    /// No free capacity: wait until a run ends (or the poll interval).
    Starved,
}

async fn poll_loop(core: Arc<Core>) {
    let mut backoff = Backoff::default();
    loop {
        let wait = match poll_once(&core).await {
            Ok(Polled::More) => {
                backoff.reset();
                tokio::task::yield_now().await;
                continue;
            }
            Ok(polled) => {
                backoff.reset();
                if polled == Polled::Starved {
                    let held = lock(&core.armed).len();
                    core.starved.store((held / 8).max(1), Ordering::SeqCst);
                }
                core.config.poll_interval
            }
            Err(e) => {
                bump(&core.counters.backend_errors);
                let d = backoff.next_delay();
                warn!(node = %core.node_id, error = %e, retry_in = ?d, "poll failed");
                d
            }
        };
        tokio::select! {
            _ = core.stop.cancelled() => return,
            _ = sleep(wait) => {}
            _ = core.wake.notified() => {}
        }
    }
}

/// The smallest page a poll that continues from the cursor asks for (at most
/// `claim_batch`).
const MIN_PAGE: usize = 256;

async fn poll_once(core: &Arc<Core>) -> Result<Polled> {
    let now = core.store.now().await?;
    // The store read its clock at some point of the call; paired with the instant the
    // call returned, the estimate never runs ahead of the store's clock, so a timer
    // may wake up to one round trip late but never early.
    *lock(&core.sync) = (now, Instant::now());
    let limit = core.free_slots().min(core.config.claim_batch);
    if limit == 0 {
        core.backlog.store(true, Ordering::SeqCst);
        return Ok(Polled::Starved);
    }
    let armed = lock(&core.armed).len();
    // From the start of the due order the fires this node already holds come first, so
    // ask for them too; a poll that continues a backlog from the cursor has them
    // behind it and asks for one page (not a tiny one: a page lost to other nodes'
    // leases is skipped, and skipping one row per round trip would be slow).
    let after = lock(&core.cursor).clone();
    let ask = match after {
        Some(_) => limit.max(core.config.claim_batch.min(MIN_PAGE)),
        None => limit + armed,
    };
    let due = match core
        .store
        .due(now + core.config.lookahead, after.as_ref(), ask)
        .await
    {
        Ok(due) => due,
        Err(e) => {
            *lock(&core.cursor) = None;
            return Err(e);
        }
    };
    // More may be due when the page was full, or when this node's free capacity ran out
    // before the page did.
    let mut full = due.len() >= ask;
    let mut fresh: Vec<DueFire> = Vec::with_capacity(limit.min(due.len()));
    // The last row looked at: the last one skipped, unless a fresh one came after it.
    let mut skipped = None;
    {
        let armed = lock(&core.armed);
        for f in due {
            if fresh.len() == limit {
                full = true;
                break;
            }
            if !armed.contains(&f.job_id) && core.handlers.contains_key(f.job.handler()) {
                fresh.push(f);
                skipped = None;
            } else {
                skipped = Some(f);
            }
        }
    }
    core.backlog.store(full, Ordering::SeqCst);
    // Then the next poll continues after the last fire looked at, at once. Otherwise
    // every due fire was seen, and the next poll starts from the beginning.
    *lock(&core.cursor) = if full {
        skipped.as_ref().or(fresh.last()).map(DueFire::key)
    } else {
        None
    };
    if fresh.is_empty() {
        return Ok(if full { Polled::More } else { Polled::Done });
    }
    let requests: Vec<LockRequest> = fresh
        .iter()
        .map(|f| LockRequest {
            key: f.job_id.to_string(),
            ttl: f.fire_at.duration_since(now) + core.config.lease_ttl,
        })
        .collect();
    let asked = Instant::now();
    let leases = core.locks.acquire(&core.node_id, &requests).await?;
    for ((fire, lease), req) in fresh.into_iter().zip(leases).zip(&requests) {
        let Some(lease) = lease else { continue };
        if !lock(&core.armed).insert(fire.job_id.clone()) {
            core.batch().release.call(lease).await.ok();
            continue;
        }
        bump(&core.counters.claimed);
        core.reserved.fetch_add(1, Ordering::SeqCst);
        debug!(job = %fire.job_id, fire_at = %fire.fire_at, token = lease.token, "claimed");
        let deadline = asked + req.ttl;
        core.fires
            .spawn(fire_task(core.clone(), fire, lease, deadline));
    }
    Ok(if full { Polled::More } else { Polled::Done })
}

/// Runs a claimed fire, then — while the job's next fire falls within the lookahead
/// and the lease could be extended to cover it — the next one, without a new claim.
async fn fire_task(core: Arc<Core>, fire: DueFire, lease: Lease, deadline: Instant) {
    let id = fire.job_id.clone();
    let mut next = Some((fire, lease, deadline));
    while let Some((fire, lease, deadline)) = next.take() {
        let span = info_span!("run", job = %fire.job_id, fire_at = %fire.fire_at, attempt = fire.attempt + 1, node = %core.node_id);
        next = run_fire(&core, fire, lease, deadline)
            .instrument(span)
            .await;
    }
    core.reserved.fetch_sub(1, Ordering::SeqCst);
    lock(&core.armed).remove(&id);
    let need = core.starved.load(Ordering::SeqCst);
    if need > 0 && core.free_slots() >= need && core.starved.swap(0, Ordering::SeqCst) > 0 {
        core.wake.notify_one();
    }
}

/// Gives back a claim that will not run.
async fn abandon(core: &Core, lease: Lease) {
    release(core, lease).await;
}

pub(crate) async fn release(core: &Core, lease: Lease) {
    if let Err(e) = core.batch().release.call(lease).await {
        debug!(error = %e, "release failed; the lease will expire");
    }
}

type Rearm = Option<(DueFire, Lease, Instant)>;

/// Sleeps until `deadline`, never waking before it. tokio's timer rounds every
/// deadline up to its next millisecond tick and then wakes late by scheduling, so a
/// plain `sleep_until` lands 1-2 ms after the instant. Asking for one tick early and
/// re-checking lands closer: what remains is slept again, or — under one tick, where
/// another sleep would overshoot by a tick — yielded away to other tasks.
async fn sleep_precisely(deadline: Instant) {
    if let Some(early) = deadline.checked_sub(Duration::from_millis(1)) {
        sleep_until(early).await;
    }
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        if deadline - now < Duration::from_millis(1) {
            tokio::task::yield_now().await;
        } else {
            sleep_until(deadline).await;
        }
    }
}

async fn run_fire(core: &Arc<Core>, fire: DueFire, lease: Lease, deadline: Instant) -> Rearm {
    tokio::select! {
        _ = sleep_precisely(core.local_instant(fire.fire_at)) => {}
        _ = core.stop.cancelled() => {
            abandon(core, lease).await;
            return None;
        }
    }
    let job = fire.job.clone();
    let now = core.store_now();
    let plan = plan::plan_start(&job, &fire, now, core.config.misfire_threshold);
    let attempt = fire.attempt + 1;
    let trigger = match &plan {
        StartPlan::Run { trigger, .. } => *trigger,
        StartPlan::Skip { .. } => TriggerKind::Misfire,
    };
    let req = StartRun {
        job_id: fire.job_id.clone(),
        fire_at: fire.fire_at,
        version: fire.version,
        token: lease.token,
        node: core.node_id.to_string(),
        attempt,
        trigger,
    };
    let run_id = match core.batch().start.call(req).await {
        Ok(StartOutcome::Started { run_id, .. }) => run_id,
        Ok(StartOutcome::Refused(why)) => {
            bump(&core.counters.start_refused);
            if matches!(why, StartRefusal::Fenced { .. }) {
                warn!(
                    ?why,
                    token = lease.token,
                    "start refused: fenced by a newer lease"
                );
            } else {
                debug!(?why, "start refused");
            }
            abandon(core, lease).await;
            return None;
        }
        Err(e) => {
            bump(&core.counters.backend_errors);
            warn!(error = %e, "start failed; the fire stays due");
            abandon(core, lease).await;
            return None;
        }
    };
    bump(&core.counters.started);
    let coalesce = match plan {
        StartPlan::Skip { next, message } => {
            info!(%message, next = ?next, "misfire: skipped");
            let p = plan::FinishPlan {
                status: RunStatus::Misfired,
                error: Some(message),
                will_retry: false,
                next: NextFire {
                    at: next,
                    trigger: TriggerKind::Schedule,
                    attempt: 0,
                },
                alarms: job
                    .alarm()
                    .wants(crate::policy::AlarmKind::Misfire)
                    .then_some(crate::policy::AlarmKind::Misfire)
                    .into_iter()
                    .collect(),
            };
            finish(core, &fire, run_id, attempt, &lease, p, None, false).await;
            release(core, lease).await;
            return None;
        }
        StartPlan::Run { coalesce, .. } => coalesce,
    };
    if trigger == TriggerKind::Misfire {
        info!("misfire: running late fire");
    }
    let cancel = core.kill.child_token();
    lock(&core.running).insert(
        run_id,
        RunningEntry {
            lease: lease.clone(),
            deadline,
            cancel: cancel.clone(),
            lost: false,
        },
    );
    // While it holds an executor slot, the fire is counted by the executor's capacity.
    core.reserved.fetch_sub(1, Ordering::SeqCst);
    let exec_started = Instant::now();
    let outcome = match core.handlers.get(job.handler()) {
        Some(handler) => {
            let ctx = JobContext {
                job: job.clone(),
                run_id,
                fire_at: fire.fire_at,
                attempt,
                trigger,
                token: lease.token,
                node_id: core.node_id.clone(),
                cancel,
                deadline: job.timeout().map(|t| Instant::now() + t),
            };
            let exec = Execution {
                ctx,
                handler: handler.clone(),
                timeout: job.timeout(),
            };
            core.executor.execute(exec).await
        }
        None => Outcome::Failed(format!(
            "no handler {:?} on node {}",
            job.handler(),
            core.node_id
        )),
    };
    core.reserved.fetch_add(1, Ordering::SeqCst);
    let entry = lock(&core.running).remove(&run_id);
    let (lease, lost) = entry.map_or((lease, false), |e| (e.lease, e.lost));
    let (status, error) = if lost {
        (
            RunStatus::Cancelled,
            Some("lease lost while running; result refused".to_string()),
        )
    } else {
        plan::status_of(&outcome)
    };
    let now = core.store_now();
    let p = plan::plan_finish(
        &job,
        fire.fire_at,
        attempt,
        trigger,
        coalesce,
        status,
        error,
        now,
        fastrand::f64(),
    );
    if p.will_retry {
        info!(status = status.as_str(), next = ?p.next.at, "retry scheduled");
    }
    let took = Some(exec_started.elapsed());
    let next = p.next.clone();
    let written = finish(core, &fire, run_id, attempt, &lease, p, took, false).await;
    if let (
        Some(FinishOutcome::Finished {
            rescheduled: true, ..
        }),
        Some(at),
    ) = (written, next.at)
        && !core.stop.is_cancelled()
        && !core.backlog.load(Ordering::SeqCst)
        && at.duration_since(core.store_now()) <= core.config.lookahead
    {
        let asked = Instant::now();
        if let Ok(Some(renewed)) = core.batch().renew.call(lease.clone()).await {
            let ttl = core.config.lookahead + core.config.lease_ttl;
            let fire = DueFire {
                fire_at: at,
                trigger: next.trigger,
                attempt: next.attempt,
                ..fire
            };
            return Some((fire, renewed, asked + ttl));
        }
    }
    release(core, lease).await;
    None
}

/// Writes a run's finish, retrying store failures until it is written or refused.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn finish(
    core: &Core,
    fire: &DueFire,
    run_id: RunId,
    attempt: u32,
    lease: &Lease,
    p: plan::FinishPlan,
    took: Option<Duration>,
    takeover: bool,
) -> Option<FinishOutcome> {
    let alarms = plan::events(
        &fire.job,
        fire,
        run_id,
        attempt,
        &core.node_id,
        took,
        &p,
        core.store_now(),
    );
    let req = FinishRun {
        run_id,
        job_id: fire.job_id.clone(),
        token: lease.token,
        takeover,
        status: p.status,
        error: p.error,
        will_retry: p.will_retry,
        version: fire.version,
        next: p.next,
        alarms,
    };
    let mut backoff = Backoff::default();
    loop {
        match core.batch().finish.call(req.clone()).await {
            Ok(out @ FinishOutcome::Finished { .. }) => {
                bump(&core.counters.finished);
                if !req.alarms.is_empty() {
                    core.alarm_wake.notify_one();
                }
                debug!(status = req.status.as_str(), "finished");
                return Some(out);
            }
            Ok(out @ FinishOutcome::Refused(why)) => {
                bump(&core.counters.finish_refused);
                warn!(
                    ?why,
                    token = lease.token,
                    "result refused: a newer lease holder fenced this node out"
                );
                return Some(out);
            }
            Err(e)
                if matches!(
                    *e,
                    Error::NotSupported {
                        backend: "engine",
                        ..
                    }
                ) =>
            {
                return None;
            }
            Err(e) => {
                bump(&core.counters.backend_errors);
                let d = backoff.next_delay();
                warn!(error = %e, retry_in = ?d, "finish failed; retrying");
                sleep(d).await;
            }
        }
    }
}
