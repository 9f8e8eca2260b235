//! [`RemoteGroup`]: the scheduler's side of an executor group — its settings, its
//! instances (fixed or registered), and the requests about runs (beat, log, kill);
//! dispatching runs is in `dispatch.rs`, sharding broadcast in `shards.rs`.
//!
//! A remote run holds one of the scheduler node's slots while it is dispatched and
//! awaited, like a local handler: one slot pool bounds a node's local and remote
//! work, and the engine's lease renewal, fencing, timeouts, retries and alarms apply
//! unchanged. The run's result is written by the node that dispatched it, fenced by
//! the run's token; if that node dies, another takes the job over when the lease
//! runs out and the late result is never applied.

use super::auth::Secret;
use super::client::{CallError, Client};
use super::members::{Members, Registry};
use super::protocol::{self, Beat, LogChunk};
use super::routing::Router;
use crate::error::{Error, Result};
use std::sync::Arc;
use std::time::Duration;

/// How a [`RemoteGroup`] talks to its instances.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteGroupConfig {
    /// Time limit of a request other than a result poll (default 5 s).
    pub request_timeout: Duration,
    /// How long one result poll waits for the run to end (default 25 s, at most 30 s).
    pub result_wait: Duration,
    /// Failed result polls in a row after which the run is reported lost (a
    /// failure, retried by the job's policy; default 3).
    pub lost_after: u32,
    /// Largest answer accepted (default 1 MiB).
    pub max_answer_bytes: usize,
    /// A registered instance whose last beat is older than this, on the store's
    /// clock, is dead: no run goes to it, and it is removed from the store
    /// (default 90 s, three of an instance's default 30 s beats).
    pub dead_after: Duration,
    /// How long a node uses the registered instances it read before reading them
    /// again (default 10 s).
    pub refresh: Duration,
    /// PEM certificates trusted for `https://` instances besides the platform's
    /// roots (a private CA, or a self-signed instance certificate); `None` (default):
    /// the platform's roots only.
    pub tls_roots_pem: Option<String>,
}

impl Default for RemoteGroupConfig {
    fn default() -> Self {
        RemoteGroupConfig {
            request_timeout: Duration::from_secs(5),
            result_wait: Duration::from_secs(25),
            lost_after: 3,
            max_answer_bytes: 1 << 20,
            dead_after: Duration::from_secs(90),
            refresh: Duration::from_secs(10),
            tls_roots_pem: None,
        }
    }
}

setters!(RemoteGroupConfig {
    request_timeout: Duration,
    result_wait: Duration,
    lost_after: u32,
    max_answer_bytes: usize,
    dead_after: Duration,
    refresh: Duration,
} optional {
    tls_roots_pem: String,
});

impl RemoteGroupConfig {
    /// The certificates of [`tls_roots_pem`](Self::tls_roots_pem) (none without it).
    /// Errors: [`Error::Invalid`] on `remote.tls_roots_pem` when it is not PEM or
    /// holds no certificate.
    pub(crate) fn tls_roots(&self) -> Result<Vec<reqwest::Certificate>> {
        let Some(pem) = &self.tls_roots_pem else {
            return Ok(Vec::new());
        };
        let roots = reqwest::Certificate::from_pem_bundle(pem.as_bytes())
            .map_err(|e| Error::invalid("remote.tls_roots_pem", "(PEM)", e.to_string()))?;
        if roots.is_empty() {
            return Err(Error::invalid(
                "remote.tls_roots_pem",
                "(PEM)",
                "holds no CERTIFICATE block",
            ));
        }
        Ok(roots)
    }

    /// Checks every field. Errors: [`Error::Invalid`] naming it.
    pub fn validate(&self) -> Result<()> {
        for (field, d, lo, hi) in [
            ("remote.request_timeout", self.request_timeout, 10, 300_000),
            ("remote.result_wait", self.result_wait, 0, 30_000),
            ("remote.dead_after", self.dead_after, 100, 3_600_000),
            ("remote.refresh", self.refresh, 10, 600_000),
        ] {
            let ms = d.as_millis();
            if !(lo..=hi).contains(&ms) {
                return Err(Error::invalid(
                    field,
                    format!("{d:?}"),
                    format!("must be {lo} ms-{hi} ms"),
                ));
            }
        }
        if !(1..=100).contains(&self.lost_after) {
            return Err(Error::invalid(
                "remote.lost_after",
                self.lost_after,
                "must be 1-100",
            ));
        }
        self.tls_roots()?;
        if !(1024..=(64 << 20)).contains(&self.max_answer_bytes) {
            return Err(Error::invalid(
                "remote.max_answer_bytes",
                self.max_answer_bytes,
                "must be 1 KiB-64 MiB",
            ));
        }
        Ok(())
    }
}

/// An executor group as a scheduler node sees it: its instances (fixed, or
/// registered by heartbeat in the scheduler's store), its secret, and the routing
/// state. Cheap to clone.
#[derive(Clone)]
pub struct RemoteGroup {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) name: String,
    members: Members,
    pub(super) client: Client,
    pub(super) router: Router,
    pub(super) config: RemoteGroupConfig,
}

impl std::fmt::Debug for RemoteGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteGroup")
            .field("name", &self.inner.name)
            .field(
                "instances",
                &match &self.inner.members {
                    Members::Fixed(list) => format!("{list:?}"),
                    Members::Registered(_) => "registered".to_string(),
                },
            )
            .finish_non_exhaustive()
    }
}

/// Checks an instance address: `http://` or `https://`, a host and a port, no
/// path, query or credentials. Answers it without a trailing slash.
pub(super) fn instance_url(url: &str) -> Result<String> {
    let bad = |why: &str| Error::invalid("remote.instances", url, why.to_string());
    let u = reqwest::Url::parse(url).map_err(|e| bad(&e.to_string()))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(bad("must be an http:// or https:// address"));
    }
    if u.host_str().is_none() || !u.username().is_empty() || u.password().is_some() {
        return Err(bad("must name a host, without credentials"));
    }
    if u.path() != "/" || u.query().is_some() || u.fragment().is_some() {
        return Err(bad("must be the instance's base address, without a path"));
    }
    Ok(u.as_str().trim_end_matches('/').to_string())
}

impl RemoteGroup {
    /// A group of fixed instance addresses (`http://10.0.0.5:9101`), signed with
    /// `secret` (the group's shared secret, at least 16 bytes).
    ///
    /// Errors: [`Error::Invalid`] on `job.remote.group`, `remote.secret` (empty,
    /// short or a sample value: there is no default), or `remote.instances` (none,
    /// or an address that is not a base `http(s)://` URL).
    pub fn fixed<I, S>(
        name: impl Into<String>,
        secret: impl AsRef<[u8]>,
        instances: I,
    ) -> Result<RemoteGroup>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let name = name.into();
        crate::placement::check_group(&name)?;
        let secret = Secret::new("remote.secret", secret)?;
        let mut list = instances
            .into_iter()
            .map(|u| instance_url(u.as_ref()))
            .collect::<Result<Vec<_>>>()?;
        list.sort();
        list.dedup();
        if list.is_empty() {
            return Err(Error::invalid(
                "remote.instances",
                "[]",
                "name at least one instance",
            ));
        }
        RemoteGroup::new(name, secret, Members::Fixed(list))
    }

    /// A group whose instances register themselves by heartbeat in the scheduler's
    /// store ([`ExecutorServerBuilder::register`](super::ExecutorServerBuilder::register)),
    /// signed with `secret`. A run goes only to an instance that beat within
    /// [`dead_after`](RemoteGroupConfig::dead_after) on the store's clock and serves
    /// the job's handler; the list is read again every
    /// [`refresh`](RemoteGroupConfig::refresh). The group reads the store of the
    /// first scheduler it is added to.
    ///
    /// Errors: [`Error::Invalid`] on `job.remote.group` or `remote.secret`.
    pub fn registered(name: impl Into<String>, secret: impl AsRef<[u8]>) -> Result<RemoteGroup> {
        let name = name.into();
        crate::placement::check_group(&name)?;
        let secret = Secret::new("remote.secret", secret)?;
        RemoteGroup::new(name, secret, Members::Registered(Registry::new()))
    }

    fn new(name: String, secret: Secret, members: Members) -> Result<RemoteGroup> {
        let config = RemoteGroupConfig::default();
        let client = Client::new(secret, &config)?;
        Ok(RemoteGroup {
            inner: Arc::new(Inner {
                name,
                members,
                client,
                router: Router::default(),
                config,
            }),
        })
    }

    /// Reads registered instances from `store` (the scheduler's, when the group is
    /// added to it).
    pub(crate) fn attach(&self, store: Arc<dyn crate::store::JobStore>) {
        if let Members::Registered(r) = &self.inner.members {
            r.attach(store);
        }
    }

    /// The same group with `config`. Errors: [`RemoteGroupConfig::validate`].
    pub fn with_config(self, config: RemoteGroupConfig) -> Result<RemoteGroup> {
        config.validate()?;
        let i = &self.inner;
        Ok(RemoteGroup {
            inner: Arc::new(Inner {
                name: i.name.clone(),
                members: match &i.members {
                    Members::Fixed(list) => Members::Fixed(list.clone()),
                    Members::Registered(_) => Members::Registered(Registry::new()),
                },
                client: Client::new(i.client.secret().clone(), &config)?,
                router: Router::default(),
                config,
            }),
        })
    }

    /// The group's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// How long a registered instance stays live after its last beat
    /// ([`RemoteGroupConfig::dead_after`]).
    pub fn dead_after(&self) -> Duration {
        self.inner.config.dead_after
    }

    /// The instances runs may go to now, in address order: the fixed list, or the
    /// live registered instances (read from the store when the last read is older
    /// than [`refresh`](RemoteGroupConfig::refresh)).
    ///
    /// Errors: reading the store failed and nothing was read before, or a
    /// registered group was not added to a scheduler.
    pub async fn instances(&self) -> Result<Vec<String>> {
        self.serving(None).await
    }

    pub(super) async fn serving(&self, handler: Option<&str>) -> Result<Vec<String>> {
        let i = &self.inner;
        i.members
            .serving(&i.name, handler, i.config.dead_after, i.config.refresh)
            .await
    }

    /// How many instances get runs now, read afresh (for the live-executors gauge;
    /// it leaves the list dispatches use as it is).
    pub(crate) async fn live_count(&self) -> Result<usize> {
        let i = &self.inner;
        i.members.count_live(&i.name, i.config.dead_after).await
    }

    /// Asks an instance whether it is alive.
    ///
    /// Errors: [`Error::Backend`] when it does not answer, refuses, or answers
    /// without the group's signature.
    pub async fn beat(&self, instance: &str) -> Result<Beat> {
        self.inner
            .client
            .call(instance, protocol::BEAT, &serde_json::json!({}), None)
            .await
            .map_err(|e| backend("beat", e))
    }

    /// Asks an instance for a run's log lines from `offset` (of one shard's, for a
    /// run dispatched as shards: `shard` is its index).
    ///
    /// Errors: as [`beat`](Self::beat).
    pub async fn log(
        &self,
        instance: &str,
        run_id: i64,
        token: u64,
        shard: Option<u32>,
        offset: u64,
    ) -> Result<LogChunk> {
        let q = protocol::LogRequest {
            run_id,
            token,
            offset,
            limit: 1_000,
            shard,
        };
        self.inner
            .client
            .call(instance, protocol::LOG, &q, None)
            .await
            .map_err(|e| backend("log", e))
    }

    /// Asks every live instance of the group to cancel run `run_id` (all its shards);
    /// returns the addresses of those that were running or queueing it. An instance
    /// that cannot be reached is passed over.
    ///
    /// Errors: as [`instances`](Self::instances).
    pub async fn kill_everywhere(&self, run_id: i64, token: u64) -> Result<Vec<String>> {
        let mut killed = Vec::new();
        for instance in self.instances().await? {
            if self
                .kill(&instance, run_id, token, None)
                .await
                .unwrap_or(false)
            {
                killed.push(instance);
            }
        }
        Ok(killed)
    }

    /// Asks an instance to cancel a run (one shard of it, for a run dispatched as
    /// shards); answers whether it was queued or running.
    ///
    /// Errors: as [`beat`](Self::beat).
    pub async fn kill(
        &self,
        instance: &str,
        run_id: i64,
        token: u64,
        shard: Option<u32>,
    ) -> Result<bool> {
        let q = protocol::KillRequest {
            run_id,
            token,
            shard,
        };
        let r: protocol::KillReply = self
            .inner
            .client
            .call(instance, protocol::KILL, &q, None)
            .await
            .map_err(|e| backend("kill", e))?;
        Ok(r.killed)
    }
}

fn backend(op: &'static str, e: CallError) -> Error {
    Error::backend(
        "remote",
        op,
        matches!(e, CallError::Unreachable(_)),
        e.to_string(),
    )
}

#[async_trait::async_trait]
impl crate::executor::ExecutorGroup for RemoteGroup {
    fn name(&self) -> &str {
        RemoteGroup::name(self)
    }

    fn attach(&self, store: Arc<dyn crate::store::JobStore>) {
        RemoteGroup::attach(self, store);
    }

    async fn kill_everywhere(&self, run_id: i64, token: u64) -> Result<Vec<String>> {
        RemoteGroup::kill_everywhere(self, run_id, token).await
    }

    async fn live_count(&self) -> Result<usize> {
        RemoteGroup::live_count(self).await
    }
}
