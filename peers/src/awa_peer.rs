//! awa: two clients, each with its own pool and `max_workers`; enqueue with
//! `insert_many`.

use crate::support::{self, Figures};
use awa::{Client, InsertOpts, JobArgs, JobResult, QueueConfig};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

const QUEUE: &str = "peers";

#[derive(Serialize, Deserialize, JobArgs)]
struct PeersNoop {
    n: usize,
}

async fn client(url: &str, max_workers: u32) -> anyhow::Result<Client> {
    let pool = sqlx08::postgres::PgPoolOptions::new()
        .max_connections(20)
        .connect(url)
        .await?;
    Ok(Client::builder(pool)
        .queue(
            QUEUE,
            QueueConfig {
                max_workers,
                ..QueueConfig::default()
            },
        )
        .register::<PeersNoop, _, _>(|_args, _ctx| async { Ok(JobResult::Completed) })
        .build()?)
}

pub async fn run(url: &str, jobs: usize, max_workers: u32) -> anyhow::Result<Figures> {
    let admin = support::pool(url, 2).await?;
    support::exec(&admin, &["DROP SCHEMA IF EXISTS awa CASCADE"]).await?;
    let pool = sqlx08::postgres::PgPoolOptions::new()
        .max_connections(20)
        .connect(url)
        .await?;
    awa::migrations::run(&pool).await?;
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
    // awa's multi-row insert, in chunks of 1,000 (its own benchmark uses 500); its
    // COPY path measured 4-7 s for 20,000 jobs here, so it is not the one compared.
    for chunk in params.chunks(1000) {
        awa::insert_many(&pool, chunk).await?;
    }
    let enqueue = t.elapsed();
    let (a, b) = (
        client(url, max_workers).await?,
        client(url, max_workers).await?,
    );
    let started = Instant::now();
    a.start().await?;
    b.start().await?;
    let drain = support::wait_done(
        &admin,
        &format!("SELECT count(*) FROM awa.jobs WHERE queue = '{QUEUE}' AND state = 'completed'"),
        jobs,
        started,
    )
    .await?;
    a.shutdown(Duration::from_secs(10)).await;
    b.shutdown(Duration::from_secs(10)).await;
    pool.close().await;
    support::exec(&admin, &["DROP SCHEMA IF EXISTS awa CASCADE"]).await?;
    Ok(Figures { enqueue, drain })
}
