//! A join by window ([`JoinWindow`]): releases keyed by their window's start, each
//! window taken once, a parent's later release of a window already taken not
//! queued, and a taken group put back by a change queued again.

use super::store::{
    cleanup, finish_one, finish_req, jid, job, long_ago, record, start_req, started,
};
use super::unique;
use crate::dependency::{JoinWindow, Release, UpstreamRun, WindowUnit};
use crate::record::*;
use crate::schedule::Schedule;
use crate::store::JobStore;
use crate::store::JobsExt as _;
use crate::time::Timestamp;
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);

/// A fire of `parent` at `at` (its next fire), succeeded, next at `next`, releasing
/// `child` keyed by `window`'s start as the engine would; its upstream run.
async fn fire(
    store: &dyn JobStore,
    parent: &str,
    (at, next, token): (Timestamp, Option<Timestamp>, u64),
    child: &str,
    window: &JoinWindow,
) -> UpstreamRun {
    let run = started(store, start_req(parent, at, 1, token)).await;
    let from = UpstreamRun {
        job: jid(parent),
        fire_at: at,
        run,
        status: RunStatus::Succeeded,
        depth: 1,
        released_by: None,
        window: Some(window.start(at)),
    };
    let mut req = finish_req(run, parent, token, RunStatus::Succeeded, next);
    req.releases = vec![Release::new(jid(child), from.clone())];
    let out = finish_one(store, req).await;
    assert!(matches!(out, FinishOutcome::Finished { .. }), "{out:?}");
    from
}

/// An operator's release in place of `parent` at `at`, in the window starting `window`.
fn by_operator(parent: &str, at: Timestamp, window: Timestamp) -> UpstreamRun {
    UpstreamRun {
        job: jid(parent),
        fire_at: at,
        run: RunId(0),
        status: RunStatus::Succeeded,
        depth: 1,
        released_by: Some("ops@example.com".into()),
        window: Some(window),
    }
}

/// The queued releases of `d` as (parent, key).
async fn queued(store: &dyn JobStore, d: &str) -> Vec<(String, Timestamp)> {
    let mut q: Vec<_> = store
        .releases(Some(&jid(d)), 100)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.from.job.to_string(), r.from.key()))
        .collect();
    q.sort();
    q
}

/// Runs `d`'s released next fire to its end under `token`.
async fn run_next(store: &dyn JobStore, d: &str, token: u64) {
    let rec = record(store, d).await;
    let next = rec.next.expect("a released fire");
    let mut req = start_req(d, next.at, rec.version, token);
    req.trigger = TriggerKind::Upstream;
    let run = started(store, req).await;
    finish_one(store, finish_req(run, d, token, RunStatus::Succeeded, None)).await;
}

/// A job that joins by a day window takes one group per window: a parent's second
/// release of a window while the first is queued is the same key; once the window
/// is taken, a parent's later release of it is not queued; the next window queues;
/// a pause puts a taken, unstarted group back in the queue (its marks removed) and
/// a resume takes it again; [`take_releases`](crate::store::Jobs::take_releases)
/// keeps recent marks.
pub async fn a_windowed_join_takes_each_window_once(store: &dyn JobStore) {
    let (b, c, d) = (unique("win-b"), unique("win-c"), unique("win-d"));
    let day = JoinWindow::new(WindowUnit::Day, "UTC").unwrap();
    let t0 = day.start(long_ago(store).await);
    let w1 = t0 + HOUR * 24;
    store.upsert(&job(&b), Some(t0 + HOUR)).await.unwrap();
    store.upsert(&job(&c), Some(t0 + HOUR * 5)).await.unwrap();
    let join = job(&d)
        .to_builder()
        .schedule(Schedule::never())
        .after(vec![jid(&b), jid(&c)])
        .join_window(day.clone())
        .build()
        .unwrap();
    store.upsert(&join, None).await.unwrap();

    // b at 01:00 and 02:00: one release of the day queued, the first.
    let first = fire(store, &b, (t0 + HOUR, Some(t0 + HOUR * 2), 1), &d, &day).await;
    fire(store, &b, (t0 + HOUR * 2, Some(t0 + HOUR * 6), 2), &d, &day).await;
    assert_eq!(queued(store, &d).await, vec![(b.clone(), t0)]);
    assert_eq!(record(store, &d).await.next, None, "waits for c");
    // c at 05:00: the day is whole and taken, naming both runs.
    let from_c = fire(store, &c, (t0 + HOUR * 5, None, 1), &d, &day).await;
    let next = record(store, &d).await.next.expect("released");
    assert_eq!(next.trigger, TriggerKind::Upstream);
    assert_eq!(next.context.upstream, vec![first, from_c]);
    assert!(queued(store, &d).await.is_empty());
    // b at 06:00, after the day was taken: not queued.
    fire(
        store,
        &b,
        (t0 + HOUR * 6, Some(t0 + HOUR * 25), 3),
        &d,
        &day,
    )
    .await;
    assert!(
        queued(store, &d).await.is_empty(),
        "a later release of a taken window is not queued"
    );
    run_next(store, &d, 1).await;
    assert_eq!(store.take_releases(100).await.unwrap(), 0);

    // The next day queues; c's place taken by an operator: taken.
    let b1 = fire(store, &b, (t0 + HOUR * 25, None, 4), &d, &day).await;
    assert_eq!(queued(store, &d).await, vec![(b.clone(), w1)]);
    let in_place = by_operator(&c, w1 + HOUR * 3, w1);
    store
        .queue_releases(&[Release::new(jid(&d), in_place.clone())], None)
        .await
        .unwrap();
    let next = record(store, &d).await.next.expect("released");
    assert_eq!(next.context.upstream, vec![b1.clone(), in_place.clone()]);
    // A pause puts the unstarted group back; a resume takes it again.
    store.set_enabled(&jid(&d), false, None).await.unwrap();
    let mut both = vec![(b.clone(), w1), (c.clone(), w1)];
    both.sort();
    assert_eq!(
        queued(store, &d).await,
        both,
        "the taken group is queued again"
    );
    store.set_enabled(&jid(&d), true, None).await.unwrap();
    let next = record(store, &d).await.next.expect("taken again");
    assert_eq!(next.context.upstream, vec![b1, in_place]);
    assert!(queued(store, &d).await.is_empty());
    run_next(store, &d, 2).await;
    // Recent marks survive a maintenance pass: the first day stays taken.
    store.take_releases(100).await.unwrap();
    store
        .queue_releases(
            &[Release::new(jid(&d), by_operator(&b, t0 + HOUR * 9, t0))],
            None,
        )
        .await
        .unwrap();
    assert!(queued(store, &d).await.is_empty(), "day one stays taken");
    cleanup(store, &[b, c, d]).await;
}
