//! The registration endpoint a scheduler serves, so that executor instances that do
//! not write to the schedulers' store themselves — a service in another language, or
//! a Rust one without the store's credentials — register by heartbeat over the
//! [protocol](crate::executors::protocol): `POST /v1/registry/beat` with their
//! [`ExecutorInfo`] every beat, `POST /v1/registry/leave` when they stop.
//!
//! Each request is signed with the secret of the group its body names, as every
//! request of the protocol is (timestamp in the replay window, nonce never reused,
//! answers signed over the nonce). A request naming a group the endpoint does not
//! serve is refused exactly as a bad signature is. A beat is written with
//! [`NodeRegistry::executor_beat`](crate::store::NodeRegistry::executor_beat), so it
//! carries the store's clock, and schedulers whose group is
//! [`RemoteGroup::registered`](super::RemoteGroup::registered) see the instance as
//! they see one that beats into the store directly.
//!
//! ```no_run
//! use jobwheel::executors::RegistryServer;
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
use super::signed::{Body, authed, check_replay_window, json_answer, refuse, unsigned_refusal};
use super::tls;
use crate::error::{Error, Result};
use crate::record::ExecutorInfo;
use crate::store::JobStore;
use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
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
    replay_window: Duration,
    max_body_bytes: usize,
    tls: Option<(Vec<u8>, Vec<u8>)>,
}

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
            replay_window: Duration::from_secs(60),
            max_body_bytes: 64 << 10,
            tls: None,
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
        self.replay_window = window;
        self
    }

    /// Largest request body accepted (default 64 KiB, 1 KiB to 1 MiB); larger ones
    /// get 413.
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// Serves HTTPS (rustls) with `cert_pem` (PEM chain, leaf first) and `key_pem`.
    /// The signatures apply either way.
    pub fn tls(mut self, cert_pem: impl Into<Vec<u8>>, key_pem: impl Into<Vec<u8>>) -> Self {
        self.tls = Some((cert_pem.into(), key_pem.into()));
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
        if !(1024..=(1 << 20)).contains(&self.max_body_bytes) {
            return Err(Error::invalid(
                "registry.max_body_bytes",
                self.max_body_bytes,
                "must be 1024-1048576",
            ));
        }
        check_replay_window("registry.replay_window", self.replay_window)
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
        let window = self.replay_window;
        let state = Arc::new(Registry {
            store: self.store,
            groups: self
                .groups
                .into_iter()
                .map(|(g, s)| (g, Verifier::new(s, window, 100_000)))
                .collect(),
        });
        Router::new()
            .route(protocol::REGISTER, post(beat))
            .route(protocol::LEAVE, post(leave))
            .layer(DefaultBodyLimit::max(self.max_body_bytes))
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
        let addr = listener
            .local_addr()
            .map_err(|e| Error::backend("registry", "bind", false, e))?;
        let tls = match &self.tls {
            Some((cert, key)) => Some(tls::server_config(
                ("registry.tls.cert", "registry.tls.key"),
                cert,
                key,
            )?),
            None => None,
        };
        let app = self.app();
        let stop = CancellationToken::new();
        let task = tls::spawn_serve(listener, addr, app, tls, stop.clone());
        tracing::info!(%addr, "executor registration endpoint listening");
        Ok(RegistryServer { addr, stop, task })
    }
}

struct Registry {
    store: Arc<dyn JobStore>,
    groups: HashMap<String, Verifier>,
}

/// Just the group a body names, to find the secret that must have signed it.
#[derive(Deserialize)]
struct Names {
    group: String,
}

impl Registry {
    /// The verifier of the group `body` names; the refusal otherwise.
    fn verifier(&self, body: &Body) -> std::result::Result<&Verifier, Box<Response>> {
        let bytes = match body {
            Ok(b) => b,
            Err(e) => {
                return Err(Box::new(unsigned_refusal(
                    e.status(),
                    "too_large",
                    &e.body_text(),
                )));
            }
        };
        serde_json::from_slice::<Names>(bytes)
            .ok()
            .and_then(|n| self.groups.get(&n.group))
            .ok_or_else(|| {
                Box::new(unsigned_refusal(
                    StatusCode::UNAUTHORIZED,
                    "bad_signature",
                    "the signature does not match the secret of the group the body names",
                ))
            })
    }

    /// The verifier of the group the body names, and the body decoded once its
    /// signature checks out with that group's secret; the refusal otherwise.
    fn authed<T: serde::de::DeserializeOwned>(
        &self,
        m: &Method,
        u: &Uri,
        h: &HeaderMap,
        b: &Body,
    ) -> std::result::Result<(&Verifier, T, String), Box<Response>> {
        let v = self.verifier(b)?;
        let (q, nonce) = authed::<T>(v, m, u, h, b)?;
        Ok((v, q, nonce))
    }
}

async fn beat(
    State(r): State<Arc<Registry>>,
    m: Method,
    u: Uri,
    h: HeaderMap,
    b: Body,
) -> Response {
    let (v, info, nonce) = match r.authed::<ExecutorInfo>(&m, &u, &h, &b) {
        Ok(x) => x,
        Err(refusal) => return *refusal,
    };
    if let Err(e) = info.validate() {
        return refuse(v, &nonce, 400, "bad_request", e.to_string());
    }
    match r.store.executor_beat(&info).await {
        Ok(at) => json_answer(v, &nonce, &Registered { at: at.as_millis() }),
        Err(e) => {
            tracing::warn!(group = %info.group, address = %info.address, error = %e, "registering an executor failed");
            refuse(
                v,
                &nonce,
                503,
                "unavailable",
                format!("the store refused the beat: {e}"),
            )
        }
    }
}

async fn leave(
    State(r): State<Arc<Registry>>,
    m: Method,
    u: Uri,
    h: HeaderMap,
    b: Body,
) -> Response {
    let (v, q, nonce) = match r.authed::<LeaveRequest>(&m, &u, &h, &b) {
        Ok(x) => x,
        Err(refusal) => return *refusal,
    };
    match r.store.deregister_executor(&q.group, &q.address).await {
        Ok(removed) => json_answer(v, &nonce, &Left { removed }),
        Err(e) => refuse(
            v,
            &nonce,
            503,
            "unavailable",
            format!("the store refused: {e}"),
        ),
    }
}
