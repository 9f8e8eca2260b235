//! A scheduler node killed (`kill -9`) while its remote run executes on an
//! instance: another node takes the job over once the dead node's heartbeat is
//! stale, records the run lost and retries it with a newer token; the first run's
//! result, which the instance still produces, is never applied. The dead node is a
//! real process (`examples/fault_node.rs`) on PostgreSQL; the instance and the
//! surviving node run in the test. Every wait is bounded.

use crate::support;
use jobwheel::store::JobsExt as _;

use jobwheel::placement::RemoteTarget;
use jobwheel::postgres::PgStore;
use jobwheel::prelude::*;
use jobwheel::remote::{ExecutorServer, RemoteGroup};
use jobwheel::store::RunLog;
use jobwheel::{RetryPolicy, RunRecord};
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::remote::SECRET;

/// What the instance saw: (attempt, token, ended).
type Seen = Arc<Mutex<Vec<(u32, u64, bool)>>>;

async fn runs(store: &PgStore, job: &str) -> Vec<RunRecord> {
    let mut r = store
        .runs(&RunQuery::new().job(JobId::new(job).unwrap()).limit(100))
        .await
        .unwrap();
    r.reverse();
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_scheduler_nodes_remote_run_is_taken_over_and_its_late_result_refused() {
    let Some(url) = support::server_url("JOBWHEEL_POSTGRES_URL") else {
        return;
    };
    support::remote::init_logs();
    let prefix = format!("rk{:08x}_", fastrand::u32(..));
    let store = PgStore::builder(&url)
        .prefix(&prefix)
        .build()
        .await
        .unwrap();
    store.migrate().await.unwrap();

    // The instance: each run takes 2 s, and says when it started and ended.
    let seen = Seen::default();
    let s = seen.clone();
    let instance = ExecutorServer::builder("billing", SECRET)
        .unwrap()
        .handler("slow", move |ctx: JobContext| {
            let s = s.clone();
            async move {
                let me = (ctx.attempt, ctx.token);
                s.lock().unwrap().push((me.0, me.1, false));
                tokio::time::sleep(Duration::from_secs(2)).await;
                s.lock().unwrap().push((me.0, me.1, true));
                Ok(())
            }
        })
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    let base = format!("http://{}", instance.local_addr());

    // Node A, a process of its own.
    let mut a = Command::new(support::faults::node_binary())
        .args(["--backend", "postgres", "--url", &url, "--prefix", &prefix])
        .args(["--node", "node-a", "--remote", &base])
        .env("JOBWHEEL_GROUP_SECRET", SECRET)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn fault_node");
    let mut out = std::io::BufReader::new(a.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.starts_with("READY"), "node A said {line:?}");

    let job = Job::builder(
        "remote-kill",
        "slow",
        Schedule::once(jobwheel::Timestamp::now()),
    )
    .remote(RemoteTarget::new("billing").unwrap())
    .retry(RetryPolicy::new(3, Duration::from_millis(100), Duration::from_secs(1)).unwrap())
    .build()
    .unwrap();
    store
        .upsert(&job, Some(jobwheel::Timestamp::now()))
        .await
        .unwrap();

    // Once the run executes on the instance for node A, kill A.
    let end = Instant::now() + Duration::from_secs(20);
    while !seen
        .lock()
        .unwrap()
        .iter()
        .any(|(attempt, _, _)| *attempt == 1)
    {
        assert!(Instant::now() < end, "node A did not dispatch within 20 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    a.kill().unwrap();
    a.wait().unwrap();

    // Node B takes over.
    let b = Scheduler::builder()
        .store(store.clone())
        .locks(store.locks())
        .remote(RemoteGroup::fixed("billing", SECRET, [base.as_str()]).unwrap())
        .config(
            SchedulerConfig::default()
                .node_id("node-b".to_string())
                .poll_interval(Duration::from_millis(200))
                .lease_ttl(Duration::from_secs(3))
                .heartbeat(Duration::from_secs(1))
                .dead_after_beats(3),
        )
        .build()
        .unwrap();
    let running = b.start().await.unwrap();
    let end = Instant::now() + Duration::from_secs(30);
    let records = loop {
        let r = runs(&store, "remote-kill").await;
        if r.iter().any(|r| r.status == RunStatus::Succeeded) {
            break r;
        }
        assert!(
            Instant::now() < end,
            "no successful attempt within 30 s: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    running.shutdown().await;

    let seen = seen.lock().unwrap().clone();
    let (first, second) = (&records[0], &records[1]);
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!(
        (first.attempt, first.node.as_str(), first.status),
        (1, "node-a", RunStatus::Lost),
        "the dead node's run is recorded lost: {first:?}"
    );
    assert_eq!(
        (second.attempt, second.node.as_str(), second.status),
        (2, "node-b", RunStatus::Succeeded),
        "{second:?}"
    );
    assert!(
        second.token > first.token,
        "the retry runs under a newer token"
    );
    // The instance finished node A's run (its result is never collected or applied)
    // and ran node B's retry under the newer token.
    assert!(
        seen.contains(&(1, first.token, true)),
        "node A's run ran to its end on the instance: {seen:?}"
    );
    assert!(seen.contains(&(2, second.token, true)), "{seen:?}");
    assert_eq!(
        seen.len(),
        4,
        "two runs, each started and ended once: {seen:?}"
    );

    instance.shutdown().await;
    support::drop_pg_tables(&url, &prefix).await;
}
