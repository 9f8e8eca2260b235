//! Tests against real servers started by `./scripts/test`: the conformance suites
//! and fleet tests on SQLite, PostgreSQL, MariaDB, Redis and a Redis Cluster (locks),
//! the run log's day partitions, `connect(url)`,
//! every accepted job read back from every store, and the alarms against a real SMTP
//! server (aiosmtpd) and a loopback HTTP server. A test whose server URL is not set
//! is skipped with a printed line (a failure under `CI=true`).

#[path = "../support/mod.rs"]
mod support;

#[cfg(all(feature = "email", feature = "webhook"))]
mod alarms;
#[cfg(all(
    feature = "sqlite",
    feature = "postgres",
    feature = "mysql",
    feature = "redis"
))]
mod connect;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod day_partitions;
#[cfg(all(feature = "mysql", feature = "conformance"))]
mod mysql;
#[cfg(all(feature = "postgres", feature = "conformance"))]
mod postgres;
#[cfg(all(feature = "redis", feature = "postgres", feature = "conformance"))]
mod redis;
#[cfg(all(feature = "redis", feature = "postgres", feature = "conformance"))]
mod redis_cluster;
#[cfg(all(feature = "redis", feature = "conformance"))]
mod redis_store;
#[cfg(all(feature = "sqlite", feature = "conformance"))]
mod sqlite;
mod stores_props;
