//! An end-to-end cluster check shared by the backend tests.

use jobwheel::store::JobsExt as _;
use jobwheel::{
    Job, JobContext, JobError, JobStore, LockProvider, RetryPolicy, RunQuery, RunStatus, Schedule,
    Scheduler, SchedulerConfig, Timestamp,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Two schedulers, each on its own backend handles from `open` (one database): 20
/// interval jobs, 200 one-shots and a failing job with one retry, for 4.5 s. Every
/// fire runs exactly once, the retry happens, both nodes deregister.
pub async fn two_schedulers_run_every_fire_once<F, Fut>(open: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = (Arc<dyn JobStore>, Arc<dyn LockProvider>)>,
{
    let seen: Arc<Mutex<HashMap<(String, i64), u32>>> = Arc::default();
    let mut handles = Vec::new();
    for node in ["a", "b"] {
        let (store, locks) = open().await;
        let s = seen.clone();
        let sched = Scheduler::builder()
            .store(store)
            .locks(locks)
            .handler("count", move |ctx: JobContext| {
                *s.lock()
                    .unwrap()
                    .entry((ctx.job.id().to_string(), ctx.fire_at.as_millis()))
                    .or_default() += 1;
                async { Ok::<(), JobError>(()) }
            })
            .handler("fail", |_ctx: JobContext| async {
                Err(JobError::msg("boom"))
            })
            .config(
                SchedulerConfig::default()
                    .node_id(node)
                    .poll_interval(Duration::from_millis(200))
                    .lookahead(Duration::from_secs(1)),
            )
            .build()
            .unwrap();
        handles.push(sched.start().await.unwrap());
    }
    let now = Timestamp::now();
    for i in 0..20 {
        handles[i % 2]
            .scheduler()
            .upsert(
                Job::builder(
                    format!("tick-{i}"),
                    "count",
                    Schedule::every(Duration::from_secs(1)).unwrap(),
                )
                .build()
                .unwrap(),
            )
            .await
            .unwrap();
    }
    for i in 0..200 {
        handles[i % 2]
            .scheduler()
            .upsert(
                Job::builder(format!("once-{i}"), "count", Schedule::once(now))
                    .build()
                    .unwrap(),
            )
            .await
            .unwrap();
    }
    let retry = RetryPolicy::new(2, Duration::from_secs(1), Duration::from_secs(1)).unwrap();
    handles[0]
        .scheduler()
        .upsert(
            Job::builder("flaky", "fail", Schedule::once(now))
                .retry(retry)
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let store = handles[0].scheduler().store().clone();
    let metrics: Vec<_> = handles.iter().map(|h| h.scheduler().metrics()).collect();
    for h in handles {
        h.shutdown().await;
    }
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.values().all(|n| *n == 1),
        "a fire ran twice: {:?}",
        seen.iter().filter(|(_, n)| **n > 1).collect::<Vec<_>>()
    );
    let once = seen.keys().filter(|(j, _)| j.starts_with("once-")).count();
    assert_eq!(once, 200, "every one-shot ran");
    for i in 0..20 {
        let n = seen
            .keys()
            .filter(|(j, _)| *j == format!("tick-{i}"))
            .count();
        assert!(n >= 4, "tick-{i} ran {n} times in 4.5 s");
    }
    assert!(metrics.iter().all(|m| m.finish_refused == 0), "{metrics:?}");
    let flaky = store
        .runs(&RunQuery::new().job(jobwheel::JobId::new("flaky").unwrap()))
        .await
        .unwrap();
    assert_eq!(flaky.len(), 2, "one attempt and one retry");
    assert!(flaky.iter().all(|r| r.status == RunStatus::Failed));
    assert_eq!(
        store.nodes().await.unwrap().items.len(),
        0,
        "both nodes deregistered"
    );
}

/// One fleet at a time in a test binary: a fleet is three schedulers busy for 20 s
/// or more, and the lag bound measures the fleet, not a second fleet beside it on the
/// same cores.
static ONE_FLEET: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How long a fleet runs after the up-front one-shots drained (the lag of the
/// 1-second jobs is measured over that time, less the last [`WIND_DOWN`]).
pub const STEADY: Duration = Duration::from_secs(8);
/// How much longer than [`Fleet::seconds`] a fleet may run waiting for [`STEADY`].
pub const MORE_AT_MOST: Duration = Duration::from_secs(40);
/// The end of a run: the stream stops this long before the schedulers shut down, so
/// its last one-shots (due up to 2 s after they are stored) have run.
const WIND_DOWN: Duration = Duration::from_secs(3);

/// The shape of a fleet test.
#[derive(Debug, Clone, Copy)]
pub struct Fleet {
    /// Schedulers on one database.
    pub nodes: usize,
    /// Jobs on a 1-second interval.
    pub jobs: usize,
    /// How long the fleet runs at least: it runs on (up to [`MORE_AT_MOST`] longer)
    /// until the 1-second jobs have had [`STEADY`] after the up-front one-shots
    /// drained, where their lag is measured.
    pub seconds: u64,
    /// One-shots stored up front, all due at once.
    pub oneshots: usize,
    /// One-shots stored per second while the fleet runs (through the schedulers, as
    /// an application would), each due 0-2 s later, with handlers of 50-500 ms.
    pub stream_per_sec: usize,
    /// The p99 lag (handler start minus fire instant) the 1-second jobs must keep
    /// once the up-front one-shots have drained: a generous correctness bound; the
    /// tight figure is the benchmark's. `None`: printed, not asserted (a backend whose
    /// single writer spends most of the run draining the up-front one-shots on a
    /// shared 2-core machine).
    pub p99_bound: Option<Duration>,
}

impl Fleet {
    /// Three schedulers, 300 jobs for 20 s, 5,000 one-shots up front, and a stream of
    /// `stream_per_sec` one-shots a second; the 1-second jobs' p99 lag within 1 s.
    pub fn three_nodes(stream_per_sec: usize) -> Fleet {
        Fleet {
            nodes: 3,
            jobs: 300,
            seconds: 20,
            oneshots: 5000,
            stream_per_sec,
            p99_bound: Some(Duration::from_secs(1)),
        }
    }
}

/// `nodes` schedulers on one database, `jobs` jobs on a 1-second interval for at
/// least `seconds`, `oneshots` one-shot jobs due at once, and a stream of one-shots
/// beside them. Every fire runs exactly once: no duplicate, no gap in any job's
/// seconds, every one-shot; and the 1-second jobs keep their p99 lag under the bound
/// while the stream runs, measured over the last [`STEADY`] or more, once the
/// up-front one-shots have drained (how soon they drain is the machine's speed, so
/// the run waits for it rather than asserting it).
pub async fn fleet_runs_every_fire_exactly_once<F, Fut>(open: F, fleet: Fleet)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = (Arc<dyn JobStore>, Arc<dyn LockProvider>)>,
{
    let Fleet {
        nodes,
        jobs,
        seconds,
        oneshots,
        stream_per_sec,
        p99_bound,
    } = fleet;
    let _alone = ONE_FLEET.lock().await;
    let seen: Arc<Mutex<HashMap<(String, i64), u32>>> = Arc::default();
    let lags: Arc<Mutex<Vec<(i64, u64)>>> = Arc::default();
    // When the last one-shot stored up front started (epoch ms), and how many did.
    let drained: Arc<std::sync::atomic::AtomicI64> = Arc::default();
    let once_started: Arc<std::sync::atomic::AtomicUsize> = Arc::default();
    let mut handles = Vec::new();
    for n in 0..nodes {
        let (store, locks) = open().await;
        let (s, l, d, o) = (
            seen.clone(),
            lags.clone(),
            drained.clone(),
            once_started.clone(),
        );
        let sched = Scheduler::builder()
            .store(store)
            .locks(locks)
            .handler("count", move |ctx: JobContext| {
                let now = Timestamp::now();
                let fire = ctx.fire_at.as_millis();
                *s.lock()
                    .unwrap()
                    .entry((ctx.job.id().to_string(), fire))
                    .or_default() += 1;
                let id = ctx.job.id().as_str();
                if id.starts_with("every-") {
                    let lag = now.as_millis().saturating_sub(fire).max(0) as u64;
                    l.lock().unwrap().push((fire, lag));
                } else if id.starts_with("once-") {
                    d.fetch_max(now.as_millis(), std::sync::atomic::Ordering::SeqCst);
                    o.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                let ms = ctx.payload()["ms"].as_u64().unwrap_or(0);
                async move {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    Ok::<(), JobError>(())
                }
            })
            .executor(jobwheel::LocalExecutor::with_concurrency(512).unwrap())
            .config(SchedulerConfig::default().node_id(format!("fleet-{n}")))
            .build()
            .unwrap();
        handles.push(sched.start().await.unwrap());
    }
    let store = handles[0].scheduler().store().clone();
    for i in 0..jobs {
        let job = Job::builder(
            format!("every-{i}"),
            "count",
            Schedule::every(Duration::from_secs(1)).unwrap(),
        )
        .build()
        .unwrap();
        handles[i % nodes].scheduler().upsert(job).await.unwrap();
    }
    let began = Timestamp::now();
    let oneshot_jobs: Vec<Job> = (0..oneshots)
        .map(|i| {
            Job::builder(format!("once-{i}"), "count", Schedule::once(began))
                .build()
                .unwrap()
        })
        .collect();
    for job in &oneshot_jobs {
        store.upsert(job, Some(began)).await.unwrap();
    }
    // The stream: a few one-shots every 20 ms through the schedulers, each due 0-2 s
    // after it is stored, with handlers of 50-500 ms.
    let schedulers: Vec<Scheduler> = handles.iter().map(|h| h.scheduler().clone()).collect();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let streamed = tokio::spawn({
        let (schedulers, stop) = (schedulers.clone(), stop.clone());
        async move {
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            let began = tokio::time::Instant::now();
            let mut n = 0usize;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                tick.tick().await;
                // As many as the rate asks for by now, so the stream keeps its rate.
                let target = (began.elapsed().as_secs_f64() * stream_per_sec as f64) as usize;
                let batch = (n..target.max(n)).map(|k| {
                    let due = Timestamp::now() + Duration::from_millis((k as u64 * 37) % 2000);
                    let job = Job::builder(format!("stream-{k}"), "count", Schedule::once(due))
                        .payload(serde_json::json!({ "ms": 50 + (k as u64 * 53) % 450 }))
                        .build()
                        .unwrap();
                    let s = schedulers[k % schedulers.len()].clone();
                    async move { s.upsert(job).await.unwrap() }
                });
                futures::future::join_all(batch).await;
                n = target.max(n);
            }
            n
        }
    });
    // The run: at least `seconds`, and on until the 1-second jobs have had `STEADY`
    // after the up-front one-shots drained (at most `MORE_AT_MOST` longer).
    let start = tokio::time::Instant::now();
    let least = Duration::from_secs(seconds).saturating_sub(WIND_DOWN);
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let ran = start.elapsed();
        let all = once_started.load(std::sync::atomic::Ordering::SeqCst) >= oneshots;
        let last = drained.load(std::sync::atomic::Ordering::SeqCst);
        let steady = all
            && Timestamp::now().as_millis() - last
                >= (STEADY - WIND_DOWN).as_millis() as i64 + 1_000;
        if (ran >= least && steady) || ran >= least + MORE_AT_MOST {
            break;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(WIND_DOWN).await;
    let ran = Timestamp::now().as_millis() - began.as_millis();
    let streamed = streamed.await.unwrap();
    // Counters are read after shutdown, when no fire is still running.
    for h in handles {
        h.shutdown().await;
    }
    let metrics: Vec<_> = schedulers.iter().map(|s| s.metrics()).collect();
    let seen = seen.lock().unwrap().clone();
    let dups: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(dups.is_empty(), "fires ran twice: {dups:?}");
    let once = seen.keys().filter(|(j, _)| j.starts_with("once-")).count();
    assert_eq!(once, oneshots, "every one-shot ran once");
    let stream = seen
        .keys()
        .filter(|(j, _)| j.starts_with("stream-"))
        .count();
    assert_eq!(stream, streamed, "every streamed one-shot ran once");
    for i in 0..jobs {
        let mut fires: Vec<i64> = seen
            .keys()
            .filter(|(j, _)| *j == format!("every-{i}"))
            .map(|(_, f)| *f)
            .collect();
        fires.sort_unstable();
        assert!(
            fires.len() as u64 >= seconds - 3,
            "every-{i} fired {} times in {ran} ms",
            fires.len()
        );
        assert!(
            fires.windows(2).all(|w| w[1] - w[0] == 1000),
            "every-{i} skipped a second: {fires:?}"
        );
    }
    assert!(metrics.iter().all(|m| m.finish_refused == 0), "{metrics:?}");
    let started: u64 = metrics.iter().map(|m| m.started).sum();
    assert_eq!(
        started as usize,
        seen.values().map(|n| *n as usize).sum::<usize>(),
        "every start ran its handler once"
    );
    // The 1-second jobs' lag from a second after the up-front one-shots drained
    // (fire order puts the recurring fires behind that backlog at first, and on
    // SQLite the single writer drains it for several seconds).
    let settled = drained.load(std::sync::atomic::Ordering::SeqCst) + 1_000;
    if p99_bound.is_some() {
        assert!(
            settled < began.as_millis() + ran - 5_000,
            "the up-front one-shots drained with at least 5 s of the run left (drained {} ms after the start, the run {ran} ms)",
            settled - 1_000 - began.as_millis()
        );
    }
    let mut steady: Vec<u64> = lags
        .lock()
        .unwrap()
        .iter()
        .filter(|(fire, _)| *fire >= settled)
        .map(|(_, lag)| *lag)
        .collect();
    steady.sort_unstable();
    let pct = |q: f64| {
        steady
            .get(((steady.len().max(1) - 1) as f64 * q) as usize)
            .copied()
            .unwrap_or(0)
    };
    println!(
        "fleet: {nodes} nodes, {} fires ({oneshots} one-shots up front, {streamed} streamed) in {:.1} s, \
         per node started: {:?}, late one-shots (misfires) {}; 1-second jobs from {:.1} s after the start: p50 {} ms, p99 {} ms, max {} ms",
        seen.len(),
        ran as f64 / 1000.0,
        metrics.iter().map(|m| m.started).collect::<Vec<_>>(),
        metrics.iter().map(|m| m.misfired.total()).sum::<u64>(),
        (settled - began.as_millis()) as f64 / 1000.0,
        pct(0.5),
        pct(0.99),
        pct(1.0)
    );
    if let Some(bound) = p99_bound {
        assert!(
            pct(0.99) <= bound.as_millis() as u64,
            "p99 lag of the 1-second jobs beside the stream: {} ms (bound {bound:?})",
            pct(0.99)
        );
    }
}
