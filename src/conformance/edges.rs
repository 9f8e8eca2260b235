//! Edges every store handles: any text a handler or a user supplies is storable,
//! and any limit a caller passes is answered.

use super::store::{
    DAY, failure_event, finish_one, finish_req, jid, job, long_ago, start_req, started,
};
use super::unique;
use crate::record::*;
use crate::store::JobsExt as _;
use crate::store::{AlarmClaim, AlarmQuery, DueQuery, JobQuery, JobStore, RunQuery};
use std::time::Duration;

/// Text no backend may refuse.
const NASTY: &str = "nul:\0 bell:\u{7} tab:\t emoji:\u{1F525} rtl:\u{202E} quote:' \" \\ %s";

/// What a backend may read back for [`NASTY`]: the text itself, or with NUL replaced
/// by U+FFFD (SQL servers cannot keep NUL in `TEXT`).
fn same_text(read: &str, what: &str) {
    let replaced = NASTY.replace('\0', "\u{FFFD}");
    assert!(
        read == NASTY || read == replaced,
        "{what} must read back intact (NUL may become U+FFFD): {read:?}"
    );
}

/// Writes text holding NUL, control characters, emoji, bidi marks and quotes as a
/// run's error, an alarm event's error and a delivery error,
/// and reads each back.
pub async fn any_text_is_stored(store: &dyn JobStore) {
    let id = unique("text");
    let t0 = long_ago(store).await;
    store.upsert(&job(&id), Some(t0)).await.unwrap();
    let run = started(store, start_req(&id, t0, 1, 3)).await;
    let mut req = finish_req(run, &id, 3, RunStatus::Failed, None);
    req.error = Some(NASTY.to_string());
    let mut event = failure_event(&id, run, t0);
    event.error = Some(NASTY.to_string());
    req.alarms = vec![event];
    let out = finish_one(store, req).await;
    assert!(
        matches!(out, FinishOutcome::Finished { .. }),
        "a finish whose error holds any text is written: {out:?}"
    );
    let runs = store
        .runs(&RunQuery::new().job(jid(&id)).limit(10))
        .await
        .unwrap();
    same_text(runs[0].error.as_deref().unwrap_or(""), "a run's error");

    let owner = unique("claimer");
    let claimed = store
        .claim_alarms(&AlarmClaim::new(&*owner, 1000, Duration::from_secs(60)))
        .await
        .unwrap();
    let ours = claimed
        .items
        .iter()
        .find(|a| a.event.job_id == jid(&id))
        .expect("the finish's alarm event is claimable");
    same_text(
        ours.event.error.as_deref().unwrap_or(""),
        "an alarm event's error",
    );
    let failed = AlarmDelivery::Failed {
        error: NASTY.to_string(),
        retry_at: None,
    };
    assert!(
        store
            .complete_alarm(ours.id, &owner, &failed)
            .await
            .unwrap(),
        "a delivery error holding any text is written"
    );
    // Give back the other events this claim took, for other checks.
    for other in claimed.items.iter().filter(|a| a.id != ours.id) {
        let _ = store
            .complete_alarm(other.id, &owner, &AlarmDelivery::NotNeeded)
            .await;
    }
    let listed = store
        .alarms(&AlarmQuery::new(10_000).status(Some(AlarmStatus::Failed)))
        .await
        .unwrap();
    let rec = listed
        .iter()
        .find(|a| a.id == ours.id)
        .expect("the failed event is listed");
    same_text(rec.last_error.as_deref().unwrap_or(""), "a delivery error");
}

/// Limits up to `usize::MAX` are answered (lowered to
/// [`MAX_PAGE`](crate::limits::MAX_PAGE) where a query has one), never a server error.
pub async fn huge_limits_are_lowered(store: &dyn JobStore) {
    let id = unique("limits");
    let t0 = long_ago(store).await;
    store.upsert(&job(&id), Some(t0)).await.unwrap();
    let jobs = store
        .list(&JobQuery::new(usize::MAX))
        .await
        .expect("a list with limit usize::MAX is answered");
    assert!(jobs.items.len() <= crate::limits::MAX_PAGE);
    store
        .runs(&RunQuery::new().limit(usize::MAX))
        .await
        .expect("a run query with limit usize::MAX is answered");
    store
        .alarms(&AlarmQuery::new(usize::MAX))
        .await
        .expect("an alarm query with limit usize::MAX is answered");
    let due = store
        .due(&DueQuery::new(t0, usize::MAX))
        .await
        .expect("a due query with limit usize::MAX is answered");
    assert!(due.items.iter().any(|f| f.job_id == jid(&id)));
    store
        .orphaned_runs(usize::MAX)
        .await
        .expect("an orphaned-runs query with limit usize::MAX is answered");
}

/// `create` stores a job only when its id is free, and leaves an existing job exactly
/// as it was, definition and scheduling state included.
pub async fn create_never_rearms(store: &dyn JobStore) {
    let id = unique("create");
    let t0 = long_ago(store).await;
    let first = job(&id);
    assert_eq!(
        store.create(&first, Some(t0)).await.unwrap(),
        crate::record::UpsertOutcome::Created
    );
    let before = store.get(&jid(&id)).await.unwrap().unwrap();
    let other = crate::job::Job::builder(
        id.as_str(),
        "other",
        crate::schedule::Schedule::every(Duration::from_secs(7)).unwrap(),
    )
    .build()
    .unwrap();
    assert_eq!(
        store.create(&other, Some(t0 + DAY)).await.unwrap(),
        crate::record::UpsertOutcome::Kept
    );
    assert_eq!(
        store.create(&first, Some(t0 + DAY)).await.unwrap(),
        crate::record::UpsertOutcome::Kept,
        "an identical definition is kept too, not re-armed"
    );
    let after = store.get(&jid(&id)).await.unwrap().unwrap();
    assert_eq!(*after.job, first, "the definition is untouched");
    assert_eq!(after.version, before.version, "the version is untouched");
    assert_eq!(after.next_fire_at(), Some(t0), "the next fire is untouched");
    store.remove(&jid(&id)).await.unwrap();
    assert_eq!(
        store.create(&other, Some(t0)).await.unwrap(),
        crate::record::UpsertOutcome::Created,
        "a removed job's id is free again"
    );
}

/// `upsert_many` writes each job as `upsert` would, in order, across batch
/// boundaries: new jobs are created, changed ones updated, identical ones unchanged.
pub async fn upsert_many_matches_upsert(store: &dyn JobStore) {
    let base = unique("many");
    let t0 = long_ago(store).await;
    let ids: Vec<String> = (0..1201).map(|i| format!("{base}-{i:04}")).collect();
    let batch: Vec<_> = ids.iter().map(|id| (job(id), Some(t0))).collect();
    let out = store.upsert_many(&batch).await.unwrap();
    assert_eq!(out.len(), ids.len());
    assert!(out.iter().all(|o| *o == UpsertOutcome::Created), "{out:?}");
    let again = store.upsert_many(&batch).await.unwrap();
    assert!(again.iter().all(|o| *o == UpsertOutcome::Unchanged));
    let changed = crate::job::Job::builder(
        ids[3].as_str(),
        "other",
        crate::schedule::Schedule::every(Duration::from_secs(7)).unwrap(),
    )
    .build()
    .unwrap();
    let new_id = format!("{base}-new");
    let mixed = vec![
        (changed.clone(), Some(t0 + DAY)),
        (job(&ids[4]), Some(t0)),
        (job(&new_id), Some(t0 + DAY)),
    ];
    assert_eq!(
        store.upsert_many(&mixed).await.unwrap(),
        vec![
            UpsertOutcome::Updated,
            UpsertOutcome::Unchanged,
            UpsertOutcome::Created
        ]
    );
    let rec = store.get(&jid(&ids[3])).await.unwrap().unwrap();
    assert_eq!(*rec.job, changed);
    assert_eq!((rec.version, rec.next_fire_at()), (2, Some(t0 + DAY)));
    let rec = store.get(&jid(&new_id)).await.unwrap().unwrap();
    assert_eq!((rec.version, rec.next_fire_at()), (1, Some(t0 + DAY)));
    let last = store.get(&jid(&ids[1200])).await.unwrap().unwrap();
    assert_eq!(
        last.next_fire_at(),
        Some(t0),
        "the last batch was written too"
    );
    for id in ids.iter().chain([&new_id]) {
        store.remove(&jid(id)).await.unwrap();
    }
    // Ids scattered over the batches, so batches written side by side interleave in
    // the id order (and in the id index's gaps).
    let scattered: Vec<String> = (0..1201)
        .map(|i| format!("{base}-s{:04}", (i * 7919) % 1201))
        .collect();
    let batch: Vec<_> = scattered.iter().map(|id| (job(id), Some(t0))).collect();
    let out = store.upsert_many(&batch).await.unwrap();
    assert!(out.iter().all(|o| *o == UpsertOutcome::Created), "{out:?}");
    for id in &scattered {
        assert!(store.remove(&jid(id)).await.unwrap(), "{id} was written");
    }
}
