//! jobwheel on SQLite: jobs and runs in one file that several processes can share.
//!
//! `cargo run --example sqlite [path/to/jobs.db]` (default: a file in the temp dir).
//! Run it in two terminals on the same file: each fire still runs once.

use jobwheel::prelude::*;
use serde::Deserialize;
use std::time::Duration;

/// The tick job's payload.
#[derive(Deserialize)]
struct Tick {
    /// A number written as text, parsed by the handler.
    every: String,
}

async fn tick(ctx: JobContext, p: Tick) -> JobResult {
    // A payload the handler cannot use fails the run with the parse error.
    let every: u64 = p.every.parse()?;
    println!(
        "  {} ran fire {} on {} (every {every} s)",
        ctx.job.id(),
        ctx.fire_at,
        ctx.node_id
    );
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).unwrap_or_else(|| {
        std::env::temp_dir()
            .join("jobwheel-example.db")
            .display()
            .to_string()
    });
    let backend = connect(&format!("sqlite://{path}?mode=rwc")).await?;
    let scheduler = Scheduler::builder()
        .backend(backend)
        .handler("tick", tick)
        .build()?;
    let running = scheduler.start().await?;
    println!("node {} on {path}", scheduler.node_id());
    scheduler
        .upsert(
            Job::builder(
                "heartbeat-report",
                "tick",
                Schedule::every(Duration::from_secs(1))?,
            )
            .payload(serde_json::json!({ "every": "1" }))
            .build()?,
        )
        .await?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    running.shutdown().await;
    let runs = scheduler.runs(&RunQuery::new().limit(5)).await?;
    println!("last {} runs in the file:", runs.len());
    for r in runs {
        println!(
            "  {} {} {} {}",
            r.job_id,
            r.fire_at,
            r.node,
            r.status.as_str()
        );
    }
    Ok(())
}
