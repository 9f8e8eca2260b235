//! An end-to-end cluster check shared by the backend tests.

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
            .config(SchedulerConfig {
                node_id: Some(node.into()),
                poll_interval: Duration::from_millis(200),
                lookahead: Duration::from_secs(1),
                ..SchedulerConfig::default()
            })
            .build()
            .unwrap();
        handles.push(sched.start().await.unwrap());
    }
    let now = Timestamp::now();
    for i in 0..20 {
        handles[i % 2]
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
        .upsert(
            Job::builder("flaky", "fail", Schedule::once(now))
                .retry(retry)
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let store = handles[0].store().clone();
    let metrics: Vec<_> = handles.iter().map(|h| h.metrics()).collect();
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
        .runs(&RunQuery {
            job_id: Some(jobwheel::JobId::new("flaky").unwrap()),
            ..RunQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(flaky.len(), 2, "one attempt and one retry");
    assert!(flaky.iter().all(|r| r.status == RunStatus::Failed));
    assert_eq!(
        store.nodes().await.unwrap().len(),
        0,
        "both nodes deregistered"
    );
}

/// The fleet test of issue 4: `nodes` schedulers on one database, `jobs` jobs on a
/// 1-second interval for `seconds`, plus `oneshots` one-shot jobs due at once. Every
/// fire runs exactly once: no duplicate, no gap in any job's seconds, every one-shot.
pub async fn fleet_runs_every_fire_exactly_once<F, Fut>(
    open: F,
    nodes: usize,
    jobs: usize,
    seconds: u64,
    oneshots: usize,
) where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = (Arc<dyn JobStore>, Arc<dyn LockProvider>)>,
{
    let seen: Arc<Mutex<HashMap<(String, i64), u32>>> = Arc::default();
    let mut handles = Vec::new();
    for n in 0..nodes {
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
            .config(SchedulerConfig {
                node_id: Some(format!("fleet-{n}")),
                concurrency: 512,
                ..SchedulerConfig::default()
            })
            .build()
            .unwrap();
        handles.push(sched.start().await.unwrap());
    }
    let store = handles[0].store().clone();
    for i in 0..jobs {
        let job = Job::builder(
            format!("every-{i}"),
            "count",
            Schedule::every(Duration::from_secs(1)).unwrap(),
        )
        .build()
        .unwrap();
        handles[i % nodes].upsert(job).await.unwrap();
    }
    let now = Timestamp::now();
    let oneshot_jobs: Vec<Job> = (0..oneshots)
        .map(|i| {
            Job::builder(format!("once-{i}"), "count", Schedule::once(now))
                .build()
                .unwrap()
        })
        .collect();
    for job in &oneshot_jobs {
        store.upsert(job, Some(now)).await.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    // Counters are read after shutdown, when no fire is still running.
    let nodes_: Vec<Scheduler> = handles.iter().map(|h| (**h).clone()).collect();
    for h in handles {
        h.shutdown().await;
    }
    let metrics: Vec<_> = nodes_.iter().map(|s| s.metrics()).collect();
    let seen = seen.lock().unwrap().clone();
    let dups: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(dups.is_empty(), "fires ran twice: {dups:?}");
    let once = seen.keys().filter(|(j, _)| j.starts_with("once-")).count();
    assert_eq!(once, oneshots, "every one-shot ran once");
    for i in 0..jobs {
        let mut fires: Vec<i64> = seen
            .keys()
            .filter(|(j, _)| *j == format!("every-{i}"))
            .map(|(_, f)| *f)
            .collect();
        fires.sort_unstable();
        assert!(
            fires.len() as u64 >= seconds - 3,
            "every-{i} fired {} times in {seconds} s",
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
    println!(
        "fleet: {nodes} nodes, {} fires ({} one-shots) in {seconds} s, per node started: {:?}",
        seen.len(),
        oneshots,
        metrics.iter().map(|m| m.started).collect::<Vec<_>>()
    );
}
