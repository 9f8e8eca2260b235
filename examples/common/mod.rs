//! The demo the backend examples share: two jobs, seven seconds, then the run log.

use jobwheel::{
    Job, JobContext, JobError, JobStore, LockProvider, RetryPolicy, RunQuery, Schedule, Scheduler,
};
use std::time::Duration;

/// Runs one scheduler on `store` and `locks`: a cron job every 2 s and an interval job
/// every 3 s with retries, for 7 s; then prints the newest runs. Several copies of the
/// example in several terminals share the work, each fire running once.
pub async fn demo(
    store: impl JobStore,
    locks: impl LockProvider,
    label: &str,
) -> jobwheel::Result<()> {
    let scheduler = Scheduler::builder()
        .store(store)
        .locks(locks)
        .handler("report", |ctx: JobContext| async move {
            println!(
                "  {} fire {} attempt {} on {}",
                ctx.job.id(),
                ctx.fire_at,
                ctx.attempt,
                ctx.node_id
            );
            Ok::<(), JobError>(())
        })
        .build()?;
    let running = scheduler.start().await?;
    println!("node {} on {}", running.node_id(), label);
    let every_2s = Schedule::cron("*/2 * * * * ?", "UTC")?;
    running
        .upsert(Job::builder("example.report", "report", every_2s).build()?)
        .await?;
    let retry = RetryPolicy::new(5, Duration::from_secs(1), Duration::from_secs(30))?;
    running
        .upsert(
            Job::builder(
                "example.sync",
                "report",
                Schedule::every(Duration::from_secs(3))?,
            )
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
