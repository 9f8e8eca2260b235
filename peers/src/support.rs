//! What every system's run shares: figures, pools, the completion wait, pgbench.

use sqlx::postgres::{PgPool, PgPoolOptions};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Handler executions of the run in progress, counted in memory by every system's
/// handler: the drain's first signal, which costs the database under test nothing.
static EXECUTED: AtomicUsize = AtomicUsize::new(0);

/// Called by every system's handler once per execution.
pub fn executed() {
    EXECUTED.fetch_add(1, Ordering::Relaxed);
}

/// A fresh database for one run: `peers_run` on the server `url` names, dropped
/// first if a previous run left it; answers its URL.
pub async fn fresh_database(url: &str) -> anyhow::Result<String> {
    let admin = pool(url, 1).await?;
    exec(
        &admin,
        &[
            "DROP DATABASE IF EXISTS peers_run WITH (FORCE)",
            "CREATE DATABASE peers_run",
        ],
    )
    .await?;
    admin.close().await;
    EXECUTED.store(0, Ordering::Relaxed);
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let server = base.rsplit_once('/').map_or(base, |(s, _)| s);
    Ok(match query {
        Some(q) => format!("{server}/peers_run?{q}"),
        None => format!("{server}/peers_run"),
    })
}

/// Drops the run's database (`url` names the server's default one).
pub async fn drop_database(url: &str) -> anyhow::Result<()> {
    let admin = pool(url, 1).await?;
    exec(&admin, &["DROP DATABASE IF EXISTS peers_run WITH (FORCE)"]).await?;
    admin.close().await;
    Ok(())
}

/// One run of one setting.
#[derive(Clone, Copy, Debug)]
pub struct Figures {
    /// The bulk enqueue of every job.
    pub enqueue: Duration,
    /// From the workers' start until the system's tables record every job done.
    pub drain: Duration,
}

/// A pool of `n` connections to `url`.
pub async fn pool(url: &str, n: u32) -> anyhow::Result<PgPool> {
    Ok(PgPoolOptions::new().max_connections(n).connect(url).await?)
}

/// Waits until every handler has run (watched in memory, no query against the
/// server while the workers drain), then until `done` (the system's own count of
/// jobs it has recorded as done) reaches `jobs`, asking every 2 ms; returns the time
/// since `since`. Gives up after 10 minutes.
pub async fn wait_done<F, Fut>(mut done: F, jobs: usize, since: Instant) -> anyhow::Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<usize>>,
{
    let limit = Duration::from_secs(600);
    while EXECUTED.load(Ordering::Relaxed) < jobs {
        anyhow::ensure!(
            since.elapsed() < limit,
            "only {} of {jobs} handlers ran in 10 minutes",
            EXECUTED.load(Ordering::Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    loop {
        let n = done().await?;
        if n >= jobs {
            return Ok(since.elapsed());
        }
        anyhow::ensure!(
            since.elapsed() < limit,
            "only {n} of {jobs} jobs recorded done after 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The system's count of done jobs through `count_sql` (one number).
pub async fn count(pool: &PgPool, count_sql: &str) -> anyhow::Result<usize> {
    let sql = sqlx::AssertSqlSafe(count_sql.to_owned());
    let n: i64 = sqlx::query_scalar(sql).fetch_one(pool).await?;
    Ok(n.max(0) as usize)
}

/// Runs each statement (the harness's own, not user input).
pub async fn exec(pool: &PgPool, sql: &[&str]) -> anyhow::Result<()> {
    for s in sql {
        sqlx::query(sqlx::AssertSqlSafe(s.to_string()))
            .execute(pool)
            .await?;
    }
    Ok(())
}

/// The median of `d` (the lower middle one for an even count), and the least and
/// the greatest.
pub fn spread(d: impl Iterator<Item = Duration>) -> (Duration, Duration, Duration) {
    let mut v: Vec<Duration> = d.collect();
    v.sort();
    let at = |i: usize| v.get(i).copied().unwrap_or_default();
    (
        at(v.len().saturating_sub(1) / 2),
        at(0),
        at(v.len().saturating_sub(1)),
    )
}

/// `pgbench -N -c 8 -j 2 -T 10` on its own tables (created, then dropped): the
/// server's single-row write transactions per second.
pub async fn pgbench(url: &str) -> anyhow::Result<f64> {
    let run = |args: &[&str]| {
        let out = std::process::Command::new("pgbench")
            .args(args)
            .arg(url)
            .output();
        async move {
            let out = out?;
            anyhow::ensure!(
                out.status.success(),
                "pgbench failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            Ok::<String, anyhow::Error>(String::from_utf8_lossy(&out.stdout).into_owned())
        }
    };
    run(&["-i", "-q", "-s", "1"]).await?;
    let out = run(&["-N", "-c", "8", "-j", "2", "-T", "10"]).await?;
    run(&["-i", "-I", "d"]).await?;
    out.lines()
        .find_map(|l| {
            l.strip_prefix("tps = ")
                .and_then(|r| r.split_whitespace().next())
                .and_then(|v| v.parse().ok())
        })
        .ok_or_else(|| anyhow::anyhow!("no tps line in pgbench's output:\n{out}"))
}
