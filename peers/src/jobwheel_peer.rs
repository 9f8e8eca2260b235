//! jobwheel: two schedulers on their own PostgreSQL pools, store and locks on the
//! same server; enqueue with `upsert_many`; done when its run log records every run
//! succeeded.

use crate::support::{self, Figures};
use jobwheel::{BackendConfig, Job, JobContext, LocalExecutor, Schedule, Scheduler, Timestamp};
use std::time::Instant;

async fn scheduler(url: &str, concurrency: Option<usize>) -> anyhow::Result<Scheduler> {
    let backend = BackendConfig::new(url)
        .max_connections(20)
        .connect()
        .await?;
    let mut b = Scheduler::builder()
        .backend(backend)
        .handler("noop", |_ctx: JobContext| async {
            support::executed();
            Ok(())
        });
    if let Some(c) = concurrency {
        b = b.executor(LocalExecutor::with_concurrency(c)?);
    }
    Ok(b.build()?)
}

/// One run in the fresh database `url`.
pub async fn run(url: &str, jobs: usize, concurrency: Option<usize>) -> anyhow::Result<Figures> {
    let admin = support::pool(url, 2).await?;
    let a = scheduler(url, concurrency).await?;
    let b = scheduler(url, concurrency).await?;
    let now = Timestamp::now();
    let batch: Vec<Job> = (0..jobs)
        .map(|i| Job::builder(format!("j{i}"), "noop", Schedule::once(now)).build())
        .collect::<Result<_, _>>()?;
    let t = Instant::now();
    a.upsert_many(batch).await?;
    let enqueue = t.elapsed();
    let started = Instant::now();
    let (ha, hb) = (a.start().await?, b.start().await?);
    let done = "SELECT count(*) FROM jobwheel_runs WHERE status = 'succeeded'";
    let drain = support::wait_done(|| support::count(&admin, done), jobs, started).await?;
    ha.shutdown().await;
    hb.shutdown().await;
    admin.close().await;
    Ok(Figures { enqueue, drain })
}
