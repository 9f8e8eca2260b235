//! graphile_worker: two workers, each with its own pool, a concurrency and a
//! LocalQueue; enqueue with `add_jobs` in one call; done when its jobs table is
//! empty (graphile_worker deletes a job as it completes).

use crate::support::{self, Figures};
use graphile_worker::{
    IntoTaskHandlerResult, JobSpec, LocalQueueConfig, TaskHandler, WorkerContext, WorkerOptions,
};
use serde::{Deserialize, Serialize};
use std::time::Instant;

const SCHEMA: &str = "peers_gw";

#[derive(Clone, Deserialize, Serialize)]
struct Noop {
    n: usize,
}

impl TaskHandler for Noop {
    const IDENTIFIER: &'static str = "noop";

    async fn run(self, _ctx: WorkerContext) -> impl IntoTaskHandlerResult {
        support::executed();
        Ok::<(), String>(())
    }
}

async fn worker(
    url: &str,
    concurrency: usize,
    local_queue: usize,
) -> anyhow::Result<graphile_worker::Worker> {
    Ok(WorkerOptions::default()
        .concurrency(concurrency)
        .schema(SCHEMA)
        .define_job::<Noop>()
        .pg_pool(support::pool(url, 20).await?)
        .local_queue(LocalQueueConfig::default().with_size(local_queue))
        .listen_os_shutdown_signals(false)
        .init()
        .await?)
}

pub async fn run(
    url: &str,
    jobs: usize,
    concurrency: usize,
    local_queue: usize,
) -> anyhow::Result<Figures> {
    let admin = support::pool(url, 2).await?;
    let a = worker(url, concurrency, local_queue).await?;
    let b = worker(url, concurrency, local_queue).await?;
    let spec = JobSpec::default();
    let batch: Vec<(Noop, &JobSpec)> = (0..jobs).map(|n| (Noop { n }, &spec)).collect();
    let t = Instant::now();
    a.create_utils().add_jobs::<Noop>(&batch).await?;
    let enqueue = t.elapsed();
    let (a, b) = (std::sync::Arc::new(a), std::sync::Arc::new(b));
    let started = Instant::now();
    let ta = tokio::spawn({
        let a = a.clone();
        async move { a.run().await }
    });
    let tb = tokio::spawn({
        let b = b.clone();
        async move { b.run().await }
    });
    let done = format!("SELECT {jobs} - count(*) FROM {SCHEMA}._private_jobs");
    let drain = support::wait_done(|| support::count(&admin, &done), jobs, started).await?;
    a.request_shutdown();
    b.request_shutdown();
    let _ = ta.await?;
    let _ = tb.await?;
    admin.close().await;
    Ok(Figures { enqueue, drain })
}
