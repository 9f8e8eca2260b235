//! The stores and lock providers, one folder per backend: `memory` (always
//! compiled), the one SQL store (`sql`) with a dialect each for SQLite, PostgreSQL
//! and MySQL/MariaDB, and Redis. Each is re-exported at the crate root under its
//! own name (`jobwheel::postgres`, …) behind its Cargo feature.

pub(crate) mod connect;
pub mod memory;

#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
pub(crate) mod sql;

#[cfg(feature = "sqlite")]
pub mod sqlite;

#[cfg(feature = "postgres")]
pub mod postgres;

#[cfg(feature = "mysql")]
pub mod mysql;

#[cfg(feature = "redis")]
pub mod redis;
