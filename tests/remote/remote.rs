//! Remote executors on loopback: a scheduler dispatching to executor servers over
//! real HTTP (the protocol's own suite is `remote_protocol.rs`). Every wait is
//! bounded.

use crate::support;

use jobwheel::RunRecord;
use jobwheel::memory::{LocalLocks, MemoryStore};
use jobwheel::placement::{RemoteTarget, Routing};
use jobwheel::prelude::*;
use jobwheel::remote::protocol::{self, Phase, RunState};
use jobwheel::remote::{ExecutorServer, RemoteGroup};
use jobwheel::store::RunLog;
use serde_json::json;
use std::time::Duration;

use support::remote::*;

/// A started scheduler on `store` dispatching to `group`, polling every 100 ms.
async fn scheduler_on(
    store: &MemoryStore,
    group: RemoteGroup,
    grace: Duration,
) -> (Scheduler, SchedulerHandle) {
    scheduler_with(
        store,
        group,
        SchedulerConfig::default().shutdown_grace(grace),
    )
    .await
}

/// [`scheduler_on`] with these settings (polling every 100 ms).
async fn scheduler_with(
    store: &MemoryStore,
    group: RemoteGroup,
    config: SchedulerConfig,
) -> (Scheduler, SchedulerHandle) {
    let scheduler = Scheduler::builder()
        .store(store.clone())
        .locks(LocalLocks::new())
        .remote(group)
        .config(config.poll_interval(Duration::from_millis(100)))
        .build()
        .unwrap();
    let running = scheduler.start().await.unwrap();
    (scheduler, running)
}

async fn wait_for_run(
    store: &MemoryStore,
    job: &str,
    done: impl Fn(&RunRecord) -> bool,
) -> RunRecord {
    for _ in 0..200 {
        let runs = store
            .runs(&RunQuery::new().job(JobId::new(job).unwrap()).limit(10))
            .await
            .unwrap();
        if let Some(r) = runs.into_iter().find(|r| done(r)) {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no matching run of {job} within 10 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_runs_remote_jobs_on_its_group_and_records_their_outcomes() {
    let seen = Seen::default();
    let servers = [
        instance("i-a", &seen).await,
        instance("i-b", &seen).await,
        instance("i-c", &seen).await,
    ];
    let group = RemoteGroup::fixed("billing", SECRET, servers.iter().map(base)).unwrap();
    let first = group.instances().await.unwrap()[0].clone();
    let first_name = servers
        .iter()
        .find(|s| base(s) == first)
        .map(|s| s.local_addr())
        .unwrap();
    let store = MemoryStore::new();
    let (scheduler, running) = scheduler_on(&store, group, Duration::from_secs(5)).await;
    let now = jobwheel::Timestamp::now();
    let target = RemoteTarget::new("billing")
        .unwrap()
        .routing(Routing::First);
    let job = Job::builder("export-1", "echo", Schedule::once(now))
        .payload(json!({"month": "2026-11"}))
        .remote(target.clone())
        .build()
        .unwrap();
    scheduler.upsert(job).await.unwrap();
    let run = wait_for_run(&store, "export-1", |r| r.status != RunStatus::Running).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    let seen_now = seen.0.lock().unwrap().clone();
    assert_eq!(seen_now.len(), 1);
    assert_eq!(seen_now[0].1, "export-1");
    assert_eq!(seen_now[0].2, json!({"month": "2026-11"}));
    // Routing first: the instance with the lowest address.
    let ran_on = servers
        .iter()
        .position(|s| s.local_addr() == first_name)
        .unwrap();
    assert_eq!(seen_now[0].0, ["i-a", "i-b", "i-c"][ran_on]);

    // A permanent failure on the instance is a failed run with its message, not retried.
    let job = Job::builder("export-2", "fail", Schedule::once(now))
        .remote(target.clone())
        .build()
        .unwrap();
    scheduler.upsert(job).await.unwrap();
    let run = wait_for_run(&store, "export-2", |r| r.status != RunStatus::Running).await;
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.error.as_deref(), Some("export failed: disk full"));
    assert!(!run.will_retry);

    // A job naming a group the scheduler does not know is refused, nothing stored.
    let job = Job::builder("export-3", "echo", Schedule::once(now))
        .remote(RemoteTarget::new("payroll").unwrap())
        .build()
        .unwrap();
    let err = scheduler.upsert(job).await.unwrap_err();
    assert!(
        matches!(&err, jobwheel::Error::UnknownGroup { group } if group == "payroll"),
        "{err}"
    );
    running.shutdown().await;
    for s in servers {
        s.shutdown().await;
    }
}

/// Every stored line of run `run`, page by page.
async fn stored_lines(store: &MemoryStore, run: jobwheel::RunId) -> Vec<String> {
    let mut all = Vec::new();
    for _ in 0..100 {
        let page = store.lines(run, all.len() as u64, 1000).await.unwrap();
        if page.is_empty() {
            break;
        }
        all.extend(page.into_iter().map(|l| l.line));
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_runs_log_is_stored_with_the_run_and_outlives_its_instance() {
    let seen = Seen::default();
    let server = instance_builder("i-a", &seen)
        .log_lines(5_000)
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    let group = RemoteGroup::fixed("billing", SECRET, [base(&server)])
        .unwrap()
        .with_config(
            jobwheel::remote::RemoteGroupConfig::default().result_wait(Duration::from_millis(200)),
        )
        .unwrap();
    let store = MemoryStore::new();
    let config = SchedulerConfig::default()
        .log_flush(Duration::from_millis(100))
        .log_lines(5_000);
    let (scheduler, running) = scheduler_with(&store, group, config).await;
    let now = jobwheel::Timestamp::now();
    let remote = || RemoteTarget::new("billing").unwrap();

    // A long run: its lines reach the store while it runs, with the result polls.
    let job = Job::builder("long", "report", Schedule::once(now))
        .payload(json!({"lines": 2, "hold_ms": 4000}))
        .remote(remote())
        .build()
        .unwrap();
    scheduler.upsert(job).await.unwrap();
    let run = wait_for_run(&store, "long", |_| true).await;
    let mut early = Vec::new();
    for _ in 0..60 {
        early = stored_lines(&store, run.id).await;
        if early.len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let still = wait_for_run(&store, "long", |_| true).await;
    assert_eq!(still.status, RunStatus::Running, "read while it runs");
    assert_eq!(
        still.executor, None,
        "the instance is recorded with the end"
    );
    assert_eq!(early.len(), 3, "{early:?}");
    assert!(
        early[0].starts_with("[jobwheel] dispatched to http://127.0.0.1:"),
        "{early:?}"
    );
    assert!(early[2].contains("report line 1"), "{early:?}");
    let long = wait_for_run(&store, "long", |r| r.status != RunStatus::Running).await;
    assert_eq!(long.status, RunStatus::Succeeded, "{long:?}");
    let went = early[0]["[jobwheel] dispatched to ".len()..]
        .split(' ')
        .next()
        .unwrap();
    assert_eq!(
        long.executor.as_deref(),
        Some(went),
        "the run's record names the instance its log says it went to"
    );

    // A log of 2,000 lines of 400 bytes: more than a page of lines, and pages cut
    // by their size bound.
    let job = Job::builder("big", "report", Schedule::once(now))
        .payload(json!({"lines": 2000, "pad": 400}))
        .remote(remote())
        .build()
        .unwrap();
    scheduler.upsert(job).await.unwrap();
    let big = wait_for_run(&store, "big", |r| r.status != RunStatus::Running).await;
    assert_eq!(big.status, RunStatus::Succeeded, "{big:?}");

    // The instance stops: what it kept is gone, the runs' logs are not.
    server.shutdown().await;
    let lines = stored_lines(&store, big.id).await;
    assert_eq!(lines.len(), 2002, "header, 2,000 lines, the logger's line");
    for (i, line) in lines[1..2001].iter().enumerate() {
        assert!(
            line.contains(&format!("report line {i} xxx")),
            "{i}: {line}"
        );
    }
    assert_eq!(lines[2001], "report: finished");
    let lines = stored_lines(&store, long.id).await;
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert_eq!(lines[3], "report: finished");
    running.shutdown().await;

    // Sixteen minutes after the end, under a day's run retention (what a node's
    // retention service purges: the runs ended before now - retention), nothing of
    // them goes; past the retention, a run's lines go with it.
    let ms = |t: Option<jobwheel::Timestamp>| t.unwrap().as_millis();
    let later = ms(big.ended_at) + 16 * 60_000;
    let purged = store
        .purge_runs(jobwheel::Timestamp::from_millis(later - 86_400_000))
        .await
        .unwrap();
    assert_eq!(purged, 0);
    assert_eq!(stored_lines(&store, big.id).await.len(), 2002);
    let after = jobwheel::Timestamp::from_millis(ms(big.ended_at).max(ms(long.ended_at)) + 1);
    assert!(store.purge_runs(after).await.unwrap() >= 2);
    assert!(
        stored_lines(&store, big.id).await.is_empty(),
        "purged with the run"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_run_ends_at_its_deadline_on_the_instance_and_a_cancelled_one_is_killed() {
    let seen = Seen::default();
    let server = instance("i-a", &seen).await;
    let group = RemoteGroup::fixed("billing", SECRET, [base(&server)]).unwrap();
    let store = MemoryStore::new();
    let (scheduler, running) =
        scheduler_on(&store, group.clone(), Duration::from_millis(200)).await;
    let job = Job::builder("slow", "wait", Schedule::once(jobwheel::Timestamp::now()))
        .timeout(Duration::from_millis(300))
        .retry(RetryPolicy::new(1, Duration::from_secs(1), Duration::from_secs(1)).unwrap())
        .remote(RemoteTarget::new("billing").unwrap())
        .build()
        .unwrap();
    scheduler.upsert(job).await.unwrap();
    let run = wait_for_run(&store, "slow", |r| r.status != RunStatus::Running).await;
    assert_eq!(run.status, RunStatus::TimedOut, "{run:?}");
    // The instance was told: its run ends cancelled and its slot is free again.
    let mut state = None;
    for _ in 0..100 {
        let (status, v, _) = ask(
            &base(&server),
            protocol::RESULT,
            &json!({"run_id": run.id.0, "token": run.token, "wait_ms": 100}),
        )
        .await;
        assert_eq!(status, 200, "{v}");
        let s: RunState = serde_json::from_value(v).unwrap();
        if s.phase == Phase::Done {
            state = Some(s);
            break;
        }
    }
    let state = state.expect("the instance's run ended within 10 s");
    // The instance was sent the deadline: its own timer or the scheduler's kill,
    // whichever lands first, ended the run there.
    let status = state.outcome.unwrap().status;
    assert!(
        ["timed_out", "cancelled"].contains(&status.as_str()),
        "{status}"
    );
    let beat = group.beat(&base(&server)).await.unwrap();
    assert_eq!((beat.running, beat.queued), (0, 0));

    // A run the engine cancels (shutdown past its grace) is killed on the instance.
    let job = Job::builder(
        "endless",
        "wait",
        Schedule::once(jobwheel::Timestamp::now()),
    )
    .remote(RemoteTarget::new("billing").unwrap())
    .build()
    .unwrap();
    scheduler.upsert(job).await.unwrap();
    let run = wait_for_run(&store, "endless", |r| r.status == RunStatus::Running).await;
    let mut on_instance = None;
    for _ in 0..100 {
        let (status, v, _) = ask(
            &base(&server),
            protocol::RESULT,
            &json!({"run_id": run.id.0, "token": run.token}),
        )
        .await;
        if status == 200 {
            on_instance = Some(serde_json::from_value::<RunState>(v).unwrap());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        on_instance.expect("the instance admitted the run").phase,
        Phase::Running
    );
    let report = running.shutdown().await;
    assert_eq!(report.cancelled, 1);
    let r = result_of(&base(&server), run.id.0, run.token, 5_000).await;
    assert_eq!(r.outcome.map(|o| o.status).as_deref(), Some("cancelled"));
    server.shutdown().await;
}

#[tokio::test]
async fn bad_settings_are_refused_with_the_field_named() {
    for (secret, field) in [
        ("", "executor.secret"),
        ("default_token", "executor.secret"),
    ] {
        let e = ExecutorServer::builder("billing", secret)
            .unwrap_err()
            .to_string();
        assert!(e.contains(field), "{e}");
    }
    let e = ExecutorServer::builder("bad group", SECRET)
        .unwrap_err()
        .to_string();
    assert!(e.contains("executor.group"), "{e}");
    let e = ExecutorServer::builder("billing", SECRET)
        .unwrap()
        .bind("127.0.0.1:0")
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("executor.handlers"), "{e}");
    for (urls, needle) in [
        (vec![], "remote.instances"),
        (vec!["ftp://127.0.0.1:1"], "remote.instances"),
        (vec!["http://127.0.0.1:1/run"], "remote.instances"),
        (vec!["http://user:pw@127.0.0.1:1"], "remote.instances"),
    ] {
        let e = RemoteGroup::fixed("billing", SECRET, urls)
            .unwrap_err()
            .to_string();
        assert!(e.contains(needle), "{e}");
    }
    let e = RemoteGroup::fixed("billing", "short", ["http://127.0.0.1:1"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("remote.secret") && !e.contains("short\""), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_dispatches_to_the_python_executor_whose_clock_is_eight_hours_ahead() {
    for skewed in [false, true] {
        let started = if skewed {
            python_executor_eight_hours_ahead()
        } else {
            python_executor()
        };
        let Some(python) = started else {
            return;
        };
        let group = RemoteGroup::fixed("billing", SECRET, [python.base.clone()]).unwrap();
        if skewed {
            // Its clock is ahead: a request signed on this machine's clock is refused.
            let (status, v, _) = ask(&python.base, protocol::BEAT, &json!({})).await;
            assert_eq!(
                (status, v["error"].as_str()),
                (401, Some("skewed_timestamp"))
            );
        }
        let store = MemoryStore::new();
        let (scheduler, running) = scheduler_on(&store, group, Duration::from_secs(5)).await;
        let at = jobwheel::Timestamp::now();
        let job = Job::builder("py-1", "echo", Schedule::once(at))
            .payload(json!({"lang": "python"}))
            .remote(RemoteTarget::new("billing").unwrap())
            .build()
            .unwrap();
        scheduler.upsert(job).await.unwrap();
        let run = wait_for_run(&store, "py-1", |r| r.status != RunStatus::Running).await;
        assert_eq!(run.status, RunStatus::Succeeded, "skewed {skewed}: {run:?}");
        // It ran at its fire, by this machine's clock, not eight hours early or late.
        assert!(run.started_at >= at && run.started_at.duration_since(at) < Duration::from_secs(5));
        let (status, v, _) = ask(
            &python.base,
            protocol::LOG,
            &json!({"run_id": run.id.0, "token": run.token}),
        )
        .await;
        if !skewed {
            assert_eq!(status, 200, "{v}");
            assert_eq!(v["lines"], json!([r#"echo {"lang": "python"}"#]));
        }
        running.shutdown().await;
    }
}

/// One dispatch of `job` through `group` with `routing`, as the engine makes it;
/// answers the instance that ran it.
async fn dispatch(
    group: &RemoteGroup,
    seen: &Seen,
    job: &str,
    routing: Routing,
    run: i64,
) -> String {
    let job = Job::builder(job, "echo", Schedule::once(jobwheel::Timestamp::now()))
        .remote(RemoteTarget::new("billing").unwrap().routing(routing))
        .build()
        .unwrap();
    let ctx = JobContext {
        job: std::sync::Arc::new(job),
        run_id: jobwheel::RunId(run),
        fire_at: jobwheel::Timestamp::now(),
        attempt: 1,
        trigger: TriggerKind::Manual,
        token: 1,
        node_id: "test".into(),
        cancel: tokio_util::sync::CancellationToken::new(),
        deadline: None,
        shard: None,
        trace: None,
        upstream: Vec::new(),
        log: jobwheel::RunLogger::discard(),
        executed_on: Default::default(),
    };
    jobwheel::JobHandler::run(group, ctx).await.unwrap();
    seen.0.lock().unwrap().last().unwrap().0.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_routing_strategy_picks_as_defined_over_three_live_instances() {
    let seen = Seen::default();
    let mut servers = vec![
        instance("i-a", &seen).await,
        instance("i-b", &seen).await,
        instance("i-c", &seen).await,
    ];
    let group = RemoteGroup::fixed("billing", SECRET, servers.iter().map(base)).unwrap();
    // The instances' names in the group's (address) order.
    let name_of: std::collections::HashMap<String, &str> = servers
        .iter()
        .zip(["i-a", "i-b", "i-c"])
        .map(|(s, n)| (base(s), n))
        .collect();
    let names: Vec<String> = group
        .instances()
        .await
        .unwrap()
        .iter()
        .map(|u| name_of[u].to_string())
        .collect();
    let mut run = 0;
    let mut picks = |routing: Routing, job: &str, n: usize| {
        let (group, seen) = (group.clone(), seen.clone());
        let job = job.to_string();
        let start = run;
        run += n as i64;
        async move {
            let mut out = Vec::new();
            for i in 0..n {
                out.push(dispatch(&group, &seen, &job, routing, start + i as i64 + 1).await);
            }
            out
        }
    };
    assert_eq!(
        picks(Routing::First, "j1", 3).await,
        vec![names[0].clone(); 3]
    );
    assert_eq!(
        picks(Routing::Last, "j1", 3).await,
        vec![names[2].clone(); 3]
    );
    let rr = picks(Routing::RoundRobin, "j2", 6).await;
    let at = |n: &String| names.iter().position(|x| x == n).unwrap();
    for w in rr.windows(2) {
        assert_eq!(at(&w[1]), (at(&w[0]) + 1) % 3, "{rr:?}");
    }
    let random = picks(Routing::Random, "j3", 60).await;
    assert!(names.iter().all(|n| random.contains(n)), "{random:?}");
    let lfu = picks(Routing::LeastFrequentlyUsed, "j4", 6).await;
    for n in &names {
        assert_eq!(lfu.iter().filter(|x| *x == n).count(), 2, "{lfu:?}");
    }
    let lru = picks(Routing::LeastRecentlyUsed, "j5", 6).await;
    assert_eq!(
        lru,
        [&names[..], &names[..]].concat(),
        "never used first, then the longest idle"
    );
    let hashed = picks(Routing::ConsistentHash, "j6", 3).await;
    assert!(
        hashed.iter().all(|x| x == &hashed[0]),
        "a job stays on its instance: {hashed:?}"
    );
    assert_eq!(
        picks(Routing::Failover, "j7", 2).await,
        vec![names[0].clone(); 2]
    );
    assert_eq!(
        picks(Routing::BusyOver, "j8", 2).await,
        vec![names[0].clone(); 2]
    );
    // The first instance goes away: failover and busy-over skip it at once.
    let first = group.instances().await.unwrap()[0].clone();
    let gone = servers.iter().position(|s| base(s) == first).unwrap();
    servers.remove(gone).shutdown().await;
    assert_eq!(
        picks(Routing::Failover, "j7", 2).await,
        vec![names[1].clone(); 2]
    );
    assert_eq!(
        picks(Routing::BusyOver, "j8", 2).await,
        vec![names[1].clone(); 2]
    );
    for s in servers {
        s.shutdown().await;
    }
}
