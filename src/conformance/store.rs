use super::unique;
use crate::error::Error;
use crate::job::{Job, JobId};
use crate::policy::AlarmKind;
use crate::record::*;
use crate::schedule::Schedule;
use crate::store::JobStore;
use crate::time::Timestamp;
use std::time::Duration;

const DAY: Duration = Duration::from_secs(86_400);

fn job(id: &str) -> Job {
    Job::builder(
        id,
        "noop",
        Schedule::every(Duration::from_secs(60)).unwrap(),
    )
    .build()
    .expect("valid test job")
}

fn jid(id: &str) -> JobId {
    JobId::new(id).unwrap()
}

/// An instant a thousand days before the store's now: fires there come first.
async fn long_ago(store: &dyn JobStore) -> Timestamp {
    store.now().await.expect("now") - DAY * 1000
}

fn start_req(id: &str, fire_at: Timestamp, version: u64, token: u64) -> StartRun {
    StartRun {
        job_id: jid(id),
        fire_at,
        version,
        token,
        node: "node-a".into(),
        attempt: 1,
        trigger: TriggerKind::Schedule,
    }
}

fn finish_req(
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
        version: 1,
        next: NextFire {
            at: next,
            trigger: TriggerKind::Schedule,
            attempt: 0,
        },
        alarms: Vec::new(),
    }
}

async fn start_one(store: &dyn JobStore, req: StartRun) -> StartOutcome {
    let mut got = store.start_runs(&[req]).await.expect("start_runs");
    assert_eq!(got.len(), 1, "start_runs returns one outcome per item");
    got.pop().unwrap()
}

async fn started(store: &dyn JobStore, req: StartRun) -> RunId {
    match start_one(store, req.clone()).await {
        StartOutcome::Started { run_id, .. } => run_id,
        other => panic!("start of {req:?} should succeed, got {other:?}"),
    }
}

async fn finish_one(store: &dyn JobStore, req: FinishRun) -> FinishOutcome {
    let mut got = store.finish_runs(&[req]).await.expect("finish_runs");
    assert_eq!(got.len(), 1, "finish_runs returns one outcome per item");
    got.pop().unwrap()
}

async fn record(store: &dyn JobStore, id: &str) -> JobRecord {
    store.get(&jid(id)).await.expect("get").expect("job exists")
}

async fn run_of(store: &dyn JobStore, id: &str, run: RunId) -> RunRecord {
    let q = RunQuery {
        job_id: Some(jid(id)),
        limit: 1000,
        ..RunQuery::default()
    };
    store
        .runs(&q)
        .await
        .expect("runs")
        .into_iter()
        .find(|r| r.id == run)
        .unwrap_or_else(|| panic!("run {run:?} of {id} is in the log"))
}

async fn cleanup(store: &dyn JobStore, ids: &[String]) {
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
        (r.version, r.next_fire_at, r.attempt, r.running),
        (1, Some(t0), 0, None)
    );
    assert_eq!(r.next_trigger, TriggerKind::Schedule);
    let same = store.upsert(&job(&ids[0]), Some(t0 + DAY)).await.unwrap();
    assert_eq!(
        same,
        UpsertOutcome::Unchanged,
        "an identical upsert changes nothing"
    );
    assert_eq!(
        record(store, &ids[0]).await.next_fire_at,
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
        (r.version, r.next_fire_at),
        (2, Some(t0 + DAY)),
        "a change bumps version and state"
    );
    assert_eq!(r.job.payload(), &serde_json::json!({"v": 2}));

    let listed: Vec<String> = store
        .list(None, 100_000)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.job.id().to_string())
        .filter(|id| id.starts_with(&p))
        .collect();
    assert_eq!(listed, ids, "list is ordered by id");
    let after: Vec<String> = store
        .list(Some(&jid(&ids[0])), 2)
        .await
        .unwrap()
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
        store.trigger(&id, now).await,
        Err(Error::NotFound { .. })
    ));
    assert!(store.get(&id).await.unwrap().is_none());
}

/// `due` returns fires up to `until`, oldest first, at most `limit`, skipping paused
/// and running jobs and jobs with nothing to fire.
pub async fn due_ordering_and_limits(store: &dyn JobStore) {
    let p = unique("due");
    let t0 = long_ago(store).await;
    let offsets = [30u64, 10, 50, 20, 40];
    let ids: Vec<String> = offsets.iter().map(|o| format!("{p}-{o}")).collect();
    for (id, o) in ids.iter().zip(offsets) {
        store
            .upsert(&job(id), Some(t0 + Duration::from_secs(o)))
            .await
            .unwrap();
    }
    let idle = format!("{p}-idle");
    store.upsert(&job(&idle), None).await.unwrap();
    let mine = |fires: Vec<DueFire>| -> Vec<(String, Timestamp)> {
        fires
            .into_iter()
            .filter(|f| f.job_id.as_str().starts_with(&p))
            .map(|f| (f.job_id.to_string(), f.fire_at))
            .collect()
    };
    let want = |os: &[u64]| -> Vec<(String, Timestamp)> {
        os.iter()
            .map(|o| (format!("{p}-{o}"), t0 + Duration::from_secs(*o)))
            .collect()
    };
    let got = mine(store.due(t0 + Duration::from_secs(45), 1000).await.unwrap());
    assert_eq!(
        got,
        want(&[10, 20, 30, 40]),
        "due is ordered by fire_at and stops at until"
    );
    let got = store.due(t0 + Duration::from_secs(1000), 2).await.unwrap();
    assert_eq!(got.len(), 2, "due honours its limit");
    assert_eq!(
        mine(got),
        want(&[10, 20]),
        "the limit keeps the oldest fires"
    );
    let first = store.due(t0 + Duration::from_secs(10), 10).await.unwrap();
    let f = first
        .iter()
        .find(|f| f.job_id.as_str() == format!("{p}-10"))
        .expect("due fire");
    assert_eq!(
        (f.version, f.attempt, f.trigger),
        (1, 0, TriggerKind::Schedule)
    );

    store
        .set_enabled(&jid(&format!("{p}-10")), false, None)
        .await
        .unwrap();
    let run = started(
        store,
        start_req(&format!("{p}-20"), t0 + Duration::from_secs(20), 1, 1),
    )
    .await;
    let got = mine(
        store
            .due(t0 + Duration::from_secs(1000), 1000)
            .await
            .unwrap(),
    );
    assert_eq!(
        got,
        want(&[30, 40, 50]),
        "paused and running jobs are not due"
    );
    finish_one(
        store,
        finish_req(run, &format!("{p}-20"), 1, RunStatus::Succeeded, None),
    )
    .await;
    let mut all = ids.clone();
    all.push(idle);
    cleanup(store, &all).await;
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
    let event = AlarmEvent {
        kind: AlarmKind::Failure,
        job_id: jid(&id),
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
    };
    let mut req = finish_req(
        run,
        &id,
        3,
        RunStatus::Failed,
        Some(t0 + Duration::from_secs(60)),
    );
    req.will_retry = true;
    req.next.trigger = TriggerKind::Retry;
    req.next.attempt = 1;
    req.alarms = vec![event.clone()];
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
    assert_eq!(r.next_fire_at, Some(t0 + Duration::from_secs(60)));
    assert_eq!((r.next_trigger, r.attempt), (TriggerKind::Retry, 1));
    let rec = run_of(store, &id, run).await;
    assert_eq!(rec.status, RunStatus::Failed);
    assert_eq!((rec.error.as_deref(), rec.will_retry), (Some("boom"), true));
    assert_eq!(rec.ended_at, Some(ended_at));
    assert!(rec.duration().is_some());
    let pending = store
        .alarms(Some(AlarmStatus::Pending), 100_000)
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
    for a in store.claim_alarms(&owner, 100_000, DAY).await.unwrap() {
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
            .due(t0 + DAY * 2, 100_000)
            .await
            .unwrap()
            .iter()
            .all(|f| f.job_id.as_str() != a),
        "a running job is never due"
    );
    store
        .trigger(&jid(&b), t0 + Duration::from_secs(5))
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
        (ra_rec.next_fire_at, ra_rec.version, ra_rec.running),
        (Some(t0 + DAY), 2, None)
    );
    let rb_rec = record(store, &b).await;
    assert_eq!(rb_rec.next_fire_at, Some(t0 + Duration::from_secs(5)));
    assert_eq!(rb_rec.next_trigger, TriggerKind::Manual);
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

/// Run-log queries filter by job, status and time, page, and return newest first.
pub async fn run_log_queries(store: &dyn JobStore) {
    let p = unique("log");
    let t0 = long_ago(store).await;
    let (a, b) = (format!("{p}-a"), format!("{p}-b"));
    let statuses = [
        RunStatus::Succeeded,
        RunStatus::Failed,
        RunStatus::Succeeded,
        RunStatus::TimedOut,
    ];
    let mut runs = Vec::new();
    for (i, status) in statuses.iter().enumerate() {
        for id in [&a, &b] {
            let fire = t0 + Duration::from_secs(i as u64);
            store.upsert(&job(id), Some(fire)).await.unwrap();
            if i > 0 {
                store.trigger(&jid(id), fire).await.unwrap();
            }
            let token = i as u64 + 1;
            let run = started(store, start_req(id, fire, 1, token)).await;
            finish_one(store, finish_req(run, id, token, *status, None)).await;
            runs.push((id.clone(), run, *status));
        }
    }
    let q = |job: &str| RunQuery {
        job_id: Some(jid(job)),
        limit: 1000,
        ..RunQuery::default()
    };
    let all_a = store.runs(&q(&a)).await.unwrap();
    let want_a: Vec<RunId> = runs
        .iter()
        .rev()
        .filter(|r| r.0 == a)
        .map(|r| r.1)
        .collect();
    assert_eq!(
        all_a.iter().map(|r| r.id).collect::<Vec<_>>(),
        want_a,
        "by job, newest first"
    );
    let failed = store
        .runs(&RunQuery {
            status: Some(RunStatus::Failed),
            ..q(&a)
        })
        .await
        .unwrap();
    assert_eq!(failed.len(), 1, "by status");
    assert_eq!(failed[0].status, RunStatus::Failed);
    let limited = store.runs(&RunQuery { limit: 2, ..q(&b) }).await.unwrap();
    assert_eq!(limited.len(), 2, "limit");
    let next_page = store
        .runs(&RunQuery {
            before: Some(limited[1].id),
            ..q(&b)
        })
        .await
        .unwrap();
    assert_eq!(next_page.len(), 2, "paging with before");
    assert!(next_page.iter().all(|r| r.id < limited[1].id));
    let pivot = all_a[1].started_at;
    let since = store
        .runs(&RunQuery {
            since: Some(pivot),
            ..q(&a)
        })
        .await
        .unwrap();
    let until = store
        .runs(&RunQuery {
            until: Some(pivot),
            ..q(&a)
        })
        .await
        .unwrap();
    assert_eq!(
        since.len() + until.len(),
        all_a.len(),
        "since and until split the log at an instant"
    );
    assert!(
        since.iter().all(|r| r.started_at >= pivot) && until.iter().all(|r| r.started_at < pivot)
    );
    assert!(
        since.iter().any(|r| r.id == all_a[1].id),
        "since is inclusive"
    );
    cleanup(store, &[a, b]).await;
}

/// `purge_runs` removes finished runs that ended before the cutoff, and only those.
pub async fn purge_runs(store: &dyn JobStore) {
    let id = unique("purge");
    let t0 = long_ago(store).await;
    store.upsert(&job(&id), Some(t0)).await.unwrap();
    let old = started(store, start_req(&id, t0, 1, 1)).await;
    finish_one(
        store,
        finish_req(old, &id, 1, RunStatus::Succeeded, Some(t0)),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    let cutoff = store.now().await.unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    let new = started(store, start_req(&id, t0, 1, 2)).await;
    finish_one(
        store,
        finish_req(new, &id, 2, RunStatus::Succeeded, Some(t0)),
    )
    .await;
    let running = started(store, start_req(&id, t0, 1, 3)).await;
    let n = store.purge_runs(cutoff).await.unwrap();
    assert!(n >= 1, "purge reports what it removed");
    let left: Vec<RunId> = store
        .runs(&RunQuery {
            job_id: Some(jid(&id)),
            ..RunQuery::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(
        left,
        [running, new],
        "runs ended after the cutoff and running runs stay"
    );
    finish_one(
        store,
        finish_req(running, &id, 3, RunStatus::Succeeded, None),
    )
    .await;
    cleanup(store, &[id]).await;
}

/// Daily stats count runs by status per UTC day of their start.
pub async fn daily_stats(store: &dyn JobStore) {
    let id = unique("stats");
    let t0 = long_ago(store).await;
    let today = store.now().await.unwrap().to_datetime().date_naive();
    let (from, to) = (today.pred_opt().unwrap(), today.succ_opt().unwrap());
    let sum = |days: Vec<DailyStats>| {
        days.into_iter().fold(DailyStats::default(), |mut acc, d| {
            assert!(
                d.day >= from && d.day <= to,
                "a day outside the range: {}",
                d.day
            );
            acc.total += d.total;
            acc.running += d.running;
            acc.succeeded += d.succeeded;
            acc.failed += d.failed;
            acc.misfired += d.misfired;
            acc.lost += d.lost;
            acc
        })
    };
    let before = sum(store.daily_stats(from, to).await.unwrap());
    store.upsert(&job(&id), Some(t0)).await.unwrap();
    for (token, status) in [
        (1, RunStatus::Succeeded),
        (2, RunStatus::Failed),
        (3, RunStatus::Misfired),
        (4, RunStatus::Lost),
    ] {
        let run = started(store, start_req(&id, t0, 1, token)).await;
        finish_one(store, finish_req(run, &id, token, status, Some(t0))).await;
    }
    let running = started(store, start_req(&id, t0, 1, 5)).await;
    let after = sum(store.daily_stats(from, to).await.unwrap());
    assert_eq!(after.total - before.total, 5, "stats count every run");
    assert_eq!(after.succeeded - before.succeeded, 1);
    assert_eq!(after.failed - before.failed, 1);
    assert_eq!(after.misfired - before.misfired, 1);
    assert_eq!(after.lost - before.lost, 1);
    assert_eq!(after.running - before.running, 1);
    let far = t0.to_datetime().date_naive();
    assert!(
        store
            .daily_stats(far, far)
            .await
            .unwrap()
            .iter()
            .all(|d| d.day == far)
    );
    finish_one(
        store,
        finish_req(running, &id, 5, RunStatus::Succeeded, None),
    )
    .await;
    cleanup(store, &[id]).await;
}

fn node(id: &str) -> NodeInfo {
    NodeInfo {
        node_id: id.to_string(),
        host: "localhost".into(),
        pid: 1,
        version: env!("CARGO_PKG_VERSION").into(),
        started_at: Timestamp::EPOCH,
        capacity: 4,
    }
}

/// Heartbeats use the store's clock; silent nodes are reaped; their runs are orphaned.
pub async fn heartbeats_and_dead_nodes(store: &dyn JobStore) {
    let p = unique("node");
    let (a, b) = (format!("{p}-a"), format!("{p}-b"));
    let beat_a = store.heartbeat(&node(&a)).await.unwrap();
    let nodes = store.nodes().await.unwrap();
    let rec = nodes
        .iter()
        .find(|n| n.info.node_id == a)
        .expect("a heartbeat registers the node");
    assert_eq!(
        rec.last_beat, beat_a,
        "last_beat is the instant heartbeat returned"
    );
    assert_eq!(rec.info, node(&a));
    let now = store.now().await.unwrap();
    assert!(now >= beat_a && now.duration_since(beat_a) < Duration::from_secs(60));

    let t0 = long_ago(store).await;
    let (ja, jb) = (format!("{p}-job-a"), format!("{p}-job-b"));
    store.upsert(&job(&ja), Some(t0)).await.unwrap();
    store.upsert(&job(&jb), Some(t0)).await.unwrap();
    let run_a = started(
        store,
        StartRun {
            node: a.clone(),
            ..start_req(&ja, t0, 1, 1)
        },
    )
    .await;
    let run_b = started(
        store,
        StartRun {
            node: b.clone(),
            ..start_req(&jb, t0, 1, 1)
        },
    )
    .await;

    tokio::time::sleep(Duration::from_millis(400)).await;
    store.heartbeat(&node(&b)).await.unwrap();
    let reaped = store.reap_nodes(Duration::from_millis(200)).await.unwrap();
    assert!(
        reaped.contains(&a),
        "a node silent past the limit is reaped: {reaped:?}"
    );
    assert!(!reaped.contains(&b), "a node that just beat is not reaped");
    let ids: Vec<String> = store
        .nodes()
        .await
        .unwrap()
        .into_iter()
        .map(|n| n.info.node_id)
        .collect();
    assert!(!ids.contains(&a) && ids.contains(&b));
    let orphans: Vec<RunId> = store
        .orphaned_runs(100_000)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert!(
        orphans.contains(&run_a),
        "a running run of a reaped node is orphaned"
    );
    assert!(
        !orphans.contains(&run_b),
        "a running run of a live node is not orphaned"
    );

    assert!(store.deregister(&b).await.unwrap());
    assert!(!store.deregister(&b).await.unwrap());
    finish_one(store, finish_req(run_a, &ja, 1, RunStatus::Succeeded, None)).await;
    finish_one(store, finish_req(run_b, &jb, 1, RunStatus::Succeeded, None)).await;
    cleanup(store, &[ja, jb]).await;
}

fn alarm(job: &str, i: u32) -> AlarmEvent {
    AlarmEvent {
        kind: AlarmKind::FinalFailure,
        job_id: jid(job),
        handler: "noop".into(),
        run_id: None,
        fire_at: Timestamp::from_millis(i64::from(i) * 1000),
        zone: "UTC".into(),
        attempt: 3,
        max_attempts: 3,
        node: "node-a".into(),
        duration_ms: None,
        error: Some(format!("failure {i}")),
        will_retry: false,
        next_fire_at: None,
        recipients: Vec::new(),
        occurred_at: Timestamp::from_millis(i64::from(i)),
    }
}

/// Each alarm event is claimed by one claimer at a time; failures and lapsed claims
/// come back; completion is owner-checked.
pub async fn alarm_outbox_claimed_once(store: &dyn JobStore) {
    let job_id = unique("alarm");
    let events: Vec<AlarmEvent> = (0..12).map(|i| alarm(&job_id, i)).collect();
    let ids = store.enqueue_alarms(&events).await.unwrap();
    assert_eq!(ids.len(), 12);
    let mine = |recs: &[AlarmRecord]| -> Vec<AlarmId> {
        recs.iter()
            .filter(|r| r.event.job_id.as_str() == job_id)
            .map(|r| r.id)
            .collect()
    };
    let mut claimed: Vec<(String, AlarmRecord)> = Vec::new();
    for round in 0..10 {
        let owners: Vec<String> = (0..4).map(|i| format!("claimer-{round}-{i}")).collect();
        let claims =
            futures::future::join_all(owners.iter().map(|o| store.claim_alarms(o, 5, DAY))).await;
        let mut any = false;
        for (owner, got) in owners.iter().zip(claims) {
            for rec in got.unwrap() {
                any = true;
                if rec.event.job_id.as_str() == job_id {
                    assert_eq!(rec.status, AlarmStatus::Sending);
                    assert_eq!(rec.claimed_by.as_deref(), Some(owner.as_str()));
                    claimed.push((owner.clone(), rec));
                } else {
                    store
                        .complete_alarm(rec.id, owner, &AlarmDelivery::NotNeeded)
                        .await
                        .unwrap();
                }
            }
        }
        if !any {
            break;
        }
    }
    let mut got: Vec<AlarmId> = claimed.iter().map(|c| c.1.id).collect();
    got.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(got, want, "every event is claimed exactly once");
    assert_eq!(
        claimed[0].1.event,
        events[(ids.iter().position(|i| *i == claimed[0].1.id)).unwrap()]
    );
    assert!(
        mine(&store.claim_alarms("late", 100, DAY).await.unwrap()).is_empty(),
        "claimed events are not handed out again"
    );

    let now = store.now().await.unwrap();
    let (o0, r0) = &claimed[0];
    assert!(
        !store
            .complete_alarm(r0.id, "intruder", &AlarmDelivery::Sent)
            .await
            .unwrap(),
        "only the claimer completes"
    );
    assert!(
        store
            .complete_alarm(r0.id, o0, &AlarmDelivery::Sent)
            .await
            .unwrap()
    );
    let (o1, r1) = &claimed[1];
    let retry = AlarmDelivery::Failed {
        error: "smtp down".into(),
        retry_at: Some(now - Duration::from_secs(1)),
    };
    assert!(store.complete_alarm(r1.id, o1, &retry).await.unwrap());
    let (o2, r2) = &claimed[2];
    let dead = AlarmDelivery::Failed {
        error: "gave up".into(),
        retry_at: None,
    };
    assert!(store.complete_alarm(r2.id, o2, &dead).await.unwrap());
    let again = store.claim_alarms("retrier", 100, DAY).await.unwrap();
    assert_eq!(
        mine(&again),
        [r1.id],
        "a failed event comes back at its retry time, a given-up one never"
    );
    assert_eq!(
        again.iter().find(|r| r.id == r1.id).unwrap().attempts,
        2,
        "claims count attempts"
    );
    assert!(
        store
            .complete_alarm(r1.id, "retrier", &AlarmDelivery::Sent)
            .await
            .unwrap()
    );

    let (o3, r3) = &claimed[3];
    assert!(
        store
            .complete_alarm(
                r3.id,
                o3,
                &AlarmDelivery::Failed {
                    error: "x".into(),
                    retry_at: Some(now)
                }
            )
            .await
            .unwrap()
    );
    let short = store
        .claim_alarms("short", 100, Duration::from_millis(200))
        .await
        .unwrap();
    assert_eq!(mine(&short), [r3.id]);
    tokio::time::sleep(Duration::from_millis(450)).await;
    let lapsed = store.claim_alarms("taker", 100, DAY).await.unwrap();
    assert_eq!(mine(&lapsed), [r3.id], "a lapsed claim is claimable again");
    assert!(
        !store
            .complete_alarm(r3.id, "short", &AlarmDelivery::Sent)
            .await
            .unwrap(),
        "a lapsed claimer cannot complete"
    );
    assert!(
        store
            .complete_alarm(r3.id, "taker", &AlarmDelivery::Sent)
            .await
            .unwrap()
    );

    let sent = store
        .alarms(Some(AlarmStatus::Sent), 100_000)
        .await
        .unwrap();
    assert!(sent.iter().any(|a| a.id == r0.id) && sent.iter().any(|a| a.id == r1.id));
    let failed = store
        .alarms(Some(AlarmStatus::Failed), 100_000)
        .await
        .unwrap();
    let f = failed
        .iter()
        .find(|a| a.id == r2.id)
        .expect("given-up event stays failed");
    assert_eq!(
        (f.last_error.as_deref(), f.next_attempt_at),
        (Some("gave up"), None)
    );
    for (owner, rec) in &claimed[4..] {
        assert!(
            store
                .complete_alarm(rec.id, owner, &AlarmDelivery::NotNeeded)
                .await
                .unwrap()
        );
    }
    let not_needed = store
        .alarms(Some(AlarmStatus::NotNeeded), 100_000)
        .await
        .unwrap();
    assert_eq!(
        claimed[4..]
            .iter()
            .filter(|(_, r)| not_needed.iter().any(|a| a.id == r.id))
            .count(),
        8
    );
}
