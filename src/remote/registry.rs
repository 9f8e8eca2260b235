//! The registration endpoint a scheduler serves, so that executor instances that do
//! not write to the schedulers' store themselves — a service in another language, or
//! a Rust one without the store's credentials — register by heartbeat over the
//! [protocol](crate::remote::protocol): `POST /v1/registry/beat` with their
//! [`ExecutorInfo`] every beat, `POST /v1/registry/leave` when they stop.
//!
//! Each request is signed with the secret of the group its body names, as every
//! request of the protocol is (timestamp in the replay window, nonce never reused,
//! answers signed over the nonce). A request naming a group the endpoint does not
//! serve is refused exactly as a bad signature is: checked against a decoy secret
//! (derived from the served groups' secrets, unknown without them) and refused
//! signed with it, so the status, body, headers and time of the answer do not tell
//! a caller without a group's secret whether the group exists. A beat is written with
//! [`NodeRegistry::executor_beat`](crate::store::NodeRegistry::executor_beat), so it
//! carries the store's clock, and schedulers whose group is
//! [`RemoteGroup::registered`](super::RemoteGroup::registered) see the instance as
//! they see one that beats into the store directly.
//!
//! ```no_run
//! use jobwheel::remote::RegistryServer;
//! # async fn run(scheduler: jobwheel::Scheduler) -> jobwheel::Result<()> {
//! let secret = std::env::var("JOBWHEEL_GROUP_SECRET").unwrap_or_default();
//! let registry = RegistryServer::builder(scheduler.store().clone())
//!     .group("billing", secret)?
//!     .bind("0.0.0.0:9100")
//!     .await?;
//! println!("executors register at http://{}", registry.local_addr());
//! # Ok(()) }
//! ```

use super::auth::{Secret, Verifier};
use super::protocol::{self, LeaveRequest, Left, Registered};
use super::signed::{OptionNames, ServerOptions, Signed, Verifies};
use crate::error::{Error, Result};
use crate::record::ExecutorInfo;
use crate::store::JobStore;
use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::response::Response;
use axum::routing::post;
use serde::Deserialize;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Builds a [`RegistryServer`].
#[must_use = "a builder does nothing until `bind` or `serve`"]
pub struct RegistryServerBuilder {
    store: Arc<dyn JobStore>,
    groups: HashMap<String, Secret>,
    /// The replay window, body limit and TLS, as the executor server has them.
    options: ServerOptions,
}

/// The names the endpoint's options are refused under.
const NAMES: OptionNames = OptionNames {
    server: "registry",
    replay_window: "registry.replay_window",
    max_body_bytes: "registry.max_body_bytes",
    tls: ("registry.tls.cert", "registry.tls.key"),
};

impl std::fmt::Debug for RegistryServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryServerBuilder")
            .field("groups", &self.groups.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// A running registration endpoint.
#[derive(Debug)]
pub struct RegistryServer {
    addr: SocketAddr,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl RegistryServer {
    /// Starts a builder for an endpoint that registers instances in `store` (the
    /// schedulers' store: `scheduler.store().clone()`). It serves no group until
    /// [`group`](RegistryServerBuilder::group) names one with its secret.
    pub fn builder(store: Arc<dyn JobStore>) -> RegistryServerBuilder {
        RegistryServerBuilder {
            store,
            groups: HashMap::new(),
            options: ServerOptions::new(64 << 10),
        }
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting requests and waits for those in progress.
    pub async fn shutdown(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

impl RegistryServerBuilder {
    /// Accepts registrations for `group`, signed with its `secret` (the group's
    /// shared secret, at least 16 bytes: the one its instances and schedulers use).
    ///
    /// Errors: [`Error::Invalid`] on `registry.group` (a bad name, or named twice)
    /// or `registry.secret` (empty, short or a sample value: there is no default).
    pub fn group(mut self, group: impl Into<String>, secret: impl AsRef<[u8]>) -> Result<Self> {
        let group = group.into();
        crate::placement::check_group(&group).map_err(|e| match e {
            Error::Invalid { value, reason, .. } => Error::invalid("registry.group", value, reason),
            other => other,
        })?;
        let secret = Secret::new("registry.secret", secret)?;
        if self.groups.contains_key(&group) {
            return Err(Error::invalid("registry.group", &group, "named twice"));
        }
        self.groups.insert(group, secret);
        Ok(self)
    }

    /// How far a request's timestamp may be from this server's clock (default 60 s,
    /// 1 s to 1 h); nonces are remembered this long.
    pub fn replay_window(mut self, window: Duration) -> Self {
        self.options.replay_window = window;
        self
    }

    /// Largest request body accepted (default 64 KiB, 1 KiB to 1 MiB); larger ones
    /// get 413.
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.options.max_body_bytes = bytes;
        self
    }

    /// Serves HTTPS (rustls) with `cert_pem` (PEM chain, leaf first) and `key_pem`.
    /// The signatures apply either way.
    pub fn tls(mut self, cert_pem: impl Into<Vec<u8>>, key_pem: impl Into<Vec<u8>>) -> Self {
        self.options.tls = Some((cert_pem.into(), key_pem.into()));
        self
    }

    fn validate(&self) -> Result<()> {
        if self.groups.is_empty() {
            return Err(Error::invalid(
                "registry.group",
                "none",
                "serve at least one group",
            ));
        }
        self.options.validate(&NAMES, (1024, 1 << 20))
    }

    /// The endpoint's routes, to serve beside others on one listener (`jobwheel
    /// serve` does); TLS, if set, is the listener's business then.
    ///
    /// Errors: [`Error::Invalid`] naming a bad setting.
    pub fn router(self) -> Result<Router> {
        self.validate()?;
        Ok(self.app())
    }

    fn app(self) -> Router {
        let window = self.options.replay_window;
        let decoy = decoy_secret(&self.groups);
        let state = Arc::new(Registry {
            store: self.store,
            decoy: Arc::new(Verifier::new(decoy, window, 100_000)),
            groups: self
                .groups
                .into_iter()
                .map(|(g, s)| (g, Arc::new(Verifier::new(s, window, 100_000))))
                .collect(),
        });
        Router::new()
            .route(protocol::REGISTER, post(beat))
            .route(protocol::LEAVE, post(leave))
            .layer(DefaultBodyLimit::max(self.options.max_body_bytes))
            .with_state(state)
    }

    /// Binds `addr` and serves until [`RegistryServer::shutdown`].
    ///
    /// Errors: [`Error::Invalid`] naming a bad setting; [`Error::Backend`] when the
    /// address cannot be bound.
    pub async fn bind(self, addr: impl tokio::net::ToSocketAddrs) -> Result<RegistryServer> {
        self.validate()?;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| Error::backend("registry", "bind", false, e))?;
        self.serve(listener)
    }

    /// Serves on a bound listener until [`RegistryServer::shutdown`].
    ///
    /// Errors: as [`bind`](Self::bind).
    pub fn serve(self, listener: tokio::net::TcpListener) -> Result<RegistryServer> {
        self.validate()?;
        let options = self.options.clone();
        let (addr, stop, task) = options.serve(&NAMES, listener, self.app())?;
        tracing::info!(%addr, "executor registration endpoint listening");
        Ok(RegistryServer { addr, stop, task })
    }
}

struct Registry {
    store: Arc<dyn JobStore>,
    groups: HashMap<String, Arc<Verifier>>,
    /// What a request naming no served group is checked against and refused with.
    decoy: Arc<Verifier>,
}

/// A secret no caller knows without the served groups' secrets: the SHA-256 of
/// them all, in name order, under a label of its own.
fn decoy_secret(groups: &HashMap<String, Secret>) -> Secret {
    use sha2::{Digest, Sha256};
    let mut names: Vec<&String> = groups.keys().collect();
    names.sort();
    let mut h = Sha256::new();
    h.update(b"jobwheel-registry-decoy\n");
    for n in names {
        h.update(n.as_bytes());
        h.update(b"\n");
        h.update(groups[n].as_bytes());
        h.update(b"\n");
    }
    Secret::new("registry.decoy", hex::encode(h.finalize())).expect("64 hex digits make a secret")
}

/// Just the group a body names, to find the secret that must have signed it.
#[derive(Deserialize)]
struct Names {
    group: String,
}

impl Verifies for Registry {
    /// The verifier of the group the body names; for an unknown group (or a body
    /// that names none), the decoy's, which refuses it as a bad signature would be.
    fn verifier_for(&self, body: &[u8]) -> std::result::Result<Arc<Verifier>, Box<Response>> {
        Ok(serde_json::from_slice::<Names>(body)
            .ok()
            .and_then(|n| self.groups.get(&n.group).cloned())
            .unwrap_or_else(|| self.decoy.clone()))
    }
}

async fn beat(State(r): State<Arc<Registry>>, q: Signed<ExecutorInfo>) -> Response {
    let Signed { body: info, reply } = q;
    if let Err(e) = info.validate() {
        return reply.refuse(400, "bad_request", e.to_string());
    }
    match r.store.executor_beat(&info).await {
        Ok(at) => reply.ok(&Registered { at: at.as_millis() }),
        Err(e) => {
            tracing::warn!(group = %info.group, address = %info.address, error = %e, "registering an executor failed");
            reply.refuse(
                503,
                "unavailable",
                format!("the store refused the beat: {e}"),
            )
        }
    }
}

async fn leave(State(r): State<Arc<Registry>>, q: Signed<LeaveRequest>) -> Response {
    match r
        .store
        .deregister_executor(&q.body.group, &q.body.address)
        .await
    {
        Ok(removed) => q.reply.ok(&Left { removed }),
        Err(e) => q
            .reply
            .refuse(503, "unavailable", format!("the store refused: {e}")),
    }
}
