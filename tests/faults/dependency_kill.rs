//! Dependent jobs while scheduler processes are killed with `kill -9`, on PostgreSQL,
//! on the Redis store, and on PostgreSQL with Redis locks: ten parents
//! fire every second, each releasing a child, which releases a grandchild; two nodes
//! of three are killed at moments they are executing (between a handler's return and
//! its finish, or between a finish and the next step's start, as the kills land),
//! and replaced; the parents fire on until more than 50 chains have ended and a
//! parent has started after the last kill (at most 40 s). From the run log: every parent fire that ended released its child
//! exactly once, every child fire that ended released its grandchild exactly once,
//! each released fire completed once, and nothing is left running or queued.

use super::fault_cluster::{SERIAL, targets};
use crate::support;
use jobwheel::dependency::ChildLink;
use jobwheel::store::Jobs;
use jobwheel::store::JobsExt as _;
use jobwheel::{
    Job, JobId, MisfirePolicy, RetryPolicy, RunRecord, RunStatus, Schedule, TriggerKind,
};
use std::collections::HashMap;
use std::time::Duration;
use support::faults::Cluster;

const PARENTS: usize = 10;
/// More parent fires than this release their chains before the parents stop.
const CHAINS: usize = 50;

fn job(id: &str, schedule: Schedule, sleep_ms: u64, child: Option<String>) -> Job {
    Job::builder(id, "work", schedule)
        .payload(serde_json::json!({ "sleep_ms": sleep_ms }))
        .retry(RetryPolicy::new(5, Duration::from_millis(500), Duration::from_secs(2)).unwrap())
        .misfire(MisfirePolicy::CatchUp { max: 1000 })
        .children(
            child
                .map(|c| vec![ChildLink::on_success(JobId::new(c).unwrap())])
                .unwrap_or_default(),
        )
        .build()
        .unwrap()
}

/// The run that ended a fire (succeeded, or failed with no retry).
fn ended_fire(r: &RunRecord) -> bool {
    r.status == RunStatus::Succeeded || (r.status.is_failure() && !r.will_retry)
}

/// For each `parent` run that ended its fire by succeeding, the `child` fire it
/// released: how many released fires name it, and how many of their runs
/// succeeded. Problems go to `bad`.
fn exactly_once(runs: &[RunRecord], parent: &str, child: &str, bad: &mut Vec<String>) -> usize {
    let mut released: HashMap<i64, (usize, usize)> = HashMap::new();
    for r in runs.iter().filter(|r| r.job_id.as_str() == child) {
        let Some(u) = r.context.upstream.first() else {
            bad.push(format!("{child} run {} has no upstream", r.id));
            continue;
        };
        let e = released.entry(u.run.0).or_default();
        if r.trigger == TriggerKind::Upstream && r.status != RunStatus::Returned {
            e.0 += 1;
        }
        if r.status == RunStatus::Succeeded {
            e.1 += 1;
        }
    }
    let mut n = 0;
    for p in runs.iter().filter(|r| {
        r.job_id.as_str() == parent && ended_fire(r) && r.status == RunStatus::Succeeded
    }) {
        n += 1;
        match released.get(&p.id.0) {
            Some((1, 1)) => {}
            other => bad.push(format!(
                "{parent} run {} released {child} {:?} times (fires, successes)",
                p.id,
                other.copied().unwrap_or_default()
            )),
        }
    }
    n
}

/// A store handle of a test's own on the cluster's tables: the Redis store for
/// `redis`, else PostgreSQL.
pub(super) async fn own_store(
    backend: &str,
    t: &support::faults::Target,
    c: &Cluster,
) -> Box<dyn jobwheel::JobStore> {
    match &t.redis {
        Some(url) if backend == "redis" => Box::new(
            jobwheel::redis::RedisStore::connect_with_prefix(url, &c.prefix)
                .await
                .unwrap(),
        ),
        _ => Box::new(
            jobwheel::postgres::PgStore::builder(&t.url)
                .prefix(&c.prefix)
                .build()
                .await
                .unwrap(),
        ),
    }
}

/// The run log once nothing runs, no release is queued and no job has a fire other
/// than its schedule's pending (checked each second, at most `secs` times).
pub(super) async fn drained(
    c: &Cluster,
    store: &dyn jobwheel::JobStore,
    secs: u32,
) -> Vec<RunRecord> {
    let mut runs = Vec::new();
    for _ in 0..secs {
        tokio::time::sleep(Duration::from_secs(1)).await;
        runs = c.runs().await;
        let busy = runs.iter().any(|r| r.status == RunStatus::Running);
        let queued = !store.releases(None, 10).await.unwrap().is_empty();
        let pending = store
            .list(&jobwheel::JobQuery::new(100))
            .await
            .unwrap()
            .items
            .iter()
            .any(|j| j.next_trigger() != TriggerKind::Schedule);
        if !busy && !queued && !pending {
            break;
        }
    }
    runs
}

async fn kill_under_dependencies(backend: &'static str) {
    let Some(t) = targets(backend) else { return };
    let _serial = SERIAL.lock().await;
    let mut c = Cluster::new(&t, "deps").await;
    for n in ["n1", "n2", "n3"] {
        c.spawn(n, false);
    }
    // A store handle of the test's own, beside the cluster's.
    let store = own_store(backend, &t, &c).await;
    let now = store.now().await.unwrap();
    let first = jobwheel::Timestamp::from_millis((now.as_millis() / 1000 + 2) * 1000);
    for i in 0..PARENTS {
        let (p, k, g) = (format!("p{i:02}"), format!("c{i:02}"), format!("g{i:02}"));
        store
            .upsert(&job(&g, Schedule::never(), 150, None), None)
            .await
            .unwrap();
        store
            .upsert(&job(&k, Schedule::never(), 150, Some(g)), None)
            .await
            .unwrap();
        let every = Schedule::every(Duration::from_secs(1)).unwrap();
        store
            .upsert(&job(&p, every, 100, Some(k)), Some(first))
            .await
            .unwrap();
    }
    let mut alive = vec!["n1", "n2", "n3"];
    for (round, spare) in ["n4", "n5"].into_iter().enumerate() {
        tokio::time::sleep(Duration::from_secs(4)).await;
        let victim = c.wait_busy(&alive).await;
        c.node(&victim).signal("KILL");
        alive.retain(|n| *n != victim);
        println!("FAULT {backend} dependencies: round {round}, killed {victim}");
        c.spawn(spare, false);
        alive.push(spare);
    }
    // The parents keep firing until the chains have ended more than `CHAINS` times
    // with a parent started after the last kill (a killed node's leases lapse
    // first, so how many fires the kills hold up depends on which jobs the victims
    // held), for at most 40 s.
    let last_kill = store.now().await.unwrap();
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let runs = c.runs().await;
        let chains = runs
            .iter()
            .filter(|r| r.job_id.as_str().starts_with('g') && r.status == RunStatus::Succeeded)
            .count();
        let after = runs
            .iter()
            .any(|r| r.job_id.as_str().starts_with('p') && r.started_at > last_kill);
        if chains > CHAINS && after {
            break;
        }
    }
    for i in 0..PARENTS {
        store
            .set_enabled(&JobId::new(format!("p{i:02}")).unwrap(), false, None)
            .await
            .unwrap();
    }
    // The killed nodes' leases lapse (3 s), their runs are recovered and retried,
    // and the chains drain.
    let runs = drained(&c, &*store, 60).await;
    c.stop_all();
    let mut bad = Vec::new();
    let (mut parents, mut children) = (0, 0);
    for i in 0..PARENTS {
        let (p, k, g) = (format!("p{i:02}"), format!("c{i:02}"), format!("g{i:02}"));
        parents += exactly_once(&runs, &p, &k, &mut bad);
        children += exactly_once(&runs, &k, &g, &mut bad);
    }
    let lost = runs.iter().filter(|r| r.status == RunStatus::Lost).count();
    let left = store.releases(None, 10).await.unwrap();
    println!(
        "FAULT {backend} dependencies: {parents} parent fires released a child, {children} child fires a grandchild, {lost} runs recorded lost, {} problems, {} releases left",
        bad.len(),
        left.len()
    );
    assert!(lost > 0, "the kills hit running runs");
    assert!(parents > CHAINS && children > CHAINS, "the chains ran");
    assert!(left.is_empty(), "releases left queued: {left:?}");
    assert!(
        bad.is_empty(),
        "{}\nthe nodes' logs:\n{}",
        bad.join("\n"),
        c.log_tails(40)
    );
    c.drop_tables().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_children_run_once_per_parent_fire_through_kills() {
    kill_under_dependencies("postgres").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_children_run_once_per_parent_fire_through_kills() {
    kill_under_dependencies("redis").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_with_redis_locks_children_run_once_per_parent_fire_through_kills() {
    kill_under_dependencies("postgres+redis").await;
}
