//! The wait deadline on the memory backend and a paused tokio clock: a join whose
//! instant waits past its job's `wait_deadline` raises one `waiting` alarm per
//! instant, naming the parent it waits for, however many nodes check.

use crate::support;

use crate::engine_dependencies::{failing_diamond, fails_after, id, never};
use jobwheel::store::{AlarmOutbox, Jobs};
use jobwheel::{AlarmKind, Clock, Scheduler};
use std::time::Duration;
use support::*;

const S: Duration = Duration::from_secs(1);

#[tokio::test(start_paused = true)]
async fn a_join_waiting_past_its_deadline_raises_one_alarm_per_instant() {
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let log = Log::default();
    let t0 = at("2026-01-01T00:00:00Z");
    let mut handles = Vec::new();
    // Two nodes check the deadlines on their heartbeats.
    for node in ["n1", "n2"] {
        let s = Scheduler::builder()
            .store(store.clone())
            .locks(locks.clone())
            .handler("h", recording(&log, &clock))
            // Branch c fails for every instant after the first.
            .handler("flaky", fails_after(&log, &clock, t0))
            .config(config(node))
            .build()
            .unwrap();
        handles.push(s.start().await.unwrap());
    }
    let sched = handles[0].scheduler();
    let deadline = Duration::from_secs(300);
    let d = never("d", "h", &[])
        .after(vec![id("b"), id("c")])
        .wait_deadline(deadline);
    failing_diamond(sched, d.build().unwrap()).await;
    let waiting = || async {
        store
            .alarms(&jobwheel::AlarmQuery::new(100))
            .await
            .unwrap()
            .into_iter()
            .filter(|a| a.event.kind == AlarmKind::Waiting)
            .map(|a| a.event)
            .collect::<Vec<_>>()
    };
    // Origin fires at t0, t0 + 60 s and t0 + 120 s; b releases d's instant a few
    // milliseconds after each, c only the first.
    advance(150 * S).await;
    sched.pause("a").await.unwrap();
    let (t1, t2) = (t0 + 60 * S, t0 + 120 * S);
    assert_eq!(
        runs_of(&store, "d").await.len(),
        1,
        "the first instant joined"
    );
    let queued = store.releases(Some(&id("d")), 10).await.unwrap();
    assert_eq!(queued.len(), 2, "{queued:?}");
    let oldest = queued[0].released_at;
    // Not before the deadline.
    let before = (oldest + deadline).duration_since(clock.now()) - 5 * S;
    advance(before).await;
    assert!(waiting().await.is_empty(), "{:?}", waiting().await);
    // After it: one alarm per waiting instant, whichever node raised it.
    advance(deadline).await;
    let got = waiting().await;
    let mut instants: Vec<_> = got.iter().map(|e| e.fire_at).collect();
    instants.sort();
    assert_eq!(instants, vec![t1, t2], "{got:?}");
    for e in &got {
        assert_eq!(e.job_id, id("d"));
        assert_eq!(e.waiting_for, vec![id("c")], "names the missing parent");
        assert!(e.run_id.is_none());
        let text = e.error.as_deref().unwrap_or_default();
        assert!(text.contains("waits for c"), "{text}");
    }
    let listed = store.releases(Some(&id("d")), 10).await.unwrap();
    assert!(listed.iter().all(|q| q.alarmed_at.is_some()), "{listed:?}");
    // Many more heartbeats on both nodes raise nothing more.
    advance(20 * 60 * S).await;
    assert_eq!(waiting().await.len(), 2);
    // An operator's release of one instant runs the join; the other stays alarmed.
    sched.release_instant("d", t1).await.unwrap();
    advance(10 * S).await;
    assert_eq!(runs_of(&store, "d").await.len(), 2);
    assert_eq!(waiting().await.len(), 2);
    for h in handles {
        h.shutdown().await;
    }
}
