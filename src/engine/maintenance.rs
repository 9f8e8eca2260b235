//! The work of a node's services (`services.rs` runs them): heartbeats, the census,
//! lost-run recovery (dead nodes' runs, starts whose answer was lost, runs the node
//! no longer has in hand), and the lease renewal loop. None of it is on the path of
//! a fire (alarm delivery is in `alarms.rs`).

use super::plan;
use super::{Core, bump, lock};
use crate::error::Result;
use crate::lock::LockRequest;
use crate::record::*;
use crate::store::RunQuery;
use std::sync::Arc;
use tokio::time::{Instant, sleep};
use tracing::{debug, warn};

pub(super) async fn heartbeat_once(core: &Core) -> Result<()> {
    let info = NodeInfo {
        node_id: core.node_id.to_string(),
        host: core.host.clone(),
        pid: std::process::id(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        started_at: core.life.started_at.get().copied().unwrap_or_default(),
        capacity: core.load.executor.capacity() as u32,
    };
    core.store.heartbeat(&info).await.map(|_| ())
}

/// Sets the live-node and live-executor gauges from the registry as it is now (the
/// store's clock as this node reads it). A failed read leaves them as they were.
pub(super) async fn census(core: &Core) {
    let now = core.clock.now();
    match core.store.nodes().await {
        Ok(nodes) => {
            let dead_after = core.config.dead_after();
            let live = nodes
                .items
                .iter()
                .filter(|n| now.duration_since(n.last_beat) <= dead_after)
                .count();
            core.instruments().live_nodes(live);
        }
        Err(e) => debug!(error = %e, "reading the node registry for the live-node gauge failed"),
    }
    for (name, group) in &core.handlers.remote {
        if let Ok(live) = group.live_count().await {
            super::instruments::live_executors(name, live);
        }
    }
}

/// Renews the leases of running runs every third of the lease ttl; a lease that is
/// refused, or that passes its local deadline unrenewed, cancels its run.
pub(super) async fn renew_loop(core: Arc<Core>) {
    let period = core.config.lease_ttl / 3;
    loop {
        tokio::select! {
            _ = core.life.bg_stop.cancelled() => return,
            _ = sleep(period) => {}
        }
        let batch: Vec<(RunId, crate::lock::Lease)> = lock(&core.load.running)
            .iter()
            .filter(|(_, e)| !e.lost)
            .map(|(id, e)| (*id, e.lease.clone()))
            .collect();
        if batch.is_empty() {
            continue;
        }
        let leases: Vec<_> = batch.iter().map(|(_, l)| l.clone()).collect();
        let asked = Instant::now();
        let result = core.locks.renew(&leases, core.config.lease_ttl).await;
        let mut running = lock(&core.load.running);
        match result {
            Ok(renewed) => {
                for ((id, _), r) in batch.iter().zip(renewed) {
                    let Some(e) = running.get_mut(id) else {
                        continue;
                    };
                    match r {
                        Some(l) => {
                            e.lease = l;
                            e.deadline = asked + core.config.lease_ttl;
                        }
                        None => lose(&core, e, "renewal refused"),
                    }
                }
            }
            Err(err) => {
                core.backend_error("renew");
                warn!(error = %err, "lease renewal failed");
                let now = Instant::now();
                for (id, _) in &batch {
                    if let Some(e) = running.get_mut(id).filter(|e| e.deadline <= now) {
                        lose(&core, e, "lease expired before it could be renewed");
                    }
                }
            }
        }
    }
}

fn lose(core: &Core, e: &mut super::RunningEntry, why: &str) {
    e.lost = true;
    e.cancel.cancel();
    bump(&core.counters.leases_lost);
    warn!(job = %e.lease.key, token = e.lease.token, why, "lease lost; cancelling the run");
}

/// Takes over the running runs of dead nodes, concurrently (a dead node may leave
/// many), and records them lost.
pub(super) async fn recover_orphans(core: &Arc<Core>) -> Result<()> {
    let orphans = core.store.orphaned_runs(core.config.claim_batch).await?;
    futures::future::join_all(orphans.into_iter().map(|run| {
        let why = format!("node {} died while running", run.node);
        recover_lost(core, run, why)
    }))
    .await
    .into_iter()
    .collect::<Result<Vec<bool>>>()
    .map(|_| ())
}

/// A start whose call failed after it may have reached the store (a connection cut
/// after the commit): if the store recorded it, the run is the node's but nobody
/// executes it, and it blocks its job. The node has given its lease back, so no
/// other start carries its token: a running run of the job with that token, fire and
/// attempt is this start's, and is recorded lost (and retried by its policy).
#[derive(Clone, Debug)]
pub(crate) struct Doubt {
    pub(crate) job_id: crate::job::JobId,
    /// The job as the node started it (its misfire policy and labels count the
    /// fires a recorded start covered).
    pub(crate) job: Arc<crate::job::Job>,
    pub(crate) fire_at: crate::time::Timestamp,
    /// The start's token; `None` for a claim, whose token the store grants (its run
    /// is then known by this node's id).
    pub(crate) token: Option<u64>,
    pub(crate) attempt: u32,
}

impl Doubt {
    /// Whether `run` may be the one this start recorded.
    fn matches(&self, run: &RunRecord, node: &str) -> bool {
        run.job_id == self.job_id
            && run.fire_at == self.fire_at
            && run.attempt == self.attempt
            && self.token.map_or(run.node == node, |t| run.token == t)
    }
}

/// Settles the starts whose call failed ([`Doubt`]): a run the store recorded for
/// one is recorded lost; one the store did not record is forgotten. A doubt the
/// store cannot answer now, or whose job's lease another node holds, stays for the
/// next pass.
pub(super) async fn settle_doubts(core: &Arc<Core>) -> Result<()> {
    let doubts = std::mem::take(&mut *lock(&core.doubts));
    let mut keep = Vec::new();
    let mut failed = None;
    // The claims' doubts (no token: the store granted it) against this node's
    // running runs, read once: a failed claim call leaves one per candidate.
    let (claims, starts): (Vec<Doubt>, Vec<Doubt>) =
        doubts.into_iter().partition(|d| d.token.is_none());
    let mut claims_left = match settle_claims(core, claims).await {
        Ok(left) => left,
        Err((left, e)) => {
            failed = Some(e);
            left
        }
    };
    keep.append(&mut claims_left);
    for d in starts {
        if failed.is_some() {
            keep.push(d);
            continue;
        }
        match settle(core, &d).await {
            Ok(true) => {}
            Ok(false) => keep.push(d),
            Err(e) => {
                keep.push(d);
                failed = Some(e);
            }
        }
    }
    lock(&core.doubts).append(&mut keep);
    failed.map_or(Ok(()), Err)
}

/// Settles the doubts of failed claim calls: each running run of this node that
/// one of them matches and that is not in hand is recorded lost. Returns the doubts
/// left for the next pass (all of them while a claim call is in flight, whose
/// runs are not in hand yet; those whose lease another node holds), with the
/// error that stopped the pass, if any.
async fn settle_claims(
    core: &Arc<Core>,
    claims: Vec<Doubt>,
) -> std::result::Result<Vec<Doubt>, (Vec<Doubt>, crate::error::Error)> {
    if claims.is_empty() {
        return Ok(claims);
    }
    let q = RunQuery::new()
        .status(RunStatus::Running)
        .node(core.node_id.to_string())
        .limit(crate::limits::MAX_PAGE);
    // The store first, then what is in hand: a run started after the read is not in
    // it, and one started before is in hand once no claim call is in flight.
    let running = match core.store.runs(&q).await {
        Ok(r) => r,
        Err(e) => return Err((claims, e)),
    };
    if core.load.claims_in_flight() {
        return Ok(claims);
    }
    let held = core.load.in_hand();
    let mut keep = Vec::new();
    for d in claims {
        let Some(run) = running
            .iter()
            .find(|r| d.matches(r, &core.node_id) && !held.contains(&r.id))
        else {
            continue;
        };
        match settle_run(core, &d, run.clone()).await {
            Ok(true) => {}
            Ok(false) => keep.push(d),
            Err(e) => {
                keep.push(d);
                return Err((keep, e));
            }
        }
    }
    Ok(keep)
}

/// Whether `d` is settled: no run of its start, or that run recorded lost (here or
/// by another node).
async fn settle(core: &Arc<Core>, d: &Doubt) -> Result<bool> {
    let running = core
        .store
        .runs(
            &RunQuery::new()
                .job(d.job_id.clone())
                .status(RunStatus::Running)
                .limit(16),
        )
        .await?;
    let Some(run) = running.into_iter().find(|r| d.matches(r, &core.node_id)) else {
        return Ok(true);
    };
    settle_run(core, d, run).await
}

/// Records lost `run`, the start `d` doubted.
async fn settle_run(core: &Arc<Core>, d: &Doubt, run: RunRecord) -> Result<bool> {
    warn!(job = %run.job_id, run = %run.id, "a start whose answer was lost was recorded: recording it lost");
    if d.token.is_none() && core.row_leases {
        // A claim: the lease in the job's row is this node's, under the run's token;
        // give it back so that the takeover below can take it.
        let lease = crate::lock::Lease {
            key: run.job_id.to_string(),
            owner: core.node_id.to_string(),
            token: run.token,
            expires_at: core.clock.now(),
        };
        core.locks.release(&[lease]).await?;
    }
    let covers = run.covers;
    let why = "the store recorded the start but its answer was lost (the store call failed)";
    let settled = recover_lost(core, run, why.into()).await?;
    // No node saw the start, so the fires its misfire span covers are counted here,
    // as a start counts them, with the job as the node knew it.
    if let (true, Some(c)) = (settled, covers) {
        core.counters.misfired(d.job.misfire(), c.fires);
        core.instruments()
            .for_job(&d.job)
            .misfired(d.job.misfire(), c.fires);
    }
    Ok(settled)
}

/// Pages of running runs one [`reclaim_own`] pass reads at most.
const RECLAIM_PAGES: usize = 10;

/// Runs the store records running on this node that the node neither executes nor
/// finishes (not [in hand](super::load::Load::hold)): a finish the store
/// acknowledged and then lost (a Redis failover without `wait_for_replicas`), or runs
/// started by an earlier process with the same node id. Each is recorded lost, as a
/// dead node's run is, and retried by its policy, so its job does not wait for a node
/// that is alive. Only runs started more than `lease_ttl` ago count (a start just
/// recorded is in hand once its answer arrives), and not a start in doubt
/// ([`settle_doubts`] settles those). Reads up to [`RECLAIM_PAGES`] pages of the
/// node's running runs, newest first.
pub(super) async fn reclaim_own(core: &Arc<Core>) -> Result<()> {
    // What is in hand is read before the store: a run finished in between is no
    // longer running there.
    let held = core.load.in_hand();
    let doubts: Vec<Doubt> = lock(&core.doubts).clone();
    let until = core.store.now().await? - core.config.lease_ttl;
    let mut q = RunQuery::new()
        .status(RunStatus::Running)
        .node(core.node_id.to_string())
        .until(until)
        .limit(crate::limits::MAX_PAGE);
    let mut nobodys = Vec::new();
    for _ in 0..RECLAIM_PAGES {
        let page = core.store.runs(&q).await?;
        let full = page.len() >= q.effective_limit();
        let Some(last) = page.last() else { break };
        q = q.before(last.id);
        nobodys.extend(page.into_iter().filter(|r| {
            *r.node == *core.node_id
                && !held.contains(&r.id)
                && !doubts.iter().any(|d| d.matches(r, &core.node_id))
        }));
        if !full {
            break;
        }
    }
    futures::future::join_all(nobodys.into_iter().map(|run| {
        warn!(job = %run.job_id, run = %run.id, "the store records a run running on this node that the node does not run");
        let why = format!(
            "the store records this run running on node {}, which does not run it (its recorded end was lost, or an earlier process of the node started it)",
            run.node
        );
        recover_lost(core, run, why)
    }))
    .await
    .into_iter()
    .collect::<Result<Vec<bool>>>()?;
    Ok(())
}

/// Takes over a run nobody executes — a dead node's, or one whose start's answer
/// was lost — and records it `lost` (a failed attempt, with `why` as its error)
/// under a newer lease, which fences the old holder out. Another node may record it
/// first; that is counted apart (`lost_already_recorded`), not as a recovery.
/// `Ok(false)`: another node holds the job's lease, so nothing was done yet.
async fn recover_lost(core: &Arc<Core>, run: RunRecord, why: String) -> Result<bool> {
    let req = LockRequest {
        key: run.job_id.to_string(),
        ttl: core.config.lease_ttl,
    };
    let Some(lease) = core
        .locks
        .acquire(&core.node_id, &[req])
        .await?
        .pop()
        .flatten()
    else {
        return Ok(false);
    };
    let error = Some(why);
    let Some(rec) = core.store.get(&run.job_id).await? else {
        // The job was removed while its node was dead: close the run, nothing to retry.
        let close = FinishRun {
            run_id: run.id,
            job_id: run.job_id.clone(),
            token: lease.token,
            takeover: true,
            status: RunStatus::Lost,
            error,
            will_retry: false,
            executor: None,
            version: 0,
            next: None,
            alarms: Vec::new(),
            releases: Vec::new(),
            lease: crate::record::LeaseEnd::Untouched,
        };
        let out = core.store.finish_runs(&[close]).await?;
        count_recovery(core, out.first());
        super::finish::release(core, lease).await;
        return Ok(true);
    };
    // The job still describes the fire the run belonged to unless it changed since.
    let same_fire = rec.next_fire_at() == Some(run.fire_at);
    let fire = DueFire {
        job_id: run.job_id.clone(),
        job: rec.job.clone(),
        version: rec.version,
        fire: FireState {
            at: run.fire_at,
            trigger: run.trigger,
            attempt: run.attempt.saturating_sub(1),
            resume_after: rec
                .next
                .as_ref()
                .and_then(|n| n.resume_after)
                .filter(|_| same_fire),
            context: run.context.clone(),
        },
    };
    // A coalescing run stood for fires up to the end of its span; a retry continues
    // its fire's base.
    let base = match run.covers {
        Some(c) if run.trigger == TriggerKind::Misfire => c.through,
        _ => fire.fire.resume_after.unwrap_or(run.fire_at),
    };
    let attempt = plan::Attempt {
        fire_at: run.fire_at,
        attempt: run.attempt,
        trigger: run.trigger,
        base,
        covers: run.covers,
        context: run.context.clone(),
    };
    let p = plan::plan_finish(
        &rec.job,
        &attempt,
        plan::Ended::new(RunStatus::Lost, error),
        core.clock.now(),
        fastrand::f64(),
    );
    warn!(job = %run.job_id, run = %run.id, node = %run.node, "recording a lost run");
    let recorded = super::finish::Run {
        instruments: core.instruments().for_job(&fire.job),
        fire,
        attempt,
        run_id: run.id,
        lease,
        started_at: run.started_at,
        executed_on: Default::default(),
    };
    let out = super::finish::finish(core, &recorded, p, None, true).await;
    count_recovery(core, out.as_ref());
    super::finish::release_after(core, recorded.lease, out.as_ref()).await;
    core.rescan();
    Ok(true)
}

fn count_recovery(core: &Core, out: Option<&FinishOutcome>) {
    match out {
        Some(FinishOutcome::Finished { .. }) => bump(&core.counters.lost_recovered),
        Some(FinishOutcome::Refused(FinishRefusal::NotRunning)) => {
            bump(&core.counters.lost_already_recorded);
        }
        _ => {}
    }
}

/// The start of the UTC day `t` falls in.
pub(super) fn day_start(t: crate::time::Timestamp) -> crate::time::Timestamp {
    const DAY_MS: i64 = 86_400_000;
    crate::time::Timestamp::from_millis(t.as_millis().div_euclid(DAY_MS) * DAY_MS)
}
