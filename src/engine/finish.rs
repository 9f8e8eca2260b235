//! How a started run ends: the fenced `finish_runs` with the run record, the next
//! fire and the alarm events, retried until the store writes or refuses it (telling
//! this node's own earlier write, an answer lost, from a newer holder's), and its
//! lease given back.

use super::plan::Attempt;
use super::{Core, bump, plan};
use crate::error::Error;
use crate::lock::Lease;
use crate::record::*;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::sleep;
use tracing::{debug, info, warn};

/// A started attempt at a fire: the run a node records, under the lease it holds.
pub(crate) struct Run {
    pub(crate) fire: DueFire,
    pub(crate) attempt: Attempt,
    pub(crate) run_id: RunId,
    pub(crate) lease: Lease,
    /// When the store recorded its start (store clock).
    pub(crate) started_at: crate::time::Timestamp,
    /// The instruments of its job's label set.
    pub(crate) instruments: Arc<super::instruments::RunInstruments>,
    /// Where a remote group's dispatcher sent it (written with its end).
    pub(crate) executed_on: crate::handler::ExecutedOn,
}

/// Gives a lease back; a failure is only logged (the lease expires by itself).
pub(crate) async fn release(core: &Core, lease: Lease) {
    if let Err(e) = core.batch().release.call(lease).await {
        debug!(error = %e, "release failed; the lease will expire");
    }
}

/// The releases of `run`'s children when it ends `status` (see
/// [`dependency`](crate::dependency)); none, with an error logged, past the
/// longest chain of releases. A child that joins by a window gets its release keyed
/// by the window's start: each released child's definition is read (retrying
/// temporary store failures; after three other failures, as for a child that cannot
/// be read, the release keeps its exact instant; `None` when the node stops first).
async fn releases(
    core: &Core,
    run: &Run,
    status: RunStatus,
    will_retry: bool,
) -> Option<Vec<crate::dependency::Release>> {
    if run.fire.job.children().is_empty() {
        return Some(Vec::new());
    }
    let from = crate::dependency::UpstreamRun {
        job: run.fire.job_id.clone(),
        // The fire's logical instant: a released fire's upstream's (its window's
        // start when it joined by one), else its own (the same for all its attempts).
        fire_at: run
            .attempt
            .context
            .upstream
            .first()
            .map_or(run.attempt.base, |u| u.key()),
        run: run.run_id,
        status,
        depth: run
            .attempt
            .context
            .upstream
            .first()
            .map_or(1, |u| u.depth.saturating_add(1)),
        released_by: None,
        window: None,
    };
    if from.depth > crate::dependency::MAX_DEPTH {
        tracing::error!(
            depth = from.depth,
            "a chain of {} releases reached this job: its children are not released (is there a cycle?)",
            crate::dependency::MAX_DEPTH
        );
    }
    let mut out = crate::dependency::releases_of(&run.fire.job, &from, will_retry);
    for r in &mut out {
        let mut backoff = super::backoff::Backoff::default();
        let mut refused = 0;
        let child = loop {
            match core.store.get(&r.job).await {
                Ok(rec) => break rec,
                Err(Error::Stopped) => return None,
                Err(e) if !e.is_temporary() && refused == 2 => {
                    warn!(error = %e, child = %r.job, "a released child cannot be read: released for the exact instant");
                    break None;
                }
                Err(e) => {
                    refused += u32::from(!e.is_temporary());
                    core.backend_error("get");
                    let d = backoff.next_delay();
                    warn!(error = %e, child = %r.job, retry_in = ?d, "reading a released child failed; retrying");
                    sleep(d).await;
                }
            }
        };
        if let Some(w) = child.as_ref().and_then(|c| c.job.join_window()) {
            let mut from = r.from.clone();
            from.window = Some(w.start(from.fire_at));
            *r = crate::dependency::Release::new(r.job.clone(), from);
        }
    }
    Some(out)
}

/// When `req`'s run is recorded ended with `req`'s token and status: its end
/// instant (`None` when it is not, or the store cannot say now).
async fn recorded_finish(core: &Core, req: &FinishRun) -> Option<crate::time::Timestamp> {
    let q = crate::store::RunQuery::new()
        .job(req.job_id.clone())
        .before(RunId(req.run_id.0 + 1))
        .limit(1);
    let runs = core.store.runs(&q).await.ok()?;
    runs.into_iter()
        .find(|r| r.id == req.run_id && r.token == req.token && r.status == req.status)
        .and_then(|r| r.ended_at)
}

/// What a run's end writes, decided once before the write: its outcome and next fire
/// (`p`), its alarm events, the releases of its children (their definitions read
/// now) and what happens to its lease (`lease`). `None` when the node stops while
/// the children are read. `takeover`: recording another node's lost run under a
/// newer lease.
pub(crate) async fn request(
    core: &Core,
    run: &Run,
    p: plan::FinishPlan,
    took: Option<Duration>,
    takeover: bool,
    lease: LeaseEnd,
) -> Option<FinishRun> {
    let by = plan::Recorder {
        node: &core.node_id,
        run_id: run.run_id,
        duration: took,
        now: core.clock.now(),
    };
    let alarms = core
        .guarded("composing a run's alarm events", || {
            plan::events(&run.fire.job, &run.fire, &run.attempt, &by, &p)
        })
        .unwrap_or_default();
    Some(FinishRun {
        run_id: run.run_id,
        job_id: run.fire.job_id.clone(),
        token: run.lease.token,
        takeover,
        status: p.status,
        error: p.error,
        will_retry: p.will_retry,
        executor: run.executed_on.summary(),
        version: run.fire.version,
        next: p.next,
        alarms,
        releases: releases(core, run, p.status, p.will_retry).await?,
        lease,
    })
}

/// How a finish that does not keep the lease ends it: in the same write when the
/// lease is kept in the job's row, otherwise by a release after it.
pub(crate) fn lease_end(core: &Core) -> LeaseEnd {
    if core.row_leases {
        LeaseEnd::Release
    } else {
        LeaseEnd::Untouched
    }
}

/// Writes a run's finish with the lease given back ([`request`], then [`write`]),
/// retrying store failures until it is written or refused. `takeover`: recording
/// another node's lost run under a newer lease.
pub(crate) async fn finish(
    core: &Core,
    run: &Run,
    p: plan::FinishPlan,
    took: Option<Duration>,
    takeover: bool,
) -> Option<FinishOutcome> {
    let req = request(core, run, p, took, takeover, lease_end(core)).await?;
    write(core, run, req).await
}

/// Gives the lease back after a finish written with [`lease_end`]: only on the
/// general path, or when the finish was not written (the node stopped first). A
/// finish that was refused was fenced out: the lease is not this node's any more.
pub(crate) async fn release_after(core: &Core, lease: Lease, written: Option<&FinishOutcome>) {
    if !core.row_leases || written.is_none() {
        release(core, lease).await;
    }
}

/// Writes `req`, `run`'s finish, retrying store failures until it is written or
/// refused (telling this node's own earlier write, an answer lost, from a newer
/// holder's).
pub(crate) async fn write(core: &Core, run: &Run, mut req: FinishRun) -> Option<FinishOutcome> {
    let takeover = req.takeover;
    let mut backoff = super::backoff::Backoff::default();
    let mut refused_for_good = 0;
    loop {
        match core.batch().finish.call(req.clone()).await {
            Ok(out @ FinishOutcome::Finished { .. }) => {
                bump(&core.counters.finished);
                run.instruments.finished(req.status.as_str());
                if !req.alarms.is_empty() {
                    core.alarm.wake.notify_one();
                }
                if !req.releases.is_empty() {
                    // The released children are due now: poll for them at once.
                    core.rescan();
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
            Ok(FinishOutcome::Refused(FinishRefusal::NotRunning)) if !takeover => {
                // The run has ended. A newer lease holder may have recorded it
                // lost; or an earlier try of this finish was written though its
                // answer was lost (a connection cut after the commit, here or in
                // the store's own retry): then the run carries this finish's token
                // and status.
                if let Some(ended_at) = recorded_finish(core, &req).await {
                    bump(&core.counters.finished);
                    run.instruments.finished(req.status.as_str());
                    info!("the result was recorded by a call whose answer was lost");
                    return Some(FinishOutcome::Finished {
                        ended_at,
                        // Not known: the lease goes back and the poller finds the
                        // next fire.
                        rescheduled: false,
                    });
                }
                bump(&core.counters.finish_refused);
                warn!(
                    token = run.lease.token,
                    "result refused: the run was recorded by another node"
                );
                return Some(FinishOutcome::Refused(FinishRefusal::NotRunning));
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
                core.backend_error("finish_runs");
                if !e.is_temporary() {
                    refused_for_good += 1;
                }
                if refused_for_good == 3 && (req.error.is_some() || !req.alarms.is_empty()) {
                    // The store keeps refusing what this finish says (text it cannot
                    // hold, say): record the outcome without the free text rather
                    // than leave the run running for good.
                    warn!(error = %e, original = ?req.error, "the store refuses this run's result; recording it without its message and alarms");
                    req.error = Some(format!(
                        "the store refused this run's message ({e}); it is in node {}'s log",
                        core.node_id
                    ));
                    req.alarms.clear();
                }
                let d = backoff.next_delay();
                warn!(error = %e, retry_in = ?d, "finish failed; retrying");
                sleep(d).await;
            }
        }
    }
}
