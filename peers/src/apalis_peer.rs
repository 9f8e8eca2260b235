//! apalis (postgres): two workers, each with its own pool and storage, a
//! concurrency limit, and its tasks spawned in parallel; enqueue with `push_bulk`;
//! done when its jobs table records every job `Done`.

use crate::support::{self, Figures};
use apalis::prelude::*;
use apalis_postgres::{Config, PostgresStorage};
use std::time::Instant;

const QUEUE: &str = "peers";

async fn noop(_n: usize) -> Result<(), BoxDynError> {
    support::executed();
    Ok(())
}

async fn storage(url: &str, batch: usize) -> anyhow::Result<PostgresStorage<usize>> {
    let pool = support::pool(url, 20).await?;
    Ok(PostgresStorage::new(&pool).with_config(Config::default().queue(QUEUE).batch_size(batch)))
}

pub async fn run(url: &str, jobs: usize, concurrency: usize) -> anyhow::Result<Figures> {
    let admin = support::pool(url, 2).await?;
    PostgresStorage::setup(&admin).await?;
    // A fetch batch as large as the concurrency, as apalis's examples pair them.
    let batch = concurrency.max(10);
    let mut producer = storage(url, batch).await?;
    let t = Instant::now();
    producer.push_bulk((0..jobs).collect()).await?;
    let enqueue = t.elapsed();
    let mut workers = Vec::new();
    let started = Instant::now();
    for name in ["peers-a", "peers-b"] {
        let backend = storage(url, batch).await?;
        let worker = WorkerBuilder::new(name)
            .backend(backend)
            .concurrency(concurrency)
            .parallelize(|f| tokio::spawn(f))
            .build(noop);
        workers.push(async move {
            let _ = worker.run().await;
        });
    }
    // The workers run on this task (their futures are not `'static`-spawnable);
    // dropping them when the drain is done stops them.
    let count =
        format!("SELECT count(*) FROM apalis.jobs WHERE job_type = '{QUEUE}' AND status = 'Done'");
    let done = support::wait_done(|| support::count(&admin, &count), jobs, started);
    let drain = tokio::select! {
        d = done => d?,
        _ = futures::future::join_all(workers) => anyhow::bail!("apalis workers stopped"),
    };
    admin.close().await;
    Ok(Figures { enqueue, drain })
}
