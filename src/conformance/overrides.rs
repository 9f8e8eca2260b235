//! A manual trigger's payload override: kept with the job until its fire is done,
//! returned with the due fire, recorded with the run, cleared by what replaces it.

use super::store::{
    DAY, cleanup, finish_one, finish_req, jid, job, long_ago, record, run_of, start_req, started,
};
use super::unique;
use crate::record::*;
use crate::store::JobsExt as _;
use crate::store::{DueQuery, JobStore};
use crate::time::Timestamp;
use serde_json::{Value, json};
use std::time::Duration;

/// The due fire of job `id` up to `until`, if any.
async fn due_fire(store: &dyn JobStore, id: &str, until: Timestamp) -> Option<DueFire> {
    store
        .due(&DueQuery::new(until, 100_000))
        .await
        .expect("due")
        .items
        .into_iter()
        .find(|f| f.job_id.as_str() == id)
}

/// A payload override is kept, returned and cleared as [`Jobs::trigger`] and
/// [`Jobs::finish_runs`] say, and text of any kind reads back exactly.
///
/// [`Jobs::trigger`]: crate::store::JobsExt::trigger
/// [`Jobs::finish_runs`]: crate::store::Jobs::finish_runs
pub async fn trigger_payload_override(store: &dyn JobStore) {
    let id = unique("override");
    let t0 = long_ago(store).await;
    let t1 = t0 + Duration::from_secs(5);
    let own = job(&id)
        .to_builder()
        .payload(json!({"own": 1}))
        .build()
        .unwrap();
    store.upsert(&own, Some(t0 + DAY)).await.unwrap();
    let over: Value =
        json!({"report": "<script>alert(1)</script>", "nul": "a\u{0}b", "π": [1.5, null, true]});

    // Trigger with a payload: the job and its due fire carry it.
    store.trigger(&jid(&id), t1, Some(&over)).await.unwrap();
    let rec = record(store, &id).await;
    assert_eq!(
        (rec.next_fire_at(), rec.next_trigger(), rec.next_payload()),
        (Some(t1), TriggerKind::Manual, Some(&over)),
        "trigger stores the override with the manual fire"
    );
    assert_eq!(
        rec.job.payload(),
        &json!({"own": 1}),
        "the definition keeps its payload"
    );
    let fire = due_fire(store, &id, t1)
        .await
        .expect("the triggered fire is due");
    assert_eq!(fire.payload(), Some(&over), "due returns the override");

    // The run records it; a retry keeps it.
    let mut req = start_req(&id, t1, 1, 1);
    (req.trigger, req.context) = (
        TriggerKind::Manual,
        FireContext::with_payload(Some(over.clone())),
    );
    let first = started(store, req).await;
    assert_eq!(run_of(store, &id, first).await.payload(), Some(&over));
    let t2 = t1 + Duration::from_secs(30);
    let mut retry = finish_req(first, &id, 1, RunStatus::Failed, Some(t2));
    retry.next = Some(FireState {
        at: t2,
        trigger: TriggerKind::Retry,
        attempt: 1,
        resume_after: Some(t1),
        context: FireContext::with_payload(Some(over.clone())),
    });
    assert!(matches!(
        finish_one(store, retry).await,
        FinishOutcome::Finished {
            rescheduled: true,
            ..
        }
    ));
    assert_eq!(record(store, &id).await.next_payload(), Some(&over));
    let fire = due_fire(store, &id, t2).await.expect("the retry is due");
    assert_eq!(
        (fire.trigger(), fire.payload()),
        (TriggerKind::Retry, Some(&over)),
        "the retry carries the override"
    );

    // The fire done: a finish whose next has no override clears it.
    let mut req = start_req(&id, t2, 1, 2);
    (req.trigger, req.attempt, req.context) = (
        TriggerKind::Retry,
        2,
        FireContext::with_payload(Some(over.clone())),
    );
    let second = started(store, req).await;
    let t3 = t0 + DAY;
    let done = finish_req(second, &id, 2, RunStatus::Succeeded, Some(t3));
    assert!(matches!(
        finish_one(store, done).await,
        FinishOutcome::Finished {
            rescheduled: true,
            ..
        }
    ));
    let rec = record(store, &id).await;
    assert_eq!((rec.next_fire_at(), rec.next_payload()), (Some(t3), None));
    assert_eq!(
        due_fire(store, &id, t3)
            .await
            .expect("scheduled fire")
            .payload(),
        None,
        "the next scheduled fire runs the job's payload"
    );
    assert_eq!(run_of(store, &id, first).await.payload(), Some(&over));
    let plain = started(store, start_req(&id, t3, 1, 3)).await;
    assert_eq!(
        run_of(store, &id, plain).await.payload(),
        None,
        "a plain run has none"
    );

    // A trigger during a run wins over the run's finish, override included.
    let other = json!("second");
    store.trigger(&jid(&id), t1, Some(&other)).await.unwrap();
    let finish = finish_req(plain, &id, 3, RunStatus::Succeeded, Some(t3 + DAY));
    assert!(matches!(
        finish_one(store, finish).await,
        FinishOutcome::Finished {
            rescheduled: false,
            ..
        }
    ));
    assert_eq!(record(store, &id).await.next_payload(), Some(&other));

    // A later trigger without one, a change of definition and a resume clear it.
    store.trigger(&jid(&id), t1, None).await.unwrap();
    assert_eq!(
        record(store, &id).await.next_payload(),
        None,
        "trigger without a payload"
    );
    store.trigger(&jid(&id), t1, Some(&other)).await.unwrap();
    let changed = own.to_builder().payload(json!({"own": 2})).build().unwrap();
    store.upsert(&changed, Some(t3)).await.unwrap();
    let rec = record(store, &id).await;
    assert_eq!(
        (rec.next_trigger(), rec.next_payload()),
        (TriggerKind::Schedule, None),
        "upsert"
    );
    store.trigger(&jid(&id), t1, Some(&other)).await.unwrap();
    store.set_enabled(&jid(&id), false, None).await.unwrap();
    assert_eq!(
        record(store, &id).await.next_payload(),
        Some(&other),
        "pause keeps it"
    );
    store.set_enabled(&jid(&id), true, Some(t3)).await.unwrap();
    assert_eq!(
        record(store, &id).await.next_payload(),
        None,
        "resume clears it"
    );
    cleanup(store, &[id]).await;
}

/// The context a created or replaced job's first fire carries ([`JobChange::Create`]
/// and [`JobChange::Upsert`]'s `context`, the trace the job was made in) is stored
/// with that fire, returned with the due fire, kept by an unchanged upsert and
/// replaced by a changing one; `upsert_many` and the unaudited helpers store none.
///
/// [`JobChange::Create`]: crate::store::JobChange::Create
/// [`JobChange::Upsert`]: crate::store::JobChange::Upsert
pub async fn first_fire_carries_its_context(store: &dyn JobStore) {
    use crate::store::JobChange;
    let id = unique("first-ctx");
    let t0 = long_ago(store).await;
    let traced = |t: &str| FireContext {
        trace: Some(format!("00-{t:0>32}-00f067aa0ba902b7-01")),
        ..FireContext::default()
    };
    let context_of = |id: String| async move {
        store
            .get(&jid(&id))
            .await
            .unwrap()
            .and_then(|r| r.next)
            .map(|n| n.context)
    };
    let create = JobChange::Create {
        job: job(&id),
        next: Some(t0),
        context: traced("a1"),
    };
    store.apply(&create, None).await.unwrap();
    assert_eq!(
        context_of(id.clone()).await,
        Some(traced("a1")),
        "created with it"
    );
    assert_eq!(
        due_fire(store, &id, t0).await.map(|f| f.fire.context),
        Some(traced("a1")),
        "the due fire carries it"
    );
    let same = JobChange::Upsert {
        job: job(&id),
        next: Some(t0),
        context: traced("b2"),
    };
    assert_eq!(
        store.apply(&same, None).await.unwrap().upsert_outcome(),
        UpsertOutcome::Unchanged
    );
    assert_eq!(
        context_of(id.clone()).await,
        Some(traced("a1")),
        "an unchanged upsert keeps it"
    );
    let changed = job(&id).with_payload(json!({"v": 2}));
    let replace = JobChange::Upsert {
        job: changed.clone(),
        next: Some(t0),
        context: traced("c3"),
    };
    assert_eq!(
        store.apply(&replace, None).await.unwrap().upsert_outcome(),
        UpsertOutcome::Updated
    );
    assert_eq!(
        context_of(id.clone()).await,
        Some(traced("c3")),
        "a changing upsert replaces it"
    );
    store
        .upsert(&changed.with_payload(json!({"v": 3})), Some(t0))
        .await
        .unwrap();
    assert_eq!(
        context_of(id.clone()).await,
        Some(FireContext::default()),
        "the unaudited helper stores none"
    );
    let many = unique("first-ctx-many");
    store.upsert_many(&[(job(&many), Some(t0))]).await.unwrap();
    assert_eq!(context_of(many.clone()).await, Some(FireContext::default()));
    cleanup(store, &[id, many]).await;
}

/// A job with [`Schedule::Never`](crate::Schedule::Never) reads back as such, is
/// never due by itself, is due once when triggered, and idle again after that fire.
pub async fn never_fires_until_triggered(store: &dyn JobStore) {
    let id = unique("never");
    let t0 = long_ago(store).await;
    let manual = job(&id)
        .to_builder()
        .schedule(crate::schedule::Schedule::never())
        .build()
        .unwrap();
    store.upsert(&manual, None).await.unwrap();
    let rec = record(store, &id).await;
    assert_eq!(
        rec.job.schedule(),
        &crate::schedule::Schedule::Never,
        "reads back"
    );
    assert_eq!(rec.next_fire_at(), None, "no fire of its own");
    let far = store.now().await.unwrap() + DAY * 365;
    assert!(
        due_fire(store, &id, far).await.is_none(),
        "never due by itself"
    );

    store.trigger(&jid(&id), t0, None).await.unwrap();
    assert!(
        due_fire(store, &id, t0).await.is_some(),
        "due once triggered"
    );
    let mut req = start_req(&id, t0, 1, 1);
    req.trigger = TriggerKind::Manual;
    let run = started(store, req).await;
    finish_one(store, finish_req(run, &id, 1, RunStatus::Succeeded, None)).await;
    let rec = record(store, &id).await;
    assert_eq!(rec.next_fire_at(), None, "idle after the triggered fire");
    assert!(due_fire(store, &id, far).await.is_none());
    cleanup(store, &[id]).await;
}
