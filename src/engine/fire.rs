//! One claimed fire, from its timer to its finish: wait for the instant, wait for a
//! slot, start (misfire policy), execute, finish (retry policy), then keep the lease
//! for the job's next fire or give it back. A due fire on a store that keeps each
//! job's lease in its row arrives started: the poll claimed and started it in one
//! call.

use super::finish::{Run, finish, release, release_after};
use super::plan::{self, Attempt, StartPlan};
use super::slots::{SlotGrant, SlotRequest};
use super::{Core, RunningEntry, bump, lock};
use crate::executor::{Execution, Outcome};
use crate::handler::{JobContext, JobError};
use crate::lock::Lease;
use crate::record::*;
use futures::FutureExt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
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
    /// Its start, when the store recorded it with the claim (a due fire on a store
    /// that keeps each job's lease in its row).
    pub(super) started: Option<ClaimedStart>,
}

/// A start recorded with its claim: the run, and the misfire policy's decision the
/// claim wrote.
pub(super) struct ClaimedStart {
    pub(super) run_id: RunId,
    pub(super) started_at: crate::time::Timestamp,
    pub(super) attempt: Attempt,
    pub(super) skip: Option<Skip>,
}

/// Runs a claimed fire, then — while the job's next fire falls within the lookahead
/// and the lease could be extended to cover it — the next one, without a new claim.
/// `slot` is the fire's place in line when it was already due at the claim.
pub(super) async fn fire_task(core: Arc<Core>, claim: Claim, slot: Option<SlotRequest>) {
    let id = claim.fire.job_id.clone();
    let mut next = Some((claim, slot));
    while let Some((claim, slot)) = next.take() {
        let f = &claim.fire;
        // A root of its own, or placed in the trace its fire was triggered in.
        let span = info_span!(
            parent: None,
            super::RUN_SPAN,
            job = %f.job_id,
            fire_at = %f.fire.at,
            attempt = f.fire.attempt + 1,
            node = %core.node_id,
            token = claim.lease.token,
            run_id = tracing::field::Empty,
            trigger = tracing::field::Empty,
            sink = core.lines.sink(),
        );
        crate::trace::place_run(&span, f.fire.context.trace.as_deref(), f.fire.attempt == 0);
        next = Box::pin(run_fire(&core, claim, slot).instrument(span))
            .await
            .map(|c| (c, None));
        if next.is_some() {
            // The run's slot freed up even though the job stays armed here.
            core.wake_if_starved();
        }
    }
    {
        let mut armed = lock(&core.load.armed);
        armed.remove(&id);
        core.instruments().armed(armed.len());
    }
    core.wake_if_starved();
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

/// Waits for an armed fire's instant and then for an executor slot. `None` when the
/// fire will not run here: the node is stopping, or no slot freed up while enough of
/// the lease was left to start under it.
async fn wait_for_slot(core: &Core, claim: &Claim) -> Option<SlotGrant> {
    let at = core.clock.local_instant(claim.fire.fire.at);
    // Biased: a node told to stop starts nothing, even where both are ready at once.
    let arrived = tokio::select! {
        biased;
        _ = core.life.stop.cancelled() => false,
        _ = sleep_precisely(at) => true,
    };
    core.load.ahead.fetch_sub(1, Ordering::SeqCst);
    if !arrived {
        return None;
    }
    let slot = core.load.slots.request(claim.fire.fire.at);
    until_given_up(core, claim, slot.granted()).await
}

/// Waits for `step` of a fire in line, unless the node stops or the fire's wait
/// ends first ([`give_up_at`]: the fire goes back, counted in `handed_back`). A
/// node that is stopping never goes on, even when `step` is ready too: a fire whose
/// claim was in flight when the node was told to stop goes back unstarted.
async fn until_given_up<F: Future>(core: &Core, claim: &Claim, step: F) -> Option<F::Output> {
    tokio::select! {
        biased;
        _ = core.life.stop.cancelled() => None,
        out = step => Some(out),
        _ = sleep_until(give_up_at(core, claim)) => {
            debug!("no executor slot within half a poll interval; the fire goes back");
            bump(&core.counters.handed_back);
            None
        }
    }
}

/// When a fire that waits in line without a start goes back: after half a poll
/// interval, so a node with a free slot can take it at its next poll, and while a
/// third of the lease is left, so a renewal lands before it expires.
fn give_up_at(core: &Core, claim: &Claim) -> Instant {
    claim
        .deadline
        .checked_sub(core.config.lease_ttl / 3)
        .unwrap_or(claim.deadline)
        .min(Instant::now() + core.config.poll_interval / 2)
}

/// A fire's wait for its slot, still in line.
type Waiting = std::pin::Pin<Box<dyn Future<Output = SlotGrant> + Send>>;

/// A started run's slot: granted, or still in line.
type Place = Result<SlotGrant, Waiting>;

/// Starts a fire that was due at its claim. It is in line for a slot already (the
/// poll claimed it within the node's line); once it is near the head of the line it
/// writes its start while it waits, so the start's round trip is not spent holding a
/// slot. `Err` gives the lease back to release: the node is stopping, the fire was
/// not near the head within its wait, or the start was refused or failed.
async fn start_in_line(
    core: &Core,
    claim: Claim,
    mut slot: SlotRequest,
) -> Result<(Run, Option<Skip>, Place), Lease> {
    if until_given_up(core, &claim, slot.near()).await.is_none() {
        return Err(claim.lease);
    }
    let waiting: Waiting = Box::pin(slot.granted());
    let (started, place) = while_waiting(waiting, start(core, claim)).await;
    let (run, skip) = started?;
    Ok((run, skip, place))
}

/// Runs `step` while the slot `waiting` is waited for: `step`'s output, and the slot
/// granted meanwhile or the wait still going on.
async fn while_waiting<T>(mut waiting: Waiting, step: impl Future<Output = T>) -> (T, Place) {
    let mut step = std::pin::pin!(step);
    let mut grant = None;
    let out = loop {
        tokio::select! {
            g = &mut waiting, if grant.is_none() => grant = Some(g),
            s = &mut step => break s,
        }
    };
    (out, grant.ok_or(waiting))
}

/// One fire through its steps: slot, start, execute, finish. Returns the claim on
/// the job's next fire when the lease was extended to cover it.
async fn run_fire(core: &Arc<Core>, mut claim: Claim, slot: Option<SlotRequest>) -> Option<Claim> {
    let deadline = claim.deadline;
    let started = match (slot, claim.started.take()) {
        (Some(slot), Some(s)) => {
            let run_span = tracing::Span::current();
            let ClaimedStart {
                run_id,
                started_at,
                attempt,
                skip,
            } = s;
            let run = recorded(
                core,
                claim.fire,
                attempt,
                &skip,
                claim.lease,
                run_id,
                started_at,
                &run_span,
            );
            Ok((run, skip, Err(Box::pin(slot.granted()) as Waiting)))
        }
        // The steps of a fire are boxed where they are large: a fire's task holds
        // only the step it is in, so spawning and ending it copies little.
        (Some(slot), None) => Box::pin(start_in_line(core, claim, slot)).await,
        (None, _) => {
            Box::pin(async {
                match wait_for_slot(core, &claim).await {
                    Some(grant) => start(core, claim)
                        .await
                        .map(|(run, skip)| (run, skip, Ok(grant))),
                    None => Err(claim.lease),
                }
            })
            .await
        }
    };
    let (run, skip, place) = match started {
        Ok(started) => started,
        Err(lease) => {
            release(core, lease).await;
            return None;
        }
    };
    let _in_hand = core.load.hold(run.run_id);
    if let Some(skip) = skip {
        let _finishing = Finishing::enter(core);
        drop(place);
        info!(message = %skip.message, next = ?skip.next, "misfire: skipped");
        let p = plan::plan_skip(&run.fire.job, &run.attempt, skip.next, skip.message);
        let written = Box::pin(finish(core, &run, p, None, false)).await;
        release_after(core, run.lease, written.as_ref()).await;
        return None;
    }
    let cancel = watch(core, &run, deadline);
    let grant = match place {
        Ok(grant) => Some(grant),
        // Started: it waits for its slot unless the node is killed or the lease is
        // lost meanwhile, or its slot does not free up in time (the node's runs
        // turned out slower than its recent ones): then it is given back.
        Err(waiting) => {
            let wait = core.config.poll_interval / 2;
            tokio::select! {
                grant = waiting => Some(grant),
                _ = cancel.cancelled() => None,
                _ = sleep(wait) => return Box::pin(give_back(core, run, wait)).await,
            }
        }
    };
    let began = Instant::now();
    let outcome = match grant {
        Some(grant) => {
            Box::pin(
                execute(core, &run, grant, cancel, crate::trace::current())
                    .instrument(info_span!("jobwheel.execute")),
            )
            .await
        }
        None => Outcome::Cancelled,
    };
    // The run's slot is free again: the next fire in line takes it.
    let _finishing = Finishing::enter(core);
    core.pump_slots();
    Box::pin(finish_and_continue(core, run, outcome, began.elapsed())).await
}

/// Gives back a started fire that waited `waited` for a slot without getting one:
/// records it `returned` (the job due again at the same fire and attempt), then
/// gives the lease back, so any node with a free slot runs the fire at its next poll.
async fn give_back(core: &Core, run: Run, waited: Duration) -> Option<Claim> {
    let (run, _) = unwatch(core, run);
    bump(&core.counters.returned);
    info!(waited = ?waited, "no executor slot freed up: started fire given back");
    let p = plan::plan_return(&run.fire, waited, &core.node_id);
    let written = finish(core, &run, p, None, false).await;
    core.poll.rescan_before(&run.fire.key());
    release_after(core, run.lease, written.as_ref()).await;
    None
}

/// A fire the misfire policy skips: recorded `misfired`, not executed.
pub(super) struct Skip {
    next: Option<crate::time::Timestamp>,
    message: String,
}

/// Applies the misfire policy and records the start (in the span `jobwheel.start`).
/// `Err` gives the lease back to release when the store refused the start or failed.
async fn start(core: &Core, claim: Claim) -> Result<(Run, Option<Skip>), Lease> {
    let run_span = tracing::Span::current();
    start_run(core, claim.fire, claim.lease, &run_span)
        .instrument(info_span!("jobwheel.start"))
        .await
}

/// The misfire policy's decision on a fire starting now: the attempt to record,
/// and whether it runs or is skipped.
pub(super) fn plan_attempt(core: &Core, fire: &DueFire) -> (Attempt, Option<Skip>) {
    let now = core.clock.now();
    let threshold = core.config.misfire_threshold;
    let plan = core
        .guarded("planning a start", || {
            plan::plan_start(&fire.job, fire, now, threshold)
        })
        .unwrap_or_else(|_| StartPlan::Run(Attempt::as_claimed(fire)));
    match plan {
        StartPlan::Run(a) => (a, None),
        StartPlan::Skip {
            attempt,
            next,
            message,
        } => (attempt, Some(Skip { next, message })),
    }
}

async fn start_run(
    core: &Core,
    fire: DueFire,
    lease: Lease,
    run_span: &tracing::Span,
) -> Result<(Run, Option<Skip>), Lease> {
    let (attempt, skip) = plan_attempt(core, &fire);
    let req = StartRun {
        job_id: fire.job_id.clone(),
        fire_at: fire.fire.at,
        version: fire.version,
        token: lease.token,
        node: core.node_id.to_string(),
        attempt: attempt.attempt,
        trigger: attempt.trigger,
        covers: attempt.covers,
        context: attempt.context.clone(),
    };
    let (run_id, started_at) = match core.batch().start.call(req).await {
        Ok(StartOutcome::Started { run_id, started_at }) => (run_id, started_at),
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
            return Err(lease);
        }
        Err(e) => {
            core.backend_error("start_runs");
            warn!(error = %e, "start failed; the fire stays due");
            lock(&core.doubts).push(super::maintenance::Doubt {
                job_id: fire.job_id.clone(),
                job: fire.job.clone(),
                fire_at: fire.fire.at,
                token: Some(lease.token),
                attempt: attempt.attempt,
            });
            return Err(lease);
        }
    };
    let run = recorded(
        core, fire, attempt, &skip, lease, run_id, started_at, run_span,
    );
    Ok((run, skip))
}

/// A start the store recorded, as a [`Run`]: counted, its span given its run id and
/// trigger, and the fires a misfire decision covers counted.
#[allow(clippy::too_many_arguments)]
fn recorded(
    core: &Core,
    fire: DueFire,
    attempt: Attempt,
    skip: &Option<Skip>,
    lease: Lease,
    run_id: RunId,
    started_at: crate::time::Timestamp,
    run_span: &tracing::Span,
) -> Run {
    bump(&core.counters.started);
    run_span.record("run_id", run_id.0);
    run_span.record("trigger", attempt.trigger.as_str());
    let instruments = core.instruments().for_job(&fire.job);
    if let Some(covers) = attempt.covers {
        core.counters.misfired(fire.job.misfire(), covers.fires);
        instruments.misfired(fire.job.misfire(), covers.fires);
        if attempt.trigger == TriggerKind::Misfire && skip.is_none() {
            info!(fires = covers.fires, through = %covers.through, "misfire: running late fire");
        }
    }
    Run {
        fire,
        attempt,
        run_id,
        lease,
        started_at,
        instruments,
        executed_on: Default::default(),
    }
}

/// Puts a started run under the lease renewer's watch; the token it returns is
/// cancelled when the lease is lost or the node is killed.
fn watch(core: &Core, run: &Run, deadline: Instant) -> tokio_util::sync::CancellationToken {
    let cancel = core.life.kill.child_token();
    let mut running = lock(&core.load.running);
    running.insert(
        run.run_id,
        RunningEntry {
            lease: run.lease.clone(),
            deadline,
            cancel: cancel.clone(),
            lost: false,
            killed: false,
        },
    );
    core.instruments().running(running.len());
    cancel
}

/// How a watched run's watch ended.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Watched {
    /// The lease held to the end.
    Held,
    /// The lease was lost meanwhile: the result is refused.
    Lost,
    /// An operator killed the run.
    Killed,
}

/// Takes a run off the lease renewer's watch ([`watch`]): the run with the lease as
/// the renewer last extended it, and how the watch ended.
fn unwatch(core: &Core, run: Run) -> (Run, Watched) {
    let entry = {
        let mut running = lock(&core.load.running);
        let entry = running.remove(&run.run_id);
        core.instruments().running(running.len());
        entry
    };
    let watched = match &entry {
        Some(e) if e.lost => Watched::Lost,
        Some(e) if e.killed => Watched::Killed,
        _ => Watched::Held,
    };
    let run = Run {
        lease: entry.map_or(run.lease, |e| e.lease),
        ..run
    };
    (run, watched)
}

/// Runs the handler in the slot `grant` holds; `cancel` (from [`watch`]) cancels it.
/// `trace`: the run span's traceparent, for the handler and a remote instance.
async fn execute(
    core: &Core,
    run: &Run,
    grant: SlotGrant,
    cancel: tokio_util::sync::CancellationToken,
    trace: Option<String>,
) -> Outcome {
    let job = &run.fire.job;
    let handler = match core.handlers.for_job(job) {
        Ok(handler) => handler,
        Err(missing) => {
            drop(grant);
            return Outcome::Failed(JobError::msg(format!("{missing} (node {})", core.node_id)));
        }
    };
    let ctx = JobContext {
        job: match &run.attempt.context.payload {
            Some(p) => Arc::new(job.with_payload(p.clone())),
            None => job.clone(),
        },
        run_id: run.run_id,
        fire_at: run.fire.fire.at,
        attempt: run.attempt.attempt,
        trigger: run.attempt.trigger,
        token: run.lease.token,
        node_id: core.node_id.clone(),
        cancel,
        deadline: job.timeout().map(|t| Instant::now() + t),
        shard: None,
        trace,
        upstream: run.attempt.context.upstream.clone(),
        log: crate::capture::RunLogger::to(core.lines.sink(), (run.run_id.0, None)),
        executed_on: run.executed_on.clone(),
    };
    let exec = Execution {
        ctx,
        handler: handler.clone(),
        timeout: job.timeout(),
    };
    core.lines.open(run.run_id);
    run.instruments
        .handler_started(run.fire.fire.at, run.started_at, core.clock.now());
    let execution = AssertUnwindSafe(core.load.executor.execute(exec)).catch_unwind();
    let _executing = core.load.pace.enter();
    match grant.run(execution).await {
        Ok(outcome) => outcome,
        Err(p) => Outcome::Panicked(core.caught("executing a run (the executor panicked)", p)),
    }
}

/// Records how the run ended (retry policy, next fire), then keeps the lease for the
/// job's next fire when it falls within the lookahead, or gives it back.
async fn finish_and_continue(
    core: &Core,
    run: Run,
    outcome: Outcome,
    took: Duration,
) -> Option<Claim> {
    let (run, watched) = unwatch(core, run);
    let ended = match watched {
        Watched::Lost => plan::Ended::new(
            RunStatus::Cancelled,
            Some("lease lost while running; result refused".to_string()),
        ),
        Watched::Killed => plan::Ended::killed(format!("killed on node {}", core.node_id)),
        Watched::Held => plan::Ended::of(&outcome),
    };
    let now = core.clock.now();
    let p = core
        .guarded("planning a run's end", || {
            plan::plan_finish(&run.fire.job, &run.attempt, ended, now, fastrand::f64())
        })
        .unwrap_or_else(|m| plan::FinishPlan::after_panic(&run.fire.job, now, &m));
    if p.will_retry {
        info!(status = p.status.as_str(), error = ?p.error, next = ?p.next.as_ref().map(|n| n.at), "run failed; retry scheduled");
    } else if p.status.is_failure() {
        warn!(status = p.status.as_str(), error = ?p.error, "run failed");
    }
    let next = p.next.clone();
    run.instruments.ran(p.status.as_str(), took);
    super::lines::flush_run(core, run.run_id).await;
    // The lease is kept for the job's next fire when it falls within the lookahead
    // (the node runs it without a claim), unless the node is stopping or has a
    // backlog others should share. Where the lease is kept in the job's row, the
    // finish keeps or frees it in its own write.
    let ttl = core.config.lookahead + core.config.lease_ttl;
    let keep = next.as_ref().is_some_and(|n| {
        !core.life.stop.is_cancelled()
            && !core.load.backlog.load(Ordering::SeqCst)
            && n.at.duration_since(core.clock.now()) <= core.config.lookahead
    });
    let lease_end = match (core.row_leases, keep) {
        (true, true) => LeaseEnd::Keep(ttl),
        (true, false) => LeaseEnd::Release,
        (false, _) => LeaseEnd::Untouched,
    };
    let mut asked = Instant::now();
    let written = async {
        let req = super::finish::request(core, &run, p, Some(took), false, lease_end).await?;
        super::finish::write(core, &run, req).await
    }
    .instrument(info_span!("jobwheel.finish"))
    .await;
    if let (
        Some(FinishOutcome::Finished {
            rescheduled: true,
            ended_at,
        }),
        Some(next),
    ) = (&written, next)
    {
        let at = next.at;
        if keep {
            let kept = if core.row_leases {
                Some(Lease {
                    expires_at: *ended_at + ttl,
                    ..run.lease.clone()
                })
            } else {
                asked = Instant::now();
                core.batch()
                    .renew
                    .call(run.lease.clone())
                    .await
                    .ok()
                    .flatten()
            };
            if let Some(lease) = kept {
                core.load.ahead.fetch_add(1, Ordering::SeqCst);
                let fire = DueFire {
                    fire: next,
                    ..run.fire
                };
                return Some(Claim {
                    fire,
                    lease,
                    deadline: asked + ttl,
                    started: None,
                });
            }
        }
        // Given back: make sure this node's next poll sees the job's next fire.
        core.poll.rescan_before(&DueKey {
            fire_at: at,
            job_id: run.fire.job_id.clone(),
        });
    }
    // Given back, unless the finish freed it in its own write.
    if !(lease_end == LeaseEnd::Release && written.is_some()) {
        release(core, run.lease).await;
    }
    None
}

/// Counts a fire in [`Core::finishing`] while it lives.
struct Finishing<'a>(&'a Core);

impl<'a> Finishing<'a> {
    fn enter(core: &'a Core) -> Self {
        core.load.finishing.fetch_add(1, Ordering::SeqCst);
        Finishing(core)
    }
}

impl Drop for Finishing<'_> {
    fn drop(&mut self) {
        self.0.load.finishing.fetch_sub(1, Ordering::SeqCst);
    }
}
