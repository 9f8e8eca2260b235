//! Remote executor benchmarks: one scheduler on the memory backend dispatching to
//! three executor server instances on loopback (same process, real HTTP).
//!
//! `cargo bench --bench remote --features remote -- [--runs 20000] [--rate 1000] [--seconds 10] [--concurrency 256]`
//!
//! 1. **Throughput**: `--runs` one-shot jobs due now, no-op handler, round-robin
//!    over the three instances; remote runs per second through the whole cycle
//!    (claim, start, dispatch, handler, result, finish).
//! 2. **Dispatch lag**: `--rate` interval jobs every 1 s spread over the second
//!    (`--rate` fires/s) for `--seconds`; lag is the wall-clock time from a fire's
//!    instant to its handler's start on the instance.

use jobwheel::memory::{LocalLocks, MemoryStore};
use jobwheel::placement::{RemoteTarget, Routing};
use jobwheel::remote::{ExecutorServer, RemoteGroup};
use jobwheel::store::JobsExt as _;
use jobwheel::store::RunLog;
use jobwheel::{
    Job, JobContext, JobError, LocalExecutor, Schedule, Scheduler, SchedulerConfig, Timestamp,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SECRET: &str = "bench-secret-0123456789abcdef";

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

/// Three instances whose `noop` handler counts calls and records (fire_at ms, lag µs).
async fn instances(
    calls: &Arc<AtomicUsize>,
    lags: &Arc<Mutex<Vec<(i64, i64)>>>,
) -> (Vec<ExecutorServer>, RemoteGroup) {
    let mut servers = Vec::new();
    for i in 0..3 {
        let (c, l) = (calls.clone(), lags.clone());
        let noop = move |ctx: JobContext| {
            let lag = now_us() - ctx.fire_at.as_millis() * 1000;
            l.lock().unwrap().push((ctx.fire_at.as_millis(), lag));
            c.fetch_add(1, Ordering::Relaxed);
            async { Ok::<(), JobError>(()) }
        };
        servers.push(
            ExecutorServer::builder("bench", SECRET)
                .unwrap()
                .instance(format!("i{i}"))
                .handler("noop", noop)
                .capacity(4096)
                .bind("127.0.0.1:0")
                .await
                .unwrap(),
        );
    }
    let urls: Vec<String> = servers
        .iter()
        .map(|s| format!("http://{}", s.local_addr()))
        .collect();
    (servers, RemoteGroup::fixed("bench", SECRET, urls).unwrap())
}

fn scheduler(store: &MemoryStore, group: RemoteGroup, concurrency: usize) -> Scheduler {
    Scheduler::builder()
        .store(store.clone())
        .locks(LocalLocks::new())
        .remote(group)
        .executor(LocalExecutor::with_concurrency(concurrency).unwrap())
        .config(
            SchedulerConfig::default()
                .node_id("bench")
                .claim_batch(2000)
                .write_batch(1000),
        )
        .build()
        .unwrap()
}

fn target() -> RemoteTarget {
    RemoteTarget::new("bench")
        .unwrap()
        .routing(Routing::RoundRobin)
}

async fn throughput(n: usize, concurrency: usize) {
    let (calls, lags) = (Arc::new(AtomicUsize::new(0)), Arc::default());
    let (servers, group) = instances(&calls, &lags).await;
    let store = MemoryStore::new();
    let s = scheduler(&store, group, concurrency);
    let now = Timestamp::now();
    for i in 0..n {
        let job = Job::builder(format!("once-{i}"), "noop", Schedule::once(now))
            .remote(target())
            .build()
            .unwrap();
        s.store().upsert(&job, Some(now)).await.unwrap();
    }
    let started = Instant::now();
    let h = s.start().await.unwrap();
    while h.scheduler().metrics().finished < n as u64
        && started.elapsed() < Duration::from_secs(300)
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = started.elapsed();
    let m = h.scheduler().metrics();
    h.shutdown().await;
    let ok = store
        .runs(
            &jobwheel::RunQuery::new()
                .status(jobwheel::RunStatus::Succeeded)
                .limit(n + 10),
        )
        .await
        .unwrap()
        .len();
    println!(
        "runs/s | {n} one-shots due now, noop, 3 instances, round-robin, concurrency {concurrency} | {} finished ({ok} succeeded) in {:.2} s | {:.0} remote runs/s | handler calls {}",
        m.finished,
        took.as_secs_f64(),
        m.finished as f64 / took.as_secs_f64(),
        calls.load(Ordering::Relaxed),
    );
    for srv in servers {
        srv.shutdown().await;
    }
}

async fn lag(rate: usize, seconds: u64, concurrency: usize) {
    let (calls, lags) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(Mutex::new(Vec::new())),
    );
    let (servers, group) = instances(&calls, &lags).await;
    let store = MemoryStore::new();
    let s = scheduler(&store, group, concurrency);
    let h = s.start().await.unwrap();
    for i in 0..rate {
        let anchor = Timestamp::from_millis((i * 1000 / rate) as i64);
        let schedule = Schedule::interval(Duration::from_secs(1), anchor).unwrap();
        let job = Job::builder(format!("tick-{i}"), "noop", schedule)
            .remote(target())
            .build()
            .unwrap();
        h.scheduler().upsert(job).await.unwrap();
    }
    let first = Timestamp::now().as_millis() / 1000 * 1000 + 2000;
    let last = first + (seconds as i64 - 1) * 1000;
    tokio::time::sleep(Duration::from_millis(
        (last - Timestamp::now().as_millis()).max(0) as u64 + 1500,
    ))
    .await;
    h.shutdown().await;
    let seen = lags.lock().unwrap().clone();
    let window: Vec<i64> = seen
        .iter()
        .filter(|(f, _)| *f >= first && *f < last + 1000)
        .map(|(_, l)| *l)
        .collect();
    let early = window.iter().filter(|l| **l < 0).count();
    let mut sorted: Vec<u64> = window.iter().map(|l| (*l).max(0) as u64).collect();
    sorted.sort_unstable();
    let expected = rate * seconds as usize;
    println!(
        "lag    | {rate} fires/s over 3 instances for {seconds} s | fires {} of {expected} (missed {}) | p50 {:.2} ms p99 {:.2} ms max {:.2} ms | early {early}",
        sorted.len(),
        expected.saturating_sub(sorted.len()),
        pct(&sorted, 0.5),
        pct(&sorted, 0.99),
        pct(&sorted, 1.0),
    );
    for srv in servers {
        srv.shutdown().await;
    }
}

fn main() {
    let runs = arg("--runs", 20_000);
    let rate = arg("--rate", 1_000);
    let seconds = arg("--seconds", 10) as u64;
    let concurrency = arg("--concurrency", 256);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "jobwheel remote executor bench, loopback, {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    rt.block_on(throughput(runs, concurrency));
    rt.block_on(lag(rate, seconds, concurrency));
}
