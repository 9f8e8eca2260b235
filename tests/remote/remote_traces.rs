//! OpenTelemetry across the executor protocol (feature `otel`): the scheduler's run
//! span's traceparent travels in the signed `RunRequest`, and the executor's span for
//! the run is its child, on the Rust executor server and on the Python executor
//! (through opentelemetry-sdk, which `scripts/test` installs).

use crate::support;

use jobwheel::memory::{LocalLocks, MemoryStore};
use jobwheel::placement::RemoteTarget;
use jobwheel::prelude::*;
use jobwheel::remote::RemoteGroup;
use opentelemetry_sdk::trace::SpanData;
use serde_json::Value;
use std::time::Duration;
use support::otel::{attr, in_memory};
use support::remote::*;

/// Runs job `id` once on `instance` from a scheduler of its own; waits for success.
async fn run_once(id: &str, instance: String) {
    let group = RemoteGroup::fixed("billing", SECRET, [instance]).unwrap();
    let store = MemoryStore::new();
    let scheduler = Scheduler::builder()
        .store(store.clone())
        .locks(LocalLocks::new())
        .remote(group)
        .config(SchedulerConfig::default().poll_interval(Duration::from_millis(100)))
        .build()
        .unwrap();
    let running = scheduler.start().await.unwrap();
    let job = Job::builder(id, "echo", Schedule::once(Timestamp::now()))
        .remote(RemoteTarget::new("billing").unwrap())
        .build()
        .unwrap();
    scheduler.upsert(job).await.unwrap();
    let mut status = None;
    for _ in 0..200 {
        let runs = scheduler
            .runs(&RunQuery::new().job(JobId::new(id).unwrap()))
            .await
            .unwrap();
        status = runs.first().map(|r| r.status);
        if status.is_some_and(|s| s != RunStatus::Running) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, Some(RunStatus::Succeeded), "{id}");
    running.shutdown().await;
}

/// The scheduler's span for the run of job `id`.
fn run_span<'a>(spans: &'a [SpanData], id: &str) -> &'a SpanData {
    spans
        .iter()
        .find(|s| s.name == "jobwheel.run" && attr(s, "job").as_deref() == Some(id))
        .unwrap_or_else(|| panic!("no run span of {id}"))
}

#[tokio::test]
async fn an_executors_span_for_a_run_is_the_child_of_the_schedulers_run_span() {
    let python_otel = std::process::Command::new("python3")
        .args(["-c", "import opentelemetry.sdk"])
        .status()
        .is_ok_and(|s| s.success());
    if !python_otel {
        support::skip("python3 has no opentelemetry-sdk (scripts/test installs it)");
        return;
    }
    // In-process spans (the scheduler's and the Rust executor's) go to memory on
    // this thread: the runtime, the instance and the scheduler all run on it.
    let (exporter, provider, _guard) = in_memory();
    let rust = instance("i-rust", &Seen::default()).await;
    let file = std::env::temp_dir().join(format!("jobwheel-spans-{}.jsonl", fastrand::u64(..)));
    let Some(python) = python_executor_with(&["--otel-spans", file.to_str().unwrap()]) else {
        return;
    };
    run_once("traced.rust", base(&rust)).await;
    run_once("traced.python", python.base.clone()).await;
    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();

    let run = run_span(&spans, "traced.rust");
    let remote = spans
        .iter()
        .find(|s| {
            s.name == "jobwheel.remote_run" && attr(s, "job").as_deref() == Some("traced.rust")
        })
        .expect("the Rust executor's span for the run");
    assert_eq!(
        (remote.span_context.trace_id(), remote.parent_span_id),
        (run.span_context.trace_id(), run.span_context.span_id()),
        "the Rust executor's span is the run span's child"
    );

    let run = run_span(&spans, "traced.python");
    let mut py = None;
    for _ in 0..100 {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        py = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|s| {
                s["name"] == "jobwheel.remote_run" && s["attributes"]["job"] == "traced.python"
            });
        if py.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let py = py.expect("the Python executor wrote its span for the run");
    assert_eq!(
        (py["context"]["trace_id"].as_str(), py["parent_id"].as_str()),
        (
            Some(format!("0x{}", run.span_context.trace_id()).as_str()),
            Some(format!("0x{}", run.span_context.span_id()).as_str())
        ),
        "the Python executor's span is the run span's child: {py}"
    );
    let _ = std::fs::remove_file(&file);
}
