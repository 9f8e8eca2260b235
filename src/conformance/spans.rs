//! Checks of what the misfire and retry policies keep in the store: a run's span of
//! covered fires, and where a job's schedule resumes after its retries.

use super::store::{
    cleanup, finish_one, finish_req, jid, job, long_ago, record, run_of, start_req, started,
};
use super::unique;
use crate::record::*;
use crate::store::JobsExt as _;
use crate::store::{DueQuery, JobStore};
use std::time::Duration;

/// A start's [`FireSpan`] is stored with the run; a run without one has none.
pub async fn runs_keep_their_misfire_span(store: &dyn JobStore) {
    let id = unique("span");
    let t0 = long_ago(store).await;
    let through = t0 + Duration::from_secs(600);
    store.upsert(&job(&id), Some(t0)).await.unwrap();
    let span = FireSpan {
        fires: 11,
        first: t0,
        through,
    };
    let mut req = start_req(&id, t0, 1, 1);
    req.trigger = TriggerKind::Misfire;
    req.covers = Some(span);
    let run = started(store, req).await;
    assert_eq!(
        run_of(store, &id, run).await.covers,
        Some(span),
        "a running misfire run shows the fires it stands for"
    );
    let next = t0 + Duration::from_secs(660);
    finish_one(
        store,
        finish_req(run, &id, 1, RunStatus::Succeeded, Some(next)),
    )
    .await;
    let done = run_of(store, &id, run).await;
    assert_eq!(done.covers, Some(span), "the finish keeps the span");
    assert_eq!(done.trigger, TriggerKind::Misfire);
    let plain = started(store, start_req(&id, next, 1, 1)).await;
    assert_eq!(
        run_of(store, &id, plain).await.covers,
        None,
        "a run without a span has none"
    );
    finish_one(store, finish_req(plain, &id, 1, RunStatus::Succeeded, None)).await;
    cleanup(store, &[id]).await;
}

/// A finish's `resume_after` is kept in the job and returned by `due`; an upsert, a
/// trigger and a resume each clear it.
pub async fn jobs_keep_where_their_schedule_resumes(store: &dyn JobStore) {
    let id = unique("resume");
    let t0 = long_ago(store).await;
    let retry_at = t0 + Duration::from_secs(90);
    store.upsert(&job(&id), Some(t0)).await.unwrap();
    let retry = |run, resume| {
        let mut req = finish_req(run, &id, 1, RunStatus::Failed, Some(retry_at));
        req.will_retry = true;
        req.next.as_mut().expect("a next fire").trigger = TriggerKind::Retry;
        req.next.as_mut().expect("a next fire").attempt = 1;
        req.next.as_mut().expect("a next fire").resume_after = resume;
        req
    };
    let run = started(store, start_req(&id, t0, 1, 1)).await;
    finish_one(store, retry(run, Some(t0))).await;
    let r = record(store, &id).await;
    assert_eq!(
        (r.next_fire_at(), r.next_trigger(), r.resume_after()),
        (Some(retry_at), TriggerKind::Retry, Some(t0)),
        "a retry keeps where the schedule resumes"
    );
    let due = store
        .due(&DueQuery::new(retry_at, 100_000))
        .await
        .unwrap()
        .items;
    let fire = due
        .iter()
        .find(|f| f.job_id == jid(&id))
        .expect("the retry is due");
    assert_eq!(fire.resume_after(), Some(t0), "due returns it");

    // A finish that returns to the schedule clears it.
    let mut req = start_req(&id, retry_at, 1, 1);
    (req.attempt, req.trigger) = (2, TriggerKind::Retry);
    let run = started(store, req).await;
    finish_one(
        store,
        finish_req(
            run,
            &id,
            1,
            RunStatus::Succeeded,
            Some(t0 + Duration::from_secs(120)),
        ),
    )
    .await;
    assert_eq!(record(store, &id).await.resume_after(), None);

    // Set again, then cleared by each operation that resets the scheduling state.
    for reset in ["trigger", "pause-resume", "upsert"] {
        let r = record(store, &id).await;
        let at = r.next_fire_at().expect("a next fire");
        let run = started(store, start_req(&id, at, r.version, 1)).await;
        let mut req = retry(run, Some(at));
        req.version = r.version;
        req.next.as_mut().expect("a next fire").at = at + Duration::from_secs(30);
        finish_one(store, req).await;
        assert_eq!(record(store, &id).await.resume_after(), Some(at));
        match reset {
            "trigger" => store.trigger(&jid(&id), at, None).await.unwrap(),
            "pause-resume" => {
                store.set_enabled(&jid(&id), false, None).await.unwrap();
                store.set_enabled(&jid(&id), true, Some(at)).await.unwrap();
            }
            _ => {
                let changed = crate::job::Job::builder(
                    &id,
                    "noop",
                    crate::schedule::Schedule::every(Duration::from_secs(30)).unwrap(),
                )
                .build()
                .unwrap();
                store.upsert(&changed, Some(at)).await.unwrap();
            }
        }
        let r = record(store, &id).await;
        assert_eq!(
            r.resume_after(),
            None,
            "{reset} clears where a retry resumes"
        );
        assert_eq!(r.attempt(), 0, "{reset} resets the attempt count");
    }
    cleanup(store, &[id]).await;
}
