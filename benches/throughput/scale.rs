//! The **scale** workload: poll and drain beside many stored jobs, against the same
//! beside 1,000, in one run.
//!
//! Two table sets (key prefixes) are filled first: one with 1,000 idle jobs (one-shots
//! a year ahead) and one with `--stored` (written with `upsert_many`, 10,000 a call).
//! Then `--rounds` rounds alternate between the two, which goes first alternating
//! too: the due scan of 1,000 due jobs (median of 21), then a drain of `--jobs`
//! one-shots due now (those 1,000 among them) by `--nodes` schedulers. The row gives the medians of each side
//! and their ratio.
//!
//! The **cluster** workload runs the same drain on the Redis store on one server
//! (`redis`), split into shards on that server (`redis-sharded`) and sharded over the
//! local Redis Cluster (`redis-cluster`), each round on fresh keys in a rotating
//! order, and gives the medians and their ratios to one server.

use super::{cleanup, micros_now, open, scan, schedulers};
use jobwheel::{Job, JobStore, Schedule, Timestamp};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Writes `n` jobs `p<i>` due at `at`, `from..from + n`, 10,000 per `upsert_many`.
async fn fill(store: &dyn JobStore, tag: &str, from: usize, n: usize, at: Timestamp) {
    let mut i = from;
    while i < from + n {
        let end = (i + 10_000).min(from + n);
        let batch: Vec<(Job, Option<Timestamp>)> = (i..end)
            .map(|k| {
                let job = Job::builder(format!("{tag}{k}"), "noop", Schedule::once(at))
                    .build()
                    .unwrap();
                (job, Some(at))
            })
            .collect();
        store.upsert_many(&batch).await.unwrap();
        i = end;
    }
}

/// Drains `jobs` one-shots due now in the tables under `prefix` (1,000 of them
/// already stored for the scan); runs a second.
async fn drain_once(backend: &str, prefix: &str, nodes: usize, jobs: usize, round: usize) -> f64 {
    let (store, _) = open(backend, prefix).await;
    let more = jobs.saturating_sub(1_000);
    fill(&*store, &format!("r{round}d"), 0, more, Timestamp::now()).await;
    let seen = Arc::new(Mutex::new(Vec::with_capacity(jobs)));
    let started = Instant::now();
    let handles = schedulers(backend, prefix, nodes, &seen, micros_now()).await;
    let finished = || {
        handles
            .iter()
            .map(|h| h.scheduler().metrics().finished)
            .sum::<u64>()
    };
    while finished() < jobs as u64 && started.elapsed() < Duration::from_secs(600) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let rate = finished() as f64 / started.elapsed().as_secs_f64();
    for h in handles {
        h.shutdown().await;
    }
    rate
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The workload (see the module's docs).
pub async fn scale(
    backend: &str,
    nodes: usize,
    jobs: usize,
    stored: usize,
    rounds: usize,
) -> serde_json::Value {
    let base = fastrand::u32(..0xffff);
    let (small_p, large_p) = (format!("s{base:04x}_"), format!("l{base:04x}_"));
    let far = Timestamp::now() + Duration::from_secs(365 * 86400);
    let (small, _) = open(backend, &small_p).await;
    let (large, _) = open(backend, &large_p).await;
    fill(&*small, "p", 0, 1_000, far).await;
    let t = Instant::now();
    fill(&*large, "p", 0, stored, far).await;
    let filled = t.elapsed();
    let (mut scans, mut drains) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    for round in 0..rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for side in order {
            let (store, prefix) = if side == 0 {
                (&small, &small_p)
            } else {
                (&large, &large_p)
            };
            // 1,000 due for the scan, then run as part of the drain.
            fill(&**store, &format!("r{round}s"), 0, 1_000, Timestamp::now()).await;
            scans[side].push(scan(&**store).await.0);
            drains[side].push(drain_once(backend, prefix, nodes, jobs, round).await);
        }
    }
    let [scan_s, scan_l] = scans.map(median);
    let [drain_s, drain_l] = drains.clone().map(median);
    println!(
        "scale | {backend} | {nodes} nodes | {stored} stored (written in {filled:.0?}) vs 1,000 | due scan of 1,000: {scan_l:.2} ms vs {scan_s:.2} ms | drain of {jobs}: {drain_l:.0} vs {drain_s:.0} runs/s ({:.2}x) | {rounds} rounds each, alternating: {:?} vs {:?}",
        drain_l / drain_s,
        drains[1].iter().map(|r| r.round()).collect::<Vec<_>>(),
        drains[0].iter().map(|r| r.round()).collect::<Vec<_>>(),
    );
    cleanup(backend, &small_p).await;
    cleanup(backend, &large_p).await;
    json!({
        "workload": "scale", "backend": backend, "nodes": nodes, "stored": stored,
        "scan_ms_1000_stored": scan_s, "scan_ms_many_stored": scan_l,
        "drain_1000_stored": drain_s, "drain_many_stored": drain_l,
    })
}

/// The cluster workload (see the module's docs).
pub async fn cluster_vs_one(nodes: usize, jobs: usize, rounds: usize) -> serde_json::Value {
    let sides = ["redis", "redis-sharded", "redis-cluster"];
    let mut drains = [Vec::new(), Vec::new(), Vec::new()];
    for round in 0..rounds {
        for k in 0..sides.len() {
            let side = (round + k) % sides.len();
            let backend = sides[side];
            let prefix = format!("c{:04x}_", fastrand::u32(..0xffff));
            let (store, _) = open(backend, &prefix).await;
            fill(&*store, &format!("r{round}s"), 0, 1_000, Timestamp::now()).await;
            drains[side].push(drain_once(backend, &prefix, nodes, jobs, round).await);
            cleanup(backend, &prefix).await;
        }
    }
    let [one, sharded, cluster] = drains.clone().map(median);
    let shards = super::num("--shards", jobwheel::redis::DEFAULT_SHARDS.into());
    let rounded = |v: &Vec<f64>| v.iter().map(|r| r.round()).collect::<Vec<_>>();
    println!(
        "cluster | redis store | {nodes} nodes | drain of {jobs}: one Redis {one:.0}, {shards} shards on one Redis {sharded:.0} ({:.2}x), {shards} shards on the Redis Cluster {cluster:.0} runs/s ({:.2}x) | {rounds} rounds each, order rotating: {:?} / {:?} / {:?}",
        sharded / one,
        cluster / one,
        rounded(&drains[0]),
        rounded(&drains[1]),
        rounded(&drains[2]),
    );
    json!({
        "workload": "cluster", "nodes": nodes, "jobs": jobs, "shards": shards,
        "drain_one_redis": one, "drain_sharded_one_redis": sharded, "drain_redis_cluster": cluster,
    })
}
