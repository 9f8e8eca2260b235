//! The demo the backend examples share: two jobs, seven seconds, then the run log.

use jobwheel::prelude::*;
use serde::Deserialize;
use std::io::Write;
use std::time::Duration;

/// The report job's payload.
#[derive(Deserialize)]
struct ReportParams {
    /// Where the report lines go (a file in the temp dir).
    file: String,
}

/// Appends one line per run to the report file; an I/O error fails the run (and is
/// retried), with the whole error in the run log.
async fn report(ctx: JobContext, p: ReportParams) -> JobResult {
    let path = std::env::temp_dir().join(&p.file);
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    writeln!(
        f,
        "{} fire {} attempt {}",
        ctx.job.id(),
        ctx.fire_at,
        ctx.attempt
    )?;
    println!(
        "  {} fire {} attempt {} on {} -> {}",
        ctx.job.id(),
        ctx.fire_at,
        ctx.attempt,
        ctx.node_id,
        path.display()
    );
    Ok(())
}

/// Connects to `url` (migrating it) and runs one scheduler: a cron job every 2 s and
/// an interval job every 3 s with retries, for 7 s; then prints the newest runs.
/// Several copies of the example in several terminals share the work, each fire
/// running once.
pub async fn demo(url: &str, prefix: &str) -> Result<(), Box<dyn std::error::Error>> {
    let backend = BackendConfig::new(url).prefix(prefix).connect().await?;
    let scheduler = Scheduler::builder()
        .backend(backend)
        .handler("report", report)
        .build()?;
    let running = scheduler.start().await?;
    println!("node {} on {}", scheduler.node_id(), url);
    let payload = serde_json::json!({ "file": "jobwheel-example-report.txt" });
    let every_2s = Schedule::cron("*/2 * * * * ?", "UTC")?;
    scheduler
        .upsert(
            Job::builder("example.report", "report", every_2s)
                .payload(payload.clone())
                .build()?,
        )
        .await?;
    let retry = RetryPolicy::new(5, Duration::from_secs(1), Duration::from_secs(30))?;
    scheduler
        .upsert(
            Job::builder(
                "example.sync",
                "report",
                Schedule::every(Duration::from_secs(3))?,
            )
            .payload(payload)
            .retry(retry)
            .build()?,
        )
        .await?;
    tokio::time::sleep(Duration::from_secs(7)).await;
    running.shutdown().await;
    for r in scheduler.runs(&RunQuery::new().limit(6)).await? {
        println!(
            "  run {} {} {} {} {:?}",
            r.id,
            r.job_id,
            r.fire_at,
            r.status.as_str(),
            r.duration()
        );
    }
    Ok(())
}
