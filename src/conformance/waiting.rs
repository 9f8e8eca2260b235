//! The `waiting` alarm of queued releases: raised once per job and instant, by
//! whichever of many concurrent callers comes first, with the instant's mark kept
//! while any of its releases is queued.

use super::releases::parent_fire;
use super::store::{cleanup, failure_event, jid, job, long_ago};
use super::unique;
use crate::dependency::{Release, UpstreamRun};
use crate::policy::AlarmKind;
use crate::record::*;
use crate::schedule::Schedule;
use crate::store::JobsExt as _;
use crate::store::{AlarmQuery, JobStore};
use crate::time::Timestamp;
use std::time::Duration;

const MIN: Duration = Duration::from_secs(60);

/// A release of job `d` at `at` by `source` in place of a parent (as an operator's).
fn in_place(d: &str, source: &str, at: Timestamp) -> Release {
    let from = UpstreamRun {
        job: jid(source),
        fire_at: at,
        run: RunId(0),
        status: RunStatus::Succeeded,
        depth: 1,
        released_by: Some("ops@example.com".into()),
        window: None,
    };
    Release::new(jid(d), from)
}

/// [`Jobs::alarm_waiting`](crate::store::Jobs::alarm_waiting): nothing queued
/// raises nothing; eight concurrent calls for one instant raise its alarm once; a
/// release of that instant queued later lists as alarmed and raises nothing; another
/// instant has its own alarm; the mark goes with the instant's releases (dropped or
/// taken), so an instant queued again can raise again.
pub async fn waiting_alarms_are_raised_once(store: &dyn JobStore) {
    let (b, c, e, d) = (
        unique("wait-b"),
        unique("wait-c"),
        unique("wait-e"),
        unique("wait-d"),
    );
    let t0 = long_ago(store).await;
    store.upsert(&job(&b), Some(t0)).await.unwrap();
    let join = job(&d)
        .to_builder()
        .schedule(Schedule::never())
        .after(vec![jid(&b), jid(&c), jid(&e)])
        .build()
        .unwrap();
    store.upsert(&join, None).await.unwrap();
    let event = |at: Timestamp| {
        let mut ev = failure_event(&d, RunId(0), at);
        ev.kind = AlarmKind::Waiting;
        ev.run_id = None;
        ev.waiting_for = vec![jid(&c), jid(&e)];
        ev
    };
    let raised = || async {
        store
            .alarms(&AlarmQuery::new(100_000))
            .await
            .unwrap()
            .into_iter()
            .filter(|a| a.event.job_id.as_str() == d && a.event.kind == AlarmKind::Waiting)
            .map(|a| a.event)
            .collect::<Vec<_>>()
    };
    let sorted = |mut v: Vec<(String, Timestamp, bool)>| {
        v.sort();
        v
    };
    let listed = || async {
        let mut l = store.releases(Some(&jid(&d)), 100).await.unwrap();
        l.sort_by(|x, y| (&x.from.job, x.from.fire_at).cmp(&(&y.from.job, y.from.fire_at)));
        l.into_iter()
            .map(|r| {
                (
                    r.from.job.to_string(),
                    r.from.fire_at,
                    r.alarmed_at.is_some(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert!(
        !store.alarm_waiting(&jid(&d), t0, &event(t0)).await.unwrap(),
        "nothing queued: no alarm"
    );

    parent_fire(store, &b, t0, 0, &[&d]).await;
    assert_eq!(listed().await, sorted(vec![(b.clone(), t0, false)]));
    let ev = event(t0);
    let dj = jid(&d);
    let calls = (0..8).map(|_| store.alarm_waiting(&dj, t0, &ev));
    let answers = futures::future::join_all(calls).await;
    let yes = answers.into_iter().filter(|a| *a.as_ref().unwrap()).count();
    assert_eq!(yes, 1, "eight concurrent calls: one raises the alarm");
    let got = raised().await;
    assert_eq!(got.len(), 1, "one event in the outbox");
    assert_eq!(got[0].fire_at, t0);
    assert_eq!(
        got[0].waiting_for,
        vec![jid(&c), jid(&e)],
        "the event as given"
    );
    let alarmed_at = store.releases(Some(&jid(&d)), 10).await.unwrap()[0].alarmed_at;
    let now = store.now().await.unwrap();
    assert!(
        alarmed_at.is_some_and(|a| a <= now && a >= t0),
        "marked at the store's instant: {alarmed_at:?}"
    );

    // A release of the same instant queued later is listed alarmed; no new alarm.
    store
        .queue_releases(&[in_place(&d, &c, t0)], None)
        .await
        .unwrap();
    assert_eq!(
        listed().await,
        sorted(vec![(b.clone(), t0, true), (c.clone(), t0, true)])
    );
    assert!(!store.alarm_waiting(&jid(&d), t0, &event(t0)).await.unwrap());

    // Another instant has its own alarm.
    let t1 = t0 + MIN;
    parent_fire(store, &b, t0, 1, &[&d]).await;
    assert!(store.alarm_waiting(&jid(&d), t1, &event(t1)).await.unwrap());
    assert!(!store.alarm_waiting(&jid(&d), t1, &event(t1)).await.unwrap());
    assert_eq!(raised().await.len(), 2);

    // A skip drops the instant's mark with its releases.
    assert_eq!(store.drop_releases(&jid(&d), t0, None).await.unwrap(), 2);
    store
        .queue_releases(&[in_place(&d, &e, t0)], None)
        .await
        .unwrap();
    assert_eq!(
        listed().await,
        sorted(vec![(e.clone(), t0, false), (b.clone(), t1, true)]),
        "queued again after the skip: not alarmed"
    );
    assert!(store.alarm_waiting(&jid(&d), t0, &event(t0)).await.unwrap());

    // A take removes the taken instant's mark; the other instant keeps its own.
    store
        .queue_releases(&[in_place(&d, &c, t1), in_place(&d, &e, t1)], None)
        .await
        .unwrap();
    let next = super::store::record(store, &d).await.next.expect("taken");
    assert_eq!(next.trigger, TriggerKind::Upstream);
    assert_eq!(listed().await, sorted(vec![(e.clone(), t0, true)]));
    // A pause puts the taken, unstarted group back in the queue: not alarmed.
    store.set_enabled(&jid(&d), false, None).await.unwrap();
    let mut back = listed().await;
    back.retain(|r| r.1 == t1);
    assert_eq!(back.len(), 3, "the taken group is queued again: {back:?}");
    assert!(
        back.iter().all(|r| !r.2),
        "its mark went with the take: {back:?}"
    );
    assert_eq!(raised().await.len(), 3);
    cleanup(store, &[b, d]).await;
}
