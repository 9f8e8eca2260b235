//! One line to a ready backend: [`connect`] reads a URL and returns a migrated store
//! and its natural lock provider; [`BackendConfig`] is the same, loadable with serde.
//!
//! Errors never echo a password: URLs in messages have their user information
//! replaced by `***`.

use crate::error::{Error, Result, redact_url as redact};
use crate::lock::LockProvider;
use crate::store::JobStore;
use serde::Deserialize;
use std::sync::Arc;

/// A store and the lock provider that goes with it, ready for
/// [`SchedulerBuilder::backend`](crate::SchedulerBuilder::backend).
#[derive(Clone)]
#[non_exhaustive]
pub struct Backend {
    /// The store (migrated unless the config said not to).
    pub store: Arc<dyn JobStore>,
    /// Leases on the same server as the store (in-process for `memory:`).
    pub locks: Arc<dyn LockProvider>,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("store", &self.store.name())
            .field("locks", &self.locks.name())
            .finish()
    }
}

/// Where and how to connect, e.g. from a TOML `[backend]` table:
///
/// ```toml
/// url = "postgres://app@db/app"
/// prefix = "jobwheel_"    # table or key prefix (optional)
/// max_connections = 16    # SQL pool size (optional)
/// migrate = true          # run pending migrations on connect (default)
/// connect_timeout = "5s"  # then fail naming the server and the cause (default)
/// ```
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct BackendConfig {
    /// The backend's URL; its scheme picks the backend.
    pub url: String,
    /// Table prefix (SQL) or key prefix (Redis); the backend's default when `None`.
    #[serde(default)]
    pub prefix: Option<String>,
    /// Pool size of an SQL backend; the backend's default when `None`.
    #[serde(default)]
    pub max_connections: Option<u32>,
    /// Whether to run pending migrations on connect (default `true`).
    #[serde(default = "yes")]
    pub migrate: bool,
    /// How long connecting may take before it fails, naming the server and the cause
    /// (default 5 s).
    #[serde(default = "connect_timeout", with = "humantime_serde")]
    pub connect_timeout: std::time::Duration,
}

fn connect_timeout() -> std::time::Duration {
    std::time::Duration::from_secs(5)
}

fn yes() -> bool {
    true
}

impl std::fmt::Debug for BackendConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendConfig")
            .field("url", &redact(&self.url))
            .field("prefix", &self.prefix)
            .field("max_connections", &self.max_connections)
            .field("migrate", &self.migrate)
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

/// Connects to `url` with the backend's defaults and migrates it:
///
/// | URL | store | locks | feature |
/// |---|---|---|---|
/// | `memory:` | [`MemoryStore`](crate::memory::MemoryStore) | [`LocalLocks`](crate::memory::LocalLocks) | always |
/// | `sqlite://jobs.db?mode=rwc`, `sqlite::memory:` | `SqliteStore` | its `locks()` | `sqlite` |
/// | `postgres://…`, `postgresql://…` | `PgStore` | its `locks()` | `postgres` |
/// | `mysql://…`, `mariadb://…` | `MySqlStore` | its `locks()` | `mysql` |
/// | `redis://…`, `rediss://…` | `RedisStore` | its `locks()` | `redis` |
/// | `redis+cluster://[user:password@]host:port,host:port…[?wait_replicas=1&wait_timeout_ms=500]` | `RedisStore` on a Redis Cluster, sharded (waiting for replicas with both parameters, see `RedisStore::wait_for_replicas`) | its `locks()` | `redis` |
///
/// Errors never echo a password: URLs in messages have their user information
/// replaced by `***`.
///
/// Errors: [`Error::Invalid`] naming `backend.url` for an unknown scheme or one whose
/// feature is not compiled in, or the backend's own errors (a bad URL, a failed
/// connection, [`Error::SchemaTooNew`]).
pub async fn connect(url: &str) -> Result<Backend> {
    BackendConfig::new(url).connect().await
}

/// Applies the config's prefix and pool size to an SQL store's builder, connects,
/// and pairs the store with its own `locks()` (migrating it unless told not to).
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
macro_rules! sql_backend {
    ($config:expr, $builder:expr) => {{
        let mut b = $builder;
        if let Some(p) = &$config.prefix {
            b = b.prefix(p.as_str());
        }
        if let Some(n) = $config.max_connections {
            b = b.max_connections(n);
        }
        b = b.connect_timeout($config.connect_timeout);
        let store = b.build().await?;
        $config
            .finish(store.clone(), store.locks(), store.migrate())
            .await
    }};
}

impl BackendConfig {
    /// A config for `url` with every other field at its default.
    pub fn new(url: impl Into<String>) -> Self {
        BackendConfig {
            url: url.into(),
            prefix: None,
            max_connections: None,
            migrate: true,
            connect_timeout: connect_timeout(),
        }
    }

    /// With this table or key prefix.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }

    /// With this SQL pool size.
    pub fn max_connections(mut self, n: u32) -> Self {
        self.max_connections = Some(n);
        self
    }

    /// With this connect timeout.
    pub fn connect_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Whether to migrate on connect.
    pub fn migrate(mut self, migrate: bool) -> Self {
        self.migrate = migrate;
        self
    }

    /// Connects (and migrates, unless `migrate` is false). See [`connect`].
    pub async fn connect(&self) -> Result<Backend> {
        let scheme = self.url.split(':').next().unwrap_or_default();
        match scheme {
            "memory" => {
                let store = crate::backends::memory::MemoryStore::new();
                Ok(Backend {
                    locks: Arc::new(store.locks()),
                    store: Arc::new(store),
                })
            }
            #[cfg(feature = "sqlite")]
            "sqlite" => sql_backend!(
                self,
                crate::backends::sqlite::SqliteStore::builder(self.url.as_str())
            ),
            #[cfg(feature = "postgres")]
            "postgres" | "postgresql" => {
                sql_backend!(
                    self,
                    crate::backends::postgres::PgStore::builder(self.url.as_str())
                )
            }
            #[cfg(feature = "mysql")]
            "mysql" | "mariadb" => {
                let url = match self.url.strip_prefix("mariadb:") {
                    Some(rest) => format!("mysql:{rest}"),
                    None => self.url.clone(),
                };
                sql_backend!(self, crate::backends::mysql::MySqlStore::builder(url))
            }
            #[cfg(feature = "redis")]
            "redis" | "rediss" => {
                let prefix = self.prefix.as_deref().unwrap_or("jobwheel:");
                let store = crate::backends::redis::RedisStore::open(
                    &self.url,
                    prefix,
                    self.connect_timeout,
                )
                .await?;
                let locks = store.locks();
                self.finish(store.clone(), locks, store.migrate()).await
            }
            #[cfg(feature = "redis")]
            "redis+cluster" => {
                let prefix = self.prefix.as_deref().unwrap_or("jobwheel:");
                let seeds = cluster_seeds(&self.url)?;
                let seeds: Vec<&str> = seeds.iter().map(String::as_str).collect();
                let mut store = crate::backends::redis::RedisStore::open_cluster(
                    &seeds,
                    prefix,
                    self.connect_timeout,
                )
                .await?;
                if let Some((replicas, timeout)) = cluster_wait(&self.url)? {
                    store = store.wait_for_replicas(replicas, timeout)?;
                }
                let locks = store.locks();
                self.finish(store.clone(), locks, store.migrate()).await
            }
            // Reached only for a backend whose feature is off.
            #[allow(unreachable_patterns)]
            "sqlite" | "postgres" | "postgresql" | "mysql" | "mariadb" | "redis" | "rediss"
            | "redis+cluster" => {
                let feature = match scheme {
                    "postgresql" => "postgres",
                    "mariadb" => "mysql",
                    "rediss" | "redis+cluster" => "redis",
                    s => s,
                };
                Err(Error::invalid(
                    "backend.url",
                    redact(&self.url),
                    format!("jobwheel was built without the `{feature}` feature"),
                ))
            }
            _ => Err(Error::invalid(
                "backend.url",
                redact(&self.url),
                "unknown scheme: expected memory:, sqlite:, postgres:, mysql:, mariadb:, redis: or redis+cluster:",
            )),
        }
    }

    #[cfg(any(
        feature = "sqlite",
        feature = "postgres",
        feature = "mysql",
        feature = "redis"
    ))]
    async fn finish(
        &self,
        store: impl JobStore,
        locks: impl LockProvider,
        migrate: impl std::future::Future<Output = Result<()>>,
    ) -> Result<Backend> {
        if self.migrate {
            migrate.await?;
        }
        Ok(Backend {
            store: Arc::new(store),
            locks: Arc::new(locks),
        })
    }
}

/// The seed URLs of a `redis+cluster://[user:password@]host:port,host:port…` URL:
/// `redis://[user:password@]host:port` each. Errors: [`Error::Invalid`] naming
/// `backend.url` (password hidden) when no host is given or one is empty.
#[cfg(feature = "redis")]
fn cluster_seeds(url: &str) -> Result<Vec<String>> {
    let rest = url.strip_prefix("redis+cluster://").unwrap_or_default();
    let rest = rest.split(['/', '?']).next().unwrap_or_default();
    let (auth, hosts) = match rest.rsplit_once('@') {
        Some((auth, hosts)) => (format!("{auth}@"), hosts),
        None => (String::new(), rest),
    };
    let seeds: Vec<String> = hosts
        .split(',')
        .map(|h| format!("redis://{auth}{h}"))
        .collect();
    if hosts.is_empty() || hosts.split(',').any(str::is_empty) {
        return Err(Error::invalid(
            "backend.url",
            redact(url),
            "expected redis+cluster://host:port,host:port (one node or more of the cluster)",
        ));
    }
    Ok(seeds)
}

/// `wait_replicas` and `wait_timeout_ms` of a `redis+cluster://` URL's query, both
/// or neither. Errors: [`Error::Invalid`] naming `backend.url` for one without the
/// other or a value that is not a number.
#[cfg(feature = "redis")]
fn cluster_wait(url: &str) -> Result<Option<(u16, std::time::Duration)>> {
    let query = url.split_once('?').map_or("", |(_, q)| q);
    let param = |name: &str| {
        query
            .split('&')
            .find_map(|p| p.strip_prefix(name)?.strip_prefix('='))
    };
    let bad = |why: &str| Error::invalid("backend.url", redact(url), why.to_string());
    match (param("wait_replicas"), param("wait_timeout_ms")) {
        (None, None) => Ok(None),
        (Some(n), Some(ms)) => {
            let n = n
                .parse()
                .map_err(|_| bad("wait_replicas must be a number of replicas"))?;
            let ms: u64 = ms
                .parse()
                .map_err(|_| bad("wait_timeout_ms must be a number of milliseconds"))?;
            Ok(Some((n, std::time::Duration::from_millis(ms))))
        }
        _ => Err(bad("wait_replicas and wait_timeout_ms go together")),
    }
}

#[cfg(test)]
mod tests {
    #[cfg(feature = "redis")]
    #[test]
    fn a_cluster_url_gives_one_seed_per_node() {
        use super::cluster_seeds;
        assert_eq!(
            cluster_seeds("redis+cluster://:pw@10.0.0.1:7000,10.0.0.2:7001/").unwrap(),
            ["redis://:pw@10.0.0.1:7000", "redis://:pw@10.0.0.2:7001"]
        );
        assert_eq!(
            cluster_seeds("redis+cluster://h:1").unwrap(),
            ["redis://h:1"]
        );
        assert_eq!(super::cluster_wait("redis+cluster://h:1").unwrap(), None);
        assert_eq!(
            super::cluster_wait("redis+cluster://h:1?wait_replicas=1&wait_timeout_ms=500").unwrap(),
            Some((1, std::time::Duration::from_millis(500)))
        );
        for bad in [
            "redis+cluster://:pw@h:1?wait_replicas=1",
            "redis+cluster://:pw@h:1?wait_replicas=x&wait_timeout_ms=5",
        ] {
            let e = super::cluster_wait(bad).unwrap_err();
            assert_eq!(e.field(), Some("backend.url"), "{bad}");
            assert!(!e.to_string().contains("pw@"), "{e}");
        }
        for bad in [
            "redis+cluster://",
            "redis+cluster://:pw@",
            "redis+cluster://h:1,,h:2",
        ] {
            let e = cluster_seeds(bad).unwrap_err();
            assert_eq!(e.field(), Some("backend.url"), "{bad}");
            assert!(!e.to_string().contains("pw@"), "{e}");
        }
    }
}
