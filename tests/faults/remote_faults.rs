//! Remote executor faults with real processes: two Python executor instances on
//! loopback behind failover routing; the instance running a job is killed (`kill
//! -9`) or paused (`SIGSTOP`) mid-run. The run is reported lost, the retry goes to
//! the live instance, and a paused instance's late result is never applied. Every
//! wait is bounded.

use crate::support;

use jobwheel::RunRecord;
use jobwheel::memory::{LocalLocks, MemoryStore};
use jobwheel::placement::{RemoteTarget, Routing};
use jobwheel::prelude::*;
use jobwheel::remote::{RemoteGroup, RemoteGroupConfig, protocol};
use jobwheel::store::RunLog;
use serde_json::json;
use std::time::Duration;
use support::remote::*;

async fn runs(store: &MemoryStore, job: &str) -> Vec<RunRecord> {
    let mut r = store
        .runs(&RunQuery::new().job(JobId::new(job).unwrap()).limit(100))
        .await
        .unwrap();
    r.reverse();
    r
}

/// Runs a 1.5 s job on the first of two instances, applies `fault` to that
/// instance's process once it runs there, and checks the recovery.
async fn fault_mid_run(fault: &str) {
    let (Some(a), Some(b)) = (python_executor(), python_executor()) else {
        return;
    };
    let group = RemoteGroup::fixed("billing", SECRET, [a.base.clone(), b.base.clone()])
        .unwrap()
        .with_config(
            RemoteGroupConfig::default()
                .request_timeout(Duration::from_millis(300))
                .result_wait(Duration::from_millis(500))
                .lost_after(2),
        )
        .unwrap();
    let (first, second) = if group.instances().await.unwrap()[0] == a.base {
        (&a, &b)
    } else {
        (&b, &a)
    };
    let store = MemoryStore::new();
    let scheduler = Scheduler::builder()
        .store(store.clone())
        .locks(LocalLocks::new())
        .remote(group)
        .config(SchedulerConfig::default().poll_interval(Duration::from_millis(100)))
        .build()
        .unwrap();
    let running = scheduler.start().await.unwrap();
    let job = Job::builder(
        "nightly",
        "wait",
        Schedule::once(jobwheel::Timestamp::now()),
    )
    .payload(json!({"ms": 1500}))
    .retry(RetryPolicy::new(3, Duration::from_millis(200), Duration::from_millis(200)).unwrap())
    .remote(
        RemoteTarget::new("billing")
            .unwrap()
            .routing(Routing::Failover),
    )
    .build()
    .unwrap();
    scheduler.upsert(job).await.unwrap();
    // Failover picks the first instance in address order; wait until it runs there.
    let mut run1 = None;
    for _ in 0..200 {
        if let Some(r) = runs(&store, "nightly").await.first().cloned() {
            let (status, v, _) = ask(
                &first.base,
                protocol::RESULT,
                &json!({"run_id": r.id.0, "token": r.token}),
            )
            .await;
            if status == 200 && v["phase"] == "running" {
                run1 = Some(r);
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let run1 = run1.expect("the first attempt runs on the first instance within 4 s");
    first.signal(fault);
    let started = std::time::Instant::now();
    let mut done = Vec::new();
    for _ in 0..300 {
        done = runs(&store, "nightly").await;
        if done.iter().any(|r| r.status == RunStatus::Succeeded) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let recovery = started.elapsed();
    println!(
        "REMOTE FAULT | {fault} | runs {:?} | recovered in {recovery:.2?}",
        done.iter()
            .map(|r| (r.attempt, r.status))
            .collect::<Vec<_>>()
    );
    assert_eq!(done[0].id, run1.id);
    assert_eq!(done[0].status, RunStatus::Failed, "{:?}", done[0]);
    assert!(
        done[0]
            .error
            .as_deref()
            .unwrap_or("")
            .contains("lost contact"),
        "{:?}",
        done[0].error
    );
    assert!(done[0].will_retry);
    let retry = &done[1];
    assert_eq!(
        (retry.status, retry.attempt),
        (RunStatus::Succeeded, 2),
        "{done:?}"
    );
    // The retry ran on the live instance: it knows the run and reports it done.
    let (status, v, _) = ask(
        &second.base,
        protocol::RESULT,
        &json!({"run_id": retry.id.0, "token": retry.token}),
    )
    .await;
    assert_eq!((status, &v["phase"]), (200, &json!("done")), "{v}");
    assert!(recovery < Duration::from_secs(10), "{recovery:?}");
    if fault == "STOP" {
        // The paused instance wakes and ends its run (finished, or cancelled by the
        // kill the dispatcher sent when it gave up, if that request reaches it);
        // nobody applies that result.
        first.signal("CONT");
        let r = result_of(&first.base, run1.id.0, run1.token, 5_000).await;
        assert_eq!(r.phase, jobwheel::remote::protocol::Phase::Done, "{r:?}");
        let after = runs(&store, "nightly").await;
        assert_eq!(
            after[0].status,
            RunStatus::Failed,
            "the late result was not applied"
        );
        assert_eq!(
            after
                .iter()
                .filter(|r| r.status == RunStatus::Succeeded)
                .count(),
            1
        );
    }
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_killed_mid_run_loses_the_run_and_failover_retries_it_elsewhere() {
    fault_mid_run("KILL").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_paused_mid_run_loses_the_run_and_its_late_result_is_not_applied() {
    fault_mid_run("STOP").await;
}
