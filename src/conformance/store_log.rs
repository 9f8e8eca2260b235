//! Checks of the run log (runs, their log lines, retention, daily counts) and the
//! node registry.

use super::store::*;
use super::unique;
use crate::record::*;
use crate::store::JobsExt as _;
use crate::store::{JobStore, RunQuery};
use crate::time::Timestamp;
use std::time::Duration;

/// Run-log queries filter by job, status and time, page, and return newest first.
pub async fn run_log_queries(store: &dyn JobStore) {
    let p = unique("log");
    let t0 = long_ago(store).await;
    let (a, b) = (format!("{p}-a"), format!("{p}-b"));
    let statuses = [
        RunStatus::Succeeded,
        RunStatus::Failed,
        RunStatus::Succeeded,
        RunStatus::TimedOut,
    ];
    let mut runs = Vec::new();
    for (i, status) in statuses.iter().enumerate() {
        for id in [&a, &b] {
            let fire = t0 + Duration::from_secs(i as u64);
            store.upsert(&job(id), Some(fire)).await.unwrap();
            if i > 0 {
                store.trigger(&jid(id), fire, None).await.unwrap();
            }
            let token = i as u64 + 1;
            let run = started(store, start_req(id, fire, 1, token)).await;
            finish_one(store, finish_req(run, id, token, *status, None)).await;
            runs.push((id.clone(), run, *status));
        }
    }
    let q = |job: &str| RunQuery::new().job(jid(job)).limit(1000);
    let all_a = store.runs(&q(&a)).await.unwrap();
    let want_a: Vec<RunId> = runs
        .iter()
        .rev()
        .filter(|r| r.0 == a)
        .map(|r| r.1)
        .collect();
    assert_eq!(
        all_a.iter().map(|r| r.id).collect::<Vec<_>>(),
        want_a,
        "by job, newest first"
    );
    let failed = store.runs(&q(&a).status(RunStatus::Failed)).await.unwrap();
    assert_eq!(failed.len(), 1, "by status");
    assert_eq!(failed[0].status, RunStatus::Failed);
    let limited = store.runs(&q(&b).limit(2)).await.unwrap();
    assert_eq!(limited.len(), 2, "limit");
    let next_page = store.runs(&q(&b).before(limited[1].id)).await.unwrap();
    assert_eq!(next_page.len(), 2, "paging with before");
    assert!(next_page.iter().all(|r| r.id < limited[1].id));
    let pivot = all_a[1].started_at;
    let since = store.runs(&q(&a).since(pivot)).await.unwrap();
    let until = store.runs(&q(&a).until(pivot)).await.unwrap();
    assert_eq!(
        since.len() + until.len(),
        all_a.len(),
        "since and until split the log at an instant"
    );
    assert!(
        since.iter().all(|r| r.started_at >= pivot) && until.iter().all(|r| r.started_at < pivot)
    );
    assert!(
        since.iter().any(|r| r.id == all_a[1].id),
        "since is inclusive"
    );
    // Running runs across jobs, newest first, paged; and those of one node (how a
    // node finds its own): `b`'s run is on a node of its own.
    let node = format!("{p}-node");
    let mut running = Vec::new();
    for (k, id) in [&a, &b].into_iter().enumerate() {
        let fire = t0 + Duration::from_secs(10 + k as u64);
        store.trigger(&jid(id), fire, None).await.unwrap();
        let mut req = start_req(id, fire, 1, 10 + k as u64);
        if k == 1 {
            req.node = node.clone();
        } else {
            req.trigger = TriggerKind::Manual;
        }
        running.push(started(store, req).await);
    }
    let ours = |rs: Vec<RunRecord>| -> Vec<RunId> {
        rs.into_iter()
            .filter(|r| r.job_id == jid(&a) || r.job_id == jid(&b))
            .map(|r| r.id)
            .collect()
    };
    let all_running = RunQuery::new().status(RunStatus::Running).limit(1000);
    let found = ours(store.runs(&all_running).await.unwrap());
    // Newest first is by id: a sharded store orders ids across shards by the
    // millisecond only, so the run started second may have the smaller id.
    let mut by_id = running.clone();
    by_id.sort_unstable_by(|x, y| y.cmp(x));
    assert_eq!(found, by_id, "running runs of every job, by id descending");
    let older = ours(
        store
            .runs(&all_running.clone().before(by_id[0]))
            .await
            .unwrap(),
    );
    assert_eq!(older, vec![by_id[1]], "running runs paged with before");
    let on_node = store
        .runs(
            &RunQuery::new()
                .status(RunStatus::Running)
                .node(node.clone()),
        )
        .await
        .unwrap();
    assert_eq!(
        on_node.iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![running[1]],
        "running runs of one node"
    );
    let ended_on_node = store.runs(&q(&a).node(node)).await.unwrap();
    assert!(ended_on_node.is_empty(), "by node: {ended_on_node:?}");
    // By trigger: `a`'s running run is its only manual one; its ended ones are
    // scheduled.
    let manual = ours(
        store
            .runs(&RunQuery::new().trigger(TriggerKind::Manual).limit(1000))
            .await
            .unwrap(),
    );
    assert_eq!(manual, vec![running[0]], "runs of one trigger");
    let scheduled = store
        .runs(&q(&a).trigger(TriggerKind::Schedule))
        .await
        .unwrap();
    assert_eq!(
        scheduled.iter().map(|r| r.id).collect::<Vec<_>>(),
        all_a.iter().map(|r| r.id).collect::<Vec<_>>(),
        "a job's runs of one trigger: its ended scheduled runs, not the manual one"
    );
    cleanup(store, &[a, b]).await;
}

/// `purge_runs` removes the finished runs that started before the cutoff (also one
/// that ended after it), and only those: a run started before it and still running
/// stays.
pub async fn purge_runs(store: &dyn JobStore) {
    let id = unique("purge");
    let long = unique("purge-long");
    let hold = unique("purge-hold");
    let t0 = long_ago(store).await;
    for j in [&id, &long, &hold] {
        store.upsert(&job(j), Some(t0)).await.unwrap();
    }
    let old = started(store, start_req(&id, t0, 1, 1)).await;
    finish_one(
        store,
        finish_req(old, &id, 1, RunStatus::Succeeded, Some(t0)),
    )
    .await;
    let across = started(store, start_req(&long, t0, 1, 1)).await;
    let still = started(store, start_req(&hold, t0, 1, 1)).await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    let cutoff = store.now().await.unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    finish_one(
        store,
        finish_req(across, &long, 1, RunStatus::Failed, Some(t0)),
    )
    .await;
    let new = started(store, start_req(&id, t0, 1, 2)).await;
    finish_one(
        store,
        finish_req(new, &id, 2, RunStatus::Succeeded, Some(t0)),
    )
    .await;
    let running = started(store, start_req(&id, t0, 1, 3)).await;
    let n = store.purge_runs(cutoff).await.unwrap();
    assert!(
        n >= 2,
        "purge reports what it removed (others' old runs too)"
    );
    let left: Vec<RunId> = store
        .runs(&RunQuery::new().job(jid(&id)))
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(left, [running, new], "runs started after the cutoff stay");
    let runs_of = |j: &str| {
        let q = RunQuery::new().job(jid(j));
        async move { store.runs(&q).await.unwrap() }
    };
    assert!(
        runs_of(&long).await.is_empty(),
        "a run started before the cutoff goes, though it ended after it"
    );
    let held: Vec<RunId> = runs_of(&hold).await.iter().map(|r| r.id).collect();
    assert_eq!(
        held,
        [still],
        "a run started before the cutoff and running stays"
    );
    finish_one(
        store,
        finish_req(running, &id, 3, RunStatus::Succeeded, None),
    )
    .await;
    finish_one(
        store,
        finish_req(still, &hold, 1, RunStatus::Succeeded, None),
    )
    .await;
    cleanup(store, &[id, long, hold]).await;
}

/// Run log lines: appended by offset (a line stored at an offset is kept, so a
/// repeated or racing append stores each line once), read in order from an offset,
/// gaps skipped, deleted with their run by the purge.
pub async fn run_lines_are_kept(store: &dyn JobStore) {
    let id = unique("lines");
    let t0 = long_ago(store).await;
    store.upsert(&job(&id), Some(t0)).await.unwrap();
    let old = started(store, start_req(&id, t0, 1, 1)).await;
    let chunk = |run: RunId, first: u64, lines: &[&str]| LogLines {
        run_id: run,
        first,
        lines: lines.iter().map(|l| l.to_string()).collect(),
    };
    store
        .append_lines(&[chunk(old, 0, &["old one", "old two"])])
        .await
        .unwrap();
    finish_one(
        store,
        finish_req(old, &id, 1, RunStatus::Succeeded, Some(t0)),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    let cutoff = store.now().await.unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    let run = started(store, start_req(&id, t0, 1, 2)).await;
    let odd = "a|b\t<é> ✓ 'quoted' \"double\"";
    store
        .append_lines(&[chunk(run, 0, &["one", "two"])])
        .await
        .unwrap();
    // Eight racing appends of an overlapping chunk, in one call with another run's.
    let both = [
        chunk(run, 1, &["TWO rewritten", odd]),
        chunk(old, 2, &["late"]),
    ];
    let racing: Vec<_> = (0..8).map(|_| store.append_lines(&both)).collect();
    for r in futures::future::join_all(racing).await {
        r.unwrap();
    }
    let read = |lines: Vec<LogLine>| -> Vec<(u64, String)> {
        lines.into_iter().map(|l| (l.offset, l.line)).collect()
    };
    let all = read(store.lines(run, 0, 100).await.unwrap());
    assert_eq!(
        all,
        [
            (0, "one".to_string()),
            (1, "two".to_string()),
            (2, odd.to_string())
        ],
        "a line stored at an offset is kept; each line once"
    );
    assert_eq!(
        read(store.lines(run, 1, 1).await.unwrap()),
        [(1, "two".to_string())],
        "read from an offset, bounded by the limit"
    );
    assert!(store.lines(run, 3, 10).await.unwrap().is_empty());
    store
        .append_lines(&[chunk(run, 5, &["six"])])
        .await
        .unwrap();
    assert_eq!(
        read(store.lines(run, 3, 10).await.unwrap()),
        [(5, "six".to_string())],
        "a gap is skipped"
    );
    assert!(
        store
            .lines(RunId(run.0 + 1_000_000), 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.lines(old, 0, 10).await.unwrap().len(), 3);
    store.purge_runs(cutoff).await.unwrap();
    assert!(
        store.lines(old, 0, 10).await.unwrap().is_empty(),
        "a purged run's lines go with it"
    );
    assert_eq!(
        store.lines(run, 0, 10).await.unwrap().len(),
        4,
        "a running run's lines stay"
    );
    finish_one(store, finish_req(run, &id, 2, RunStatus::Succeeded, None)).await;
    cleanup(store, &[id]).await;
}

/// Daily stats count runs by status per UTC day of their start.
pub async fn daily_stats(store: &dyn JobStore) {
    let id = unique("stats");
    let t0 = long_ago(store).await;
    let today = store.now().await.unwrap().to_datetime().date_naive();
    let (from, to) = (today.pred_opt().unwrap(), today.succ_opt().unwrap());
    let sum = |days: Vec<DailyStats>| {
        days.into_iter().fold(DailyStats::default(), |mut acc, d| {
            assert!(
                d.day >= from && d.day <= to,
                "a day outside the range: {}",
                d.day
            );
            acc.add_all(&d);
            acc
        })
    };
    let before = sum(store.daily_stats(from, to).await.unwrap());
    store.upsert(&job(&id), Some(t0)).await.unwrap();
    for (token, status) in [
        (1, RunStatus::Succeeded),
        (2, RunStatus::Failed),
        (3, RunStatus::Misfired),
        (4, RunStatus::Lost),
        (5, RunStatus::Returned),
    ] {
        let run = started(store, start_req(&id, t0, 1, token)).await;
        finish_one(store, finish_req(run, &id, token, status, Some(t0))).await;
    }
    let running = started(store, start_req(&id, t0, 1, 6)).await;
    let after = sum(store.daily_stats(from, to).await.unwrap());
    assert_eq!(after.total - before.total, 6, "stats count every run");
    assert_eq!(after.succeeded - before.succeeded, 1);
    assert_eq!(after.failed - before.failed, 1);
    assert_eq!(after.misfired - before.misfired, 1);
    assert_eq!(after.lost - before.lost, 1);
    assert_eq!(after.returned - before.returned, 1);
    assert_eq!(after.running - before.running, 1);
    let far = t0.to_datetime().date_naive();
    assert!(
        store
            .daily_stats(far, far)
            .await
            .unwrap()
            .iter()
            .all(|d| d.day == far)
    );
    finish_one(
        store,
        finish_req(running, &id, 6, RunStatus::Succeeded, None),
    )
    .await;
    cleanup(store, &[id]).await;
}

fn node(id: &str) -> NodeInfo {
    NodeInfo {
        node_id: id.to_string(),
        host: "localhost".into(),
        pid: 1,
        version: env!("CARGO_PKG_VERSION").into(),
        started_at: Timestamp::EPOCH,
        capacity: 4,
    }
}

/// Heartbeats use the store's clock; silent nodes are reaped; their runs are orphaned.
pub async fn heartbeats_and_dead_nodes(store: &dyn JobStore) {
    let p = unique("node");
    let (a, b) = (format!("{p}-a"), format!("{p}-b"));
    let beat_a = store.heartbeat(&node(&a)).await.unwrap();
    let nodes = store.nodes().await.unwrap().items;
    let rec = nodes
        .iter()
        .find(|n| n.info.node_id == a)
        .expect("a heartbeat registers the node");
    assert_eq!(
        rec.last_beat, beat_a,
        "last_beat is the instant heartbeat returned"
    );
    assert_eq!(rec.info, node(&a));
    let now = store.now().await.unwrap();
    assert!(now >= beat_a && now.duration_since(beat_a) < Duration::from_secs(60));

    let t0 = long_ago(store).await;
    let (ja, jb) = (format!("{p}-job-a"), format!("{p}-job-b"));
    store.upsert(&job(&ja), Some(t0)).await.unwrap();
    store.upsert(&job(&jb), Some(t0)).await.unwrap();
    let run_a = started(
        store,
        StartRun {
            node: a.clone(),
            ..start_req(&ja, t0, 1, 1)
        },
    )
    .await;
    let run_b = started(
        store,
        StartRun {
            node: b.clone(),
            ..start_req(&jb, t0, 1, 1)
        },
    )
    .await;

    tokio::time::sleep(Duration::from_millis(400)).await;
    store.heartbeat(&node(&b)).await.unwrap();
    let reaped = store.reap_nodes(Duration::from_millis(200)).await.unwrap();
    assert!(
        reaped.contains(&a),
        "a node silent past the limit is reaped: {reaped:?}"
    );
    assert!(!reaped.contains(&b), "a node that just beat is not reaped");
    let ids: Vec<String> = store
        .nodes()
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| n.info.node_id)
        .collect();
    assert!(!ids.contains(&a) && ids.contains(&b));
    let orphans: Vec<RunId> = store
        .orphaned_runs(100_000)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert!(
        orphans.contains(&run_a),
        "a running run of a reaped node is orphaned"
    );
    assert!(
        !orphans.contains(&run_b),
        "a running run of a live node is not orphaned"
    );

    assert!(store.deregister(&b).await.unwrap());
    assert!(!store.deregister(&b).await.unwrap());
    finish_one(store, finish_req(run_a, &ja, 1, RunStatus::Succeeded, None)).await;
    finish_one(store, finish_req(run_b, &jb, 1, RunStatus::Succeeded, None)).await;
    cleanup(store, &[ja, jb]).await;
}
