//! jobwheel in one file: a few jobs on the embedded memory backend, one that fails
//! and is retried with backoff, an alarm printed to the console, and the run log.
//!
//! `cargo run --example quickstart` (finishes by itself in about 12 seconds).

use jobwheel::{
    AlarmError, AlarmEvent, AlarmKind, AlarmPolicy, Job, JobAlarm, JobContext, JobError,
    RetryPolicy, RunQuery, Schedule, Scheduler, SchedulerConfig, Timestamp,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// A user-written alarm: prints each alarm event.
struct ConsoleAlarm;

#[async_trait::async_trait]
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

#[tokio::main]
async fn main() -> jobwheel::Result<()> {
    let flaky_calls = Arc::new(AtomicU32::new(0));
    let calls = flaky_calls.clone();
    let scheduler = Scheduler::builder()
        .handler("hello", |ctx: JobContext| async move {
            println!(
                "  hello from {} (fire {}, trigger {})",
                ctx.job.id(),
                ctx.fire_at,
                ctx.trigger.as_str()
            );
            Ok::<(), JobError>(())
        })
        .handler("flaky", move |ctx: JobContext| {
            let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
            async move {
                println!("  flaky attempt {} at {}", ctx.attempt, Timestamp::now());
                if n < 3 {
                    Err(JobError::msg(format!("upstream unavailable (call {n})")))
                } else {
                    Ok(())
                }
            }
        })
        .alarm(ConsoleAlarm)
        .config(SchedulerConfig {
            poll_interval: Duration::from_millis(200),
            ..SchedulerConfig::default()
        })
        .build()?;
    let running = scheduler.start().await?;
    println!("node {} started", running.node_id());

    running
        .upsert(
            Job::builder(
                "every-2s",
                "hello",
                Schedule::cron("*/2 * * * * ?", "Europe/Berlin")?,
            )
            .build()?,
        )
        .await?;
    running
        .upsert(
            Job::builder(
                "every-3s",
                "hello",
                Schedule::every(Duration::from_secs(3))?,
            )
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
    running
        .upsert(
            Job::builder(
                "sync-once",
                "flaky",
                Schedule::once(Timestamp::now() + Duration::from_secs(1)),
            )
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
