//! One claimed fire, from its timer to its finish: wait for the instant, wait for a
//! slot, start (misfire policy), execute, finish (retry policy), then keep the lease
//! for the job's next fire or give it back.

use super::plan::{self, Attempt, StartPlan};
use super::slots::SlotRequest;
use super::{Core, RunningEntry, bump, lock};
use crate::error::Error;
use crate::executor::{Execution, Outcome};
use crate::handler::{JobContext, JobError};
use crate::lock::Lease;
use crate::record::*;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::time::{Instant, sleep, sleep_until};
use tracing::{Instrument, debug, info, info_span, warn};

/// A fire this node holds the lease for.
pub(super) struct Claim {
    pub(super) fire: DueFire,
    pub(super) lease: Lease,
    /// The local instant the lease runs out unless renewed.
    pub(super) deadline: Instant,
}

/// Runs a claimed fire, then — while the job's next fire falls within the lookahead
/// and the lease could be extended to cover it — the next one, without a new claim.
/// `slot` is the fire's place in line when it was already due at the claim.
pub(super) async fn fire_task(core: Arc<Core>, claim: Claim, slot: Option<SlotRequest>) {
    let id = claim.fire.job_id.clone();
    let mut next = Some((claim, slot));
    while let Some((claim, slot)) = next.take() {
        let f = &claim.fire;
        let span = info_span!("run", job = %f.job_id, fire_at = %f.fire_at, attempt = f.attempt + 1, node = %core.node_id);
        next = run_fire(&core, claim, slot)
            .instrument(span)
            .await
            .map(|c| (c, None));
        if next.is_some() {
            // The run's slot freed up even though the job stays armed here.
            core.wake_if_starved();
        }
    }
    lock(&core.armed).remove(&id);
    core.wake_if_starved();
}

pub(crate) async fn release(core: &Core, lease: Lease) {
    if let Err(e) = core.batch().release.call(lease).await {
        debug!(error = %e, "release failed; the lease will expire");
    }
}

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

/// Waits for the fire's instant (when it was armed ahead) and then for an executor
/// slot. `None` when the fire will not run here: the node is stopping, or no slot
/// freed up while enough of the lease was left to start under it.
async fn wait_for_slot(
    core: &Core,
    claim: &Claim,
    slot: Option<SlotRequest>,
) -> Option<super::slots::SlotGrant> {
    let slot = match slot {
        Some(slot) => slot,
        None => {
            let at = core.local_instant(claim.fire.fire_at);
            let arrived = tokio::select! {
                _ = sleep_precisely(at) => true,
                _ = core.stop.cancelled() => false,
            };
            core.ahead.fetch_sub(1, Ordering::SeqCst);
            if !arrived {
                return None;
            }
            core.slots.request(claim.fire.fire_at)
        }
    };
    // A fire that finds no slot within half a poll interval goes back, so a node with
    // a free slot can take it at its next poll; and a start needs a third of the lease
    // left, so a renewal lands before it expires.
    let give_up = claim
        .deadline
        .checked_sub(core.config.lease_ttl / 3)
        .unwrap_or(claim.deadline)
        .min(Instant::now() + core.config.poll_interval / 2);
    tokio::select! {
        grant = slot.granted() => Some(grant),
        _ = core.stop.cancelled() => None,
        _ = sleep_until(give_up) => {
            debug!("no executor slot within half a poll interval; the fire goes back");
            bump(&core.counters.handed_back);
            None
        }
    }
}

async fn run_fire(core: &Arc<Core>, claim: Claim, slot: Option<SlotRequest>) -> Option<Claim> {
    let Some(grant) = wait_for_slot(core, &claim, slot).await else {
        release(core, claim.lease).await;
        return None;
    };
    let Claim {
        fire,
        lease,
        deadline,
    } = claim;
    let job = fire.job.clone();
    let plan = plan::plan_start(&job, &fire, core.store_now(), core.config.misfire_threshold);
    let (attempt, skip) = match plan {
        StartPlan::Run(a) => (a, None),
        StartPlan::Skip {
            attempt,
            next,
            message,
        } => (attempt, Some((next, message))),
    };
    let req = StartRun {
        job_id: fire.job_id.clone(),
        fire_at: fire.fire_at,
        version: fire.version,
        token: lease.token,
        node: core.node_id.to_string(),
        attempt: attempt.attempt,
        trigger: attempt.trigger,
        covers: attempt.covers,
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
            drop(grant);
            release(core, lease).await;
            return None;
        }
        Err(e) => {
            bump(&core.counters.backend_errors);
            warn!(error = %e, "start failed; the fire stays due");
            drop(grant);
            release(core, lease).await;
            return None;
        }
    };
    bump(&core.counters.started);
    if let Some(covers) = attempt.covers {
        core.counters.misfired(job.misfire(), covers.fires);
    }
    let run = RunAt {
        fire: &fire,
        attempt: &attempt,
        run_id,
        lease: &lease,
    };
    if let Some((next, message)) = skip {
        let _finishing = Finishing::enter(core);
        drop(grant);
        info!(%message, next = ?next, "misfire: skipped");
        let p = plan::plan_skip(&job, &attempt, next, message);
        finish(core, run, p, None, false).await;
        release(core, lease).await;
        return None;
    }
    if let Some(covers) = attempt
        .covers
        .filter(|_| attempt.trigger == TriggerKind::Misfire)
    {
        info!(fires = covers.fires, through = %covers.through, "misfire: running late fire");
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
    let exec_started = Instant::now();
    let outcome = match core.handlers.get(job.handler()) {
        Some(handler) => {
            let ctx = JobContext {
                job: job.clone(),
                run_id,
                fire_at: fire.fire_at,
                attempt: attempt.attempt,
                trigger: attempt.trigger,
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
            grant.run(core.executor.execute(exec)).await
        }
        None => {
            drop(grant);
            Outcome::Failed(JobError::msg(format!(
                "no handler {:?} on node {}",
                job.handler(),
                core.node_id
            )))
        }
    };
    // The run's slot is free again: the next fire in line takes it.
    let _finishing = Finishing::enter(core);
    core.slots.pump();
    let entry = lock(&core.running).remove(&run_id);
    let (lease, lost) = entry.map_or((lease, false), |e| (e.lease, e.lost));
    let ended = if lost {
        plan::Ended::new(
            RunStatus::Cancelled,
            Some("lease lost while running; result refused".to_string()),
        )
    } else {
        plan::Ended::of(&outcome)
    };
    let p = plan::plan_finish(&job, &attempt, ended, core.store_now(), fastrand::f64());
    if p.will_retry {
        info!(status = p.status.as_str(), next = ?p.next.at, "retry scheduled");
    }
    let next = p.next.clone();
    let run = RunAt {
        fire: &fire,
        attempt: &attempt,
        run_id,
        lease: &lease,
    };
    let written = finish(core, run, p, Some(exec_started.elapsed()), false).await;
    let rescheduled = matches!(
        written,
        Some(FinishOutcome::Finished {
            rescheduled: true,
            ..
        })
    );
    if let (true, Some(at)) = (rescheduled, next.at) {
        if !core.stop.is_cancelled()
            && !core.backlog.load(Ordering::SeqCst)
            && at.duration_since(core.store_now()) <= core.config.lookahead
        {
            let asked = Instant::now();
            if let Ok(Some(renewed)) = core.batch().renew.call(lease.clone()).await {
                core.ahead.fetch_add(1, Ordering::SeqCst);
                let ttl = core.config.lookahead + core.config.lease_ttl;
                let fire = DueFire {
                    fire_at: at,
                    trigger: next.trigger,
                    attempt: next.attempt,
                    resume_after: next.resume_after,
                    ..fire
                };
                return Some(Claim {
                    fire,
                    lease: renewed,
                    deadline: asked + ttl,
                });
            }
        }
        // Given back: make sure this node's next poll sees the job's next fire.
        core.rescan_before(at);
    }
    release(core, lease).await;
    None
}

/// Counts a fire in [`Core::finishing`] while it lives.
struct Finishing<'a>(&'a Core);

impl<'a> Finishing<'a> {
    fn enter(core: &'a Core) -> Self {
        core.finishing.fetch_add(1, Ordering::SeqCst);
        Finishing(core)
    }
}

impl Drop for Finishing<'_> {
    fn drop(&mut self) {
        self.0.finishing.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A run being recorded: its fire, attempt, id and the lease it ran under.
pub(crate) struct RunAt<'a> {
    pub(crate) fire: &'a DueFire,
    pub(crate) attempt: &'a Attempt,
    pub(crate) run_id: RunId,
    pub(crate) lease: &'a Lease,
}

/// Writes a run's finish, retrying store failures until it is written or refused.
/// `takeover`: recording another node's lost run under a newer lease.
pub(crate) async fn finish(
    core: &Core,
    run: RunAt<'_>,
    p: plan::FinishPlan,
    took: Option<Duration>,
    takeover: bool,
) -> Option<FinishOutcome> {
    let by = plan::Recorder {
        node: &core.node_id,
        run_id: run.run_id,
        duration: took,
        now: core.store_now(),
    };
    let alarms = plan::events(&run.fire.job, run.fire, run.attempt, &by, &p);
    let req = FinishRun {
        run_id: run.run_id,
        job_id: run.fire.job_id.clone(),
        token: run.lease.token,
        takeover,
        status: p.status,
        error: p.error,
        will_retry: p.will_retry,
        version: run.fire.version,
        next: p.next,
        alarms,
    };
    let mut backoff = super::backoff::Backoff::default();
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
            Ok(out @ FinishOutcome::Refused(FinishRefusal::NotRunning)) if takeover => {
                // Another node recorded the same lost run first: not a fence (the
                // recovery counts it apart).
                debug!("lost run already recorded by another node");
                return Some(out);
            }
            Ok(out @ FinishOutcome::Refused(why)) => {
                bump(&core.counters.finish_refused);
                warn!(
                    ?why,
                    token = run.lease.token,
                    "result refused: a newer lease holder fenced this node out"
                );
                return Some(out);
            }
            Err(e) if matches!(*e, Error::Stopped) => {
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
