//! Sharding broadcast over three executor servers on loopback: every fire of a job
//! becomes shards 0, 1 and 2 of 3, one per instance, each exactly once; a shard
//! that fails is retried on its own under the job's retry policy (on the next
//! instance), and the fire is one run in the log. Every wait is bounded.

use crate::support;

use jobwheel::memory::{LocalLocks, MemoryStore};
use jobwheel::prelude::*;
use jobwheel::remote::{ExecutorServer, RemoteGroup};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use support::remote::*;

async fn three(seen: &Seen) -> ([ExecutorServer; 3], RemoteGroup) {
    let servers = [
        instance("i-a", seen).await,
        instance("i-b", seen).await,
        instance("i-c", seen).await,
    ];
    let group = RemoteGroup::fixed("billing", SECRET, servers.iter().map(base)).unwrap();
    (servers, group)
}

async fn scheduler(store: &MemoryStore, group: RemoteGroup) -> (Scheduler, SchedulerHandle) {
    let scheduler = Scheduler::builder()
        .store(store.clone())
        .locks(LocalLocks::new())
        .remote(group)
        .config(SchedulerConfig::default().poll_interval(Duration::from_millis(100)))
        .build()
        .unwrap();
    let running = scheduler.start().await.unwrap();
    (scheduler, running)
}

/// What the instances' `shard` handlers saw, per fire: `(index, attempt)` → the
/// instances that ran it.
fn shards_by_fire(seen: &Seen, job: &str) -> BTreeMap<i64, BTreeMap<(u64, u64), Vec<String>>> {
    let mut out: BTreeMap<i64, BTreeMap<(u64, u64), Vec<String>>> = BTreeMap::new();
    for (instance, j, v) in seen.0.lock().unwrap().iter() {
        if j != job {
            continue;
        }
        assert_eq!(v["total"], json!(3), "{v}");
        let key = (v["index"].as_u64().unwrap(), v["attempt"].as_u64().unwrap());
        out.entry(v["fire_at"].as_i64().unwrap())
            .or_default()
            .entry(key)
            .or_default()
            .push(instance.clone());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fire_runs_each_shard_once_and_a_failed_shard_is_retried_alone() {
    let seen = Seen::default();
    let (_servers, group) = three(&seen).await;
    let store = MemoryStore::new();
    let (scheduler, running) = scheduler(&store, group).await;
    let job = Job::builder(
        "sync",
        "shard",
        Schedule::every(Duration::from_millis(500)).unwrap(),
    )
    .payload(json!({"fail_shard": 1}))
    .retry(RetryPolicy::new(3, Duration::from_millis(20), Duration::from_secs(1)).unwrap())
    .remote(broadcast())
    .build()
    .unwrap();
    scheduler.upsert(job).await.unwrap();
    let runs = ended_runs(&store, "sync", 3).await;
    running.shutdown().await;
    let fires = shards_by_fire(&seen, "sync");
    for run in &runs {
        // One run per fire in the log: the shards' retries are inside it.
        assert_eq!(
            (run.status, run.attempt, run.will_retry),
            (RunStatus::Succeeded, 1, false),
            "{run:?}"
        );
        let shards = &fires[&run.fire_at.as_millis()];
        let keys: BTreeSet<(u64, u64)> = shards.keys().copied().collect();
        assert_eq!(
            keys,
            BTreeSet::from([(0, 1), (1, 1), (1, 2), (2, 1)]),
            "fire {}: shards 0-2 once each, and shard 1's retry only: {shards:?}",
            run.fire_at
        );
        assert!(shards.values().all(|i| i.len() == 1), "{shards:?}");
        // Each instance ran one shard of the fire's first attempt …
        let first: BTreeSet<&String> = [0, 1, 2].iter().map(|i| &shards[&(*i, 1)][0]).collect();
        assert_eq!(first.len(), 3, "{shards:?}");
        // … and the retry went to the next instance in address order.
        assert_ne!(shards[&(1, 2)], shards[&(1, 1)], "{shards:?}");
        // The run's one stored log holds each shard's lines, each named by its shard:
        // where it went, and what the handler logged there.
        let lines: Vec<String> = jobwheel::store::RunLog::lines(&store, run.id, 0, 1000)
            .await
            .unwrap()
            .into_iter()
            .map(|l| l.line)
            .collect();
        for i in 0..3 {
            let shard = format!("[shard {i}/3] ");
            assert!(
                lines.iter().any(|l| l.starts_with(&format!(
                    "{shard}[jobwheel] dispatched to http://127.0.0.1:"
                ))),
                "{shard}: {lines:?}"
            );
            assert!(
                lines
                    .iter()
                    .any(|l| l.starts_with(&shard) && l.contains(&format!("shard {i}/3 attempt"))),
                "{shard}: {lines:?}"
            );
        }
        // The run's record names every instance that ran a shard of it.
        let went: BTreeSet<&str> = lines
            .iter()
            .filter_map(|l| l.split("dispatched to ").nth(1)?.split(' ').next())
            .collect();
        let recorded: BTreeSet<&str> = run
            .executor
            .as_deref()
            .expect("a broadcast's record names its instances")
            .split(", ")
            .collect();
        assert_eq!((recorded.len(), &recorded), (3, &went), "{run:?}");
        // Besides them, only the node's own lines about the run (the shard's retry).
        assert!(
            lines
                .iter()
                .all(|l| l.starts_with("[shard ") || l.contains(" jobwheel::remote::shards: ")),
            "{lines:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_out_of_attempts_fails_the_fire_naming_the_shard_without_rerunning_the_others() {
    let seen = Seen::default();
    let (_servers, group) = three(&seen).await;
    let store = MemoryStore::new();
    let (scheduler, running) = scheduler(&store, group).await;
    let job = Job::builder("sync", "shard", Schedule::once(Timestamp::now()))
        .payload(json!({"fail_shard": 2}))
        .retry(RetryPolicy::none())
        .remote(broadcast())
        .build()
        .unwrap();
    scheduler.upsert(job).await.unwrap();
    let runs = ended_runs(&store, "sync", 1).await;
    running.shutdown().await;
    assert_eq!(runs.len(), 1, "{runs:?}");
    let run = &runs[0];
    assert_eq!(
        (run.status, run.will_retry),
        (RunStatus::Failed, false),
        "{run:?}"
    );
    let error = run.error.as_deref().unwrap_or_default();
    assert!(
        error.starts_with("1 of 3 shards failed: shard 2 on http://127.0.0.1:")
            && error.ends_with("(attempt 1): shard 2 failed once"),
        "{error}"
    );
    let fires = shards_by_fire(&seen, "sync");
    let shards = &fires[&run.fire_at.as_millis()];
    let keys: BTreeSet<(u64, u64)> = shards.keys().copied().collect();
    assert_eq!(keys, BTreeSet::from([(0, 1), (1, 1), (2, 1)]), "{shards:?}");
}
