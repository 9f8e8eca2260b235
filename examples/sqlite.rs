//! jobwheel on SQLite: jobs and runs in one file that several processes can share.
//!
//! `cargo run --example sqlite [path/to/jobs.db]` (default: a file in the temp dir).
//! Run it in two terminals on the same file: each fire still runs once.

use jobwheel::sqlite::SqliteStore;
use jobwheel::{Job, JobContext, JobError, RunQuery, Schedule, Scheduler};
use std::time::Duration;

#[tokio::main]
async fn main() -> jobwheel::Result<()> {
    let path = std::env::args().nth(1).unwrap_or_else(|| {
        std::env::temp_dir()
            .join("jobwheel-example.db")
            .display()
            .to_string()
    });
    let store = SqliteStore::builder(format!("sqlite://{path}"))
        .build()
        .await?;
    store.migrate().await?;
    let locks = store.locks();
    let scheduler = Scheduler::builder()
        .store(store)
        .locks(locks)
        .handler("tick", |ctx: JobContext| async move {
            println!(
                "  {} ran fire {} on {}",
                ctx.job.id(),
                ctx.fire_at,
                ctx.node_id
            );
            Ok::<(), JobError>(())
        })
        .build()?;
    let running = scheduler.start().await?;
    println!("node {} on {path}", running.node_id());
    running
        .upsert(
            Job::builder(
                "heartbeat-report",
                "tick",
                Schedule::every(Duration::from_secs(1))?,
            )
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
