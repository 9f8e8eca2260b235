//! jobwheel on PostgreSQL: the store and the row-lease locks in one database.
//!
//! `JOBWHEEL_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test cargo run --example postgres --features postgres`
//! (the URL defaults to the local development server). Run it in several terminals:
//! each fire still runs once, and `kill -9` of one of them is recovered by the others.

use jobwheel::postgres::{PgLocks, PgStore};
use jobwheel::{Job, JobContext, JobError, RetryPolicy, RunQuery, Schedule, Scheduler};
use std::time::Duration;

#[tokio::main]
async fn main() -> jobwheel::Result<()> {
    let url = std::env::var("JOBWHEEL_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let store = PgStore::builder(&url).prefix("example_").build().await?;
    store.migrate().await?;
    let locks = PgLocks::new(store.pool().clone(), store.tables());
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
    println!("node {} on {}", running.node_id(), url);
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
    for r in scheduler
        .runs(&RunQuery {
            limit: 6,
            ..RunQuery::default()
        })
        .await?
    {
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
