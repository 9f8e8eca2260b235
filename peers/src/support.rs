//! What every system's run shares: figures, pools, the completion wait, pgbench.

use sqlx::postgres::{PgPool, PgPoolOptions};
use std::time::{Duration, Instant};

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

/// Polls `count` (the number of jobs the system's tables record as done) every 10 ms
/// until it reaches `jobs`; returns the time since `since`. Gives up after 10 minutes.
pub async fn wait_done(
    pool: &PgPool,
    count_sql: &str,
    jobs: usize,
    since: Instant,
) -> anyhow::Result<Duration> {
    loop {
        let sql = sqlx::AssertSqlSafe(count_sql.to_owned());
        let done: i64 = sqlx::query_scalar(sql).fetch_one(pool).await?;
        if done as usize >= jobs {
            return Ok(since.elapsed());
        }
        anyhow::ensure!(
            since.elapsed() < Duration::from_secs(600),
            "only {done} of {jobs} jobs done after 10 minutes ({count_sql})"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
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

/// The median of `d` (the lower middle one for an even count).
pub fn median(d: impl Iterator<Item = Duration>) -> Duration {
    let mut v: Vec<Duration> = d.collect();
    v.sort();
    v.get(v.len().saturating_sub(1) / 2)
        .copied()
        .unwrap_or_default()
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
