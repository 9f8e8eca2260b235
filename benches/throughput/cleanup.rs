//! Removes what a workload stored, so that runs do not slow each other down through a
//! growing database (a Redis keyspace of half a million leftover keys rehashes during
//! the next drain) and the servers are left as they were found.

/// The tables `migrate()` creates under a prefix.
const TABLES: [&str; 11] = [
    "alarms",
    "audit",
    "credentials",
    "executors",
    "jobs",
    "locks",
    "migrations",
    "nodes",
    "releases",
    "run_lines",
    "runs",
];

/// Drops the workload's tables or keys under `prefix`; failures are printed, not fatal.
pub async fn cleanup(
    backend: &str,
    prefix: &str,
    pg: &str,
    mysql: &str,
    redis: &str,
    cluster: &[String],
) {
    let drop = TABLES
        .iter()
        .map(|t| format!("{prefix}{t}"))
        .collect::<Vec<_>>()
        .join(", ");
    // The run ids' sequence too (PostgreSQL and MariaDB).
    let sql = format!("DROP TABLE IF EXISTS {drop}; DROP SEQUENCE IF EXISTS {prefix}run_ids");
    if backend.starts_with("postgres") {
        let done = async {
            let pool = sqlx::PgPool::connect(pg).await?;
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone()))
                .execute(&pool)
                .await
        };
        if let Err(e) = done.await {
            eprintln!("cleanup: postgres: {e}");
        }
    }
    if backend == "mysql" {
        let done = async {
            let pool = sqlx::MySqlPool::connect(mysql).await?;
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone()))
                .execute(&pool)
                .await
        };
        if let Err(e) = done.await {
            eprintln!("cleanup: mysql: {e}");
        }
    }
    if matches!(backend, "redis" | "redis-sharded" | "postgres+redis")
        && let Err(e) = crate::redis_keys::drop_keys(redis, prefix).await
    {
        eprintln!("cleanup: redis: {e}");
    }
    if backend == "redis-cluster"
        && let Err(e) = crate::redis_keys::drop_cluster_keys(cluster, prefix).await
    {
        eprintln!("cleanup: redis cluster: {e}");
    }
    if backend == "sqlite" {
        for end in ["", "-wal", "-shm"] {
            let path = std::env::temp_dir().join(format!("{prefix}bench.db{end}"));
            let _ = std::fs::remove_file(path);
        }
    }
}
