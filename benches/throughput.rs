//! The benchmark harness for every backend: throughput, lag and poll cost, with the
//! database's own single-row transaction rate beside them.
//!
//! ```sh
//! cargo bench --bench throughput --all-features -- --backend postgres \
//!     [--workload all|drain|lag|mixed|poll|scale|cluster] [--nodes 2] [--jobs 20000] \
//!     [--rate 1000] [--seconds 10] [--stream 300] [--lead 2000] [--stored 1000000] \
//!     [--rounds 4] [--shards 8] [--json] \
//!     [--concurrency 2048] [--claim-batch 2000] [--claim-window 4000] [--write-batch 1000] \
//!     [--handler-ms 0] [--no-limit] [--profile] [--store-calls]
//! ```
//!
//! `--backend memory | sqlite | postgres | mysql | redis | redis-sharded | redis-cluster |
//! postgres+redis` (`redis-sharded`: the Redis store split into `--shards` shards,
//! default 8, on the one server; `redis-cluster`: the same on the cluster); server URLs
//! from `JOBWHEEL_POSTGRES_URL`, `JOBWHEEL_MYSQL_URL`, `JOBWHEEL_REDIS_URL`,
//! `JOBWHEEL_REDIS_CLUSTER` (default: the local development servers, and the cluster
//! `scripts/redis-cluster` starts on 7101-7106). Workloads:
//!
//! * **drain**: `--jobs` one-shot jobs due now, drained by `--nodes` schedulers with
//!   noop handlers (or handlers sleeping `--handler-ms`): runs/s, and the limit
//!   (pgbench `-N` for PostgreSQL, an autocommit single-row UPDATE loop for MySQL,
//!   `redis-benchmark -t set` for Redis) with the ratio.
//! * **lag**: `--rate` jobs firing every second, spread over the second, for
//!   `--seconds` on `--nodes` schedulers: lag p50/p99/max from the scheduled instant to
//!   the handler's start, and fires missed.
//! * **mixed**: `--rate` jobs firing every second beside a stream of `--stream`
//!   one-shots a second (handlers of 50-500 ms), on the default configuration: the
//!   recurring jobs' lag with the stream beside them (see `throughput/mixed.rs`).
//! * **poll**: one `due` scan of 1,000 due jobs with 1,000 jobs stored, then with
//!   `--stored` jobs stored (the rest far in the future): the scan's median time, and for
//!   the memory backend the resident memory per stored job.
//! * **scale** (only when named): the due scan and the drain beside `--stored` idle
//!   jobs (default 10,000,000) against the same beside 1,000, `--rounds` alternating
//!   rounds (see `throughput/scale.rs`).
//! * **cluster** (only when named): the drain on the Redis store on one Redis server,
//!   split into `--shards` shards on that server, and sharded over the local Redis
//!   Cluster (3 primaries), `--rounds` rounds rotating the order (see
//!   `throughput/scale.rs`).
//!
//! Each workload prints one table row; `--json` prints one JSON object per row too;
//! `--no-limit` leaves the limit measurement out (for profiling the drain alone);
//! `--profile` prints the drain's CPU split between the database server and the engines
//! (and, for Redis, the server commands per run). `--store-calls` prints, after the workloads, how long
//! the engines' store calls took by operation and how late fires were claimed (the
//! engine's own instruments, read in process). Each workload drops its tables (or
//! Redis keys) when it is done.

#[path = "throughput/cleanup.rs"]
mod cleanup;
#[path = "throughput/mixed.rs"]
mod mixed;
#[path = "throughput/profile.rs"]
mod profile;
#[path = "../tests/support/redis_keys.rs"]
mod redis_keys;
#[path = "throughput/scale.rs"]
mod scale;
#[path = "throughput/store_calls.rs"]
mod store_calls;

use jobwheel::{
    Job, JobContext, JobError, JobStore, LocalExecutor, LockProvider, Schedule, Scheduler,
    SchedulerConfig, Timestamp,
};
use serde_json::json;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn num(name: &str, default: usize) -> usize {
    arg(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

type Backend = (Arc<dyn JobStore>, Arc<dyn LockProvider>);

fn pg_url() -> String {
    env_url(
        "JOBWHEEL_POSTGRES_URL",
        "postgres://postgres@127.0.0.1:5432/test",
    )
}

fn mysql_url() -> String {
    env_url("JOBWHEEL_MYSQL_URL", "mysql://root@127.0.0.1:3306/test")
}

fn redis_url() -> String {
    env_url("JOBWHEEL_REDIS_URL", "redis://127.0.0.1:6379/15")
}

/// The Redis Cluster's node URLs (`scripts/redis-cluster` starts one on 7101-7106).
fn cluster_seeds() -> Vec<String> {
    std::env::var("JOBWHEEL_REDIS_CLUSTER")
        .map(|v| v.split(',').map(str::to_string).collect())
        .unwrap_or_else(|_| {
            (7101..=7106)
                .map(|p| format!("redis://127.0.0.1:{p}"))
                .collect()
        })
}

/// Drops what a workload stored under `prefix` (tables, or Redis keys `prefix*`).
async fn cleanup(backend: &str, prefix: &str) {
    cleanup::cleanup(
        backend,
        prefix,
        &pg_url(),
        &mysql_url(),
        &redis_url(),
        &cluster_seeds(),
    )
    .await;
}

fn env_url(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.into())
}

/// Backend handles for one node: separate pools per node, as separate processes would
/// have (the memory backend is one shared store).
async fn open(backend: &str, prefix: &str) -> Backend {
    static MEMORY: OnceLock<(jobwheel::memory::MemoryStore, jobwheel::memory::LocalLocks)> =
        OnceLock::new();
    let pg = pg_url;
    let redis = redis_url;
    match backend {
        "memory" => {
            let (s, l) = MEMORY.get_or_init(Default::default);
            (Arc::new(s.clone()), Arc::new(l.clone()))
        }
        "sqlite" => {
            let path = std::env::temp_dir().join(format!("{prefix}bench.db"));
            let store =
                jobwheel::sqlite::SqliteStore::builder(format!("sqlite://{}", path.display()))
                    .build()
                    .await
                    .unwrap();
            store.migrate().await.unwrap();
            let locks = store.locks();
            (Arc::new(store), Arc::new(locks))
        }
        "postgres" | "postgres+redis" => {
            let store = jobwheel::postgres::PgStore::builder(pg())
                .prefix(prefix)
                .build()
                .await
                .unwrap();
            store.migrate().await.unwrap();
            let locks: Arc<dyn LockProvider> = if backend == "postgres" {
                Arc::new(store.locks())
            } else {
                let client = redis::Client::open(redis()).unwrap();
                let conn = redis::aio::ConnectionManager::new(client).await.unwrap();
                Arc::new(jobwheel::redis::RedisLocks::new(conn, prefix).unwrap())
            };
            (Arc::new(store), locks)
        }
        "mysql" => {
            let store = jobwheel::mysql::MySqlStore::builder(mysql_url())
                .prefix(prefix)
                .build()
                .await
                .unwrap();
            store.migrate().await.unwrap();
            let locks = store.locks();
            (Arc::new(store), Arc::new(locks))
        }
        "redis" => {
            let store =
                jobwheel::redis::RedisStore::connect_with_prefix(&redis(), &format!("{prefix}:"))
                    .await
                    .unwrap();
            store.migrate().await.unwrap();
            let locks = store.locks();
            (Arc::new(store), Arc::new(locks))
        }
        "redis-sharded" | "redis-cluster" => {
            let p = format!("{prefix}:");
            let store = if backend == "redis-sharded" {
                jobwheel::redis::RedisStore::connect_with_prefix(&redis(), &p)
                    .await
                    .unwrap()
            } else {
                let seeds = cluster_seeds();
                let seeds: Vec<&str> = seeds.iter().map(String::as_str).collect();
                jobwheel::redis::RedisStore::connect_cluster(&seeds, &p)
                    .await
                    .unwrap()
            };
            let shards = num("--shards", jobwheel::redis::DEFAULT_SHARDS.into()) as u16;
            let store = store.with_shards(shards).unwrap();
            store.migrate().await.unwrap();
            let locks = store.locks();
            (Arc::new(store), Arc::new(locks))
        }
        other => panic!(
            "unknown backend {other:?}; use memory, sqlite, postgres, mysql, redis, redis-sharded, redis-cluster or postgres+redis"
        ),
    }
}

/// The database's own single-row write transactions per second, two clients.
async fn physical_limit(backend: &str) -> Option<(String, f64)> {
    let run = |cmd: &str, args: &[&str]| {
        std::process::Command::new(cmd)
            .args(args)
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
    };
    match backend {
        "postgres" | "postgres+redis" => {
            let url = env_url(
                "JOBWHEEL_POSTGRES_URL",
                "postgres://postgres@127.0.0.1:5432/test",
            );
            run("pgbench", &["-i", "-q", "-s", "1", &url])?;
            let text = run("pgbench", &["-N", "-T", "10", "-c", "2", "-j", "2", &url])?;
            let tps = text
                .lines()
                .find(|l| l.starts_with("tps = "))?
                .split_whitespace()
                .nth(2)?
                .parse()
                .ok()?;
            Some(("pgbench -N -c 2 -T 10".into(), tps))
        }
        "redis" => {
            let text = run(
                "redis-benchmark",
                &[
                    "-h",
                    "127.0.0.1",
                    "-p",
                    "6379",
                    "-c",
                    "2",
                    "-n",
                    "200000",
                    "-t",
                    "set",
                    "-q",
                ],
            )?;
            let rps = text
                .split(['\r', '\n'])
                .find(|l| l.starts_with("SET: ") && l.contains("requests per second"))?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some(("redis-benchmark -t set -c 2".into(), rps))
        }
        "mysql" => Some(mysql_limit().await),
        _ => None,
    }
}

async fn mysql_limit() -> (String, f64) {
    let url = mysql_url();
    let pool = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(2)
        .connect(&url)
        .await
        .unwrap();
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS bench_rows (id INT PRIMARY KEY, v BIGINT) ENGINE = InnoDB",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("INSERT IGNORE INTO bench_rows VALUES (1, 0), (2, 0)")
        .execute(&pool)
        .await
        .unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    let workers = (1..=2).map(|id| {
        let pool = pool.clone();
        tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < end {
                sqlx::query("UPDATE bench_rows SET v = v + 1 WHERE id = ?")
                    .bind(id)
                    .execute(&pool)
                    .await
                    .unwrap();
                n += 1;
            }
            n
        })
    });
    let total: u64 = futures::future::join_all(workers)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .sum();
    (
        "autocommit single-row UPDATE, 2 clients, 10 s".into(),
        total as f64 / 10.0,
    )
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    sorted
        .get(((sorted.len().max(1) - 1) as f64 * p).round() as usize)
        .map_or(f64::NAN, |v| *v as f64 / 1000.0)
}

pub(crate) fn micros_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

/// Starts `nodes` schedulers whose `noop` handler records `(fire_at ms, lag µs)`.
pub(crate) async fn schedulers(
    backend: &str,
    prefix: &str,
    nodes: usize,
    seen: &Arc<Mutex<Vec<(i64, i64)>>>,
    floor_us: i64,
) -> Vec<jobwheel::SchedulerHandle> {
    let mut handles = Vec::new();
    for n in 0..nodes {
        let (store, locks) = open(backend, prefix).await;
        let seen = seen.clone();
        let handler_ms = num("--handler-ms", 0) as u64;
        let s = Scheduler::builder()
            .store(store)
            .locks(locks)
            .handler("noop", move |ctx: JobContext| {
                let fire_us = (ctx.fire_at.as_millis() * 1000).max(floor_us);
                seen.lock()
                    .unwrap()
                    .push((ctx.fire_at.as_millis(), micros_now() - fire_us));
                async move {
                    if handler_ms > 0 {
                        tokio::time::sleep(Duration::from_millis(handler_ms)).await;
                    }
                    Ok::<(), JobError>(())
                }
            })
            .executor(LocalExecutor::with_concurrency(num("--concurrency", 2048)).unwrap())
            .config(
                SchedulerConfig::default()
                    .node_id(format!("bench-{n}"))
                    .claim_batch(num("--claim-batch", 2000))
                    .claim_window(num("--claim-window", 4000))
                    .write_batch(num("--write-batch", 1000)),
            )
            .build()
            .unwrap();
        handles.push(s.start().await.unwrap());
    }
    handles
}

/// Upserts `jobs` with up to 32 calls in flight.
/// Stores `jobs` with the bulk path (`upsert_many`, 20,000 at a time), as an
/// application enqueuing many does.
async fn store_all(store: &dyn JobStore, jobs: impl Iterator<Item = (Job, Timestamp)>) {
    let jobs: Vec<(Job, Option<Timestamp>)> = jobs.map(|(j, at)| (j, Some(at))).collect();
    for chunk in jobs.chunks(20_000) {
        store.upsert_many(chunk).await.unwrap();
    }
}

async fn drain(backend: &str, nodes: usize, jobs: usize) -> serde_json::Value {
    let prefix = format!("b{:06x}_", fastrand::u32(..0xffffff));
    let (store, _) = open(backend, &prefix).await;
    let due = Timestamp::now();
    store_all(
        &*store,
        (0..jobs).map(|i| {
            (
                Job::builder(format!("d{i}"), "noop", Schedule::once(due))
                    .build()
                    .unwrap(),
                due,
            )
        }),
    )
    .await;
    let seen = Arc::new(Mutex::new(Vec::with_capacity(jobs)));
    let profiling = std::env::args()
        .any(|a| a == "--profile")
        .then(|| profile::Profile::start(backend));
    if profiling.is_some() {
        // For a sampling profiler attached to this process from here on.
        eprintln!("profile | the drain starts (pid {})", std::process::id());
    }
    let started = Instant::now();
    let handles = schedulers(backend, &prefix, nodes, &seen, micros_now()).await;
    while handles
        .iter()
        .map(|h| h.scheduler().metrics().finished)
        .sum::<u64>()
        < jobs as u64
        && started.elapsed() < Duration::from_secs(600)
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let took = started.elapsed().as_secs_f64();
    let finished: u64 = handles
        .iter()
        .map(|h| h.scheduler().metrics().finished)
        .sum();
    if let Some(p) = &profiling {
        p.report(finished, took);
    }
    for h in handles {
        h.shutdown().await;
    }
    cleanup(backend, &prefix).await;
    let mut lags: Vec<u64> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(_, l)| (*l).max(0) as u64)
        .collect();
    lags.sort_unstable();
    let rate = finished as f64 / took;
    let limit = if std::env::args().any(|a| a == "--no-limit") {
        None
    } else {
        physical_limit(backend).await
    };
    println!(
        "drain | {backend} | {nodes} nodes | {finished} one-shots in {took:.2} s | {rate:.0} runs/s | lag p50 {:.0} ms p99 {:.0} ms | limit {} | ratio {}",
        pct(&lags, 0.5),
        pct(&lags, 0.99),
        limit
            .as_ref()
            .map_or("-".into(), |(how, tps)| format!("{tps:.0} tx/s ({how})")),
        limit
            .as_ref()
            .map_or("-".into(), |(_, tps)| format!("{:.2}x", rate / tps)),
    );
    json!({
        "workload": "drain", "backend": backend, "nodes": nodes, "jobs": jobs,
        "finished": finished, "seconds": took, "runs_per_s": rate,
        "lag_p50_ms": pct(&lags, 0.5), "lag_p99_ms": pct(&lags, 0.99),
        "limit_tx_per_s": limit.as_ref().map(|l| l.1), "limit_how": limit.as_ref().map(|l| l.0.clone()),
        "ratio": limit.as_ref().map(|l| rate / l.1),
    })
}

/// Stores `rate` jobs (`<prefix><i>`, handler `handler`) firing every second, spread
/// evenly over the second.
async fn store_spread(store: &dyn JobStore, rate: usize, prefix: &str, handler: &str) {
    let now = store.now().await.unwrap();
    store_all(
        store,
        (0..rate).map(|i| {
            let anchor = Timestamp::from_millis((i * 1000 / rate) as i64);
            let s = Schedule::interval(Duration::from_secs(1), anchor).unwrap();
            let first = s.first_fire(now).unwrap();
            (
                Job::builder(format!("{prefix}{i}"), handler, s)
                    .build()
                    .unwrap(),
                first,
            )
        }),
    )
    .await;
}

async fn lag(backend: &str, nodes: usize, rate: usize, seconds: u64) -> serde_json::Value {
    let prefix = format!("b{:06x}_", fastrand::u32(..0xffffff));
    let (store, _) = open(backend, &prefix).await;
    store_spread(&*store, rate, "l", "noop").await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let handles = schedulers(backend, &prefix, nodes, &seen, 0).await;
    // Whole seconds that start after every node is up.
    let first = Timestamp::now().as_millis() / 1000 * 1000 + 2000;
    let last = first + (seconds as i64 - 1) * 1000;
    tokio::time::sleep(Duration::from_millis(
        (last - Timestamp::now().as_millis()).max(0) as u64 + 2000,
    ))
    .await;
    for h in handles {
        h.shutdown().await;
    }
    cleanup(backend, &prefix).await;
    let seen = seen.lock().unwrap();
    let window: Vec<i64> = seen
        .iter()
        .filter(|(f, _)| *f >= first && *f < last + 1000)
        .map(|(_, l)| *l)
        .collect();
    let early = window.iter().filter(|l| **l < 0).count();
    let mut lags: Vec<u64> = window.iter().map(|l| (*l).max(0) as u64).collect();
    lags.sort_unstable();
    let expected = rate * seconds as usize;
    let missed = expected.saturating_sub(lags.len());
    println!(
        "lag   | {backend} | {nodes} nodes | {rate} fires/s for {seconds} s | fires {} of {expected} (missed {missed}) | p50 {:.2} ms p99 {:.2} ms max {:.2} ms | early {early}",
        lags.len(),
        pct(&lags, 0.5),
        pct(&lags, 0.99),
        pct(&lags, 1.0),
    );
    json!({
        "workload": "lag", "backend": backend, "nodes": nodes, "rate": rate, "seconds": seconds,
        "fires": lags.len(), "expected": expected, "missed": missed, "early": early,
        "lag_p50_ms": pct(&lags, 0.5), "lag_p99_ms": pct(&lags, 0.99), "lag_max_ms": pct(&lags, 1.0),
    })
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// Median time of `due(now, 1000)` over 21 calls.
pub(crate) async fn scan(store: &dyn JobStore) -> (f64, usize) {
    let mut times = Vec::new();
    let mut n = 0;
    for _ in 0..21 {
        let until = store.now().await.unwrap();
        let t = Instant::now();
        n = store
            .due(&jobwheel::store::DueQuery::new(until, 1000))
            .await
            .unwrap()
            .items
            .len();
        times.push(t.elapsed().as_micros() as u64);
    }
    times.sort_unstable();
    (times[times.len() / 2] as f64 / 1000.0, n)
}

async fn poll(backend: &str, stored: usize) -> serde_json::Value {
    let past = Timestamp::now() - Duration::from_secs(3600);
    let far = Timestamp::now() + Duration::from_secs(365 * 86400);
    let once = |i: usize, at| {
        (
            Job::builder(format!("p{i}"), "noop", Schedule::once(at))
                .build()
                .unwrap(),
            at,
        )
    };
    let prefix = format!("b{:06x}_", fastrand::u32(..0xffffff));
    // The memory backend gets a store of its own, without the other workloads' jobs.
    let store: Arc<dyn JobStore> = if backend == "memory" {
        Arc::new(jobwheel::memory::MemoryStore::new())
    } else {
        open(backend, &prefix).await.0
    };
    store_all(&*store, (0..1000).map(|i| once(i, past))).await;
    let (small, n_small) = scan(&*store).await;
    let rss0 = rss_bytes();
    store_all(&*store, (1000..stored).map(|i| once(i, far))).await;
    let per_job =
        (rss_bytes().saturating_sub(rss0)) as f64 / (stored.saturating_sub(1000)).max(1) as f64;
    let (large, n_large) = scan(&*store).await;
    let mem = if backend == "memory" {
        format!(" | memory {per_job:.0} B per stored job")
    } else {
        String::new()
    };
    println!(
        "poll  | {backend} | due scan of {n_small} due jobs: {small:.2} ms with 1,000 stored, {large:.2} ms with {stored} stored ({n_large} due) | ratio {:.2}x{mem}",
        large / small
    );
    cleanup(backend, &prefix).await;
    json!({
        "workload": "poll", "backend": backend, "stored": stored,
        "scan_ms_1000_stored": small, "scan_ms_many_stored": large, "ratio": large / small,
        "bytes_per_job": (backend == "memory").then_some(per_job),
    })
}

fn main() {
    let backend = arg("--backend").unwrap_or_else(|| "memory".into());
    let workload = arg("--workload").unwrap_or_else(|| "all".into());
    let nodes = num("--nodes", 2);
    // Installed before any scheduler exists, so every instrument reports to it.
    let store_calls = std::env::args()
        .any(|a| a == "--store-calls")
        .then(store_calls::StoreCalls::install);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "jobwheel throughput harness | backend {backend} | workload {workload} | {} cores | {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::env::consts::ARCH
    );
    let mut rows = Vec::new();
    rt.block_on(async {
        if matches!(workload.as_str(), "all" | "drain") {
            rows.push(drain(&backend, nodes, num("--jobs", 20_000)).await);
        }
        if matches!(workload.as_str(), "all" | "lag") {
            rows.push(
                lag(
                    &backend,
                    nodes,
                    num("--rate", 1000),
                    num("--seconds", 10) as u64,
                )
                .await,
            );
        }
        if matches!(workload.as_str(), "all" | "mixed") {
            rows.push(
                mixed::mixed(
                    &backend,
                    nodes,
                    num("--rate", 200),
                    num("--stream", 300),
                    num("--lead", 2000) as u64,
                    num("--seconds", 10) as u64,
                )
                .await,
            );
        }
        if matches!(workload.as_str(), "all" | "poll") {
            rows.push(poll(&backend, num("--stored", 1_000_000)).await);
        }
        // Not in `all`: it stores `--stored` jobs twice over.
        if workload == "scale" {
            let jobs = num("--jobs", 20_000).max(1_000);
            let stored = num("--stored", 10_000_000);
            rows.push(scale::scale(&backend, nodes, jobs, stored, num("--rounds", 4)).await);
        }
        // Not in `all`: needs the local Redis Cluster beside the Redis server.
        if workload == "cluster" {
            let jobs = num("--jobs", 20_000).max(1_000);
            rows.push(scale::cluster_vs_one(nodes, jobs, num("--rounds", 4)).await);
        }
    });
    if let Some(calls) = store_calls {
        calls.print();
    }
    if std::env::args().any(|a| a == "--json") {
        for r in rows {
            println!("{r}");
        }
    }
}
