//! The Redis backend (feature `redis`): [`RedisStore`], a complete job store, and
//! [`RedisLocks`], fenced leases, each on one Redis server or a Redis Cluster.
//!
//! ```no_run
//! # async fn t() -> jobwheel::Result<()> {
//! let store = jobwheel::redis::RedisStore::connect("redis://127.0.0.1:6379/0").await?;
//! store.migrate().await?;
//! let locks = store.locks();
//! # Ok(()) }
//! ```
//!
//! Every conditional write of the store (upsert, start, finish, alarm claim, purge,
//! reap) is one Lua script, so a batch of starts or finishes is one round trip and
//! atomic on the server; the store's clock is Redis `TIME`.
//!
//! # What a single Redis node guarantees, and what it does not
//!
//! * While the node is up, a grant is `SET NX PX` inside a Lua script, so a key has one
//!   holder at a time, and the fencing token is issued in the same atomic step.
//! * Tokens are `max(counter + 1, server TIME in µs)`: they strictly increase per key
//!   even when the server restarts with nothing on disk, because the restarted
//!   server's clock is past every token issued before (at most one grant per key per
//!   microsecond could break this; grants of one key are seconds apart).
//! * It does **not** survive failover: with replication, a replica promoted before it
//!   received a grant can grant the same key again, and a paused holder can outlive
//!   its lease (Kleppmann's critique of Redlock applies to any lease). What keeps a
//!   stale holder from committing is the store's fencing check: a store refuses a
//!   start with an older token and a finish whose token is not the job's last one.
//!
//! Every lock key lives under the configured prefix (default `jobwheel:`).
//!
//! # On a Redis Cluster
//!
//! [`RedisLocks::connect_cluster`] runs the same
//! scripts on a cluster: a lease's two keys share a hash tag, and a batch is split
//! by slot, one script per slot, all at once. A failover can lose a grant the
//! replica had not received; the promoted replica may then grant the key again, to a
//! larger token (its clock's µs), and the store's fencing refuses the older holder.
//!
//! [`RedisStore::connect_cluster`] splits the store into shards (a count fixed when
//! the keyspace is first migrated, [`DEFAULT_SHARDS`] unless chosen), each under a
//! hash tag of its own spread evenly over the slots; a job's keys are its shard's,
//! so every script runs on one node (see [`RedisStore`]). Replication is
//! asynchronous, so a failover can lose the last writes a dying primary
//! acknowledged; what that repeats is in `docs/book/src/reliability.md` ("The Redis store on
//! a Redis Cluster").

mod audit;
mod conn;
mod decode;
mod forward;
mod lease_scripts;
mod leases;
mod locks;
mod log;
mod prepared;
mod registry_scripts;
mod release_scripts;
mod releases;
mod routed;
mod routed_log;
mod scripts;
mod shard;
mod store;

pub use locks::RedisLocks;
pub use store::{DEFAULT_SHARDS, MAX_SHARDS, RedisStore};

use crate::error::Error;

const NAME: &str = "redis";

/// Maps a driver error; I/O, dropped connections, refusals and timeouts are temporary.
pub(crate) fn redis_err(operation: &'static str) -> impl Fn(redis::RedisError) -> Error {
    move |e| {
        let temporary = e.is_io_error()
            || e.is_connection_dropped()
            || e.is_connection_refusal()
            || e.is_timeout();
        Error::backend(NAME, operation, temporary, e)
    }
}

/// How long connecting may take before it fails with the server's address and the
/// cause.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Opens a reconnecting connection to `url`. One plain connection is tried first
/// under `timeout`, so a refused port, a failed login or a bad database number is
/// reported at once, naming the server and the cause (the connection manager would
/// retry each for about ten seconds). Errors: [`Error::Invalid`] naming `redis.url`
/// (password hidden) for a URL that cannot be parsed; [`Error::Backend`] otherwise.
pub(crate) async fn open(
    url: &str,
    timeout: std::time::Duration,
) -> crate::error::Result<redis::aio::ConnectionManager> {
    let client = redis::Client::open(url)
        .map_err(|e| Error::invalid("redis.url", crate::error::redact_url(url), e.to_string()))?;
    let server = client.get_connection_info().addr().to_string();
    let failed = |temporary: bool, cause: String| {
        Error::backend(NAME, "connect", temporary, format!("{server}: {cause}"))
    };
    match tokio::time::timeout(timeout, client.get_multiplexed_async_connection()).await {
        Err(_) => return Err(failed(true, format!("timed out after {timeout:?}"))),
        Ok(Err(e)) => {
            let temporary = e.is_io_error() || e.is_connection_refusal() || e.is_timeout();
            return Err(failed(temporary, e.to_string()));
        }
        Ok(Ok(_probe)) => {}
    }
    let config = redis::aio::ConnectionManagerConfig::new().set_connection_timeout(Some(timeout));
    match tokio::time::timeout(
        timeout,
        redis::aio::ConnectionManager::new_with_config(client, config),
    )
    .await
    {
        Err(_) => Err(failed(true, format!("timed out after {timeout:?}"))),
        Ok(r) => r.map_err(|e| failed(true, e.to_string())),
    }
}

/// Where the leases of a keyspace under `prefix` on the server of `url` live, as
/// [`LockProvider::home`](crate::LockProvider::home) names it: the server's address,
/// its database and the prefix (`redis 127.0.0.1:6379/0 jobwheel:`). `None` for a
/// URL that cannot be parsed.
pub(crate) fn home_of(url: &str, prefix: &str) -> Option<String> {
    let info = redis::Client::open(url).ok()?.get_connection_info().clone();
    Some(format!(
        "{NAME} {}/{} {prefix}",
        info.addr(),
        info.redis_settings().db()
    ))
}

/// The home of a keyspace under `prefix` reached through a connection handed over
/// by the application, whose server is not known: one of its own, which only the
/// store's [`locks`](RedisStore::locks) share.
fn connection_home(prefix: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{NAME} connection #{n} {prefix}")
}

/// A key prefix: 1-100 printable ASCII characters, no spaces.
fn check_prefix(prefix: &str) -> crate::error::Result<()> {
    if !prefix.is_empty() && prefix.len() <= 100 && prefix.bytes().all(|b| b.is_ascii_graphic()) {
        Ok(())
    } else {
        Err(Error::invalid(
            "redis.prefix",
            prefix,
            "must be 1-100 printable ASCII characters without spaces",
        ))
    }
}
