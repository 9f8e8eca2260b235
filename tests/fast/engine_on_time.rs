//! Every fire on time under mixed load, on a paused clock: a recurring job beside a
//! stream of one-shots keeps its instants while executor slots are free, whatever the
//! misfire policy, and claims armed ahead of time never hold the slots a due fire
//! needs.

use crate::support;

use jobwheel::{
    Clock, Job, JobContext, JobError, MisfirePolicy, RunStatus, Schedule, Scheduler, Timestamp,
    TriggerKind,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use support::*;

const POLL: Duration = Duration::from_secs(1);

/// How the one-shots arrive.
#[derive(Clone, Copy, Debug)]
enum Stream {
    /// All 400 stored up front, due every 25 ms from 3 s to 13 s: the node arms them
    /// ahead of their instants.
    Scheduled,
    /// One stored every 25 ms from 3 s on, due a second later.
    Live,
}

struct Outcome {
    /// `(fire_at, started, trigger)` of every run of the recurring job.
    ticks: Vec<(Timestamp, Timestamp, TriggerKind)>,
    one_shots: usize,
    busiest: usize,
    misfired_records: usize,
}

/// One scheduler with the default configuration (64 + 16 slots), a job every second
/// and 40 one-shots a second for ten seconds, every handler taking 100 ms.
async fn mixed_load(policy: MisfirePolicy, stream: Stream) -> Outcome {
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let log = Log::default();
    let (busy, busiest) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (l, c, b, m) = (log.clone(), clock.clone(), busy.clone(), busiest.clone());
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("h", move |ctx: JobContext| {
            l.record(&ctx, &*c);
            let b = b.clone();
            m.fetch_max(b.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
            async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                b.fetch_sub(1, Ordering::SeqCst);
                Ok::<(), JobError>(())
            }
        })
        .config(config("n1"))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    let t0 = clock.now();
    let tick = Job::builder(
        "tick",
        "h",
        Schedule::every(Duration::from_secs(1)).unwrap(),
    )
    .misfire(policy)
    .build()
    .unwrap();
    h.scheduler().upsert(tick).await.unwrap();
    let one_shot = |i: u64, at: Timestamp| {
        Job::builder(format!("once-{i:03}"), "h", Schedule::once(at))
            .build()
            .unwrap()
    };
    match stream {
        Stream::Scheduled => {
            for i in 0..400 {
                let at = t0 + Duration::from_millis(3_000 + i * 25);
                h.scheduler().upsert(one_shot(i, at)).await.unwrap();
            }
            advance(Duration::from_secs(16)).await;
        }
        Stream::Live => {
            advance(Duration::from_secs(3)).await;
            for i in 0..400 {
                let due = clock.now() + Duration::from_secs(1);
                h.scheduler().upsert(one_shot(i, due)).await.unwrap();
                advance(Duration::from_millis(25)).await;
            }
            advance(Duration::from_secs(3)).await;
        }
    }
    h.shutdown().await;
    let runs = runs_of(&store, "tick").await;
    let all = log.all();
    Outcome {
        ticks: log
            .of("tick")
            .iter()
            .map(|s| (s.fire_at, s.started, s.trigger))
            .collect(),
        one_shots: all.iter().filter(|s| s.job.starts_with("once-")).count(),
        busiest: busiest.load(Ordering::SeqCst),
        misfired_records: runs
            .iter()
            .filter(|r| r.status == RunStatus::Misfired || r.covers.is_some())
            .count(),
    }
}

fn assert_on_time(policy: MisfirePolicy, stream: Stream) -> impl FnOnce(Outcome) {
    move |o: Outcome| {
        let what = format!("{policy:?}, {stream:?}");
        assert_eq!(o.one_shots, 400, "{what}: every one-shot ran");
        assert!(
            o.busiest < 80,
            "{what}: the premise is free slots (busiest {})",
            o.busiest
        );
        assert!(
            o.ticks.len() >= 15,
            "{what}: a tick every second: {:?}",
            o.ticks
        );
        let mut expected = o.ticks[0].0;
        for (fire_at, started, trigger) in &o.ticks {
            assert_eq!(*fire_at, expected, "{what}: no tick skipped or coalesced");
            assert_eq!(*trigger, TriggerKind::Schedule, "{what}: {fire_at}");
            let lag = started.duration_since(*fire_at);
            assert!(
                lag < POLL,
                "{what}: the tick of {fire_at} started {lag:?} late"
            );
            assert!(started >= fire_at, "{what}: never early");
            expected = expected + Duration::from_secs(1);
        }
        assert_eq!(o.misfired_records, 0, "{what}: nothing misfired");
    }
}

async fn case(policy: MisfirePolicy, stream: Stream) {
    let check = assert_on_time(policy, stream);
    check(mixed_load(policy, stream).await);
}

#[tokio::test(start_paused = true)]
async fn fire_once_ticks_on_time_beside_scheduled_one_shots() {
    case(MisfirePolicy::FireOnce, Stream::Scheduled).await;
}

#[tokio::test(start_paused = true)]
async fn skip_ticks_on_time_beside_scheduled_one_shots() {
    case(MisfirePolicy::Skip, Stream::Scheduled).await;
}

#[tokio::test(start_paused = true)]
async fn catch_up_ticks_on_time_beside_scheduled_one_shots() {
    case(MisfirePolicy::CatchUp { max: 3 }, Stream::Scheduled).await;
}

#[tokio::test(start_paused = true)]
async fn fire_once_ticks_on_time_beside_a_live_stream() {
    case(MisfirePolicy::FireOnce, Stream::Live).await;
}

#[tokio::test(start_paused = true)]
async fn skip_ticks_on_time_beside_a_live_stream() {
    case(MisfirePolicy::Skip, Stream::Live).await;
}

#[tokio::test(start_paused = true)]
async fn catch_up_ticks_on_time_beside_a_live_stream() {
    case(MisfirePolicy::CatchUp { max: 3 }, Stream::Live).await;
}
