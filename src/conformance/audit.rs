//! Checks of the audit log and of an operator's alarm retry and discard.

use super::outbox::{alarm, claim_mine, enqueue};
use super::unique;
use crate::record::*;
use crate::store::AlarmOutboxExt as _;
use crate::store::{AlarmQuery, AuditQuery, JobStore};
use std::time::Duration;

/// Audit entries read back newest first, exact (any text, JSON before and after),
/// stamped with the store's clock, filtered by actor and target, paged by id, and
/// purged by age.
pub async fn audit_log_reads_back(store: &dyn JobStore) {
    let actor = unique("auditor");
    let t0 = store.now().await.unwrap();
    let entry = |i: usize| AuditEntry {
        actor: actor.clone(),
        action: if i.is_multiple_of(2) {
            "job.update"
        } else {
            "job.pause"
        }
        .into(),
        target: format!("job-{}-<script>alert(1)</script>\u{1b}[31m", i % 3),
        before: (i > 0).then(|| serde_json::json!({"schedule": "0 * * * * ?", "n": i - 1})),
        after: Some(serde_json::json!({"payload": {"text": "é ✓ \u{0}", "n": i}})),
    };
    for i in 0..7 {
        store.append_audit(&entry(i)).await.unwrap();
    }
    let t1 = store.now().await.unwrap();
    let mine = store
        .audit(&AuditQuery::new(100).actor(Some(actor.clone())))
        .await
        .unwrap();
    assert_eq!(mine.len(), 7, "every entry is read back");
    for (k, r) in mine.iter().enumerate() {
        assert_eq!(
            r.entry,
            entry(6 - k),
            "entries read back exactly, newest first"
        );
        assert!(r.at >= t0 && r.at <= t1, "stamped with the store's clock");
    }
    assert!(
        mine.windows(2).all(|w| w[0].id > w[1].id),
        "ids increase with every entry"
    );
    let target = entry(1).target;
    let about = store
        .audit(&AuditQuery::new(100).target(Some(target.clone())))
        .await
        .unwrap();
    let ids: Vec<i64> = about.iter().map(|r| r.id).collect();
    assert_eq!(ids, [mine[2].id, mine[5].id], "filtered by target");
    let page = store
        .audit(
            &AuditQuery::new(2)
                .actor(Some(actor.clone()))
                .before(Some(mine[2].id)),
        )
        .await
        .unwrap();
    let ids: Vec<i64> = page.iter().map(|r| r.id).collect();
    assert_eq!(
        ids,
        [mine[3].id, mine[4].id],
        "paged below an id, at most limit"
    );

    store
        .purge_audit(t0 - Duration::from_millis(1))
        .await
        .unwrap();
    let kept = store
        .audit(&AuditQuery::new(100).actor(Some(actor.clone())))
        .await
        .unwrap();
    assert_eq!(kept.len(), 7, "entries appended after the cut-off are kept");
    let purged = store
        .purge_audit(t1 + Duration::from_secs(1))
        .await
        .unwrap();
    assert!(purged >= 7, "purge reports what it deleted: {purged}");
    let kept = store
        .audit(&AuditQuery::new(100).actor(Some(actor)))
        .await
        .unwrap();
    assert!(kept.is_empty(), "entries before the cut-off are purged");
}

/// An operator discards a pending or failed event (never delivered, kept for
/// retention) and retries a failed one (claimable at once); sent and sending events
/// are left as they are.
pub async fn alarm_outbox_operator_retry_and_discard(store: &dyn JobStore) {
    let job_id = unique("operator-alarm");
    let ids = enqueue(store, &job_id, (0..3).map(|i| alarm(&job_id, i)).collect()).await;
    let status = |id: AlarmId| async move {
        let one = store.alarms(&AlarmQuery::new(10).id(id)).await.unwrap();
        assert_eq!(one.len(), 1, "the query by id finds exactly that event");
        assert_eq!(one[0].id, id);
        one.into_iter().next().unwrap()
    };
    assert!(
        store
            .alarms(&AlarmQuery::new(10).id(AlarmId(i64::MAX - 7)))
            .await
            .unwrap()
            .is_empty(),
        "no event has that id"
    );
    assert!(
        store.discard_alarm(ids[0]).await.unwrap(),
        "a pending event is discarded"
    );
    let a0 = status(ids[0]).await;
    assert_eq!(a0.status, AlarmStatus::Failed);
    assert_eq!(
        a0.next_attempt_at, None,
        "a discarded event has no retry left"
    );

    let owner = unique("operator");
    let claimed = claim_mine(store, &owner, &ids).await;
    let mut got: Vec<AlarmId> = claimed.iter().map(|r| r.id).collect();
    got.sort();
    assert_eq!(got, ids[1..], "a discarded event is never claimed");

    assert!(
        !store.retry_alarm(ids[1]).await.unwrap(),
        "a sending event is left alone"
    );
    assert!(
        !store.discard_alarm(ids[1]).await.unwrap(),
        "a sending event is left alone"
    );
    assert_eq!(status(ids[1]).await.status, AlarmStatus::Sending);
    assert!(
        store
            .complete_alarm(ids[1], &owner, &AlarmDelivery::Sent)
            .await
            .unwrap()
    );
    assert!(
        !store.retry_alarm(ids[1]).await.unwrap(),
        "a sent event is left alone"
    );
    assert!(
        !store.discard_alarm(ids[1]).await.unwrap(),
        "a sent event is left alone"
    );
    assert_eq!(status(ids[1]).await.status, AlarmStatus::Sent);
    let failed = AlarmDelivery::Failed {
        error: "smtp down".into(),
        retry_at: None,
    };
    assert!(store.complete_alarm(ids[2], &owner, &failed).await.unwrap());
    assert!(
        !store.retry_alarm(AlarmId(i64::MAX - 7)).await.unwrap(),
        "no such event"
    );

    let before = store.now().await.unwrap();
    assert!(
        store.retry_alarm(ids[0]).await.unwrap(),
        "a discarded event is retried"
    );
    assert!(
        store.retry_alarm(ids[2]).await.unwrap(),
        "a failed event is retried"
    );
    let after = store.now().await.unwrap();
    for id in [ids[0], ids[2]] {
        let a = status(id).await;
        assert_eq!(a.status, AlarmStatus::Pending);
        let at = a.next_attempt_at.expect("claimable again");
        assert!(at >= before && at <= after, "claimable at the store's now");
    }
    assert_eq!(
        status(ids[2]).await.last_error.as_deref(),
        Some("smtp down"),
        "the last error is kept"
    );
    let again = claim_mine(store, &owner, &ids).await;
    let mut got: Vec<AlarmId> = again.iter().map(|r| r.id).collect();
    got.sort();
    assert_eq!(got, [ids[0], ids[2]], "retried events are claimed again");
    for r in again {
        store
            .complete_alarm(r.id, &owner, &AlarmDelivery::NotNeeded)
            .await
            .unwrap();
    }
}

/// Every change [`Jobs::apply`](crate::store::Jobs::apply) and
/// [`AlarmOutbox::apply_alarm`](crate::store::AlarmOutbox::apply_alarm) make with an
/// audit entry appends that entry exactly once, in the same step; a change that
/// changes nothing (an unchanged upsert, a create that keeps, the removal of a
/// missing job, an alarm that is not pending or failed) and a refused one (a pause,
/// resume or trigger of a missing job) append none.
pub async fn changes_and_their_audit_entries(store: &dyn JobStore) {
    use super::store::{DAY, cleanup, job, long_ago};
    use crate::store::{AlarmChange, Applied, JobChange};
    let actor = unique("changer");
    let id = unique("audited");
    let jid = crate::job::JobId::new(&id).unwrap();
    let t0 = long_ago(store).await;
    let entry = |action: &str| AuditEntry {
        actor: actor.clone(),
        action: action.into(),
        target: id.clone(),
        before: Some(serde_json::json!({"n": 1})),
        after: Some(serde_json::json!({"text": "<b>é</b>"})),
    };
    let logged = || async {
        store
            .audit(&AuditQuery::new(1000).actor(Some(actor.clone())))
            .await
            .unwrap()
            .into_iter()
            .rev()
            .map(|r| r.entry.action)
            .collect::<Vec<_>>()
    };
    let apply = |change: JobChange, action: &'static str| {
        let e = entry(action);
        async move { store.apply(&change, Some(&e)).await }
    };
    let def = job(&id);
    let changed = def
        .to_builder()
        .payload(serde_json::json!({"v": 2}))
        .build()
        .unwrap();
    let steps: Vec<(JobChange, &str, Applied)> = vec![
        (
            JobChange::Create {
                job: def.clone(),
                next: Some(t0 + DAY),
                context: FireContext::default(),
            },
            "create",
            Applied::Upsert(UpsertOutcome::Created),
        ),
        (
            JobChange::Create {
                job: changed.clone(),
                next: Some(t0),
                context: FireContext::default(),
            },
            "create-kept",
            Applied::Upsert(UpsertOutcome::Kept),
        ),
        (
            JobChange::Upsert {
                job: def.clone(),
                next: Some(t0),
                context: FireContext::default(),
            },
            "upsert-same",
            Applied::Upsert(UpsertOutcome::Unchanged),
        ),
        (
            JobChange::Upsert {
                job: changed.clone(),
                next: Some(t0 + DAY),
                context: FireContext::default(),
            },
            "upsert",
            Applied::Upsert(UpsertOutcome::Updated),
        ),
        (JobChange::Pause { id: jid.clone() }, "pause", Applied::Done),
        (
            JobChange::Resume {
                id: jid.clone(),
                next: Some(FireState::scheduled(t0 + DAY)),
            },
            "resume",
            Applied::Done,
        ),
        (
            JobChange::Trigger {
                id: jid.clone(),
                fire: FireState::fresh(
                    t0,
                    TriggerKind::Manual,
                    FireContext::with_payload(Some(serde_json::json!("x"))),
                ),
            },
            "trigger",
            Applied::Done,
        ),
        (
            JobChange::Remove { id: jid.clone() },
            "remove",
            Applied::Removed(true),
        ),
        (
            JobChange::Remove { id: jid.clone() },
            "remove-missing",
            Applied::Removed(false),
        ),
    ];
    for (change, action, want) in steps {
        assert_eq!(
            apply(change, action).await.unwrap(),
            want,
            "{action} applies as documented"
        );
    }
    for change in [
        JobChange::Pause { id: jid.clone() },
        JobChange::Resume {
            id: jid.clone(),
            next: None,
        },
        JobChange::Trigger {
            id: jid.clone(),
            fire: FireState::fresh(t0, TriggerKind::Manual, FireContext::default()),
        },
    ] {
        assert!(
            matches!(
                apply(change, "missing").await,
                Err(crate::error::Error::NotFound { .. })
            ),
            "a change to a missing job is refused NotFound"
        );
    }
    assert_eq!(
        logged().await,
        ["create", "upsert", "pause", "resume", "trigger", "remove"],
        "one entry per applied change, none for a change that changed nothing or was refused"
    );
    // The entry is the one given, stamped with the store's clock.
    let last = store
        .audit(&AuditQuery::new(1).actor(Some(actor.clone())))
        .await
        .unwrap();
    assert_eq!(last[0].entry, entry("remove"));

    // Alarm events: applied (and audited) only while pending or failed.
    let alarm_job = unique("audited-alarm");
    let ids =
        super::outbox::enqueue(store, &alarm_job, vec![super::outbox::alarm(&alarm_job, 1)]).await;
    let e = entry("alarm.discard");
    assert!(
        store
            .apply_alarm(AlarmChange::Discard(ids[0]), Some(&e))
            .await
            .unwrap()
    );
    let e = entry("alarm.retry");
    assert!(
        store
            .apply_alarm(AlarmChange::Retry(ids[0]), Some(&e))
            .await
            .unwrap()
    );
    let missing = AlarmId(i64::MAX - 7);
    let e = entry("alarm.missing");
    assert!(
        !store
            .apply_alarm(AlarmChange::Retry(missing), Some(&e))
            .await
            .unwrap()
    );
    assert_eq!(
        logged().await[6..],
        ["alarm.discard", "alarm.retry"],
        "alarm changes are audited when applied"
    );
    cleanup(store, &[id]).await;
}
