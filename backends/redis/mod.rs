//! The Redis backend (feature `redis`): [`RedisStore`], a complete job store, and
//! [`RedisLocks`], fenced leases on one Redis node.
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

mod decode;
mod locks;
mod log;
mod scripts;
mod store;

pub use locks::RedisLocks;
pub use store::RedisStore;

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
