//! Local runs' logs on a paused clock: a handler's `tracing` events reach the store
//! in order while it runs and at its end, cut at the configured bound with a marker.

use crate::support;

use jobwheel::prelude::*;
use jobwheel::store::RunLog;
use jobwheel::{LogLine, RunId, Scheduler};
use std::time::Duration;
use support::*;
use tracing_subscriber::layer::SubscriberExt;

async fn lines(store: &dyn jobwheel::JobStore, run: RunId) -> Vec<String> {
    store
        .lines(run, 0, 10_000)
        .await
        .unwrap()
        .into_iter()
        .map(|l: LogLine| l.line)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_local_runs_events_are_its_log_in_order_and_bounded() {
    let _subscriber =
        scoped_subscriber(tracing_subscriber::registry().with(jobwheel::run_log_layer()));
    let (store, locks, _clock) = backend("2026-01-01T00:00:00Z");
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("chatty", |ctx: JobContext| async move {
            let n: u64 = ctx.job.payload().as_u64().unwrap_or(3);
            tracing::info!(first = true, "started <{}>", ctx.job.id());
            tokio::time::sleep(Duration::from_secs(3)).await;
            for i in 1..n {
                tracing::warn_span!("inner").in_scope(|| tracing::warn!(i, "step {i}"));
            }
            Ok(())
        })
        .config(
            config("n1")
                .log_lines(10)
                .log_flush(Duration::from_millis(500)),
        )
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    tracing::info!("outside any run: in no run's log");
    let never = Schedule::once(at("2030-01-01T00:00:00Z"));
    for (id, n) in [("short", 3), ("flood", 25)] {
        s.upsert(
            Job::builder(id, "chatty", never.clone())
                .payload(serde_json::json!(n))
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
        s.trigger_now(id).await.unwrap();
    }
    advance(Duration::from_secs(2)).await;
    let (short, flood) = (
        runs_of(&store, "short").await[0].clone(),
        runs_of(&store, "flood").await[0].clone(),
    );
    assert_eq!(short.status, RunStatus::Running);
    let early = lines(&store, short.id).await;
    assert_eq!(early.len(), 1, "written while it runs: {early:?}");
    assert!(
        early[0].contains(" INFO ") && early[0].ends_with("started <short> first=true"),
        "{early:?}"
    );
    advance(Duration::from_secs(3)).await;
    assert_eq!(
        runs_of(&store, "short").await[0].status,
        RunStatus::Succeeded
    );
    let all = lines(&store, short.id).await;
    assert_eq!(all.len(), 3, "{all:?}");
    for (i, l) in all.iter().enumerate().skip(1) {
        assert!(
            l.contains(" WARN ") && l.ends_with(&format!("step {i} i={i}")),
            "{all:?}"
        );
    }
    let flood_lines = lines(&store, flood.id).await;
    assert_eq!(
        flood_lines.len(),
        11,
        "ten lines and the marker: {flood_lines:?}"
    );
    assert!(flood_lines[9].ends_with("step 9 i=9"), "{flood_lines:?}");
    assert!(
        flood_lines[10].contains("log cut at 10 lines"),
        "{flood_lines:?}"
    );
    let from = store.lines(flood.id, 4, 2).await.unwrap();
    assert_eq!(
        from.iter().map(|l| l.offset).collect::<Vec<_>>(),
        [4, 5],
        "read from an offset"
    );
    h.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn no_log_is_kept_with_log_lines_zero() {
    let _subscriber =
        scoped_subscriber(tracing_subscriber::registry().with(jobwheel::run_log_layer()));
    let (store, locks, _clock) = backend("2026-01-01T00:00:00Z");
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("chatty", |_ctx: JobContext| async move {
            tracing::info!("said");
            Ok(())
        })
        .config(config("n1").log_lines(0))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    s.upsert(
        Job::builder(
            "quiet",
            "chatty",
            Schedule::once(at("2030-01-01T00:00:00Z")),
        )
        .build()
        .unwrap(),
    )
    .await
    .unwrap();
    s.trigger_now("quiet").await.unwrap();
    advance(Duration::from_secs(3)).await;
    let run = runs_of(&store, "quiet").await[0].clone();
    assert_eq!(run.status, RunStatus::Succeeded);
    assert!(lines(&store, run.id).await.is_empty());
    h.shutdown().await;
}
