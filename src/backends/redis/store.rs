//! [`RedisStore`]: the Redis job store, one keyspace on one server or shards spread
//! over the slots of a Redis Cluster, and how it finds a job's, a run's and an id's
//! shard.

use super::conn::RedisConn;
use super::prepared::Scripts;
use super::shard::{SCHEMA, Shard};
use super::{NAME, redis_err};
use crate::error::{Error, Result};
use crate::job::JobId;
use redis::aio::ConnectionManager;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

/// Shards of a store on a Redis Cluster whose keyspace has no shard count yet.
pub const DEFAULT_SHARDS: u16 = 8;
/// The most shards a store can have (ids give each shard 2048 / n per millisecond).
pub const MAX_SHARDS: u16 = 64;
/// Slots of a Redis Cluster.
const SLOTS: u32 = 16384;

/// How the keyspace is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Layout {
    /// One keyspace under the prefix (one server, or one slot with a hash-tagged
    /// prefix).
    Single,
    /// `n` shards, each under the prefix and a hash tag of its own.
    Sharded(u16),
}

/// A complete [`JobStore`](crate::JobStore) on Redis (feature `redis`): one server,
/// or a Redis Cluster with the jobs spread over shards.
///
/// Jobs are hashes with a sorted set as the due index; every conditional write
/// (upsert, start, finish, claim, purge, reap) is one Lua script, so each batch is one
/// round trip and atomic on the server. The store's clock is Redis `TIME`. The key
/// layout is in the `scripts` module's docs.
///
/// **Sharded** (on a cluster always, [`connect_cluster`](Self::connect_cluster); on
/// one server with [`with_shards`](Self::with_shards)): the keyspace is split into a
/// fixed number of shards, chosen when the keyspace is first migrated and stored
/// under `<prefix>shards`. Each shard's keys carry a hash tag of their own, chosen so
/// the shards' slots are spread evenly over `0..16384` (so over every primary of a
/// cluster whose slots are split evenly), and a job lives on the shard its id hashes
/// to (FNV-1a, mod the count). Every script touches one shard, so one slot: a start,
/// finish, renew or trigger runs on the node that serves the job's shard. Reads that
/// span jobs (the due fires, the job list, the run log, the outbox, the audit log)
/// ask every shard at once and merge in the order the contract gives. Nodes,
/// executors and credentials live on shard 0. Run, alarm and audit ids carry their
/// shard (`id mod n`) and order by the millisecond they were issued. A release of a
/// job on another shard is kept by the parent's finish on the parent's shard and
/// delivered to the child's right after it (and by every maintenance pass until it
/// is), at most once per release.
///
/// Durability is Redis's: run it with AOF (`appendonly yes`) when the run log and the
/// schedule must survive a restart. What a failover can repeat is in the module docs.
#[derive(Clone)]
pub struct RedisStore {
    pub(super) conn: RedisConn,
    pub(super) prefix: Arc<str>,
    pub(super) layout: Layout,
    pub(super) shards: Arc<[Shard]>,
    /// Where the next alarm claim starts, so every shard's outbox is served in turn.
    pub(super) claim_from: Arc<AtomicUsize>,
    /// Replicas that must acknowledge each start and finish, and how long to wait.
    pub(super) wait: Option<(u16, std::time::Duration)>,
    /// The shard count the keyspace had when this store connected, if any.
    pub(super) stored: Option<u16>,
    /// Where the job hashes' leases live (the server and the prefix) when the store
    /// is one keyspace: the [`home`](crate::LockProvider::home) its
    /// [`locks`](Self::locks) name, so a scheduler keeps its leases in the job
    /// hashes ([`JobLeases`](crate::store::JobLeases)). `None` when sharded.
    pub(super) lease_home: Option<Arc<str>>,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.prefix)
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

/// The hash tag of shard `i` of `n`: the first `<i>.<k>` whose slot lies in the
/// shard's even share of the slots, `[i * 16384 / n, (i + 1) * 16384 / n)`.
fn tag(i: u16, n: u16) -> String {
    (0u32..)
        .map(|k| format!("{i}.{k}"))
        .find(|t| {
            let slot = u32::from(crc16::State::<crc16::XMODEM>::calculate(t.as_bytes())) % SLOTS;
            slot * u32::from(n) / SLOTS == u32::from(i)
        })
        .unwrap_or_default()
}

/// The refusal of `asked` shards for a keyspace that has `stored`.
fn other_count(asked: u16, stored: i64) -> Error {
    Error::invalid(
        "redis.shards",
        asked,
        format!(
            "the keyspace has {stored} shards; the count is changed offline (docs/book/src/architecture.md, \"The Redis store on a Redis Cluster\")"
        ),
    )
}

/// The shard of job `id` among `n`: FNV-1a (64 bits) of its bytes, mod `n`. Fixed
/// forever: a keyspace's jobs were placed by it.
pub(super) fn shard_of_job(id: &str, n: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % n as u64) as usize
}

impl RedisStore {
    /// Connects to `url` (`redis://127.0.0.1:6379/0`) with a reconnecting connection
    /// manager; keys go under `jobwheel:`.
    pub async fn connect(url: &str) -> Result<Self> {
        RedisStore::connect_with_prefix(url, "jobwheel:").await
    }

    /// Like [`connect`](Self::connect), with keys under `prefix`.
    pub async fn connect_with_prefix(url: &str, prefix: &str) -> Result<Self> {
        RedisStore::open(url, prefix, super::CONNECT_TIMEOUT).await
    }

    /// Like [`connect_with_prefix`](Self::connect_with_prefix), failing after
    /// `timeout` (what [`BackendConfig::connect_timeout`](crate::BackendConfig) sets).
    pub(crate) async fn open(
        url: &str,
        prefix: &str,
        timeout: std::time::Duration,
    ) -> Result<Self> {
        let conn = super::open(url, timeout).await?;
        RedisStore::on(conn.into(), prefix, super::home_of(url, prefix)).await
    }

    /// On the application's existing connection manager, with keys under `prefix`
    /// (1-100 printable ASCII characters without spaces). Reads the keyspace's shard
    /// count (none: one keyspace).
    pub async fn new(conn: ConnectionManager, prefix: &str) -> Result<Self> {
        RedisStore::on(conn.into(), prefix, Some(super::connection_home(prefix))).await
    }

    /// Connects to a Redis Cluster from seed URLs (`redis://127.0.0.1:7101`; any
    /// node will do, more than one in case one is down), with keys under `prefix`
    /// (which then has no `{` or `}`: each shard adds its own hash tag). The shard
    /// count is the keyspace's (from its first [`migrate`](Self::migrate)), or
    /// [`DEFAULT_SHARDS`] for a new one; [`with_shards`](Self::with_shards) chooses
    /// another before the first migrate. Errors as
    /// [`RedisLocks::connect_cluster`](super::RedisLocks::connect_cluster).
    pub async fn connect_cluster(seeds: &[&str], prefix: &str) -> Result<Self> {
        RedisStore::open_cluster(seeds, prefix, super::CONNECT_TIMEOUT).await
    }

    /// Like [`connect_cluster`](Self::connect_cluster), failing after `timeout`.
    pub(crate) async fn open_cluster(
        seeds: &[&str],
        prefix: &str,
        timeout: std::time::Duration,
    ) -> Result<Self> {
        let conn = super::conn::open_cluster(seeds, timeout).await?;
        RedisStore::on(conn, prefix, None).await
    }

    /// The store under `prefix` on `conn`, laid out as its keyspace says; `home`
    /// names where its job hashes' leases live when it is one keyspace.
    async fn on(conn: RedisConn, prefix: &str, home: Option<String>) -> Result<Self> {
        super::check_prefix(prefix)?;
        let stored: Option<i64> = redis::cmd("GET")
            .arg(format!("{prefix}shards"))
            .query_async(&mut conn.clone())
            .await
            .map_err(redis_err("connect"))?;
        let stored = stored.map(|n| u16::try_from(n).unwrap_or(0));
        let layout = match stored {
            Some(n) => Layout::Sharded(n),
            None if conn.is_cluster() => Layout::Sharded(DEFAULT_SHARDS),
            None => Layout::Single,
        };
        let mut store = RedisStore::laid_out(conn, prefix, layout)?;
        store.stored = stored;
        if layout == Layout::Single {
            store.lease_home = home.map(Into::into);
        }
        Ok(store)
    }

    fn laid_out(conn: RedisConn, prefix: &str, layout: Layout) -> Result<Self> {
        let scripts = Arc::new(Scripts::new());
        let shard = |prefix: String| Shard {
            conn: conn.clone(),
            prefix: prefix.into(),
            scripts: scripts.clone(),
        };
        let shards: Vec<Shard> = match layout {
            Layout::Single => vec![shard(prefix.to_string())],
            Layout::Sharded(n) => {
                if !(1..=MAX_SHARDS).contains(&n) {
                    return Err(Error::invalid(
                        "redis.shards",
                        n,
                        format!("must be 1 to {MAX_SHARDS}"),
                    ));
                }
                if prefix.contains(['{', '}']) {
                    return Err(Error::invalid(
                        "redis.prefix",
                        prefix,
                        "a sharded store's prefix has no braces: each shard adds its own hash tag",
                    ));
                }
                (0..n)
                    .map(|i| shard(format!("{prefix}{{{}}}:", tag(i, n))))
                    .collect()
            }
        };
        Ok(RedisStore {
            conn,
            prefix: prefix.into(),
            layout,
            shards: shards.into(),
            claim_from: Arc::new(AtomicUsize::new(0)),
            wait: None,
            stored: None,
            lease_home: None,
        })
    }

    /// This store with `shards` shards (1 to [`MAX_SHARDS`]): for a keyspace not
    /// migrated yet, whose first [`migrate`](Self::migrate) stores the count. A
    /// keyspace keeps its count: `migrate` refuses another. Errors:
    /// [`Error::Invalid`] naming `redis.shards` outside the range or other than the
    /// count the keyspace had when this store connected, `redis.prefix` for a prefix
    /// with braces.
    pub fn with_shards(self, shards: u16) -> Result<Self> {
        if let Some(stored) = self.stored.filter(|&n| n != shards) {
            return Err(other_count(shards, i64::from(stored)));
        }
        let (wait, stored) = (self.wait, self.stored);
        let mut store = RedisStore::laid_out(self.conn, &self.prefix, Layout::Sharded(shards))?;
        store.wait = wait;
        store.stored = stored;
        Ok(store)
    }

    /// This store waiting, after each batch of starts and of finishes and each
    /// delivery of releases across shards, until `replicas` replicas of the primary
    /// that wrote it acknowledged the write (`WAIT`), or `timeout` passed (then a
    /// warning is logged naming the shard and how many did; the write stands). With
    /// every replica of each primary counted, a failover to any of them keeps every
    /// start and finish the engine was told of (see `docs/book/src/reliability.md`). A `WAIT`
    /// holds the connection it is sent on until it returns, so calls behind it wait
    /// too. Errors: [`Error::Invalid`] naming `redis.wait_replicas` for 0 replicas,
    /// `redis.wait_timeout` for a timeout of zero or not below the calls' own
    /// timeout ([`CONNECT_TIMEOUT`](super::CONNECT_TIMEOUT)).
    pub fn wait_for_replicas(
        mut self,
        replicas: u16,
        timeout: std::time::Duration,
    ) -> Result<Self> {
        if replicas == 0 {
            return Err(Error::invalid(
                "redis.wait_replicas",
                replicas,
                "must be at least 1",
            ));
        }
        if timeout.is_zero() || timeout >= super::CONNECT_TIMEOUT {
            return Err(Error::invalid(
                "redis.wait_timeout",
                format!("{timeout:?}"),
                format!("must be above zero and below {:?}", super::CONNECT_TIMEOUT),
            ));
        }
        self.wait = Some((replicas, timeout));
        Ok(self)
    }

    /// With [`wait_for_replicas`](Self::wait_for_replicas): waits for the replicas
    /// of the primary serving `shard` to acknowledge what was written to it, and
    /// logs a shortfall or a failure (the write is done either way).
    pub(super) async fn replicated(&self, shard: &Shard, what: &'static str) {
        let Some((replicas, timeout)) = self.wait else {
            return;
        };
        match shard
            .conn
            .wait(&shard.key("schema"), replicas, timeout)
            .await
        {
            Ok(acked) if acked >= i64::from(replicas) => {}
            Ok(acked) => tracing::warn!(
                shard = %shard.prefix, acked, wanted = replicas, ?timeout, what,
                "fewer replicas acknowledged the write in time than the store waits for; a failover now could lose it"
            ),
            Err(e) => {
                tracing::warn!(shard = %shard.prefix, error = %e, what, "waiting for the replicas failed")
            }
        }
    }

    /// How many shards the keyspace has (1 when it is one keyspace).
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    /// The key prefix of each shard, in shard order (the store's prefix alone when
    /// it is one keyspace): every key of shard `i` starts with the `i`th.
    pub fn shard_prefixes(&self) -> Vec<String> {
        self.shards.iter().map(|s| s.prefix.to_string()).collect()
    }

    /// The shard that holds job `id` (an index into
    /// [`shard_prefixes`](Self::shard_prefixes)).
    pub fn shard_of(&self, id: &JobId) -> usize {
        shard_of_job(id.as_str(), self.shards.len())
    }

    /// The connection manager on one server, for sharing with
    /// [`RedisLocks`](super::RedisLocks); `None` on a cluster.
    pub fn connection(&self) -> Option<&ConnectionManager> {
        match &self.conn {
            RedisConn::Server(c) => Some(c),
            RedisConn::Cluster(_) => None,
        }
    }

    /// Leases on this store's connection (one server or the cluster), with keys
    /// under its prefix. On one keyspace they name the store's
    /// [`home`](crate::LockProvider::home), so a scheduler given them keeps each
    /// job's lease in the job's hash, claiming and starting a fire in one script;
    /// sharded, they are lease keys of their own.
    pub fn locks(&self) -> super::RedisLocks {
        let mut locks = super::RedisLocks::checked(self.conn.clone(), &self.prefix);
        locks.home = self.lease_home.clone();
        locks
    }

    /// Writes the schema version (and, sharded, the shard count and each shard's
    /// place) under the prefix. Idempotent. Refuses a keyspace written by a newer
    /// jobwheel, a shard count other than the keyspace's, and sharding a keyspace
    /// that holds an unsharded store (moving one is an offline step, described in
    /// `docs/book/src/architecture.md`, "The Redis store on a Redis Cluster").
    pub async fn migrate(&self) -> Result<()> {
        let mut conn = self.conn.clone();
        let refuse = |why: String| Error::backend(NAME, "migrate", false, why);
        if let Layout::Sharded(n) = self.layout {
            // Two reads: the keys are in different slots.
            let old_schema: Option<i64> = redis::cmd("GET")
                .arg(format!("{}schema", self.prefix))
                .query_async(&mut conn)
                .await
                .map_err(redis_err("migrate"))?;
            let stored: Option<i64> = redis::cmd("GET")
                .arg(format!("{}shards", self.prefix))
                .query_async(&mut conn)
                .await
                .map_err(redis_err("migrate"))?;
            if stored.is_none() && old_schema.is_some() {
                return Err(refuse(format!(
                    "the keyspace under {:?} holds an unsharded store; it cannot be sharded in place",
                    self.prefix
                )));
            }
            // Written unless present; the answer is the count there before (Redis 7).
            let before: Option<i64> = redis::cmd("SET")
                .arg(format!("{}shards", self.prefix))
                .arg(n)
                .arg("NX")
                .arg("GET")
                .query_async(&mut conn)
                .await
                .map_err(redis_err("migrate"))?;
            if let Some(stored) = before.filter(|&s| s != i64::from(n)) {
                return Err(other_count(n, stored));
            }
        }
        let mut keys = vec![format!("{}schema", self.prefix)];
        if self.layout != Layout::Single {
            for (i, shard) in self.shards.iter().enumerate() {
                let _: () = redis::cmd("HSET")
                    .arg(shard.key("shard"))
                    .arg("of")
                    .arg(self.shards.len())
                    .arg("at")
                    .arg(i)
                    .query_async(&mut conn)
                    .await
                    .map_err(redis_err("migrate"))?;
                keys.push(shard.key("schema"));
            }
        }
        for key in keys {
            let (found,): (i64,) = redis::pipe()
                .atomic()
                .cmd("SET")
                .arg(&key)
                .arg(SCHEMA)
                .arg("NX")
                .ignore()
                .get(&key)
                .query_async(&mut conn)
                .await
                .map_err(redis_err("migrate"))?;
            if found > SCHEMA {
                return Err(refuse(format!(
                    "keyspace schema {found} is newer than this jobwheel's {SCHEMA}"
                )));
            }
        }
        Ok(())
    }

    /// The schema version stored under the prefix.
    pub(super) async fn stored_schema(&self) -> Result<crate::store::SchemaVersion> {
        let found: Option<i64> = redis::cmd("GET")
            .arg(format!("{}schema", self.prefix))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_err("schema"))?;
        Ok(crate::store::SchemaVersion {
            found,
            known: SCHEMA,
        })
    }

    /// The shard of job `id`.
    pub(super) fn job_shard(&self, id: &JobId) -> &Shard {
        &self.shards[self.shard_of(id)]
    }

    /// The index of the shard that issued id `id` (a run's, an alarm's, an audit
    /// entry's): `id mod n`.
    pub(super) fn id_index(&self, id: i64) -> usize {
        id.rem_euclid(self.shards.len() as i64) as usize
    }

    /// The shard that issued id `id`.
    pub(super) fn id_shard(&self, id: i64) -> &Shard {
        &self.shards[self.id_index(id)]
    }

    /// Shard 0: nodes, executors and credentials.
    pub(super) fn home(&self) -> &Shard {
        &self.shards[0]
    }

    /// Whether there is more than one shard.
    pub(super) fn is_split(&self) -> bool {
        self.shards.len() > 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_tags_spread_over_the_slots_and_jobs_over_the_shards() {
        let n = 8;
        for i in 0..n {
            let t = tag(i, n);
            let slot = u32::from(crc16::State::<crc16::XMODEM>::calculate(t.as_bytes())) % SLOTS;
            assert_eq!(
                slot * u32::from(n) / SLOTS,
                u32::from(i),
                "tag {t} slot {slot}"
            );
        }
        let mut counts = [0usize; 8];
        for k in 0..8000 {
            counts[shard_of_job(&format!("job-{k}"), 8)] += 1;
        }
        assert!(
            counts.iter().all(|&c| (800..1200).contains(&c)),
            "{counts:?}"
        );
        assert_eq!(shard_of_job("anything", 1), 0);
    }
}
