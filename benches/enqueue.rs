//! Enqueue throughput: 20,000 one-shot jobs due now, stored through the scheduler one
//! `upsert` at a time (each one round trip) and with one `upsert_many`, per backend.
//!
//! `cargo bench --bench enqueue --all-features -- [--jobs 20000] [--rounds 1] [--bulk-only]`
//! (`--rounds`: that many `upsert_many` rounds, each into a fresh table, the median
//! printed with every round; `--bulk-only`: no single upserts)
//! (`JOBWHEEL_POSTGRES_URL`, `JOBWHEEL_MYSQL_URL`, `JOBWHEEL_REDIS_URL`; a backend whose
//! URL is unset is left out; SQLite runs on a temporary file). Every run uses a fresh
//! table or key prefix and drops it afterwards.

use jobwheel::{BackendConfig, Job, JobContext, Schedule, Scheduler, Timestamp};
use std::time::Instant;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn scheduler(url: &str, prefix: &str) -> Scheduler {
    let backend = BackendConfig::new(url)
        .prefix(prefix)
        .connect()
        .await
        .expect("connect");
    Scheduler::builder()
        .backend(backend)
        .handler("noop", |_ctx: JobContext| async { Ok(()) })
        .build()
        .unwrap()
}

fn jobs(n: usize, tag: &str) -> Vec<Job> {
    let now = Timestamp::now();
    (0..n)
        .map(|i| {
            Job::builder(format!("{tag}-{i}"), "noop", Schedule::once(now))
                .build()
                .unwrap()
        })
        .collect()
}

/// Drops what a run left: SQL tables with `prefix`, Redis keys under it.
async fn clean(url: &str, prefix: &str) {
    if url.starts_with("redis") {
        let client = redis::Client::open(url).unwrap();
        let mut c = client.get_multiplexed_async_connection().await.unwrap();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}*"))
            .query_async(&mut c)
            .await
            .unwrap();
        for chunk in keys.chunks(1000) {
            let _: () = redis::cmd("DEL")
                .arg(chunk)
                .query_async(&mut c)
                .await
                .unwrap();
        }
        return;
    }
    if url.starts_with("sqlite") {
        return;
    }
    let tables = [
        "jobs",
        "runs",
        "nodes",
        "executors",
        "alarms",
        "locks",
        "migrations",
    ];
    if url.starts_with("postgres") {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        for t in tables {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP TABLE IF EXISTS {prefix}{t}"
            )))
            .execute(&pool)
            .await;
        }
    } else {
        let pool = sqlx::MySqlPool::connect(url).await.unwrap();
        for t in tables {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP TABLE IF EXISTS {prefix}{t}"
            )))
            .execute(&pool)
            .await;
        }
    }
}

fn main() {
    let n = arg("--jobs", 20_000);
    let rounds = arg("--rounds", 1).max(1);
    let bulk_only = std::env::args().any(|a| a == "--bulk-only");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let file = std::env::temp_dir().join(format!("jobwheel-enqueue-{}.db", std::process::id()));
    let mut backends = vec![(
        "sqlite".to_string(),
        format!("sqlite://{}?mode=rwc", file.display()),
    )];
    for (name, var) in [
        ("postgres", "JOBWHEEL_POSTGRES_URL"),
        ("mysql", "JOBWHEEL_MYSQL_URL"),
        ("redis", "JOBWHEEL_REDIS_URL"),
    ] {
        match std::env::var(var) {
            Ok(url) if !url.is_empty() => backends.push((name.to_string(), url)),
            _ => eprintln!("enqueue: {var} is not set; {name} left out"),
        }
    }
    println!("| backend | jobs | one `upsert` each | `upsert_many` | speed-up |");
    println!("|---|---|---|---|---|");
    rt.block_on(async {
        for (name, url) in backends {
            let prefix = if url.starts_with("redis") {
                format!("jwenq{}:", std::process::id())
            } else {
                format!("jwenq{}_", std::process::id())
            };
            let s = scheduler(&url, &prefix).await;
            let single = if bulk_only {
                std::time::Duration::ZERO
            } else {
                let began = Instant::now();
                for job in jobs(n, "one") {
                    s.upsert(job).await.unwrap();
                }
                began.elapsed()
            };
            let mut times = Vec::new();
            for round in 0..rounds {
                // Each round into a table of its own: every job is new.
                let s = scheduler(&url, &format!("{prefix}r{round}_")).await;
                let began = Instant::now();
                let out = s.upsert_many(jobs(n, "many")).await.unwrap();
                times.push(began.elapsed());
                assert_eq!(out.len(), n);
                clean(&url, &format!("{prefix}r{round}_")).await;
            }
            let shown: Vec<String> = times
                .iter()
                .map(|t| format!("{:.3}", t.as_secs_f64()))
                .collect();
            times.sort();
            let bulk = times[times.len() / 2];
            if rounds > 1 {
                eprintln!("{name}: upsert_many rounds (s): {}", shown.join(" · "));
            }
            println!(
                "| {name} | {n} | {:.2} s ({:.0} jobs/s) | {:.3} s ({:.0} jobs/s) | {:.1}× |",
                single.as_secs_f64(),
                n as f64 / single.as_secs_f64(),
                bulk.as_secs_f64(),
                n as f64 / bulk.as_secs_f64(),
                single.as_secs_f64() / bulk.as_secs_f64()
            );
            clean(&url, &prefix).await;
        }
    });
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_file(file.with_extension("db-wal"));
    let _ = std::fs::remove_file(file.with_extension("db-shm"));
}
