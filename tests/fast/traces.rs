//! OpenTelemetry traces of local runs (feature `otel`), on a paused clock with an
//! in-memory exporter: a fire triggered inside a span runs as that span's child,
//! its retry is a trace of its own linked to it, a scheduled fire is a root, and a
//! run's span has the start, execute and finish spans as children.

use crate::support;

use jobwheel::prelude::*;
use jobwheel::{RetryPolicy, Scheduler};
use opentelemetry::trace::SpanId;
use opentelemetry_sdk::trace::SpanData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use support::otel::{attr, in_memory};
use support::*;
use tracing::Instrument;

#[tokio::test(start_paused = true)]
async fn a_triggered_fire_joins_its_callers_trace_and_its_retry_is_linked_to_it() {
    let (exporter, provider, _guard) = in_memory();
    let (store, locks, _clock) = backend("2026-01-01T00:00:00Z");
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("flaky", move |ctx: JobContext| {
            let c = c.clone();
            async move {
                assert!(
                    ctx.trace.is_some(),
                    "the handler sees its run's traceparent"
                );
                if c.fetch_add(1, Ordering::SeqCst) == 0 {
                    Err(JobError::msg("first attempt fails"))
                } else {
                    Ok(())
                }
            }
        })
        .handler("tick", |_ctx: JobContext| async { Ok(()) })
        .config(config("n1"))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    let never = Schedule::once(at("2030-01-01T00:00:00Z"));
    let retry = RetryPolicy::new(2, Duration::from_secs(5), Duration::from_secs(5)).unwrap();
    s.upsert(
        Job::builder("flaky", "flaky", never)
            .retry(retry)
            .build()
            .unwrap(),
    )
    .await
    .unwrap();
    s.upsert(
        Job::builder("tick", "tick", Schedule::once(at("2026-01-01T00:00:03Z")))
            .build()
            .unwrap(),
    )
    .await
    .unwrap();
    let caller = tracing::info_span!("caller");
    async { s.trigger_now("flaky").await.unwrap() }
        .instrument(caller)
        .await;
    advance(Duration::from_secs(10)).await;
    h.shutdown().await;
    assert_eq!(calls.load(Ordering::SeqCst), 2, "failed once, then retried");
    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    let named = |n: &str| -> Vec<&SpanData> { spans.iter().filter(|s| s.name == n).collect() };
    let caller = named("caller")[0];
    let runs = named("jobwheel.run");
    let run_of = |job: &str, attempt: &str| -> &SpanData {
        runs.iter()
            .find(|s| {
                attr(s, "job").as_deref() == Some(job)
                    && attr(s, "attempt").as_deref() == Some(attempt)
            })
            .unwrap_or_else(|| panic!("no run span of {job} attempt {attempt}: {runs:#?}"))
    };
    let first = run_of("flaky", "1");
    assert_eq!(
        (first.span_context.trace_id(), first.parent_span_id),
        (
            caller.span_context.trace_id(),
            caller.span_context.span_id()
        ),
        "the first attempt is the caller's child"
    );
    assert_eq!(attr(first, "trigger").as_deref(), Some("manual"));
    assert!(attr(first, "run_id").is_some() && attr(first, "token").is_some());
    let second = run_of("flaky", "2");
    assert_ne!(
        second.span_context.trace_id(),
        caller.span_context.trace_id(),
        "a retry is a trace of its own"
    );
    assert_eq!(second.parent_span_id, SpanId::INVALID);
    assert!(
        second
            .links
            .iter()
            .any(|l| l.span_context.span_id() == caller.span_context.span_id()),
        "linked to the span it was triggered in: {:?}",
        second.links
    );
    let tick = run_of("tick", "1");
    assert_eq!(
        tick.parent_span_id,
        SpanId::INVALID,
        "a scheduled fire is a root"
    );
    assert!(tick.links.is_empty());
    for run in [first, second, tick] {
        let children: Vec<&str> = spans
            .iter()
            .filter(|s| s.parent_span_id == run.span_context.span_id())
            .map(|s| s.name.as_ref())
            .collect();
        for step in ["jobwheel.start", "jobwheel.execute", "jobwheel.finish"] {
            assert!(
                children.contains(&step),
                "{step} under the run: {children:?}"
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_job_created_inside_a_span_fires_first_as_its_child_then_as_roots() {
    let (exporter, provider, _guard) = in_memory();
    let (store, locks, _clock) = backend("2026-01-01T00:00:00Z");
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("tick", |_ctx: JobContext| async { Ok(()) })
        .config(config("n1"))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    let creator = tracing::info_span!("creator");
    async {
        s.upsert(
            Job::builder(
                "every5",
                "tick",
                Schedule::every(Duration::from_secs(5)).unwrap(),
            )
            .build()
            .unwrap(),
        )
        .await
        .unwrap()
    }
    .instrument(creator)
    .await;
    advance(Duration::from_secs(12)).await;
    h.shutdown().await;
    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    let creator = spans.iter().find(|s| s.name == "creator").unwrap();
    let mut runs: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.name == "jobwheel.run" && attr(s, "job").as_deref() == Some("every5"))
        .collect();
    runs.sort_by_key(|s| s.start_time);
    assert!(runs.len() >= 2, "two fires at least: {}", runs.len());
    assert_eq!(
        (runs[0].span_context.trace_id(), runs[0].parent_span_id),
        (
            creator.span_context.trace_id(),
            creator.span_context.span_id()
        ),
        "the first fire is the creator's child"
    );
    for later in &runs[1..] {
        assert_eq!(
            later.parent_span_id,
            SpanId::INVALID,
            "later fires are roots"
        );
        assert_ne!(
            later.span_context.trace_id(),
            creator.span_context.trace_id()
        );
    }
}
