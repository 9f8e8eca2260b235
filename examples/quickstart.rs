//! jobwheel in one file: a few jobs on the embedded memory backend, one that fails
//! and is retried with backoff, an alarm printed to the console, and the run log.
//!
//! `cargo run --example quickstart` (finishes by itself in about 12 seconds).

use jobwheel::prelude::*;
use jobwheel::{AlarmError, AlarmEvent, JobAlarm};
use serde::Deserialize;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// A user-written alarm: prints each alarm event.
struct ConsoleAlarm;

#[jobwheel::async_trait]
impl JobAlarm for ConsoleAlarm {
    fn name(&self) -> &str {
        "console"
    }

    async fn alarm(&self, e: &AlarmEvent) -> Result<(), AlarmError> {
        println!(
            "  ALARM [{}] job {} attempt {}/{}: {} (will retry: {}, next fire: {})",
            e.kind.as_str(),
            e.job_id,
            e.attempt,
            e.max_attempts,
            e.error.as_deref().unwrap_or("-"),
            e.will_retry,
            e.next_fire_at.map_or("none".into(), |t| t.to_string()),
        );
        Ok(())
    }
}

/// The `hello` jobs' payload.
#[derive(Deserialize)]
struct Greeting {
    name: String,
}

async fn hello(ctx: JobContext, g: Greeting) -> JobResult {
    println!(
        "  hello {} from {} (fire {}, trigger {})",
        g.name,
        ctx.job.id(),
        ctx.fire_at,
        ctx.trigger.as_str()
    );
    Ok(())
}

/// Calls to the pretend upstream so far: the first two are refused.
static CALLS: AtomicU32 = AtomicU32::new(0);

fn call_upstream() -> std::io::Result<()> {
    let n = CALLS.fetch_add(1, Ordering::SeqCst) + 1;
    if n < 3 {
        let why = format!("upstream unavailable (call {n})");
        return Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            why,
        ));
    }
    Ok(())
}

/// Fails twice with the upstream's I/O error (`?` carries it to the run log), then
/// succeeds.
async fn sync(ctx: JobContext) -> JobResult {
    println!("  sync attempt {} at {}", ctx.attempt, Timestamp::now());
    call_upstream()?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scheduler = Scheduler::builder()
        .backend(connect("memory:").await?)
        .handler("hello", hello)
        .handler("sync", sync)
        .alarm(ConsoleAlarm)
        .config(SchedulerConfig::default().poll_interval(Duration::from_millis(200)))
        .build()?;
    let running = scheduler.start().await?;
    println!("node {} started", scheduler.node_id());

    let every_2s = Schedule::cron("*/2 * * * * ?", "Europe/Berlin")?;
    scheduler
        .upsert(
            Job::builder("every-2s", "hello", every_2s)
                .payload(serde_json::json!({ "name": "Berlin" }))
                .build()?,
        )
        .await?;
    scheduler
        .upsert(
            Job::builder(
                "every-3s",
                "hello",
                Schedule::every(Duration::from_secs(3))?,
            )
            .payload(serde_json::json!({ "name": "interval" }))
            .build()?,
        )
        .await?;
    // Fails twice, succeeds on the third attempt: retries after 1 s, then 2 s.
    let retry = RetryPolicy::new(3, Duration::from_secs(1), Duration::from_secs(10))?;
    let alarms = AlarmPolicy {
        events: vec![AlarmKind::Failure, AlarmKind::Recovery],
        recipients: vec![],
        ..AlarmPolicy::default()
    };
    // A one-shot is declared with `create`: another process (or a restart) that
    // declares it again leaves the first one alone instead of re-arming it.
    let soon = Schedule::once(Timestamp::now() + Duration::from_secs(1));
    scheduler
        .create(
            Job::builder("sync-once", "sync", soon)
                .retry(retry)
                .alarm(alarms)
                .build()?,
        )
        .await?;

    tokio::time::sleep(Duration::from_secs(9)).await;
    let report = running.shutdown().await;
    println!("stopped (drained: {})\n", report.drained);

    let mut runs = scheduler.runs(&RunQuery::new().limit(1000)).await?;
    runs.reverse();
    println!(
        "{:<10} {:<24} {:<9} {:>7} {:<10} {:>8}  error",
        "job", "fire_at", "trigger", "attempt", "status", "ms"
    );
    for r in runs {
        println!(
            "{:<10} {:<24} {:<9} {:>7} {:<10} {:>8}  {}",
            r.job_id.as_str(),
            r.fire_at.to_string(),
            r.trigger.as_str(),
            r.attempt,
            r.status.as_str(),
            r.duration().map_or(0, |d| d.as_millis()),
            r.error.unwrap_or_default(),
        );
    }
    Ok(())
}
