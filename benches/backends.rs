//! Backend throughput: one-shot jobs due now, drained by several engines with noop
//! handlers, beside the database's own single-row transaction rate.
//!
//! `cargo bench --bench backends --all-features -- --backend postgres [--jobs 20000] [--nodes 2]`
//! (`--backend sqlite | postgres | mysql | redis | postgres+redis`; URLs from
//! `JOBWHEEL_POSTGRES_URL` / `JOBWHEEL_MYSQL_URL` / `JOBWHEEL_REDIS_URL`, defaulting to
//! the local development servers).

use jobwheel::{
    Job, JobContext, JobError, JobStore, LockProvider, Schedule, Scheduler, SchedulerConfig,
    Timestamp,
};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

type Backend = (Arc<dyn JobStore>, Arc<dyn LockProvider>);

async fn open(backend: &str, prefix: &str) -> Backend {
    match backend {
        "sqlite" => {
            let path = std::env::temp_dir().join(format!("{prefix}bench.db"));
            let store =
                jobwheel::sqlite::SqliteStore::builder(format!("sqlite://{}", path.display()))
                    .build()
                    .await
                    .unwrap();
            store.migrate().await.unwrap();
            let locks = jobwheel::sqlite::SqliteLocks::new(store.pool().clone(), store.prefix());
            (Arc::new(store), Arc::new(locks))
        }
        "postgres" => {
            let url = std::env::var("JOBWHEEL_POSTGRES_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
            let store = jobwheel::postgres::PgStore::builder(url)
                .prefix(prefix)
                .build()
                .await
                .unwrap();
            store.migrate().await.unwrap();
            let locks = jobwheel::postgres::PgLocks::new(store.pool().clone(), store.tables());
            (Arc::new(store), Arc::new(locks))
        }
        "mysql" => {
            let url = std::env::var("JOBWHEEL_MYSQL_URL")
                .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into());
            let store = jobwheel::mysql::MySqlStore::builder(url)
                .prefix(prefix)
                .build()
                .await
                .unwrap();
            store.migrate().await.unwrap();
            let locks = jobwheel::mysql::MySqlLocks::new(store.pool().clone(), store.prefix());
            (Arc::new(store), Arc::new(locks))
        }
        "redis" => {
            let store = jobwheel::redis::RedisStore::connect_with_prefix(&redis_url(), prefix)
                .await
                .unwrap();
            store.migrate().await.unwrap();
            let locks = jobwheel::redis::RedisLocks::new(store.connection().clone(), prefix);
            (Arc::new(store), Arc::new(locks))
        }
        "postgres+redis" => {
            let (store, _) = Box::pin(open("postgres", prefix)).await;
            let locks = jobwheel::redis::RedisLocks::connect(&redis_url())
                .await
                .unwrap();
            (store, Arc::new(locks))
        }
        other => panic!(
            "unknown backend {other:?}; use sqlite, postgres, mysql, redis or postgres+redis"
        ),
    }
}

fn redis_url() -> String {
    std::env::var("JOBWHEEL_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/15".into())
}

/// The database's own single-row write transactions per second, two clients, 10 s.
fn physical_limit(backend: &str) -> Option<(String, f64)> {
    match backend {
        "redis" => {
            // redis-benchmark's SET rate, two clients, no pipelining.
            let out = std::process::Command::new("redis-benchmark")
                .args([
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
                ])
                .output()
                .ok()?;
            let text = String::from_utf8_lossy(&out.stdout);
            let rps = text
                .split(['\r', '\n'])
                .find(|l| l.starts_with("SET: ") && l.contains("requests per second"))?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some((
                "redis-benchmark -t set -c 2 (one SET per request)".into(),
                rps,
            ))
        }
        "postgres" | "postgres+redis" => {
            let url = std::env::var("JOBWHEEL_POSTGRES_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
            std::process::Command::new("pgbench")
                .args(["-i", "-q", "-s", "1", &url])
                .output()
                .ok()?;
            let out = std::process::Command::new("pgbench")
                .args(["-N", "-T", "10", "-c", "2", "-j", "2", &url])
                .output()
                .ok()?;
            let text = String::from_utf8_lossy(&out.stdout);
            let tps = text
                .lines()
                .find(|l| l.starts_with("tps = "))?
                .split_whitespace()
                .nth(2)?
                .parse()
                .ok()?;
            Some(("pgbench -N -c 2 -T 10".into(), tps))
        }
        _ => None,
    }
}

async fn mysql_limit() -> (String, f64) {
    let url = std::env::var("JOBWHEEL_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into());
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

fn main() {
    let backend = arg("--backend").unwrap_or_else(|| "sqlite".into());
    let jobs: usize = arg("--jobs").and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let nodes: usize = arg("--nodes").and_then(|v| v.parse().ok()).unwrap_or(2);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let prefix = format!("b{:06x}_", fastrand::u32(..0xffffff));
        let (store, _) = open(&backend, &prefix).await;
        // Due now: by the time the engines start, every job is waiting.
        let due = Timestamp::now();
        for i in 0..jobs {
            let job = Job::builder(format!("b{i}"), "noop", Schedule::once(due)).build().unwrap();
            store.upsert(&job, Some(due)).await.unwrap();
        }
        let lags = Arc::new(Mutex::new(Vec::with_capacity(jobs)));
        // Lag is counted from the later of the fire's instant and the drain's start.
        let drain_start = Timestamp::now().as_millis() * 1000;
        let started = Instant::now();
        let mut handles = Vec::new();
        for n in 0..nodes {
            let (store, locks) = open(&backend, &prefix).await;
            let l = lags.clone();
            let s = Scheduler::builder()
                .store(store)
                .locks(locks)
                .handler("noop", move |ctx: JobContext| {
                    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as i64;
                    let from = (ctx.fire_at.as_millis() * 1000).max(drain_start);
                    l.lock().unwrap().push((now - from).max(0) as u64);
                    async { Ok::<(), JobError>(()) }
                })
                .config(SchedulerConfig {
                    node_id: Some(format!("bench-{n}")),
                    concurrency: 2048,
                    claim_batch: 2000,
                    write_batch: 1000,
                    ..SchedulerConfig::default()
                })
                .build()
                .unwrap();
            handles.push(s.start().await.unwrap());
        }
        while handles.iter().map(|h| h.metrics().finished).sum::<u64>() < jobs as u64 && started.elapsed() < Duration::from_secs(600) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let took = started.elapsed().as_secs_f64();
        let finished: u64 = handles.iter().map(|h| h.metrics().finished).sum();
        for h in handles {
            h.shutdown().await;
        }
        let mut l = lags.lock().unwrap().clone();
        l.sort_unstable();
        let rate = finished as f64 / took;
        println!("backend  | {backend}, {nodes} nodes, {jobs} one-shots due at once, noop handlers (engine start included)");
        println!("runs/s   | {finished} finished in {took:.2} s = {rate:.0} runs/s");
        println!("lag      | drain start -> handler start: p50 {:.1} ms | p99 {:.1} ms | max {:.1} ms", pct(&l, 0.5), pct(&l, 0.99), pct(&l, 1.0));
        let limit = if backend == "mysql" { Some(mysql_limit().await) } else { physical_limit(&backend) };
        if let Some((how, tps)) = limit {
            println!("limit    | {how}: {tps:.0} tx/s; runs/s ÷ that = {:.2}", rate / tps);
        }
    });
}
