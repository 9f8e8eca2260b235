//! A dead node's run, on a paused tokio clock: recorded lost under a newer lease
//! once its node is silent and its lease expired, retried as the same fire (with the
//! payload it was given), the dead node's late result refused.

use crate::support;
use jobwheel::store::JobsExt as _;

use jobwheel::store::{AlarmOutbox, Jobs, NodeRegistry};
use jobwheel::{
    AlarmKind, Job, JobContext, JobError, Lease, LockProvider, LockRequest, RetryPolicy, RunStatus,
    Schedule, Scheduler, TriggerKind,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::*;

/// A node "ghost" that claimed and started the fire of job "report" due at the base
/// instant, then died: it never beats again. Returns its lease.
async fn ghost_started(
    store: &jobwheel::memory::MemoryStore,
    locks: &jobwheel::memory::LocalLocks,
) -> Lease {
    ghost_started_with(store, locks, TriggerKind::Schedule, None).await
}

/// [`ghost_started`] for a fire of this kind and payload override.
async fn ghost_started_with(
    store: &jobwheel::memory::MemoryStore,
    locks: &jobwheel::memory::LocalLocks,
    trigger: TriggerKind,
    payload: Option<serde_json::Value>,
) -> Lease {
    let ghost = jobwheel::NodeInfo {
        node_id: "ghost".into(),
        host: "h".into(),
        pid: 1,
        version: "0".into(),
        started_at: at("2026-01-01T00:00:00Z"),
        capacity: 1,
    };
    store.heartbeat(&ghost).await.unwrap();
    let req = LockRequest {
        key: "report".into(),
        ttl: Duration::from_secs(30),
    };
    let lease = locks
        .acquire("ghost", &[req])
        .await
        .unwrap()
        .pop()
        .flatten()
        .unwrap();
    let start = jobwheel::store::StartRun {
        job_id: jobwheel::JobId::new("report").unwrap(),
        fire_at: at("2026-01-01T00:00:00Z"),
        version: 1,
        token: lease.token,
        node: "ghost".into(),
        attempt: 1,
        trigger,
        covers: None,
        context: jobwheel::FireContext::with_payload(payload),
    };
    assert!(matches!(
        store.start_runs(&[start]).await.unwrap()[0],
        jobwheel::store::StartOutcome::Started { .. }
    ));
    lease
}

#[tokio::test(start_paused = true)]
async fn a_dead_nodes_run_of_a_removed_job_is_closed() {
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let job = Job::builder("report", "h", Schedule::once(at("2026-01-01T00:00:00Z")))
        .build()
        .unwrap();
    store
        .upsert(&job, Some(at("2026-01-01T00:00:00Z")))
        .await
        .unwrap();
    ghost_started(&store, &locks).await;
    store
        .remove(&jobwheel::JobId::new("report").unwrap())
        .await
        .unwrap();
    let (log, h) = start_recording(&store, locks, &clock).await;
    advance(Duration::from_secs(60)).await;
    let runs = runs_of(&store, "report").await;
    assert_eq!(
        runs[0].status,
        RunStatus::Lost,
        "the orphan is closed, not re-listed forever"
    );
    assert!(store.orphaned_runs(10).await.unwrap().is_empty());
    assert!(log.all().is_empty(), "nothing to retry for a removed job");
    h.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_dead_nodes_run_is_recorded_lost_and_retried() {
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let retry = RetryPolicy::new(3, Duration::from_secs(60), Duration::from_secs(3600)).unwrap();
    let job = Job::builder("report", "h", Schedule::once(at("2026-01-01T00:00:00Z")))
        .retry(retry)
        .build()
        .unwrap();
    store
        .upsert(&job, Some(at("2026-01-01T00:00:00Z")))
        .await
        .unwrap();
    let lease = ghost_started(&store, &locks).await;

    let (log, h) = start_recording(&store, locks.clone(), &clock).await;
    advance(Duration::from_secs(29)).await;
    assert_eq!(
        runs_of(&store, "report").await[0].status,
        RunStatus::Running,
        "not lost while its node may be alive"
    );
    advance(Duration::from_secs(20)).await;
    let runs = runs_of(&store, "report").await;
    assert_eq!(
        runs[0].status,
        RunStatus::Lost,
        "silent for 3 beats and its lease expired: lost"
    );
    assert!(runs[0].will_retry);
    assert!(
        runs.len() >= 2
            && runs[1].fire_at == runs[0].fire_at
            && runs[1].trigger == jobwheel::TriggerKind::Retry
            && runs[1].attempt == 2
            && runs[1].started_at.duration_since(runs[0].ended_at.unwrap())
                <= Duration::from_secs(2),
        "the lost fire runs again at once, as the same fire: {runs:?}"
    );
    assert_eq!(h.scheduler().metrics().lost_recovered, 1);
    let lost_alarms: Vec<_> = store
        .alarms(&jobwheel::AlarmQuery::new(100))
        .await
        .unwrap()
        .into_iter()
        .filter(|a| a.event.kind == AlarmKind::Lost)
        .collect();
    assert_eq!(lost_alarms.len(), 1, "a lost alarm is raised");
    let rec = store
        .get(&jobwheel::JobId::new("report").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(
        rec.last_token > lease.token,
        "the takeover fenced the dead node out"
    );
    let stale = jobwheel::store::FinishRun {
        run_id: runs[0].id,
        job_id: rec.job.id().clone(),
        token: lease.token,
        takeover: false,
        status: RunStatus::Succeeded,
        error: None,
        will_retry: false,
        executor: None,
        version: 1,
        next: None,
        alarms: vec![],
        releases: vec![],
        lease: jobwheel::store::LeaseEnd::Untouched,
    };
    assert!(
        matches!(
            store.finish_runs(&[stale]).await.unwrap()[0],
            jobwheel::store::FinishOutcome::Refused(_)
        ),
        "the dead node's late result is refused"
    );
    advance(Duration::from_secs(90)).await;
    let seen = log.of("report");
    assert_eq!(seen.len(), 1, "retried once, by the live node");
    assert_eq!((seen[0].attempt, seen[0].trigger), (2, TriggerKind::Retry));
    h.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_dead_nodes_manual_run_is_retried_with_the_payload_it_was_given() {
    let (store, locks, _clock) = backend("2026-01-01T00:00:00Z");
    let own = serde_json::json!({"own": true});
    let over = serde_json::json!({"date": "2025-12-31", "rerun": true});
    let job = Job::builder(
        "report",
        "h",
        Schedule::every(Duration::from_secs(3600)).unwrap(),
    )
    .payload(own.clone())
    .retry(RetryPolicy::new(3, Duration::from_secs(60), Duration::from_secs(3600)).unwrap())
    .build()
    .unwrap();
    let base = at("2026-01-01T00:00:00Z");
    store
        .upsert(&job, Some(base + Duration::from_secs(3600)))
        .await
        .unwrap();
    let id = jobwheel::JobId::new("report").unwrap();
    store.trigger(&id, base, Some(&over)).await.unwrap();
    ghost_started_with(&store, &locks, TriggerKind::Manual, Some(over.clone())).await;

    let seen: Arc<Mutex<Vec<(TriggerKind, u32, serde_json::Value)>>> = Arc::default();
    let log = seen.clone();
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("h", move |ctx: JobContext| {
            log.lock()
                .unwrap()
                .push((ctx.trigger, ctx.attempt, ctx.payload().clone()));
            async { Ok::<(), JobError>(()) }
        })
        .config(config("n1"))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    advance(Duration::from_secs(3700)).await;
    h.shutdown().await;
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (TriggerKind::Retry, 2, over.clone()),
            (TriggerKind::Schedule, 1, own),
        ],
        "the lost manual fire runs again with its payload; the schedule with the job's"
    );
    let runs = runs_of(&store, "report").await;
    assert_eq!(
        runs.iter()
            .map(|r| (r.status, r.payload().cloned()))
            .collect::<Vec<_>>(),
        [
            (RunStatus::Lost, Some(over.clone())),
            (RunStatus::Succeeded, Some(over)),
            (RunStatus::Succeeded, None),
        ]
    );
}
