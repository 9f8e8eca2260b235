//! Redis lock throughput: acquire + release pairs per second, batches of 100.
//!
//! `cargo bench --bench redis_locks --all-features -- [--seconds 5] [--tasks 4]`
//! (`JOBWHEEL_REDIS_URL`, default `redis://127.0.0.1:6379/15`).

use jobwheel::redis::RedisLocks;
use jobwheel::{LockProvider, LockRequest};
use std::time::{Duration, Instant};

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let seconds = arg("--seconds", 5);
    let tasks = arg("--tasks", 4);
    let url =
        std::env::var("JOBWHEEL_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/15".into());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let locks = RedisLocks::connect(&url).await.unwrap();
        let end = Instant::now() + Duration::from_secs(seconds);
        let workers = (0..tasks).map(|t| {
            let locks = locks.clone();
            tokio::spawn(async move {
                let requests: Vec<LockRequest> = (0..100)
                    .map(|i| LockRequest { key: format!("bench-{t}-{i}"), ttl: Duration::from_secs(30) })
                    .collect();
                let mut pairs = 0u64;
                while Instant::now() < end {
                    let leases: Vec<_> = locks.acquire("bench", &requests).await.unwrap().into_iter().flatten().collect();
                    assert_eq!(leases.len(), 100);
                    assert!(locks.release(&leases).await.unwrap().iter().all(|r| *r));
                    pairs += 100;
                }
                pairs
            })
        });
        let total: u64 = futures::future::join_all(workers).await.into_iter().map(|r| r.unwrap()).sum();
        println!(
            "redis locks | batches of 100, {tasks} tasks, {seconds} s | {total} acquire+release pairs | {:.0} pairs/s",
            total as f64 / seconds as f64
        );
    });
}
