//! jobwheel: two schedulers on their own PostgreSQL pools, store and locks on the
//! same server; enqueue with `upsert_many`; done when its run log records every run
//! succeeded.

use crate::support::{self, Figures};
use jobwheel::{
    BackendConfig, Job, JobContext, LocalExecutor, Schedule, Scheduler, SchedulerConfig, Timestamp,
};
use std::time::Instant;

/// How the two schedulers are set.
#[derive(Clone, Copy, Debug)]
pub enum Tuning {
    /// Every default, with `Some(c)` handlers per worker.
    Defaults(Option<usize>),
    /// Hand-tuned for a drain: 2048 handlers, claim batch 2000, claim window 4000,
    /// write batch 1000.
    Drain,
}

async fn scheduler(url: &str, tuning: Tuning) -> anyhow::Result<Scheduler> {
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
    match tuning {
        Tuning::Defaults(Some(c)) => b = b.executor(LocalExecutor::with_concurrency(c)?),
        Tuning::Defaults(None) => {}
        Tuning::Drain => {
            b = b.executor(LocalExecutor::with_concurrency(2048)?).config(
                SchedulerConfig::default()
                    .claim_batch(2000)
                    .claim_window(4000)
                    .write_batch(1000),
            );
        }
    }
    Ok(b.build()?)
}

/// One run in the fresh database `url`.
pub async fn run(url: &str, jobs: usize, tuning: Tuning) -> anyhow::Result<Figures> {
    let admin = support::pool(url, 2).await?;
    let a = scheduler(url, tuning).await?;
    let b = scheduler(url, tuning).await?;
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
