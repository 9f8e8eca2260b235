//! Engine benchmarks on the memory backend, real clock, multi-threaded runtime.
//!
//! `cargo bench --bench engine -- [--jobs 10000] [--seconds 10] [--oneshots 200000]`
//!
//! 1. **Lag**: `--jobs` jobs on a 1-second interval for `--seconds`; lag is the
//!    wall-clock time from a fire's scheduled instant to its handler's start.
//! 2. **Throughput**: `--oneshots` one-shot jobs due now, noop handlers, through the
//!    full cycle (claim, start, execute, finish, release); runs per second.

use jobwheel::memory::{LocalLocks, MemoryStore};
use jobwheel::store::JobsExt as _;
use jobwheel::{Job, JobContext, JobError, Schedule, Scheduler, SchedulerConfig, Timestamp};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn config() -> SchedulerConfig {
    SchedulerConfig::default()
        .node_id("bench")
        .claim_batch(5000)
        .write_batch(2000)
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

/// `aligned`: every job fires on the whole second (a burst of `jobs` fires at once);
/// otherwise the jobs' anchors spread them evenly over each second.
async fn lag(jobs: usize, seconds: u64, aligned: bool) {
    let lags = Arc::new(Mutex::new(Vec::<(i64, i64)>::with_capacity(
        jobs * seconds as usize + jobs,
    )));
    let l = lags.clone();
    let s = Scheduler::builder()
        .store(MemoryStore::new())
        .locks(LocalLocks::new())
        .handler("noop", move |ctx: JobContext| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_micros() as i64;
            let lag = now - ctx.fire_at.as_millis() * 1000;
            l.lock().unwrap().push((ctx.fire_at.as_millis(), lag));
            async { Ok::<(), JobError>(()) }
        })
        .executor(jobwheel::LocalExecutor::with_concurrency(jobs * 6).unwrap())
        .config(config())
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    for i in 0..jobs {
        let offset = if aligned { 0 } else { (i * 1000 / jobs) as i64 };
        let schedule =
            Schedule::interval(Duration::from_secs(1), Timestamp::from_millis(offset)).unwrap();
        h.scheduler()
            .upsert(
                Job::builder(format!("tick-{i}"), "noop", schedule)
                    .build()
                    .unwrap(),
            )
            .await
            .unwrap();
    }
    // Measure whole seconds that start after every job is stored.
    let first = Timestamp::now().as_millis() / 1000 * 1000 + 2000;
    let last = first + (seconds as i64 - 1) * 1000;
    tokio::time::sleep(Duration::from_millis(
        (last - Timestamp::now().as_millis()).max(0) as u64 + 1500,
    ))
    .await;
    h.shutdown().await;
    let seen = lags.lock().unwrap();
    let signed: Vec<i64> = seen
        .iter()
        .filter(|(f, _)| *f >= first && *f < last + 1000)
        .map(|(_, l)| *l)
        .collect();
    let early = signed.iter().filter(|l| **l < 0).count();
    let earliest = signed.iter().min().copied().unwrap_or(0);
    let mut window: Vec<u64> = signed.iter().map(|l| (*l).max(0) as u64).collect();
    window.sort_unstable();
    let expected = jobs * seconds as usize;
    println!(
        "lag      | {jobs} jobs every 1 s, {}, {seconds} s | fires {} of {expected} (missed {}) | p50 {:.3} ms | p99 {:.3} ms | max {:.3} ms | early {early} (earliest {:.3} ms)",
        if aligned {
            "all on the whole second"
        } else {
            "spread over the second"
        },
        window.len(),
        expected.saturating_sub(window.len()),
        pct(&window, 0.50),
        pct(&window, 0.99),
        pct(&window, 1.0),
        earliest as f64 / 1000.0,
    );
}

async fn throughput(n: usize) {
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    let store = MemoryStore::new();
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(LocalLocks::new())
        .handler("noop", move |_ctx: JobContext| {
            d.fetch_add(1, Ordering::Relaxed);
            async { Ok::<(), JobError>(()) }
        })
        .executor(jobwheel::LocalExecutor::with_concurrency(4096).unwrap())
        .config(config())
        .build()
        .unwrap();
    let now = Timestamp::now();
    for i in 0..n {
        let job = Job::builder(format!("once-{i}"), "noop", Schedule::once(now))
            .build()
            .unwrap();
        s.store().upsert(&job, Some(now)).await.unwrap();
    }
    let started = Instant::now();
    let h = s.start().await.unwrap();
    while h.scheduler().metrics().finished < n as u64 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        if started.elapsed() > Duration::from_secs(300) {
            break;
        }
    }
    let took = started.elapsed();
    let m = h.scheduler().metrics();
    h.shutdown().await;
    println!(
        "runs/s   | {n} one-shots due now, noop, 1 node | {} finished in {:.2} s | {:.0} runs/s | handler calls {}",
        m.finished,
        took.as_secs_f64(),
        m.finished as f64 / took.as_secs_f64(),
        done.load(Ordering::Relaxed),
    );
}

/// The floor under the lag: tokio's timer alone, `n` sleeps spread over a second,
/// lateness from the requested wall-clock millisecond to the wake-up.
async fn timer_floor(n: usize) {
    let lags = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let base = Timestamp::now().as_millis() / 1000 * 1000 + 1000;
    let mut tasks = Vec::new();
    for i in 0..n {
        let lags = lags.clone();
        let at_ms = base + (i * 1000 / n) as i64;
        tasks.push(tokio::spawn(async move {
            let wait = Duration::from_millis((at_ms - Timestamp::now().as_millis()).max(0) as u64);
            tokio::time::sleep(wait).await;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_micros() as i64;
            lags.lock()
                .unwrap()
                .push((now - at_ms * 1000).max(0) as u64);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut l = lags.lock().unwrap().clone();
    l.sort_unstable();
    println!(
        "timer    | tokio sleep alone, {n} wake-ups spread over 1 s | p50 {:.3} ms | p99 {:.3} ms | max {:.3} ms",
        pct(&l, 0.5),
        pct(&l, 0.99),
        pct(&l, 1.0)
    );
}

fn main() {
    let jobs = arg("--jobs", 10_000);
    let seconds = arg("--seconds", 10) as u64;
    let oneshots = arg("--oneshots", 200_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "jobwheel engine bench, memory backend, {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    rt.block_on(timer_floor(jobs));
    rt.block_on(lag(jobs, seconds, false));
    rt.block_on(lag(jobs, seconds, true));
    rt.block_on(throughput(oneshots));
}
