use super::unique;
use crate::error::Error;
use crate::job::{Job, JobId};
use crate::policy::AlarmKind;
use crate::record::*;
use crate::schedule::Schedule;
use crate::store::JobsExt as _;
use crate::store::{AlarmClaim, AlarmQuery, DueQuery, JobQuery, JobStore, RunQuery};
use crate::time::Timestamp;
use std::time::Duration;

pub(super) const DAY: Duration = Duration::from_secs(86_400);

pub(super) fn job(id: &str) -> Job {
    Job::builder(
        id,
        "noop",
        Schedule::every(Duration::from_secs(60)).unwrap(),
    )
    .build()
    .expect("valid test job")
}

pub(super) fn jid(id: &str) -> JobId {
    JobId::new(id).unwrap()
}

/// An instant a thousand days before the store's now: fires there come first.
pub(super) async fn long_ago(store: &dyn JobStore) -> Timestamp {
    store.now().await.expect("now") - DAY * 1000
}

pub(super) fn start_req(id: &str, fire_at: Timestamp, version: u64, token: u64) -> StartRun {
    StartRun {
        job_id: jid(id),
        fire_at,
        version,
        token,
        node: "node-a".into(),
        attempt: 1,
        trigger: TriggerKind::Schedule,
        covers: None,
        context: FireContext::default(),
    }
}

/// A failure alarm event of run `run` of job `id`, fired at `t0`.
pub(super) fn failure_event(id: &str, run: RunId, t0: Timestamp) -> AlarmEvent {
    AlarmEvent {
        kind: AlarmKind::Failure,
        job_id: jid(id),
        handler: "noop".into(),
        run_id: Some(run),
        fire_at: t0,
        zone: "UTC".into(),
        attempt: 1,
        max_attempts: 3,
        node: "node-a".into(),
        duration_ms: Some(5),
        error: Some("boom".into()),
        will_retry: true,
        next_fire_at: Some(t0 + Duration::from_secs(60)),
        recipients: vec!["ops@example.com".into()],
        occurred_at: t0,
        suppressed: 0,
        covers: None,
        blocked: Vec::new(),
        waiting_for: Vec::new(),
    }
}

pub(super) fn finish_req(
    run_id: RunId,
    id: &str,
    token: u64,
    status: RunStatus,
    next: Option<Timestamp>,
) -> FinishRun {
    FinishRun {
        run_id,
        job_id: jid(id),
        token,
        takeover: false,
        status,
        error: status.is_failure().then(|| "boom".to_string()),
        will_retry: false,
        executor: None,
        version: 1,
        next: next.map(FireState::scheduled),
        alarms: Vec::new(),
        releases: Vec::new(),
        lease: crate::record::LeaseEnd::Untouched,
    }
}

pub(super) async fn start_one(store: &dyn JobStore, req: StartRun) -> StartOutcome {
    let mut got = store.start_runs(&[req]).await.expect("start_runs");
    assert_eq!(got.len(), 1, "start_runs returns one outcome per item");
    got.pop().unwrap()
}

pub(super) async fn started(store: &dyn JobStore, req: StartRun) -> RunId {
    match start_one(store, req.clone()).await {
        StartOutcome::Started { run_id, .. } => run_id,
        other => panic!("start of {req:?} should succeed, got {other:?}"),
    }
}

pub(super) async fn finish_one(store: &dyn JobStore, req: FinishRun) -> FinishOutcome {
    let mut got = store.finish_runs(&[req]).await.expect("finish_runs");
    assert_eq!(got.len(), 1, "finish_runs returns one outcome per item");
    got.pop().unwrap()
}

pub(super) async fn record(store: &dyn JobStore, id: &str) -> JobRecord {
    store.get(&jid(id)).await.expect("get").expect("job exists")
}

pub(super) async fn run_of(store: &dyn JobStore, id: &str, run: RunId) -> RunRecord {
    let q = RunQuery::new().job(jid(id)).limit(1000);
    store
        .runs(&q)
        .await
        .expect("runs")
        .into_iter()
        .find(|r| r.id == run)
        .unwrap_or_else(|| panic!("run {run:?} of {id} is in the log"))
}

pub(super) async fn cleanup(store: &dyn JobStore, ids: &[String]) {
    for id in ids {
        store.remove(&jid(id)).await.expect("remove");
    }
}

/// Upsert is idempotent, bumps versions on change, and get/list/remove agree.
pub async fn upsert_get_list_remove(store: &dyn JobStore) {
    let p = unique("upsert");
    let ids: Vec<String> = (0..3).map(|i| format!("{p}-{i}")).collect();
    let t0 = long_ago(store).await;
    for id in ids.iter().rev() {
        assert_eq!(
            store.upsert(&job(id), Some(t0)).await.unwrap(),
            UpsertOutcome::Created
        );
    }
    let r = record(store, &ids[0]).await;
    assert_eq!(*r.job, job(&ids[0]), "get returns the stored definition");
    assert_eq!(
        (r.version, r.next_fire_at(), r.attempt(), r.running),
        (1, Some(t0), 0, None)
    );
    assert_eq!(r.next_trigger(), TriggerKind::Schedule);
    let same = store.upsert(&job(&ids[0]), Some(t0 + DAY)).await.unwrap();
    assert_eq!(
        same,
        UpsertOutcome::Unchanged,
        "an identical upsert changes nothing"
    );
    assert_eq!(
        record(store, &ids[0]).await.next_fire_at(),
        Some(t0),
        "unchanged keeps state"
    );
    let changed = job(&ids[0])
        .to_builder()
        .payload(serde_json::json!({"v": 2}))
        .build()
        .unwrap();
    assert_eq!(
        store.upsert(&changed, Some(t0 + DAY)).await.unwrap(),
        UpsertOutcome::Updated
    );
    let r = record(store, &ids[0]).await;
    assert_eq!(
        (r.version, r.next_fire_at()),
        (2, Some(t0 + DAY)),
        "a change bumps version and state"
    );
    assert_eq!(r.job.payload(), &serde_json::json!({"v": 2}));

    let listed: Vec<String> = store
        .list(&JobQuery::new(100_000))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|r| r.job.id().to_string())
        .filter(|id| id.starts_with(&p))
        .collect();
    assert_eq!(listed, ids, "list is ordered by id");
    let after: Vec<String> = store
        .list(&JobQuery::new(2).after(Some(jid(&ids[0]))))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|r| r.job.id().to_string())
        .collect();
    assert_eq!(after.len(), 2, "list honours its limit");
    assert!(
        after.iter().all(|id| id.as_str() > ids[0].as_str()),
        "list pages after an id"
    );
    assert_eq!(after[0], ids[1]);

    assert!(store.remove(&jid(&ids[0])).await.unwrap());
    assert!(
        !store.remove(&jid(&ids[0])).await.unwrap(),
        "removing twice reports false"
    );
    assert!(store.get(&jid(&ids[0])).await.unwrap().is_none());
    cleanup(store, &ids[1..]).await;
}

/// Operations on a missing job report `NotFound`.
pub async fn refuses_missing_jobs(store: &dyn JobStore) {
    let id = jid(&unique("missing"));
    let now = store.now().await.unwrap();
    assert!(matches!(
        store.set_enabled(&id, false, None).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.trigger(&id, now, None).await,
        Err(Error::NotFound { .. })
    ));
    assert!(store.get(&id).await.unwrap().is_none());
}

/// `start_runs` writes only when every condition holds, item by item.
pub async fn conditional_start(store: &dyn JobStore) {
    let p = unique("start");
    let t0 = long_ago(store).await;
    let (a, b, c) = (format!("{p}-a"), format!("{p}-b"), format!("{p}-c"));
    for id in [&a, &b, &c] {
        store.upsert(&job(id), Some(t0)).await.unwrap();
    }
    store.set_enabled(&jid(&c), false, None).await.unwrap();
    let missing = format!("{p}-missing");
    let got = store
        .start_runs(&[
            start_req(&a, t0, 2, 1),
            start_req(&a, t0 + DAY, 1, 1),
            start_req(&a, t0, 1, 1),
            start_req(&a, t0, 1, 1),
            start_req(&c, t0, 2, 1),
            start_req(&missing, t0, 1, 1),
            start_req(&b, t0, 1, 7),
        ])
        .await
        .unwrap();
    assert_eq!(got.len(), 7);
    assert_eq!(
        got[0],
        StartOutcome::Refused(StartRefusal::Changed),
        "wrong version"
    );
    assert_eq!(
        got[1],
        StartOutcome::Refused(StartRefusal::NotDue),
        "wrong fire_at"
    );
    let StartOutcome::Started { run_id, started_at } = got[2] else {
        panic!("a start meeting every condition must succeed: {:?}", got[2]);
    };
    assert_eq!(
        got[3],
        StartOutcome::Refused(StartRefusal::Running),
        "second start of one fire"
    );
    assert_eq!(
        got[4],
        StartOutcome::Refused(StartRefusal::Disabled),
        "paused job"
    );
    assert_eq!(
        got[5],
        StartOutcome::Refused(StartRefusal::NotFound),
        "missing job"
    );
    assert!(
        matches!(got[6], StartOutcome::Started { .. }),
        "items are independent"
    );

    let r = record(store, &a).await;
    assert_eq!((r.running, r.last_token), (Some(run_id), 1));
    let run = run_of(store, &a, run_id).await;
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!((run.fire_at, run.attempt, run.token), (t0, 1, 1));
    assert_eq!(
        (run.node.as_str(), run.trigger),
        ("node-a", TriggerKind::Schedule)
    );
    assert_eq!((run.started_at, run.ended_at), (started_at, None));
    assert_eq!(run.executor, None, "a running run names no executor yet");
    let now = store.now().await.unwrap();
    assert!(
        started_at.duration_since(now) < Duration::from_secs(5),
        "started_at is the store's now"
    );
    assert!(
        now.duration_since(started_at) < Duration::from_secs(60),
        "started_at is the store's now"
    );
    cleanup(store, &[a, b, c]).await;
}

/// A finish writes the run, the job's next state and the alarm events together.
pub async fn finish_writes_state_run_and_alarms(store: &dyn JobStore) {
    let id = unique("finish");
    let t0 = long_ago(store).await;
    store.upsert(&job(&id), Some(t0)).await.unwrap();
    let run = started(store, start_req(&id, t0, 1, 3)).await;
    let event = failure_event(&id, run, t0);
    let mut req = finish_req(
        run,
        &id,
        3,
        RunStatus::Failed,
        Some(t0 + Duration::from_secs(60)),
    );
    req.will_retry = true;
    req.next.as_mut().expect("a next fire").trigger = TriggerKind::Retry;
    req.next.as_mut().expect("a next fire").attempt = 1;
    req.alarms = vec![event.clone()];
    req.executor = Some("10.0.0.7:9999, [::1]:9998".into());
    let out = finish_one(store, req.clone()).await;
    let FinishOutcome::Finished {
        ended_at,
        rescheduled,
    } = out
    else {
        panic!("finish with the run's token must succeed: {out:?}");
    };
    assert!(
        rescheduled,
        "an unchanged job takes the finish's next state"
    );
    let r = record(store, &id).await;
    assert_eq!(r.running, None, "finish clears the running run");
    assert_eq!(r.next_fire_at(), Some(t0 + Duration::from_secs(60)));
    assert_eq!((r.next_trigger(), r.attempt()), (TriggerKind::Retry, 1));
    let rec = run_of(store, &id, run).await;
    assert_eq!(rec.status, RunStatus::Failed);
    assert_eq!((rec.error.as_deref(), rec.will_retry), (Some("boom"), true));
    assert_eq!(rec.ended_at, Some(ended_at));
    assert_eq!(
        rec.executor.as_deref(),
        Some("10.0.0.7:9999, [::1]:9998"),
        "the finish records the executor instance"
    );
    assert!(rec.duration().is_some());
    let pending = store
        .alarms(&AlarmQuery::new(100_000).status(Some(AlarmStatus::Pending)))
        .await
        .unwrap();
    let mine: Vec<&AlarmRecord> = pending
        .iter()
        .filter(|a| a.event.job_id.as_str() == id)
        .collect();
    assert_eq!(mine.len(), 1, "the finish's alarm is in the outbox");
    assert_eq!(mine[0].event, event);
    assert_eq!(
        finish_one(store, req).await,
        FinishOutcome::Refused(FinishRefusal::NotRunning),
        "a run finishes once"
    );
    let ghost = finish_req(RunId(i64::MAX - 7), &id, 3, RunStatus::Succeeded, None);
    assert_eq!(
        finish_one(store, ghost).await,
        FinishOutcome::Refused(FinishRefusal::NotFound)
    );
    let owner = unique("drain");
    for a in store
        .claim_alarms(&AlarmClaim::new(&owner, 100_000, DAY))
        .await
        .unwrap()
        .items
    {
        store
            .complete_alarm(a.id, &owner, &AlarmDelivery::NotNeeded)
            .await
            .unwrap();
    }
    cleanup(store, &[id]).await;
}

/// An upsert, trigger or removal during a run wins over the run's next state.
pub async fn finish_yields_to_changes_during_the_run(store: &dyn JobStore) {
    let p = unique("yield");
    let t0 = long_ago(store).await;
    let (a, b, c) = (format!("{p}-a"), format!("{p}-b"), format!("{p}-c"));
    for id in [&a, &b, &c] {
        store.upsert(&job(id), Some(t0)).await.unwrap();
    }
    let (ra, rb, rc) = (
        started(store, start_req(&a, t0, 1, 1)).await,
        started(store, start_req(&b, t0, 1, 1)).await,
        started(store, start_req(&c, t0, 1, 1)).await,
    );
    let changed = job(&a)
        .to_builder()
        .payload(serde_json::json!(1))
        .build()
        .unwrap();
    assert_eq!(
        store.upsert(&changed, Some(t0 + DAY)).await.unwrap(),
        UpsertOutcome::Updated
    );
    assert!(
        store
            .due(&DueQuery::new(t0 + DAY * 2, 100_000))
            .await
            .unwrap()
            .items
            .iter()
            .all(|f| f.job_id.as_str() != a),
        "a running job is never due"
    );
    store
        .trigger(&jid(&b), t0 + Duration::from_secs(5), None)
        .await
        .unwrap();
    store.remove(&jid(&c)).await.unwrap();
    let next = Some(t0 + Duration::from_secs(60));
    let outs = store
        .finish_runs(&[
            finish_req(ra, &a, 1, RunStatus::Succeeded, next),
            finish_req(rb, &b, 1, RunStatus::Succeeded, next),
            finish_req(rc, &c, 1, RunStatus::Succeeded, next),
        ])
        .await
        .unwrap();
    for (out, what) in outs.iter().zip(["upserted", "triggered", "removed"]) {
        assert!(
            matches!(
                out,
                FinishOutcome::Finished {
                    rescheduled: false,
                    ..
                }
            ),
            "finish of a job {what} during its run records the run but keeps the new state: {out:?}"
        );
    }
    let ra_rec = record(store, &a).await;
    assert_eq!(
        (ra_rec.next_fire_at(), ra_rec.version, ra_rec.running),
        (Some(t0 + DAY), 2, None)
    );
    let rb_rec = record(store, &b).await;
    assert_eq!(rb_rec.next_fire_at(), Some(t0 + Duration::from_secs(5)));
    assert_eq!(rb_rec.next_trigger(), TriggerKind::Manual);
    assert_eq!(
        run_of(store, &c, rc).await.status,
        RunStatus::Succeeded,
        "a removed job's run is still recorded"
    );
    cleanup(store, &[a, b]).await;
}

/// Stale tokens are refused on start and finish; a takeover fences the old holder.
pub async fn fencing(store: &dyn JobStore) {
    let id = unique("fence");
    let t0 = long_ago(store).await;
    let t1 = t0 + Duration::from_secs(60);
    store.upsert(&job(&id), Some(t0)).await.unwrap();
    let r1 = started(store, start_req(&id, t0, 1, 5)).await;
    let out = finish_one(
        store,
        finish_req(r1, &id, 5, RunStatus::Succeeded, Some(t1)),
    )
    .await;
    assert!(matches!(
        out,
        FinishOutcome::Finished {
            rescheduled: true,
            ..
        }
    ));
    assert_eq!(
        start_one(store, start_req(&id, t1, 1, 3)).await,
        StartOutcome::Refused(StartRefusal::Fenced { current: 5 }),
        "a start with an older token than the job's last is refused"
    );
    let r2 = started(store, start_req(&id, t1, 1, 7)).await;
    let stale = finish_req(r2, &id, 6, RunStatus::Succeeded, None);
    assert_eq!(
        finish_one(store, stale).await,
        FinishOutcome::Refused(FinishRefusal::Fenced { current: 7 }),
        "a finish with a token other than the run's is refused"
    );
    let foreign = finish_req(r2, &id, 9, RunStatus::Succeeded, None);
    assert_eq!(
        finish_one(store, foreign).await,
        FinishOutcome::Refused(FinishRefusal::Fenced { current: 7 }),
        "a finish outside a takeover must carry the run's own token"
    );
    let mut low_takeover = finish_req(r2, &id, 6, RunStatus::Lost, Some(t1));
    low_takeover.takeover = true;
    assert!(
        matches!(
            finish_one(store, low_takeover).await,
            FinishOutcome::Refused(FinishRefusal::Fenced { .. })
        ),
        "a takeover needs a token at least the job's last"
    );
    let mut takeover = finish_req(r2, &id, 8, RunStatus::Lost, Some(t1));
    takeover.takeover = true;
    assert!(
        matches!(
            finish_one(store, takeover).await,
            FinishOutcome::Finished { .. }
        ),
        "a newer token takes over a run"
    );
    assert_eq!(
        record(store, &id).await.last_token,
        8,
        "a takeover raises the last token"
    );
    assert_eq!(run_of(store, &id, r2).await.status, RunStatus::Lost);
    let late = finish_req(r2, &id, 7, RunStatus::Succeeded, None);
    assert!(
        matches!(finish_one(store, late).await, FinishOutcome::Refused(_)),
        "the old holder's result is refused after a takeover"
    );
    assert_eq!(
        run_of(store, &id, r2).await.status,
        RunStatus::Lost,
        "a refused finish writes nothing"
    );
    assert_eq!(
        start_one(store, start_req(&id, t1, 1, 7)).await,
        StartOutcome::Refused(StartRefusal::Fenced { current: 8 }),
        "the old holder cannot start again either"
    );
    cleanup(store, &[id]).await;
}
