use super::conn::{RedisConn, by_slot};
use super::{NAME, redis_err};
use crate::error::Result;
use crate::lock::{Lease, LockProvider, LockRequest};
use crate::time::{Timestamp, duration_ms};
use async_trait::async_trait;
use redis::Script;
use redis::aio::ConnectionManager;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// KEYS: lock1, counter1, lock2, counter2, … ARGV: owner, ttl1, ttl2, …
/// Returns token1, expires1, token2, expires2, … (token 0: not granted).
const ACQUIRE: &str = r"
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now_ms = math.floor(now_us / 1000)
local out = {}
for i = 1, #KEYS / 2 do
  local lock, counter, ttl = KEYS[2 * i - 1], KEYS[2 * i], tonumber(ARGV[i + 1])
  if redis.call('EXISTS', lock) == 1 then
    out[2 * i - 1] = 0
    out[2 * i] = 0
  else
    local token = redis.call('INCR', counter)
    if token < now_us then
      token = now_us
      -- Lua numbers are doubles: write integers with %.0f, never with tostring.
      redis.call('SET', counter, string.format('%.0f', token))
    end
    -- The counter outlives the lease by a day, then goes: a later grant's token is
    -- the clock's µs, past every token of a day before (LockProvider::forget_idle).
    redis.call('PEXPIRE', counter, ttl + 86400000)
    redis.call('SET', lock, ARGV[1] .. ':' .. string.format('%.0f', token), 'PX', ttl)
    out[2 * i - 1] = token
    out[2 * i] = now_ms + ttl
  end
end
return out
";

/// KEYS: lock1, lock2, … ARGV: ttl, holder1, holder2, … (holder = owner:token).
/// Returns expiry (0: not held) per key.
const RENEW: &str = r"
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[i + 1] then
    redis.call('PEXPIRE', KEYS[i], ttl)
    out[i] = now_ms + ttl
  else
    out[i] = 0
  end
end
return out
";

/// KEYS: lock1, … ARGV: holder1, … Returns 1 (released) or 0 per key.
const RELEASE: &str = r"
local out = {}
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[i] then
    redis.call('DEL', KEYS[i])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
";

/// Fenced leases on one Redis server or a Redis Cluster. A lease's key and its token
/// counter share a hash tag (`lock:{<key>}`, `token:{<key>}`), so each lease is one
/// slot; a batched call is one script call (one round trip) on one server, and one
/// per slot among its keys, all at once, on a cluster. See the [module docs](super)
/// for what this does and does not guarantee.
#[derive(Clone)]
pub struct RedisLocks {
    conn: RedisConn,
    prefix: Arc<str>,
    acquire: Arc<Script>,
    renew: Arc<Script>,
    release: Arc<Script>,
    /// The [`home`](LockProvider::home) these leases name: the store's when they
    /// are a one-keyspace store's own (its job hashes hold the leases then).
    pub(super) home: Option<Arc<str>>,
}

impl fmt::Debug for RedisLocks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLocks")
            .field("prefix", &self.prefix)
            .field("cluster", &self.conn.is_cluster())
            .finish_non_exhaustive()
    }
}

impl RedisLocks {
    /// Connects to `url` (`redis://127.0.0.1:6379`) with a reconnecting connection
    /// manager; keys go under `jobwheel:`. They name the server, its database and
    /// the prefix as their [`home`](LockProvider::home): beside a one-keyspace
    /// [`RedisStore`](super::RedisStore) under `jobwheel:` on the same server and
    /// database, a scheduler keeps its leases in the store's job hashes instead.
    pub async fn connect(url: &str) -> Result<Self> {
        let conn = super::open(url, super::CONNECT_TIMEOUT).await?;
        let mut locks = RedisLocks::new(conn, "jobwheel:")?;
        locks.home = super::home_of(url, "jobwheel:").map(Into::into);
        Ok(locks)
    }

    /// Connects to a Redis Cluster through its seed nodes (`redis://127.0.0.1:7000`,
    /// any of them will do), with keys under `prefix` (checked as for
    /// [`new`](Self::new); `jobwheel:` is the usual one; a prefix with a hash tag of
    /// its own, `{jobs}:`, puts every key in one slot). Connecting and each answer
    /// time out after [`CONNECT_TIMEOUT`](super::CONNECT_TIMEOUT), and a call that
    /// fails on the connection opens it again (the topology read afresh), so a node
    /// whose calls went to a primary that died follows the failover. Errors name
    /// `redis.cluster` for no seed or a URL that cannot be parsed.
    pub async fn connect_cluster(seeds: &[&str], prefix: &str) -> Result<Self> {
        super::check_prefix(prefix)?;
        let conn = super::conn::open_cluster(seeds, super::CONNECT_TIMEOUT).await?;
        Ok(RedisLocks::checked(conn, prefix))
    }

    /// On the application's existing connection manager, with keys under `prefix`
    /// (1-100 printable ASCII characters without spaces; an error names
    /// `redis.prefix` otherwise).
    pub fn new(conn: ConnectionManager, prefix: &str) -> Result<Self> {
        super::check_prefix(prefix)?;
        Ok(RedisLocks::checked(conn.into(), prefix))
    }

    /// With a prefix already checked.
    pub(super) fn checked(conn: RedisConn, prefix: &str) -> Self {
        RedisLocks {
            conn,
            prefix: prefix.into(),
            acquire: Arc::new(Script::new(ACQUIRE)),
            renew: Arc::new(Script::new(RENEW)),
            release: Arc::new(Script::new(RELEASE)),
            home: None,
        }
    }

    fn lock_key(&self, key: &str) -> String {
        format!("{}lock:{{{key}}}", self.prefix)
    }

    fn counter_key(&self, key: &str) -> String {
        format!("{}token:{{{key}}}", self.prefix)
    }

    /// Runs `call` for each group of positions of `keys` that share a slot (one
    /// group on one server), all at once, and puts each group's answers back at its
    /// positions: `call` answers `per` values per position.
    async fn per_slot<F, Fut>(&self, keys: &[String], per: usize, call: F) -> Result<Vec<i64>>
    where
        F: Fn(Vec<usize>) -> Fut,
        Fut: std::future::Future<Output = Result<Vec<i64>>>,
    {
        let groups = by_slot(self.conn.is_cluster(), keys);
        let answers = futures::future::join_all(groups.iter().map(|g| call(g.clone()))).await;
        let mut out = vec![0; keys.len() * per];
        for (g, answer) in groups.iter().zip(answers) {
            let answer = answer?;
            if answer.len() != g.len() * per {
                return Err(crate::error::Error::backend(
                    NAME,
                    "locks",
                    false,
                    format!("{} values for {} keys", answer.len(), g.len()),
                ));
            }
            for (k, &pos) in g.iter().enumerate() {
                out[pos * per..(pos + 1) * per].copy_from_slice(&answer[k * per..(k + 1) * per]);
            }
        }
        Ok(out)
    }
}

impl RedisLocks {
    /// One script call ([`eval`](super::conn::eval)), its error mapped.
    async fn eval(
        &self,
        script: &Script,
        code: &str,
        keys: &[String],
        args: &[String],
        operation: &'static str,
    ) -> Result<Vec<i64>> {
        super::conn::eval(&self.conn, script, code, keys, args)
            .await
            .map_err(redis_err(operation))
    }
}

fn holder(l: &Lease) -> String {
    format!("{}:{}", l.owner, l.token)
}

#[async_trait]
impl LockProvider for RedisLocks {
    fn name(&self) -> &'static str {
        NAME
    }

    fn home(&self) -> Option<String> {
        self.home.as_deref().map(str::to_string)
    }

    async fn acquire(&self, owner: &str, requests: &[LockRequest]) -> Result<Vec<Option<Lease>>> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = requests.iter().map(|r| self.lock_key(&r.key)).collect();
        let keys = &keys;
        let out = self
            .per_slot(keys, 2, |group| async move {
                let mut ks = Vec::with_capacity(2 * group.len());
                let mut args = vec![owner.to_string()];
                for &i in &group {
                    ks.push(keys[i].clone());
                    ks.push(self.counter_key(&requests[i].key));
                }
                for &i in &group {
                    args.push(duration_ms(requests[i].ttl).max(1).to_string());
                }
                self.eval(&self.acquire, ACQUIRE, &ks, &args, "acquire")
                    .await
            })
            .await?;
        Ok(requests
            .iter()
            .zip(out.chunks(2))
            .map(|(r, pair)| {
                (pair[0] > 0).then(|| Lease {
                    key: r.key.clone(),
                    owner: owner.to_string(),
                    token: pair[0] as u64,
                    expires_at: Timestamp::from_millis(pair[1]),
                })
            })
            .collect())
    }

    async fn renew(&self, leases: &[Lease], ttl: Duration) -> Result<Vec<Option<Lease>>> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = leases.iter().map(|l| self.lock_key(&l.key)).collect();
        let keys = &keys;
        let out = self
            .per_slot(keys, 1, |group| async move {
                let ks: Vec<String> = group.iter().map(|&i| keys[i].clone()).collect();
                let mut args = vec![duration_ms(ttl).max(1).to_string()];
                args.extend(group.iter().map(|&i| holder(&leases[i])));
                self.eval(&self.renew, RENEW, &ks, &args, "renew").await
            })
            .await?;
        Ok(leases
            .iter()
            .zip(out)
            .map(|(l, e)| {
                (e > 0).then(|| Lease {
                    expires_at: Timestamp::from_millis(e),
                    ..l.clone()
                })
            })
            .collect())
    }

    async fn release(&self, leases: &[Lease]) -> Result<Vec<bool>> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = leases.iter().map(|l| self.lock_key(&l.key)).collect();
        let keys = &keys;
        let out = self
            .per_slot(keys, 1, |group| async move {
                let ks: Vec<String> = group.iter().map(|&i| keys[i].clone()).collect();
                let args: Vec<String> = group.iter().map(|&i| holder(&leases[i])).collect();
                self.eval(&self.release, RELEASE, &ks, &args, "release")
                    .await
            })
            .await?;
        Ok(out.into_iter().map(|r| r == 1).collect())
    }
}
