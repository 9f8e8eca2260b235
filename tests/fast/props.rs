//! Properties over everything a user or a configuration file supplies: any job
//! (schedule, retry, misfire, timeouts, payload) and any scheduler configuration is
//! either refused with a typed error naming its field, or runs through full fires on
//! the paused clock without a panic and without leaving a run behind. (That every
//! accepted job reads back unchanged from every store is checked in the services
//! binary, `stores_props.rs`.)

use crate::support;
use support::strategies::*;

const MS: u64 = 1;

use jobwheel::memory::{LocalLocks, MemoryStore};
use jobwheel::{
    Error, Job, JobContext, JobError, RunQuery, RunStatus, Schedule, Scheduler, SchedulerConfig,
    TokioClock,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::sync::Arc;
use std::time::Duration;

/// A refusal is typed and names a field of what was given.
fn typed(e: &Error) {
    let field = e
        .field()
        .unwrap_or_else(|| panic!("not an Invalid error: {e:?}"));
    assert!(
        ["job.", "retry.", "schedule.", "misfire.", "config."]
            .iter()
            .any(|p| field.starts_with(p)),
        "{field}: {e}"
    );
}

/// The number of cases (`JOBWHEEL_PROP_CASES`, default 96) and a runner for them.
fn runner() -> (u32, TestRunner) {
    let cases = std::env::var("JOBWHEEL_PROP_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(96);
    let runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    (cases, runner)
}

fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
}

/// Runs `job` for a few seconds of the paused clock on a memory store: an upsert is
/// accepted or refused with a typed error; nothing panics, no run is left running,
/// shutdown drains.
async fn runs_through(job: Job) {
    let clock = Arc::new(TokioClock::starting_at(support::at("2026-06-01T00:00:00Z")));
    let store = MemoryStore::with_clock(clock.clone());
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(LocalLocks::with_clock(clock.clone()))
        .handler("ok", |_c: JobContext| async { Ok(()) })
        .handler("fail", |_c: JobContext| async { Err(JobError::msg("no")) })
        .config(support::config("p1"))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    match s.upsert(job).await {
        Ok(_) => {}
        Err(e) => typed(&e),
    }
    tokio::time::sleep(Duration::from_secs(4)).await;
    let runs = s.runs(&RunQuery::new().limit(10_000)).await.unwrap();
    let report = h.shutdown().await;
    assert!(report.drained, "shutdown drained");
    assert_eq!(s.metrics().panics, 0, "no panic was caught in the engine");
    assert!(
        runs.iter()
            .all(|r| r.status != RunStatus::Running || r.ended_at.is_none()),
        "runs end"
    );
    let still = s
        .runs(&RunQuery::new().status(RunStatus::Running))
        .await
        .unwrap();
    assert!(still.is_empty(), "no run left running: {still:?}");
}

#[test]
fn any_job_is_refused_typed_or_runs_without_panicking() {
    let now = support::at("2026-06-01T00:00:00Z").as_millis();
    let (cases, mut runner) = runner();
    let accepted = std::sync::atomic::AtomicU32::new(0);
    runner
        .run(&job(now), |built| {
            match built {
                Err(e) => typed(&e),
                Ok(job) => {
                    accepted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let text = serde_json::to_string(&job).unwrap();
                    let back: Job =
                        serde_json::from_str(&text).expect("an accepted job reads back");
                    prop_assert_eq!(&back, &job);
                    paused().block_on(runs_through(job));
                }
            }
            Ok(())
        })
        .unwrap();
    let accepted = accepted.into_inner();
    assert!(
        accepted * 8 >= cases,
        "the strategy must reach the engine often: {accepted} of {cases} accepted"
    );
}

/// A setting left at its default three times in four, otherwise anything.
fn maybe<T: std::fmt::Debug + Clone>(
    s: impl Strategy<Value = T>,
) -> impl Strategy<Value = Option<T>> {
    proptest::option::weighted(0.25, s)
}

fn config() -> impl Strategy<Value = SchedulerConfig> {
    (
        (
            maybe(duration()),
            maybe(duration()),
            maybe(duration()),
            maybe(duration()),
        ),
        (
            maybe(duration()),
            maybe(duration()),
            maybe(duration()),
            maybe(duration()),
        ),
        (
            maybe(prop_oneof![4 => 0u32..1100, 1 => any::<u32>()]),
            maybe(prop_oneof![4 => 0usize..200_000, 1 => any::<usize>()]),
            maybe(prop_oneof![4 => 0usize..20_000, 1 => any::<usize>()]),
        ),
        (
            maybe(prop_oneof![4 => 0usize..(32 << 20), 1 => any::<usize>()]),
            maybe(prop_oneof![4 => 0u32..2000, 1 => any::<u32>()]),
            maybe(prop_oneof![4 => 0usize..200_000, 1 => any::<usize>()]),
        ),
    )
        .prop_map(|(durations, more, counts, last)| {
            let (poll, look, lease, misfire) = durations;
            let (beat, grace, keep, alarm_to) = more;
            let (beats, claim, write) = counts;
            let (bytes, attempts, window) = last;
            let mut c = SchedulerConfig::default();
            macro_rules! set {
                ($($v:ident => $f:ident),*) => {$(if let Some(v) = $v { c = c.$f(v); })*};
            }
            set!(poll => poll_interval, look => lookahead, lease => lease_ttl,
                misfire => misfire_threshold, beat => heartbeat, grace => shutdown_grace,
                keep => run_retention, alarm_to => alarm_timeout, beats => dead_after_beats,
                claim => claim_batch, write => write_batch, bytes => max_payload_bytes,
                attempts => alarm_max_attempts, window => claim_window);
            c
        })
}

#[test]
fn any_config_is_refused_typed_or_starts_and_stops() {
    let (cases, mut runner) = runner();
    let valid = std::sync::atomic::AtomicU32::new(0);
    runner
        .run(&config(), |c| {
            let text = serde_json::to_string(&c).unwrap();
            let read: Result<SchedulerConfig, _> = serde_json::from_str(&text);
            match c.validate() {
                Err(e) => typed(&e),
                Ok(()) => {
                    valid.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    prop_assert_eq!(read.expect("a valid config reads back"), c.clone());
                    paused().block_on(async move {
                        let s = Scheduler::builder()
                            .backend(jobwheel::connect("memory:").await.unwrap())
                            .handler("ok", |_c: JobContext| async { Ok(()) })
                            .config(c)
                            .build()
                            .expect("a valid config builds");
                        let h = s.start().await.expect("and starts");
                        s.upsert(
                            Job::builder(
                                "t",
                                "ok",
                                Schedule::every(Duration::from_millis(250 * MS)).unwrap(),
                            )
                            .build()
                            .unwrap(),
                        )
                        .await
                        .unwrap();
                        tokio::time::sleep(Duration::from_secs(2)).await;
                        let report = h.shutdown().await;
                        assert!(report.drained);
                        assert_eq!(s.metrics().panics, 0);
                    });
                }
            }
            Ok(())
        })
        .unwrap();
    let valid = valid.into_inner();
    assert!(
        valid * 16 >= cases,
        "the strategy must reach a running scheduler: {valid} of {cases} valid"
    );
}
