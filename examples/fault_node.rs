//! One scheduler node for the multi-process fault tests (`tests/faults/fault_cluster.rs`), and
//! a way to try them by hand.
//!
//! ```sh
//! cargo run --example fault_node --all-features -- \
//!     --backend postgres --url postgres://postgres@127.0.0.1:5432/test \
//!     --prefix demo_ --node n1
//! ```
//!
//! `--backend postgres | mysql | postgres+redis | redis` (`--redis URL` for the last
//! two; with `redis` the Redis store keeps everything but the results table). The
//! node migrates the store. The handler `work` writes one row per execution into
//! `<prefix>results` in the store's database (created by the test, or by hand:
//! `id` serial key, `job_id` text, `fire_at`/`token`/`started_at` BIGINT, `node` text,
//! `attempt` INT): job, fire, node, attempt, token and the database's clock at the
//! start; then it sleeps `payload.sleep_ms` (and, with `payload.align_ms`, until the
//! clock is at a multiple of it); `--handlers a,b` registers it under those names
//! instead of `work`; the row insert is retried through an outage of up
//! to 30 s. The node runs until SIGTERM or SIGINT, shuts down gracefully and prints
//! one line `METRICS {json}` with its counters. `--remote <base URL>` also dispatches
//! the jobs of executor group `billing` to that instance (secret: `JOBWHEEL_GROUP_SECRET`;
//! `tests/faults/remote_faults.rs`). Short lease (3 s) and heartbeat (1 s)
//! make faults show quickly.

use jobwheel::{JobContext, JobStore, LockProvider, Scheduler, SchedulerConfig};
use std::sync::Arc;
use std::time::Duration;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// The `work` job's payload.
#[derive(serde::Deserialize)]
struct Work {
    /// How long a run takes after recording itself.
    #[serde(default)]
    sleep_ms: u64,
    /// Then it waits until the machine's clock is at a multiple of this many
    /// milliseconds, so runs on several nodes end at the same moment (0: no wait).
    #[serde(default)]
    align_ms: u64,
}

#[derive(Clone)]
enum Results {
    Pg(sqlx::PgPool, String),
    My(sqlx::MySqlPool, String),
}

impl Results {
    async fn record(&self, ctx: &JobContext) -> Result<(), sqlx::Error> {
        let (job, fire, node) = (
            ctx.job.id().as_str(),
            ctx.fire_at.as_millis(),
            &*ctx.node_id,
        );
        let (attempt, token) = (ctx.attempt as i32, ctx.token as i64);
        // The same insert on either driver; only the placeholders and the clock differ.
        macro_rules! insert {
            ($pool:expr, $table:expr, $values:expr) => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "INSERT INTO {} (job_id, fire_at, node, attempt, token, started_at) VALUES {}",
                    $table, $values
                )))
                .bind(job)
                .bind(fire)
                .bind(node)
                .bind(attempt)
                .bind(token)
                .execute($pool)
                .await
                .map(|_| ())?
            };
        }
        match self {
            Results::Pg(pool, table) => insert!(
                pool,
                table,
                "($1, $2, $3, $4, $5, floor(extract(epoch from clock_timestamp()) * 1000)::bigint)"
            ),
            Results::My(pool, table) => insert!(
                pool,
                table,
                "(?, ?, ?, ?, ?, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)"
            ),
        };
        Ok(())
    }
}

#[tokio::main]
async fn main() -> jobwheel::Result<()> {
    {
        // Handlers' events become their runs' logs (written every 50 ms); the
        // engine's events at `RUST_LOG`'s level go to stderr, which the fault
        // tests keep in a file per node.
        use tracing_subscriber::{Layer, layer::SubscriberExt};
        let stderr = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .with_filter(tracing_subscriber::EnvFilter::from_default_env());
        let _ = tracing::subscriber::set_global_default(
            tracing_subscriber::registry()
                .with(jobwheel::run_log_layer())
                .with(stderr),
        );
    }
    let backend = arg("--backend").unwrap_or_else(|| "postgres".into());
    let url = arg("--url").expect("--url");
    let prefix = arg("--prefix").unwrap_or_else(|| "fault_".into());
    let node = arg("--node").expect("--node");
    let table = format!("{prefix}results");
    let (store, locks, results): (Arc<dyn JobStore>, Arc<dyn LockProvider>, Results) = match backend
        .as_str()
    {
        "postgres" | "postgres+redis" => {
            let store = jobwheel::postgres::PgStore::builder(&url)
                .prefix(&prefix)
                .build()
                .await?;
            store.migrate().await?;
            let locks: Arc<dyn LockProvider> = if backend == "postgres" {
                Arc::new(store.locks())
            } else {
                let redis = arg("--redis").expect("--redis");
                let client = redis::Client::open(redis.as_str())
                    .map_err(|e| jobwheel::Error::invalid("--redis", &redis, e.to_string()))?;
                let conn = redis::aio::ConnectionManager::new(client)
                    .await
                    .map_err(|e| jobwheel::Error::backend("redis", "connect", true, e))?;
                Arc::new(jobwheel::redis::RedisLocks::new(conn, &prefix)?)
            };
            let results = Results::Pg(store.pool().clone(), table);
            (Arc::new(store), locks, results)
        }
        "redis" => {
            // The Redis store and locks; the results table stays in PostgreSQL
            // (`--url`).
            let redis = arg("--redis").expect("--redis");
            let store = jobwheel::redis::RedisStore::connect_with_prefix(&redis, &prefix).await?;
            store.migrate().await?;
            let locks = store.locks();
            let pool = sqlx::PgPool::connect(&url)
                .await
                .map_err(|e| jobwheel::Error::backend("postgres", "connect", true, e))?;
            (Arc::new(store), Arc::new(locks), Results::Pg(pool, table))
        }
        "mysql" => {
            let store = jobwheel::mysql::MySqlStore::builder(&url)
                .prefix(&prefix)
                .build()
                .await?;
            store.migrate().await?;
            let locks = store.locks();
            let results = Results::My(store.pool().clone(), table);
            (Arc::new(store), Arc::new(locks), results)
        }
        other => panic!("unknown backend {other:?}"),
    };
    let mut builder = Scheduler::builder();
    // With `--remote <base URL>`: jobs of executor group `billing` go to that
    // instance, signed with the secret in `JOBWHEEL_GROUP_SECRET`.
    if let Some(instance) = arg("--remote") {
        let secret = std::env::var("JOBWHEEL_GROUP_SECRET").unwrap_or_default();
        builder = builder.remote(jobwheel::remote::RemoteGroup::fixed(
            "billing",
            secret,
            [instance],
        )?);
    }
    // `--handlers a,b`: the names the work handler is registered under (default
    // `work`); a node without a job's handler leaves it to a node that has it.
    let names = arg("--handlers").unwrap_or_else(|| "work".into());
    for name in names.split(',') {
        let results = results.clone();
        builder = builder.handler(name, move |ctx: JobContext, work: Work| {
            let results = results.clone();
            async move {
                let mut tries = 0;
                loop {
                    match results.record(&ctx).await {
                        Ok(()) => break,
                        // Through an outage of up to 30 s; then the sqlx error fails the run.
                        Err(e) if tries >= 120 => return Err(e.into()),
                        Err(_) => tries += 1,
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                tracing::info!(tries, "recorded; working");
                tokio::time::sleep(Duration::from_millis(work.sleep_ms)).await;
                if work.align_ms > 0 {
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap_or_default()
                        .as_millis() as u64;
                    let wait = work.align_ms - now % work.align_ms;
                    tokio::time::sleep(Duration::from_millis(wait)).await;
                }
                Ok(())
            }
        });
    }
    let scheduler = builder
        .store(store)
        .locks(locks)
        .config(
            SchedulerConfig::default()
                .node_id(node)
                .poll_interval(Duration::from_millis(200))
                .lookahead(Duration::from_secs(1))
                .lease_ttl(Duration::from_secs(3))
                .heartbeat(Duration::from_secs(1))
                .dead_after_beats(3)
                .shutdown_grace(Duration::from_secs(5))
                .log_flush(Duration::from_millis(50)),
        )
        .build()?;
    let running = scheduler.start().await?;
    println!("READY {}", scheduler.node_id());
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    let report = running.shutdown().await;
    let metrics = scheduler.metrics();
    println!(
        "METRICS {{\"started\":{},\"finished\":{},\"start_refused\":{},\"finish_refused\":{},\"leases_lost\":{},\"lost_recovered\":{},\"backend_errors\":{},\"drained\":{}}}",
        metrics.started,
        metrics.finished,
        metrics.start_refused,
        metrics.finish_refused,
        metrics.leases_lost,
        metrics.lost_recovered,
        metrics.backend_errors,
        report.drained
    );
    Ok(())
}
