//! One connection type for one Redis server and for a Redis Cluster.

use super::NAME;
use crate::error::{Error, Result};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::Slot;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// A connection to one Redis server (a reconnecting connection manager) or to a
/// Redis Cluster (the `redis` crate's cluster client, which follows `MOVED` and
/// `ASK` redirections and a failover's new primaries, and is opened again after a
/// call that failed on the connection, see [`Cluster`]). On a cluster every script's
/// keys must hash to one slot.
#[derive(Clone)]
pub(crate) enum RedisConn {
    /// One server.
    Server(redis::aio::ConnectionManager),
    /// A Redis Cluster.
    Cluster(Arc<Cluster>),
}

/// A cluster client and its current connection. The `redis` crate refreshes its map
/// of the slots when a node answers `MOVED` or a connection drops, but not after a
/// call that timed out: a connection whose calls to a dead primary time out can keep
/// sending them there after the failover. So a call that fails on the connection
/// (timeout, I/O, dropped) opens a new one, which reads the topology afresh (at most
/// once a second), and the caller's next call uses it.
pub(crate) struct Cluster {
    client: ClusterClient,
    conn: RwLock<ClusterConnection>,
    opened: tokio::sync::Mutex<Instant>,
}

impl Cluster {
    fn current(&self) -> ClusterConnection {
        self.conn.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// After a call: one that failed on the connection (timeout, I/O, dropped) opens
    /// a new connection for the next call.
    async fn after<T>(&self, out: &redis::RedisResult<T>) {
        if let Err(e) = out
            && (e.is_timeout() || e.is_io_error() || e.is_connection_dropped())
        {
            self.reopen().await;
        }
    }

    /// Opens a new connection unless one was opened within the last second.
    async fn reopen(&self) {
        let Ok(mut last) = self.opened.try_lock() else {
            return;
        };
        if last.elapsed() < Duration::from_secs(1) {
            return;
        }
        *last = Instant::now();
        match self.client.get_async_connection().await {
            Ok(c) => *self.conn.write().unwrap_or_else(|e| e.into_inner()) = c,
            Err(e) => tracing::warn!(error = %e, "reopening the Redis Cluster connection failed"),
        }
    }
}

impl RedisConn {
    /// Whether this is a cluster connection (scripts are then grouped by slot).
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, RedisConn::Cluster(_))
    }
}

/// Commands and pipelines on either connection, so the store's reads are written
/// once: on a cluster a command goes to the node serving its key (a pipeline's keys
/// must share a slot), and a call that fails on the connection reopens it as
/// [`eval`] does.
impl redis::aio::ConnectionLike for RedisConn {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        match self {
            RedisConn::Server(c) => c.req_packed_command(cmd),
            RedisConn::Cluster(cluster) => Box::pin(async move {
                let out = cluster.current().req_packed_command(cmd).await;
                cluster.after(&out).await;
                out
            }),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        match self {
            RedisConn::Server(c) => c.req_packed_commands(pipeline, offset, count),
            RedisConn::Cluster(cluster) => Box::pin(async move {
                let out = cluster
                    .current()
                    .req_packed_commands(pipeline, offset, count)
                    .await;
                cluster.after(&out).await;
                out
            }),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            RedisConn::Server(c) => c.get_db(),
            RedisConn::Cluster(_) => 0,
        }
    }
}

impl RedisConn {
    /// `WAIT replicas timeout` on the node that serves `key` (on one server, the
    /// server): how many replicas acknowledged every write sent on this connection
    /// before it, once `replicas` did or `timeout` passed.
    pub(crate) async fn wait(
        &self,
        key: &str,
        replicas: u16,
        timeout: Duration,
    ) -> redis::RedisResult<i64> {
        let mut cmd = redis::cmd("WAIT");
        cmd.arg(replicas).arg(timeout.as_millis() as u64);
        match self {
            RedisConn::Server(c) => cmd.query_async(&mut c.clone()).await,
            RedisConn::Cluster(cluster) => {
                use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
                let to = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                    Route::with_key(key, SlotAddr::Master),
                ));
                let out = cluster.current().route_command(cmd, to).await;
                cluster.after(&out).await;
                Ok(redis::from_redis_value(out?)?)
            }
        }
    }
}

impl From<redis::aio::ConnectionManager> for RedisConn {
    fn from(c: redis::aio::ConnectionManager) -> Self {
        RedisConn::Server(c)
    }
}

/// Runs `script` (whose source is `code`) with `keys` and `args`: `EVALSHA`, and
/// on `NOSCRIPT` the source with `EVAL`, both sent to the node that serves the
/// keys. (The `redis` crate's own retry loads the script on every primary it knows,
/// and during a failover that includes the dead one, so every call would wait for
/// its timeout until the client learns the new topology.)
pub(crate) async fn eval<T: redis::FromRedisValue>(
    conn: &RedisConn,
    script: &redis::Script,
    code: &str,
    keys: &[String],
    args: impl redis::ToRedisArgs + Send + Sync,
) -> redis::RedisResult<T> {
    match conn {
        RedisConn::Server(c) => eval_on(&mut c.clone(), script, code, keys, &args).await,
        RedisConn::Cluster(cluster) => {
            let out = eval_on(&mut cluster.current(), script, code, keys, &args).await;
            cluster.after(&out).await;
            out
        }
    }
}

async fn eval_on<T: redis::FromRedisValue>(
    conn: &mut impl redis::aio::ConnectionLike,
    script: &redis::Script,
    code: &str,
    keys: &[String],
    args: impl redis::ToRedisArgs + Send + Sync,
) -> redis::RedisResult<T> {
    let call = |verb: &str, first: &str| {
        let mut cmd = redis::cmd(verb);
        cmd.arg(first).arg(keys.len()).arg(keys).arg(&args);
        cmd
    };
    match call("EVALSHA", script.get_hash()).query_async(conn).await {
        Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
            call("EVAL", code).query_async(conn).await
        }
        other => other,
    }
}

/// Opens a cluster connection from seed URLs (`redis://127.0.0.1:7000`; any node of
/// the cluster will do, more than one in case one is down), failing after `timeout`
/// with the seeds and the cause. Errors: [`Error::Invalid`] naming `redis.cluster`
/// for no seed or a URL that cannot be parsed; [`Error::Backend`] otherwise.
pub(crate) async fn open_cluster(seeds: &[&str], timeout: Duration) -> Result<RedisConn> {
    if seeds.is_empty() {
        return Err(Error::invalid(
            "redis.cluster",
            "",
            "needs at least one seed URL",
        ));
    }
    let shown = seeds
        .iter()
        .map(|s| crate::error::redact_url(s))
        .collect::<Vec<_>>()
        .join(",");
    let client = redis::cluster::ClusterClient::builder(seeds.iter().copied())
        .connection_timeout(timeout)
        .response_timeout(timeout)
        .build()
        .map_err(|e| Error::invalid("redis.cluster", shown.clone(), e.to_string()))?;
    let conn = match tokio::time::timeout(timeout, client.get_async_connection()).await {
        Err(_) => format!("timed out after {timeout:?}"),
        Ok(Err(e)) => e.to_string(),
        Ok(Ok(c)) => {
            return Ok(RedisConn::Cluster(Arc::new(Cluster {
                client,
                conn: RwLock::new(c),
                opened: tokio::sync::Mutex::new(Instant::now()),
            })));
        }
    };
    Err(Error::backend(
        NAME,
        "connect",
        true,
        format!("{shown}: {conn}"),
    ))
}

/// The positions of `keys` grouped by the slot each hashes to, in first-seen order:
/// one group per slot, each group's positions in order. On one server there is no
/// slot to respect: everything is one group.
pub(crate) fn by_slot(cluster: bool, keys: &[String]) -> Vec<Vec<usize>> {
    if !cluster {
        return vec![(0..keys.len()).collect()];
    }
    let mut index: HashMap<Slot, usize> = HashMap::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let g = *index.entry(Slot::for_key(k)).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[g].push(i);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_group_by_slot_on_a_cluster_only() {
        let keys: Vec<String> = ["a{x}", "b{y}", "c{x}", "d{y}", "e{z}"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(by_slot(false, &keys), vec![vec![0, 1, 2, 3, 4]]);
        assert_eq!(by_slot(true, &keys), vec![vec![0, 2], vec![1, 3], vec![4]]);
    }
}
