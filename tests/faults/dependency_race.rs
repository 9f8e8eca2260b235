//! Two parents of a join finishing at the same moment on two scheduler processes,
//! on PostgreSQL and on the Redis store: `b` runs only on node n1 and `c` only on
//! n2 (each node registers one of their handlers), both released by one origin fire
//! and made to end on the same 250 ms boundary of the machine's clock, so their two
//! finishes — each queuing its release of `d` and trying to take the whole group —
//! reach the store together. Every origin instant both branches succeeded for runs
//! `d` exactly once, naming both, taken in the step of whichever finish came second
//! (not left to a later maintenance pass); how close the two finishes were is
//! measured from the run log (the store's clock) and printed.

use super::fault_cluster::{SERIAL, targets};
use crate::support;
use jobwheel::dependency::ChildLink;
use jobwheel::store::Jobs;
use jobwheel::store::JobsExt as _;
use jobwheel::{Job, JobId, RetryPolicy, RunStatus, Schedule, Timestamp};
use std::collections::BTreeMap;
use std::time::Duration;
use support::faults::Cluster;

/// Origin fires per backend.
const FIRES: i64 = 24;

fn job(id: &str, handler: &str, schedule: Schedule, payload: serde_json::Value) -> Job {
    Job::builder(id, handler, schedule)
        .payload(payload)
        .retry(RetryPolicy::none())
        .build()
        .unwrap()
}

fn jid(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

async fn race_on_two_nodes(backend: &'static str) {
    let Some(t) = targets(backend) else { return };
    let _serial = SERIAL.lock().await;
    let mut c = Cluster::new(&t, "race").await;
    c.spawn_with("n1", false, &["--handlers", "work,left"]);
    c.spawn_with("n2", false, &["--handlers", "work,right"]);
    let store = super::dependency_kill::own_store(backend, &t, &c).await;
    let branch = serde_json::json!({ "sleep_ms": 20, "align_ms": 250 });
    let d = job("d", "work", Schedule::never(), serde_json::json!({}));
    let d = d
        .to_builder()
        .after(vec![jid("b"), jid("c")])
        .build()
        .unwrap();
    store.upsert(&d, None).await.unwrap();
    for (name, handler) in [("b", "left"), ("c", "right")] {
        let j = job(name, handler, Schedule::never(), branch.clone())
            .to_builder()
            .children(vec![ChildLink::on_success(jid("d"))])
            .build()
            .unwrap();
        store.upsert(&j, None).await.unwrap();
    }
    let now = store.now().await.unwrap();
    let first = Timestamp::from_millis((now.as_millis() / 1000 + 2) * 1000);
    let a = job(
        "a",
        "work",
        Schedule::every(Duration::from_secs(1)).unwrap(),
        serde_json::json!({}),
    )
    .to_builder()
    .children(vec![
        ChildLink::on_success(jid("b")),
        ChildLink::on_success(jid("c")),
    ])
    .build()
    .unwrap();
    store.upsert(&a, Some(first)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(FIRES as u64 * 1000 + 1500)).await;
    store.set_enabled(&jid("a"), false, None).await.unwrap();
    let runs = super::dependency_kill::drained(&c, &*store, 30).await;
    c.stop_all();
    // Per origin instant: the branches' runs (node, end) and the joins that ran.
    let mut branches: BTreeMap<Timestamp, Vec<(String, String, Timestamp)>> = BTreeMap::new();
    // Per instant: each join's upstream jobs, its fire's instant and its start.
    type Join = (Vec<String>, Timestamp, Timestamp);
    let mut joins: BTreeMap<Timestamp, Vec<Join>> = BTreeMap::new();
    let mut bad = Vec::new();
    for r in &runs {
        let Some(u) = r.context.upstream.first() else {
            continue;
        };
        match r.job_id.as_str() {
            "b" | "c" if r.status == RunStatus::Succeeded => {
                branches.entry(u.fire_at).or_default().push((
                    r.job_id.to_string(),
                    r.node.clone(),
                    r.ended_at.unwrap_or_default(),
                ));
            }
            "d" => joins.entry(u.fire_at).or_default().push((
                r.context
                    .upstream
                    .iter()
                    .map(|u| u.job.to_string())
                    .collect(),
                r.fire_at,
                r.started_at,
            )),
            _ => {}
        }
    }
    let (mut whole, mut apart_ms, mut lag_ms) = (0, Vec::new(), Vec::new());
    for (at, ends) in &branches {
        let mut names: Vec<&str> = ends.iter().map(|e| e.0.as_str()).collect();
        names.sort_unstable();
        if names != ["b", "c"] {
            bad.push(format!("instant {at}: branch runs {ends:?}"));
            continue;
        }
        whole += 1;
        if ends[0].1 == ends[1].1 {
            bad.push(format!("instant {at}: both branches ran on {}", ends[0].1));
        }
        apart_ms.push(ends[0].2.as_millis().abs_diff(ends[1].2.as_millis()));
        match joins.get(at).map(Vec::as_slice) {
            Some([(names, fire_at, started)]) if names == &["b".to_string(), "c".to_string()] => {
                // A release taken in a finish's own step is due at that step's
                // instant, which is also the run's end: the later of the two
                // finishes to commit saw the other's release and took the join.
                if *fire_at != ends[0].2 && *fire_at != ends[1].2 {
                    bad.push(format!(
                        "instant {at}: the join was not taken by either finish (due {fire_at}, ends {ends:?}): a later pass took it"
                    ));
                }
                let last = ends[0].2.max(ends[1].2);
                lag_ms.push(started.as_millis() - last.as_millis());
            }
            other => bad.push(format!("instant {at}: the join ran {other:?}")),
        }
    }
    for at in joins.keys().filter(|at| !branches.contains_key(at)) {
        bad.push(format!("instant {at}: a join without its branches"));
    }
    apart_ms.sort_unstable();
    let close = apart_ms.iter().filter(|&&ms| ms <= 10).count();
    let median = apart_ms
        .get(apart_ms.len() / 2)
        .copied()
        .unwrap_or_default();
    lag_ms.sort_unstable();
    let lag = lag_ms.get(lag_ms.len() / 2).copied().unwrap_or_default();
    println!(
        "RACE {backend}: {whole} instants with both branches (on two nodes), {} joins, finishes at most 10 ms apart for {close} of them (median {median} ms apart), the join started a median {lag} ms after the later finish, {} problems",
        joins.values().map(Vec::len).sum::<usize>(),
        bad.len()
    );
    assert!(
        bad.is_empty(),
        "{}\nthe nodes' logs:\n{}",
        bad.join("\n"),
        c.log_tails(40)
    );
    assert!(
        whole as i64 >= FIRES - 4,
        "the origin fired: {whole} instants"
    );
    assert!(
        close * 2 >= whole,
        "the race was exercised: {close} of {whole} instants' finishes within 10 ms ({apart_ms:?})"
    );
    c.drop_tables().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_two_nodes_finishing_a_join_at_once_release_it_once() {
    race_on_two_nodes("postgres").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_two_nodes_finishing_a_join_at_once_release_it_once() {
    race_on_two_nodes("redis").await;
}
