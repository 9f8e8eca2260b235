//! jobwheel: two schedulers on their own PostgreSQL pools, store and locks on the
//! same server.

use crate::support::{self, Figures};
use jobwheel::{BackendConfig, Job, JobContext, LocalExecutor, Schedule, Scheduler, Timestamp};
use std::time::Instant;

const PREFIX: &str = "peers_jw_";

async fn scheduler(url: &str, concurrency: Option<usize>) -> anyhow::Result<Scheduler> {
    let backend = BackendConfig::new(url)
        .prefix(PREFIX)
        .max_connections(20)
        .connect()
        .await?;
    let mut b = Scheduler::builder()
        .backend(backend)
        .handler("noop", |_ctx: JobContext| async { Ok(()) });
    if let Some(c) = concurrency {
        b = b.executor(LocalExecutor::with_concurrency(c)?);
    }
    Ok(b.build()?)
}

async fn drop_tables(pool: &sqlx::PgPool) -> anyhow::Result<()> {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE 'peers\\_jw\\_%'",
    )
    .fetch_all(pool)
    .await?;
    for t in tables {
        crate::support::exec(pool, &[&format!("DROP TABLE IF EXISTS \"{t}\" CASCADE")]).await?;
    }
    Ok(())
}

pub async fn run(url: &str, jobs: usize, concurrency: Option<usize>) -> anyhow::Result<Figures> {
    let admin = support::pool(url, 2).await?;
    drop_tables(&admin).await?;
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
    let drain = support::wait_done(
        &admin,
        &format!("SELECT count(*) FROM {PREFIX}runs WHERE status = 'succeeded'"),
        jobs,
        started,
    )
    .await?;
    ha.shutdown().await;
    hb.shutdown().await;
    drop_tables(&admin).await?;
    Ok(Figures { enqueue, drain })
}
