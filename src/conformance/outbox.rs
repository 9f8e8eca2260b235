//! Checks of the alarm outbox: each event claimed by one claimer at a time,
//! completed and retried; done events purged by retention.

use super::store::*;
use super::unique;
use crate::policy::AlarmKind;
use crate::record::*;
use crate::store::JobsExt as _;
use crate::store::{AlarmClaim, AlarmQuery, JobStore};
use crate::time::Timestamp;
use std::time::Duration;

pub(super) fn alarm(job: &str, i: u32) -> AlarmEvent {
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
        suppressed: 0,
        covers: None,
        blocked: Vec::new(),
        waiting_for: Vec::new(),
    }
}

/// Puts `events` in the outbox the way the engine does, with the finish of a run of
/// job `id` (created for the purpose and removed again); returns their ids, oldest
/// first.
pub(super) async fn enqueue(
    store: &dyn JobStore,
    id: &str,
    events: Vec<AlarmEvent>,
) -> Vec<AlarmId> {
    let t0 = long_ago(store).await;
    store.upsert(&job(id), Some(t0)).await.unwrap();
    let run = started(store, start_req(id, t0, 1, 1)).await;
    let mut req = finish_req(run, id, 1, RunStatus::Succeeded, None);
    req.alarms = events;
    let n = req.alarms.len();
    finish_one(store, req).await;
    cleanup(store, &[id.to_string()]).await;
    let mut ids: Vec<AlarmId> = store
        .alarms(&AlarmQuery::new(100_000))
        .await
        .unwrap()
        .into_iter()
        .filter(|a| a.event.job_id.as_str() == id)
        .map(|a| a.id)
        .collect();
    ids.sort();
    assert_eq!(ids.len(), n, "a finish puts its alarm events in the outbox");
    ids
}

/// Claims until none of `ids` is handed out; completes other checks' events as not
/// needed. Returns the events of `ids` claimed.
pub(super) async fn claim_mine(
    store: &dyn JobStore,
    owner: &str,
    ids: &[AlarmId],
) -> Vec<AlarmRecord> {
    let mut mine = Vec::new();
    for _ in 0..20 {
        let page = store
            .claim_alarms(&AlarmClaim::new(owner, 100, DAY))
            .await
            .unwrap();
        if page.items.is_empty() {
            break;
        }
        for rec in page.items {
            if ids.contains(&rec.id) {
                mine.push(rec);
            } else {
                let done = AlarmDelivery::NotNeeded;
                store.complete_alarm(rec.id, owner, &done).await.unwrap();
            }
        }
    }
    mine
}

/// Each alarm event is claimed by one claimer at a time; failures and lapsed claims
/// come back; completion is owner-checked.
pub async fn alarm_outbox_claimed_once(store: &dyn JobStore) {
    let job_id = unique("alarm");
    let events: Vec<AlarmEvent> = (0..12).map(|i| alarm(&job_id, i)).collect();
    let ids = enqueue(store, &job_id, events.clone()).await;
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
        let claims = futures::future::join_all(
            owners
                .iter()
                .map(|o| async move { store.claim_alarms(&AlarmClaim::new(o, 5, DAY)).await }),
        )
        .await;
        let mut any = false;
        for (owner, got) in owners.iter().zip(claims) {
            for rec in got.unwrap().items {
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
        mine(
            &store
                .claim_alarms(&AlarmClaim::new("late", 100, DAY))
                .await
                .unwrap()
                .items
        )
        .is_empty(),
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
    let again = store
        .claim_alarms(&AlarmClaim::new("retrier", 100, DAY))
        .await
        .unwrap()
        .items;
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
        .claim_alarms(&AlarmClaim::new("short", 100, Duration::from_millis(200)))
        .await
        .unwrap()
        .items;
    assert_eq!(mine(&short), [r3.id]);
    tokio::time::sleep(Duration::from_millis(450)).await;
    let lapsed = store
        .claim_alarms(&AlarmClaim::new("taker", 100, DAY))
        .await
        .unwrap()
        .items;
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
        .alarms(&AlarmQuery::new(100_000).status(Some(AlarmStatus::Sent)))
        .await
        .unwrap();
    assert!(sent.iter().any(|a| a.id == r0.id) && sent.iter().any(|a| a.id == r1.id));
    let failed = store
        .alarms(&AlarmQuery::new(100_000).status(Some(AlarmStatus::Failed)))
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
        .alarms(&AlarmQuery::new(100_000).status(Some(AlarmStatus::NotNeeded)))
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

/// `purge_alarms` deletes the events that are done (sent, not needed, failed with no
/// retry left) and created before the cut-off, and keeps those still to deliver or
/// being delivered.
pub async fn alarm_outbox_purges_done_events(store: &dyn JobStore) {
    let job_id = unique("purge-alarm");
    let ids = enqueue(store, &job_id, (0..5).map(|i| alarm(&job_id, i)).collect()).await;
    let owner = unique("purger");
    let mut claimed = claim_mine(store, &owner, &ids).await;
    claimed.sort_by_key(|r| r.id);
    assert_eq!(claimed.len(), 5, "every event of the check is claimed");
    let now = store.now().await.unwrap();
    let failed = |retry_at| AlarmDelivery::Failed {
        error: "smtp down".into(),
        retry_at,
    };
    let deliveries = [
        AlarmDelivery::Sent,
        AlarmDelivery::NotNeeded,
        failed(None),
        failed(Some(now + DAY)),
    ];
    for (rec, d) in claimed.iter().zip(&deliveries) {
        assert!(store.complete_alarm(rec.id, &owner, d).await.unwrap());
    }
    let left = |all: Vec<AlarmRecord>| -> Vec<AlarmId> {
        let mut v: Vec<AlarmId> = all
            .into_iter()
            .filter(|a| a.event.job_id.as_str() == job_id)
            .map(|a| a.id)
            .collect();
        v.sort();
        v
    };
    let created = claimed.iter().map(|r| r.created_at).min().unwrap();
    store
        .purge_alarms(created - Duration::from_secs(1))
        .await
        .unwrap();
    let all = store.alarms(&AlarmQuery::new(100_000)).await.unwrap();
    assert_eq!(left(all), ids, "events created after the cut-off are kept");
    let purged = store
        .purge_alarms(now + Duration::from_secs(60))
        .await
        .unwrap();
    assert!(purged >= 3, "purge reports what it deleted: {purged}");
    let all = store.alarms(&AlarmQuery::new(100_000)).await.unwrap();
    assert_eq!(
        left(all),
        [claimed[3].id, claimed[4].id],
        "done events are purged; one to retry and one being sent are kept"
    );
    let done = AlarmDelivery::NotNeeded;
    store
        .complete_alarm(claimed[4].id, &owner, &done)
        .await
        .unwrap();
}
