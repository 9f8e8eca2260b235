//! awa: two clients, each with its own pool and `max_workers`, on awa's default
//! queue storage; enqueue through its COPY path (`QueueStorage::enqueue_params_copy`,
//! the one its documentation recommends for high-volume producers); done when its
//! queue counts say every job is terminal.

use crate::support::{self, Figures};
use awa::model::{QueueStorage, QueueStorageConfig};
use awa::{Client, InsertOpts, JobArgs, JobResult, QueueConfig};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

const QUEUE: &str = "peers";

#[derive(Serialize, Deserialize, JobArgs)]
struct PeersNoop {
    n: usize,
}

async fn pool(url: &str) -> anyhow::Result<sqlx08::PgPool> {
    Ok(sqlx08::postgres::PgPoolOptions::new()
        .max_connections(20)
        .connect(url)
        .await?)
}

async fn client(url: &str, max_workers: u32, no_deadline: bool) -> anyhow::Result<Client> {
    let mut queue = QueueConfig {
        max_workers,
        ..QueueConfig::default()
    };
    if no_deadline {
        // The zero-deadline short path awa's own queue-storage benchmark runs.
        queue.deadline_duration = Duration::ZERO;
    }
    Ok(Client::builder(pool(url).await?)
        .queue(QUEUE, queue)
        .register::<PeersNoop, _, _>(|_args, _ctx| async {
            support::executed();
            Ok(JobResult::Completed)
        })
        .build()?)
}

/// One run in the fresh database `url`.
pub async fn run(
    url: &str,
    jobs: usize,
    max_workers: u32,
    no_deadline: bool,
) -> anyhow::Result<Figures> {
    let pool = pool(url).await?;
    awa::migrations::run(&pool).await?;
    // A client's first start installs and activates the queue storage on a fresh
    // database; the jobs are enqueued into it afterwards, before the workers start.
    let install = client(url, 1, no_deadline).await?;
    install.start().await?;
    install.shutdown(Duration::from_secs(10)).await;
    let store = QueueStorage::new(QueueStorageConfig::default())?;
    let params = (0..jobs)
        .map(|n| {
            awa::model::insert::params_with(
                &PeersNoop { n },
                InsertOpts {
                    queue: QUEUE.into(),
                    ..Default::default()
                },
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let t = Instant::now();
    store.enqueue_params_copy(&pool, &params).await?;
    let enqueue = t.elapsed();
    let (a, b) = (
        client(url, max_workers, no_deadline).await?,
        client(url, max_workers, no_deadline).await?,
    );
    let started = Instant::now();
    a.start().await?;
    b.start().await?;
    let done = || async {
        let counts = store.queue_counts(&pool, QUEUE).await?;
        Ok(counts.terminal.max(0) as usize)
    };
    let drain = support::wait_done(done, jobs, started).await?;
    a.shutdown(Duration::from_secs(10)).await;
    b.shutdown(Duration::from_secs(10)).await;
    pool.close().await;
    Ok(Figures { enqueue, drain })
}
