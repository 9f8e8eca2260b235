//! The engine's instruments through the `metrics` facade, on a paused clock with a
//! recorder local to the test's thread: the counters per outcome and misfire policy
//! equal what the run log holds, and the lag histograms hold what the clock implies.

use crate::support;
use jobwheel::store::JobsExt as _;

use jobwheel::engine::instruments as i;
use jobwheel::{Job, MisfirePolicy, RetryPolicy, RunStatus, Schedule, Scheduler, TriggerKind};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use std::collections::BTreeMap;
use std::time::Duration;
use support::*;

/// Counter values by (name, label values).
type Counted = BTreeMap<(String, String), u64>;
/// Histogram samples by name.
type Sampled = BTreeMap<String, Vec<f64>>;
/// What a `DebuggingRecorder` snapshot holds.
type Snapshot = Vec<(
    metrics_util::CompositeKey,
    Option<metrics::Unit>,
    Option<metrics::SharedString>,
    DebugValue,
)>;

/// Counter values by (name, label value), and histogram samples by name.
fn read(snap: Snapshot) -> (Counted, Sampled) {
    let (mut counters, mut histograms) = (BTreeMap::new(), BTreeMap::<String, Vec<f64>>::new());
    for (key, _, _, value) in snap {
        let key = key.key();
        // Runs of the scheduler's own handlers carry an empty `group`.
        let label = key
            .labels()
            .filter(|l| !(l.key() == "group" && l.value().is_empty()))
            .map(|l| l.value().to_string())
            .collect::<Vec<_>>()
            .join(",");
        match value {
            DebugValue::Counter(n) => {
                counters.insert((key.name().to_string(), label), n);
            }
            DebugValue::Histogram(v) => histograms
                .entry(key.name().to_string())
                .or_default()
                .extend(v.into_iter().map(|x| x.into_inner())),
            DebugValue::Gauge(_) => {}
        }
    }
    (counters, histograms)
}

#[tokio::test(start_paused = true)]
async fn the_instruments_hold_what_the_run_log_holds() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let log = Log::default();
    let every = |id: &str, handler: &str, secs: u64, misfire: MisfirePolicy| {
        Job::builder(
            id,
            handler,
            Schedule::every(Duration::from_secs(secs)).unwrap(),
        )
        .retry(RetryPolicy::none())
        .misfire(misfire)
        .build()
        .unwrap()
    };
    // Stored while no scheduler runs: when one starts 35 s later, each job's first
    // fire is late and its misfire policy handles the ones it missed.
    for job in [
        every("ok.once", "ok", 10, MisfirePolicy::FireOnce),
        every("ok.skip", "ok", 10, MisfirePolicy::Skip),
        every("bad.catch", "bad", 10, MisfirePolicy::CatchUp { max: 2 }),
    ] {
        store
            .upsert(&job, Some(at("2026-01-01T00:00:10Z")))
            .await
            .unwrap();
    }
    advance(Duration::from_secs(35)).await;
    let h = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("ok", recording(&log, &clock))
        .handler("bad", failing(&log, &clock))
        .config(config("n1"))
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    advance(Duration::from_secs(60)).await;
    let scheduler = h.scheduler().clone();
    h.shutdown().await;
    let m = scheduler.metrics();

    let (counters, histograms) = read(snapshotter.snapshot().into_vec());
    let mut runs = Vec::new();
    for job in ["ok.once", "ok.skip", "bad.catch"] {
        runs.extend(runs_of(&store, job).await);
    }
    assert!(runs.len() > 15, "a workload ran: {} runs", runs.len());
    let counter = |name: &str, label: &str| {
        counters
            .get(&(name.to_string(), label.to_string()))
            .copied()
            .unwrap_or(0)
    };
    // Runs by outcome, as the run log holds them.
    for status in [RunStatus::Succeeded, RunStatus::Failed, RunStatus::Misfired] {
        let logged = runs.iter().filter(|r| r.status == status).count() as u64;
        assert_eq!(
            counter(i::RUNS_FINISHED, status.as_str()),
            logged,
            "{} runs finished {}",
            logged,
            status.as_str()
        );
        assert!(logged > 0, "the workload has {} runs", status.as_str());
    }
    assert_eq!(counter(i::RUNS_STARTED, ""), runs.len() as u64);
    // The in-process snapshot reads the same values.
    assert_eq!(
        [
            counter(i::FIRES_CLAIMED, ""),
            counter(i::RUNS_STARTED, ""),
            counter(i::BACKEND_ERRORS, ""),
            counter(i::STARTS_REFUSED, ""),
        ],
        [m.claimed, m.started, m.backend_errors, m.start_refused]
    );
    assert!(m.claimed > 0 && m.finished == runs.len() as u64);
    // Misfired fires per policy: what the records of the policy stand for.
    for (job, policy) in [
        ("ok.once", "fire_once"),
        ("ok.skip", "skip"),
        ("bad.catch", "catch_up"),
    ] {
        let covered: u64 = runs
            .iter()
            .filter(|r| r.job_id.as_str() == job)
            .filter_map(|r| r.covers.map(|c| c.fires))
            .sum();
        assert!(covered > 0, "{job} misfired");
        assert_eq!(counter(i::FIRES_MISFIRED, policy), covered, "{policy}");
    }
    // Lags: one sample per executed run, each what the clock implies (the handler
    // saw the clock when it started; the store recorded the start).
    let executed: Vec<_> = runs
        .iter()
        .filter(|r| r.status != RunStatus::Misfired)
        .collect();
    let seen = log.all();
    assert_eq!(seen.len(), executed.len());
    let mut implied: Vec<f64> = seen
        .iter()
        .map(|s| (s.started.as_millis() - s.fire_at.as_millis()) as f64 / 1000.0)
        .collect();
    let mut lag = histograms[i::FIRE_LAG].clone();
    implied.sort_by(f64::total_cmp);
    lag.sort_by(f64::total_cmp);
    assert_eq!(lag, implied, "fire lag = handler start - fire instant");
    let mut claim: Vec<f64> = executed
        .iter()
        .map(|r| (r.started_at.as_millis() - r.fire_at.as_millis()) as f64 / 1000.0)
        .collect();
    let mut claim_lag = histograms[i::CLAIM_LAG].clone();
    claim.sort_by(f64::total_cmp);
    claim_lag.sort_by(f64::total_cmp);
    assert_eq!(claim_lag, claim, "claim lag = store start - fire instant");
    assert!(
        lag.iter().any(|x| *x >= 25.0),
        "the late first fires show their lateness: {lag:?}"
    );
    assert_eq!(histograms[i::PICKUP].len(), executed.len());
    // Store calls are timed; the claims asked for cover the claims made.
    assert!(
        histograms[i::STORE_CALL].len() >= 3,
        "due, start_runs, finish_runs"
    );
    let asked: f64 = histograms[i::CLAIM_BATCH].iter().sum();
    assert!(
        asked >= m.claimed as f64,
        "{asked} asked, {} claimed",
        m.claimed
    );
    assert_eq!(histograms[i::RUN_DURATION].len(), executed.len());
    assert!(
        runs.iter().any(|r| r.trigger == TriggerKind::Misfire),
        "a late run is a misfire run"
    );
}

#[test]
fn the_architecture_table_lists_every_instrument() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/book/src/architecture.md"
    ))
    .unwrap();
    let table: Vec<&str> = doc
        .lines()
        .filter(|l| l.starts_with("| `jobwheel_"))
        .map(|l| l.split('`').nth(1).unwrap())
        .collect();
    let mut named: Vec<&str> = i::ALL.iter().map(|m| m.0).collect();
    let mut listed = table.clone();
    named.sort();
    listed.sort();
    assert_eq!(
        listed, named,
        "docs/book/src/architecture.md's metrics table is the code's"
    );
    for (name, kind, unit, _) in i::ALL {
        let row = doc
            .lines()
            .find(|l| l.starts_with(&format!("| `{name}`")))
            .unwrap();
        assert!(
            row.contains(&format!("| {kind} |")),
            "{name} is a {kind}: {row}"
        );
        assert_eq!(name.ends_with("_seconds"), *unit == "seconds", "{name}");
    }
}

#[test]
fn the_shipped_dashboard_and_alert_rules_name_only_exported_metrics() {
    let root = env!("CARGO_MANIFEST_DIR");
    let exported: Vec<&str> = i::ALL.iter().map(|m| m.0).collect();
    for file in ["docs/prometheus/alerts.yml", "docs/grafana/jobwheel.json"] {
        let text = std::fs::read_to_string(format!("{root}/{file}")).unwrap();
        let mut named = 0;
        for (at, _) in text.match_indices("jobwheel_") {
            let name: String = text[at..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| {
                    name.strip_suffix(s)
                        .filter(|b| i::ALL.iter().any(|m| m.0 == *b && m.1 == "histogram"))
                })
                .unwrap_or(&name);
            assert!(
                exported.contains(&base),
                "{file} names {name}, which the code does not export"
            );
            named += 1;
        }
        assert!(named >= 8, "{file} uses the instruments ({named})");
    }
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{root}/docs/grafana/jobwheel.json")).unwrap(),
    )
    .unwrap();
    assert!(dashboard["panels"].as_array().unwrap().len() >= 6);
}

#[tokio::test(start_paused = true)]
async fn the_due_gauges_show_what_waits_and_since_when() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let (store, locks, _clock) = backend("2026-01-01T00:00:00Z");
    // Three fires due at 10 s whose handler no node has: they wait. (The node has
    // another handler.)
    for id in ["a", "b", "c"] {
        let job = Job::builder(
            id,
            "nobody",
            Schedule::every(Duration::from_secs(10)).unwrap(),
        )
        .build()
        .unwrap();
        store
            .upsert(&job, Some(at("2026-01-01T00:00:10Z")))
            .await
            .unwrap();
    }
    advance(Duration::from_secs(35)).await;
    let h = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("other", |_ctx: jobwheel::JobContext| async {
            Ok::<(), jobwheel::JobError>(())
        })
        .config(config("n1"))
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    advance(Duration::from_secs(10)).await;
    // One snapshot (reading one takes its values).
    let gauges: BTreeMap<String, f64> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(k, _, _, v)| match v {
            DebugValue::Gauge(g) => Some((k.key().name().to_string(), g.into_inner())),
            _ => None,
        })
        .collect();
    h.shutdown().await;
    assert_eq!(gauges.get(i::DUE_BACKLOG), Some(&3.0), "{gauges:?}");
    let oldest = gauges[i::OLDEST_DUE];
    assert!(
        (34.0..=35.0).contains(&oldest),
        "the last poll (every second) saw fires waiting since 10 s: {oldest}"
    );
}

/// Fails its first delivery (of all its copies), then delivers.
struct FlakyAlarm(std::sync::Arc<std::sync::atomic::AtomicU32>);

#[async_trait::async_trait]
impl jobwheel::JobAlarm for FlakyAlarm {
    fn name(&self) -> &str {
        "pager"
    }
    async fn alarm(&self, _e: &jobwheel::AlarmEvent) -> Result<(), jobwheel::AlarmError> {
        if self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            Err(jobwheel::AlarmError::retryable("pager down"))
        } else {
            Ok(())
        }
    }
}

#[tokio::test(start_paused = true)]
async fn job_labels_gauges_and_alarm_deliveries() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let (store, locks, _clock) = backend("2026-01-01T00:00:00Z");
    let tries = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let node = |id: &str, job_labels: bool| {
        Scheduler::builder()
            .store(store.clone())
            .locks(locks.clone())
            .handler("ok", |_ctx: jobwheel::JobContext| async {
                Ok::<(), jobwheel::JobError>(())
            })
            .handler("bad", |_ctx: jobwheel::JobContext| async {
                Err::<(), _>(jobwheel::JobError::msg("boom").permanent())
            })
            .alarm(FlakyAlarm(tries.clone()))
            .config(
                config(id)
                    .metric_job_labels(job_labels)
                    .alarm_retry_base(Duration::from_secs(1)),
            )
            .build()
            .unwrap()
    };
    let n1 = node("n1", true);
    let h1 = n1.start().await.unwrap();
    let h2 = node("n2", true).start().await.unwrap();
    // Every 10 s from 10 s: armed ahead (lookahead 5 s) between fires.
    n1.upsert(
        Job::builder(
            "tick",
            "ok",
            Schedule::every(Duration::from_secs(10)).unwrap(),
        )
        .build()
        .unwrap(),
    )
    .await
    .unwrap();
    n1.upsert(
        Job::builder("boom", "bad", Schedule::once(at("2026-01-01T00:00:02Z")))
            .build()
            .unwrap(),
    )
    .await
    .unwrap();
    advance(Duration::from_secs(17)).await;
    let snap = snapshotter.snapshot().into_vec();
    h1.shutdown().await;
    h2.shutdown().await;
    let labels = |key: &metrics::Key| -> BTreeMap<String, String> {
        key.labels()
            .map(|l| (l.key().to_string(), l.value().to_string()))
            .collect()
    };
    let gauge = |name: &str| {
        snap.iter().find_map(|(k, _, _, v)| match v {
            DebugValue::Gauge(g) if k.key().name() == name => Some(g.into_inner()),
            _ => None,
        })
    };
    let counted = |name: &str, want: &[(&str, &str)]| -> u64 {
        snap.iter()
            .filter(|(k, _, _, _)| k.key().name() == name)
            .filter(|(k, _, _, _)| {
                let l = labels(k.key());
                want.iter()
                    .all(|(a, b)| l.get(*a).map(String::as_str) == Some(*b))
            })
            .map(|(_, _, _, v)| match v {
                DebugValue::Counter(n) => *n,
                _ => 0,
            })
            .sum()
    };
    assert_eq!(gauge(i::LIVE_NODES), Some(2.0), "two nodes beat");
    assert_eq!(
        gauge(i::ARMED),
        Some(1.0),
        "tick's fire at 20 s is armed at 17 s"
    );
    // Runs' instruments carry group (empty: local), job and handler.
    let tick = [
        ("group", ""),
        ("job", "tick"),
        ("handler", "ok"),
        ("outcome", "succeeded"),
    ];
    let runs = runs_of(&store, "tick").await;
    assert_eq!(counted(i::RUNS_FINISHED, &tick), runs.len() as u64);
    assert!(!runs.is_empty());
    let boom = [("job", "boom"), ("handler", "bad"), ("outcome", "failed")];
    assert_eq!(counted(i::RUNS_FINISHED, &boom), 1);
    assert!(
        snap.iter().any(|(k, _, _, v)| k.key().name() == i::FIRE_LAG
            && labels(k.key()).get("job").map(String::as_str) == Some("tick")
            && matches!(v, DebugValue::Histogram(h) if !h.is_empty())),
        "the fire lag of tick's runs under its labels"
    );
    // The final failure's alarm: the pager failed once, then delivered (1 s later).
    assert_eq!(
        counted(
            i::ALARM_DELIVERIES,
            &[("alarm", "pager"), ("result", "failed")]
        ),
        1
    );
    assert_eq!(
        counted(
            i::ALARM_DELIVERIES,
            &[("alarm", "pager"), ("result", "delivered")]
        ),
        1
    );
}
