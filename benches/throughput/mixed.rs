//! The **mixed** workload: recurring jobs beside a stream of one-shots, on the
//! settings users start from.
//!
//! `--rate` jobs fire every second, spread over the second, while `--stream`
//! one-shots a second are stored straight into the store (as another service that
//! enqueues work would: no scheduler is woken by it), each due up to `--lead` ms (default 2,000)
//! after it is stored, with handlers of 50-500 ms; `--nodes`
//! schedulers run the default configuration (64 + 16 slots each) for `--seconds`.
//! The row gives the recurring jobs' lag p50/p99/max and fires missed, the one-shots'
//! lag p99, the busiest node's slots in use, and the fires the misfire policy
//! handled (which should be none).

use super::{cleanup, micros_now, open, pct, store_spread};
use jobwheel::store::JobsExt as _;
use jobwheel::{Job, JobContext, JobError, Schedule, Scheduler, SchedulerConfig, Timestamp};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// `(is recurring, fire_at ms, lag µs)` per handler start.
type Seen = Arc<Mutex<Vec<(bool, i64, i64)>>>;

pub(super) async fn mixed(
    backend: &str,
    nodes: usize,
    rate: usize,
    stream: usize,
    lead: u64,
    seconds: u64,
) -> serde_json::Value {
    let prefix = format!("b{:06x}_", fastrand::u32(..0xffffff));
    let (store, _) = open(backend, &prefix).await;
    store_spread(&*store, rate, "m", "work").await;
    let seen: Seen = Arc::default();
    let busiest = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for n in 0..nodes {
        let (store, locks) = open(backend, &prefix).await;
        let (seen, busiest) = (seen.clone(), busiest.clone());
        let busy = Arc::new(AtomicUsize::new(0));
        let s = Scheduler::builder()
            .store(store)
            .locks(locks)
            .handler("work", move |ctx: JobContext| {
                let fire_us = ctx.fire_at.as_millis() * 1000;
                let recurring = ctx.job.id().as_str().starts_with('m');
                seen.lock().unwrap().push((
                    recurring,
                    ctx.fire_at.as_millis(),
                    micros_now() - fire_us,
                ));
                busiest.fetch_max(busy.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                let ms = ctx.payload()["ms"].as_u64().unwrap_or(0);
                let busy = busy.clone();
                async move {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    busy.fetch_sub(1, Ordering::SeqCst);
                    Ok::<(), JobError>(())
                }
            })
            .config(SchedulerConfig::default().node_id(format!("bench-{n}")))
            .build()
            .unwrap();
        handles.push(s.start().await.unwrap());
    }
    let schedulers: Vec<Scheduler> = handles.iter().map(|h| h.scheduler().clone()).collect();
    // Whole seconds that start after every node is up.
    let first = Timestamp::now().as_millis() / 1000 * 1000 + 2000;
    let last = first + (seconds as i64 - 1) * 1000;
    let until = tokio::time::Instant::now()
        + Duration::from_millis((last - Timestamp::now().as_millis()).max(0) as u64 + 1000);
    let producer = tokio::spawn({
        let store = store.clone();
        async move {
            let mut tick = tokio::time::interval(Duration::from_millis(10));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let began = tokio::time::Instant::now();
            let mut n = 0usize;
            while tokio::time::Instant::now() < until {
                tick.tick().await;
                // As many as the rate asks for by now, so the stream keeps its rate.
                let target = (began.elapsed().as_secs_f64() * stream as f64) as usize;
                let batch = (n..target.max(n)).map(|k| {
                    let due =
                        Timestamp::now() + Duration::from_millis((k as u64 * 37) % lead.max(1));
                    let job = Job::builder(format!("s{k}"), "work", Schedule::once(due))
                        .payload(json!({ "ms": 50 + (k as u64 * 53) % 450 }))
                        .build()
                        .unwrap();
                    let store = store.clone();
                    async move { store.upsert(&job, Some(due)).await.unwrap() }
                });
                futures::future::join_all(batch).await;
                n = target.max(n);
            }
            n
        }
    });
    let streamed = producer.await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let misfired: u64 = schedulers
        .iter()
        .map(|s| s.metrics().misfired.total())
        .sum();
    for h in handles {
        h.shutdown().await;
    }
    cleanup(backend, &prefix).await;
    let seen = seen.lock().unwrap();
    let in_window = |f: &i64| *f >= first && *f < last + 1000;
    let mut recurring: Vec<u64> = seen
        .iter()
        .filter(|(r, f, _)| *r && in_window(f))
        .map(|(_, _, l)| (*l).max(0) as u64)
        .collect();
    recurring.sort_unstable();
    let mut one_shots: Vec<u64> = seen
        .iter()
        .filter(|(r, f, _)| !*r && in_window(f))
        .map(|(_, _, l)| (*l).max(0) as u64)
        .collect();
    one_shots.sort_unstable();
    let expected = rate * seconds as usize;
    let missed = expected.saturating_sub(recurring.len());
    let per_sec = streamed as f64 / seconds as f64;
    println!(
        "mixed | {backend} | {nodes} nodes | {rate} jobs/s + {per_sec:.0} one-shots/s (50-500 ms, due within {lead} ms) for {seconds} s | recurring: fires {} of {expected} (missed {missed}), p50 {:.2} ms p99 {:.2} ms max {:.2} ms | one-shots p99 {:.2} ms | busiest node {} handlers at once (64 + 16 slots) | misfired {misfired}",
        recurring.len(),
        pct(&recurring, 0.5),
        pct(&recurring, 0.99),
        pct(&recurring, 1.0),
        pct(&one_shots, 0.99),
        busiest.load(Ordering::SeqCst),
    );
    json!({
        "workload": "mixed", "backend": backend, "nodes": nodes, "rate": rate,
        "stream_per_s": per_sec, "lead_ms": lead, "seconds": seconds, "fires": recurring.len(),
        "expected": expected, "missed": missed, "misfired": misfired,
        "lag_p50_ms": pct(&recurring, 0.5), "lag_p99_ms": pct(&recurring, 0.99),
        "lag_max_ms": pct(&recurring, 1.0), "one_shot_lag_p99_ms": pct(&one_shots, 0.99),
        "busiest_slots": busiest.load(Ordering::SeqCst),
    })
}
