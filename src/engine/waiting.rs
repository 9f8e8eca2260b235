//! The wait deadline of queued releases (see [`dependency`](crate::dependency)): a
//! release that waits in a job's queue longer than the job's
//! [`wait_deadline`](crate::Job::wait_deadline) — a join missing a parent, a
//! paused or busy child — raises one [`Waiting`](AlarmKind::Waiting) alarm for its
//! job and instant. Every node checks on its heartbeat; the store raises each alarm
//! once ([`Jobs::alarm_waiting`](crate::store::Jobs::alarm_waiting)).

use super::Core;
use super::plan::zone_of;
use crate::dependency::QueuedRelease;
use crate::error::Result;
use crate::job::JobId;
use crate::policy::AlarmKind;
use crate::record::{AlarmEvent, JobRecord};
use crate::time::Timestamp;
use std::collections::{BTreeMap, HashMap};
use tracing::{debug, info};

/// Most queued releases one check reads (the oldest first).
pub(crate) const CHECKED_PER_PASS: usize = 1_000;

/// Raises the `waiting` alarms that are due: reads the oldest queued releases not
/// yet alarmed, and for each job and instant whose oldest release has waited past
/// the job's deadline, asks the store to raise its alarm. Returns how many it raised.
pub(super) async fn raise(core: &Core) -> Result<usize> {
    let queued = core.store.releases(None, CHECKED_PER_PASS).await?;
    let mut instants: BTreeMap<(JobId, Timestamp), Vec<&QueuedRelease>> = BTreeMap::new();
    for q in queued.iter().filter(|q| q.alarmed_at.is_none()) {
        instants
            .entry((q.job.clone(), q.from.key()))
            .or_default()
            .push(q);
    }
    if instants.is_empty() {
        return Ok(0);
    }
    let now = core.clock.now();
    let mut jobs: HashMap<JobId, Option<JobRecord>> = HashMap::new();
    let mut raised = 0;
    for ((id, at), releases) in instants {
        if !jobs.contains_key(&id) {
            let rec = core.store.get(&id).await?;
            jobs.insert(id.clone(), rec);
        }
        let Some(rec) = &jobs[&id] else { continue };
        let Some(event) = overdue(rec, at, &releases, now, &core.node_id) else {
            continue;
        };
        if core.store.alarm_waiting(&id, at, &event).await? {
            info!(job = %id, instant = %at, waiting_for = ?event.waiting_for, "a release waited past its job's deadline: alarm raised");
            raised += 1;
        } else {
            debug!(job = %id, instant = %at, "waiting alarm already raised, or the releases were taken");
        }
    }
    if raised > 0 {
        core.alarm.wake.notify_one();
    }
    Ok(raised)
}

/// The `waiting` event for job `rec`'s `releases` of the instant `at` (not yet
/// alarmed), when the oldest of them has waited past the job's deadline at `now`
/// and its policy wants the kind; `None` otherwise.
pub(crate) fn overdue(
    rec: &JobRecord,
    at: Timestamp,
    releases: &[&QueuedRelease],
    now: Timestamp,
    node: &str,
) -> Option<AlarmEvent> {
    let job = &rec.job;
    let deadline = job.wait_deadline()?;
    let oldest = releases.iter().map(|r| r.released_at).min()?;
    if now.duration_since(oldest) < deadline || !job.alarm().wants(AlarmKind::Waiting) {
        return None;
    }
    let waiting_for: Vec<JobId> = job
        .after()
        .iter()
        .filter(|p| !releases.iter().any(|r| &r.from.job == *p))
        .cloned()
        .collect();
    let why = if !waiting_for.is_empty() {
        let names: Vec<&str> = waiting_for.iter().map(JobId::as_str).collect();
        format!(
            "the join waits for {} to release this instant",
            names.join(", ")
        )
    } else if !job.enabled() {
        "the job is paused".to_string()
    } else if rec.running.is_some() {
        "the job is still running an earlier fire".to_string()
    } else {
        "the job has a fire due before it (or an earlier release queued)".to_string()
    };
    Some(AlarmEvent {
        kind: AlarmKind::Waiting,
        job_id: job.id().clone(),
        handler: job.handler().to_string(),
        run_id: None,
        fire_at: at,
        zone: zone_of(job),
        attempt: 0,
        max_attempts: job.retry().max_attempts(),
        node: node.to_string(),
        duration_ms: None,
        error: Some(format!(
            "a release queued at {oldest} has waited past the job's wait deadline of {}: {why}",
            humantime_serde::re::humantime::format_duration(deadline)
        )),
        will_retry: false,
        next_fire_at: rec.next_fire_at(),
        recipients: job.alarm().recipients.clone(),
        occurred_at: now,
        suppressed: 0,
        covers: None,
        blocked: Vec::new(),
        waiting_for,
    })
}
