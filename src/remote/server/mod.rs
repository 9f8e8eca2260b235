//! The executor server a Rust service embeds: it serves handlers to the schedulers
//! of one executor group over the [protocol](crate::remote::protocol).
//!
//! ```no_run
//! use jobwheel::remote::ExecutorServer;
//! use jobwheel::prelude::*;
//!
//! async fn export(ctx: JobContext) -> JobResult {
//!     tracing::info!(job = %ctx.job.id(), "exporting");
//!     Ok(())
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let secret = std::env::var("JOBWHEEL_GROUP_SECRET")?;
//! let server = ExecutorServer::builder("billing", secret)?
//!     .handler("export", export)
//!     .capacity(32)
//!     .bind("127.0.0.1:9101")
//!     .await?;
//! println!("serving on {}", server.local_addr());
//! # Ok(()) }
//! ```

mod logs;
mod register;
mod runs;

pub use logs::RUN_SPAN;

use super::auth::{Secret, Verifier};
use super::protocol;
use super::signed::{OptionNames, Replier, ServerOptions, Signed, Verifies, nonce_of, refuse};
use crate::error::{Error, Result};
use crate::handler::{IntoHandler, JobHandler};
use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::post;
use runs::{Limits, Runs};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Longest wait a result request may ask for.
pub const MAX_RESULT_WAIT: Duration = Duration::from_secs(30);
/// A result poll that asks for log lines is answered this long after it came, at
/// the soonest, once lines past its offset are there.
const LOG_BATCH: Duration = Duration::from_secs(1);

/// Builds an [`ExecutorServer`].
#[must_use = "a builder does nothing until `bind` or `serve`"]
pub struct ExecutorServerBuilder {
    group: String,
    secret: Secret,
    instance: Option<String>,
    handlers: HashMap<String, Arc<dyn JobHandler>>,
    capacity: usize,
    max_queued_per_job: usize,
    /// The replay window, body limit and TLS, as the registration endpoint has them.
    options: ServerOptions,
    log_lines: usize,
    result_retention: Duration,
    max_results: usize,
    register_in: Option<RegisterIn>,
    advertise: Option<String>,
    beat_every: Duration,
}

/// The names the executor server's options are refused under.
const NAMES: OptionNames = OptionNames {
    server: "executor",
    replay_window: "executor.replay_window",
    max_body_bytes: "executor.max_body_bytes",
    tls: ("executor.tls.cert", "executor.tls.key"),
};

impl std::fmt::Debug for ExecutorServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutorServerBuilder")
            .field("group", &self.group)
            .field("handlers", &self.handlers.keys().collect::<Vec<_>>())
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

/// Where an instance registers, as the builder was told.
enum RegisterIn {
    Store(Arc<dyn crate::store::JobStore>),
    Endpoint(String),
}

/// A running executor server.
#[derive(Debug)]
pub struct ExecutorServer {
    addr: SocketAddr,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    /// The registration's beat loop, when the instance registers.
    beats: Option<tokio::task::JoinHandle<()>>,
}

impl ExecutorServer {
    /// Starts a builder for an instance of `group` that checks requests with
    /// `secret` (the group's shared secret, at least 16 bytes).
    ///
    /// Errors: [`Error::Invalid`] on `executor.group` or `executor.secret`: there is
    /// no default secret and no way to run without one.
    pub fn builder(
        group: impl Into<String>,
        secret: impl AsRef<[u8]>,
    ) -> Result<ExecutorServerBuilder> {
        let group = group.into();
        crate::placement::check_group(&group).map_err(|e| rename(e, "executor.group"))?;
        Ok(ExecutorServerBuilder {
            group,
            secret: Secret::new("executor.secret", secret)?,
            instance: None,
            handlers: HashMap::new(),
            capacity: 64,
            max_queued_per_job: 1_000,
            options: ServerOptions::new(1 << 20),
            log_lines: 1_000,
            result_retention: Duration::from_secs(600),
            max_results: 100_000,
            register_in: None,
            advertise: None,
            beat_every: Duration::from_secs(30),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting requests and, when it registered, removes its registration;
    /// runs in progress are cancelled with the process.
    pub async fn shutdown(self) {
        self.stop.cancel();
        let _ = self.task.await;
        if let Some(beats) = self.beats {
            let _ = beats.await;
        }
    }
}

fn rename(e: Error, field: &'static str) -> Error {
    match e {
        Error::Invalid { value, reason, .. } => Error::invalid(field, value, reason),
        other => other,
    }
}

impl ExecutorServerBuilder {
    /// Serves `handler` under `name` (the job's handler name).
    pub fn handler<M>(mut self, name: impl Into<String>, handler: impl IntoHandler<M>) -> Self {
        self.handlers.insert(name.into(), handler.into_handler());
        self
    }
    /// The instance's name in its group (default: the address it binds).
    pub fn instance(mut self, name: impl Into<String>) -> Self {
        self.instance = Some(name.into());
        self
    }
    /// Runs executing at once, at most (default 64); a run beyond is refused `busy`.
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }
    /// Runs of one job queued behind its running run, at most (default 1,000).
    pub fn max_queued_per_job(mut self, n: usize) -> Self {
        self.max_queued_per_job = n;
        self
    }
    /// How far a request's timestamp may be from this instance's clock (default
    /// 60 s); nonces are remembered this long.
    pub fn replay_window(mut self, window: Duration) -> Self {
        self.options.replay_window = window;
        self
    }
    /// Largest request body accepted (default 1 MiB); larger ones get 413.
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.options.max_body_bytes = bytes;
        self
    }
    /// Lines kept per run (default 1,000; the oldest are dropped first).
    pub fn log_lines(mut self, lines: usize) -> Self {
        self.log_lines = lines;
        self
    }
    /// How long an ended run's result and log are kept (default 10 min), and how
    /// many at most (default 100,000).
    pub fn result_retention(mut self, keep: Duration, max_results: usize) -> Self {
        self.result_retention = keep;
        self.max_results = max_results;
        self
    }

    /// Registers the instance in `store` (the schedulers' store) under its group,
    /// beating every 30 s (see [`beat_every`](Self::beat_every)) on the store's
    /// clock, and removes it when the server shuts down. Schedulers whose group is
    /// [`RemoteGroup::registered`](super::RemoteGroup::registered) send it runs of
    /// the handlers it serves while its beats keep coming. It advertises `http://`
    /// and the bound address unless [`advertise`](Self::advertise) says otherwise.
    pub fn register(mut self, store: Arc<dyn crate::store::JobStore>) -> Self {
        self.register_in = Some(RegisterIn::Store(store));
        self
    }

    /// Registers the instance through a scheduler's registration endpoint at `url`
    /// (its base URL, `http://scheduler-1:9100`; a
    /// [`RegistryServer`](super::RegistryServer)) instead of writing to the store:
    /// the same beats, signed with the group's secret, for an instance that has no
    /// access to the schedulers' store.
    pub fn register_at(mut self, url: impl Into<String>) -> Self {
        self.register_in = Some(RegisterIn::Endpoint(url.into()));
        self
    }

    /// The address schedulers reach this instance at (`https://exec-3.internal:9101`),
    /// when it is not the bound one (a proxy, TLS in front, a wildcard bind). Used
    /// when it [registers](Self::register).
    pub fn advertise(mut self, address: impl Into<String>) -> Self {
        self.advertise = Some(address.into());
        self
    }

    /// How often a registered instance beats (default 30 s; 10 ms to 10 min). Used
    /// when it [registers](Self::register).
    pub fn beat_every(mut self, every: Duration) -> Self {
        self.beat_every = every;
        self
    }

    /// Serves HTTPS (rustls, TLS 1.2 and 1.3, HTTP/1.1) with `cert_pem` (the PEM
    /// certificate chain, leaf first) and `key_pem` (its PEM private key). A
    /// registered instance then advertises `https://` and the bound address.
    /// Schedulers trust the certificate through the platform's roots or
    /// [`RemoteGroupConfig::tls_roots_pem`](super::RemoteGroupConfig::tls_roots_pem).
    /// The HMAC signatures apply either way; TLS adds confidentiality of payloads
    /// and results on the wire.
    pub fn tls(mut self, cert_pem: impl Into<Vec<u8>>, key_pem: impl Into<Vec<u8>>) -> Self {
        self.options.tls = Some((cert_pem.into(), key_pem.into()));
        self
    }

    fn validate(&self) -> Result<()> {
        if self.handlers.is_empty() {
            return Err(Error::invalid(
                "executor.handlers",
                "none",
                "serve at least one handler",
            ));
        }
        for (field, v, lo, hi) in [
            ("executor.capacity", self.capacity, 1, 100_000),
            (
                "executor.max_queued_per_job",
                self.max_queued_per_job,
                0,
                1_000_000,
            ),
            ("executor.log_lines", self.log_lines, 1, 1_000_000),
            ("executor.max_results", self.max_results, 1, 10_000_000),
        ] {
            if !(lo..=hi).contains(&v) {
                return Err(Error::invalid(field, v, format!("must be {lo}-{hi}")));
            }
        }
        self.options.validate(&NAMES, (1024, 64 << 20))
    }

    /// Binds `addr` and serves until [`ExecutorServer::shutdown`].
    ///
    /// Errors: [`Error::Invalid`] naming a bad setting; [`Error::Backend`] when the
    /// address cannot be bound.
    pub async fn bind(self, addr: impl tokio::net::ToSocketAddrs) -> Result<ExecutorServer> {
        self.validate()?;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| Error::backend("executor", "bind", false, e))?;
        self.serve(listener)
    }

    /// Serves on a bound listener until [`ExecutorServer::shutdown`].
    ///
    /// Errors: as [`bind`](Self::bind).
    pub fn serve(self, listener: tokio::net::TcpListener) -> Result<ExecutorServer> {
        self.validate()?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::backend("executor", "bind", false, e))?;
        let instance: Arc<str> = self
            .instance
            .clone()
            .unwrap_or_else(|| addr.to_string())
            .into();
        let tls = self.options.tls.is_some();
        let target = match &self.register_in {
            None => None,
            Some(RegisterIn::Store(store)) => Some(register::Target::Store(store.clone())),
            Some(RegisterIn::Endpoint(url)) => {
                let url = super::group::instance_url(url)
                    .map_err(|e| rename(e, "executor.register_at"))?;
                let client = super::client::Client::new(
                    self.secret.clone(),
                    &super::RemoteGroupConfig::default(),
                )?;
                Some(register::Target::Endpoint(url, Arc::new(client)))
            }
        };
        let registration = target.map(|target| register::Registration {
            target,
            advertise: self.advertise.clone(),
            every: self.beat_every,
            scheme: if tls { "https" } else { "http" },
        });
        let registered = match &registration {
            Some(r) => Some((
                r.target.clone(),
                r.info(
                    &self.group,
                    addr,
                    self.handlers.keys().cloned().collect(),
                    self.capacity,
                )?,
                r.every,
            )),
            None => None,
        };
        let logs = logs::Logs::new(self.log_lines);
        let runs = Arc::new(Runs::new(
            self.handlers,
            Limits {
                capacity: self.capacity,
                max_queued_per_job: self.max_queued_per_job,
                retention: self.result_retention,
                max_results: self.max_results,
            },
            instance.clone(),
            logs,
        )?);
        // The base addresses schedulers call this instance at: the advertised one
        // and the bound one (a request signed for another instance is refused).
        let scheme = if tls { "https" } else { "http" };
        let mut addresses = vec![format!("{scheme}://{addr}")];
        if let Some(a) = &self.advertise {
            addresses.push(a.clone());
        }
        let addresses = addresses
            .iter()
            .filter_map(|a| super::group::instance_url(a).ok())
            .collect();
        let state = Arc::new(Served {
            addresses,
            verifier: Arc::new(Verifier::new(
                self.secret,
                self.options.replay_window,
                1_000_000,
            )),
            runs,
            instance,
        });
        let app = Router::new()
            .route(protocol::BEAT, post(beat))
            .route(protocol::IDLE_BEAT, post(idle_beat))
            .route(protocol::RUN, post(run))
            .route(protocol::RESULT, post(result))
            .route(protocol::KILL, post(kill))
            .route(protocol::LOG, post(log))
            .fallback(not_found)
            .with_state(state);
        let (addr, stop, task) = self.options.serve(&NAMES, listener, app)?;
        tracing::info!(group = %self.group, %addr, "executor server listening");
        let beats = registered.map(|(target, info, every)| {
            tokio::spawn(register::beat_loop(target, info, every, stop.clone()))
        });
        Ok(ExecutorServer {
            addr,
            stop,
            task,
            beats,
        })
    }
}

struct Served {
    /// The base addresses requests to this instance are addressed to.
    addresses: Vec<String>,
    verifier: Arc<Verifier>,
    runs: Arc<Runs>,
    instance: Arc<str>,
}

impl Verifies for Served {
    fn verifier_for(&self, _body: &[u8]) -> std::result::Result<Arc<Verifier>, Box<Response>> {
        Ok(self.verifier.clone())
    }

    fn targets(&self, path: &str) -> Vec<String> {
        self.addresses
            .iter()
            .map(|a| super::auth::addressed(a, path))
            .collect()
    }
}

async fn beat(State(s): State<Arc<Served>>, q: Signed<serde_json::Value>) -> Response {
    let (running, queued, capacity) = s.runs.load();
    q.reply.ok(&protocol::Beat {
        instance: s.instance.to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        handlers: s.runs.handler_names(),
        capacity,
        running,
        queued,
    })
}

async fn idle_beat(State(s): State<Arc<Served>>, q: Signed<protocol::IdleBeatRequest>) -> Response {
    q.reply.ok(&protocol::IdleBeat {
        idle: s.runs.idle_for(&q.body.job_id),
    })
}

async fn run(State(s): State<Arc<Served>>, q: Signed<protocol::RunRequest>) -> Response {
    let Signed { body: q, reply } = q;
    let (key, token) = ((q.run_id, q.shard.map(|s| s.index)), q.token);
    let wait = Duration::from_millis(q.wait_ms).min(MAX_RESULT_WAIT);
    let log_offset = q.log_offset;
    match s.runs.admit(q) {
        Ok(state) if state.phase != protocol::Phase::Done && !wait.is_zero() => {
            let state = awaited(&s, key, token, wait, log_offset)
                .await
                .unwrap_or(state);
            reply.ok(&with_log(&s, key, state, log_offset))
        }
        Ok(state) => reply.ok(&with_log(&s, key, state, log_offset)),
        Err(refused) => {
            let (status, code, message) = refused.answer();
            reply.refuse(status, code, message)
        }
    }
}

async fn result(State(s): State<Arc<Served>>, q: Signed<protocol::ResultRequest>) -> Response {
    let wait = Duration::from_millis(q.body.wait_ms).min(MAX_RESULT_WAIT);
    let key = (q.body.run_id, q.body.shard);
    match awaited(&s, key, q.body.token, wait, q.body.log_offset).await {
        Some(state) => q.reply.ok(&with_log(&s, key, state, q.body.log_offset)),
        None => unknown_run(&q.reply),
    }
}

/// A result poll's wait: until the run ends, at most `wait`; when the request asks
/// for log lines from `log_offset`, also until lines past it are there, answered
/// [`LOG_BATCH`] after the request at the soonest (a chatty run's lines come about
/// once a second, a quiet run's poll waits for its end). `None`: unknown run or
/// another token.
async fn awaited(
    s: &Served,
    key: logs::RunKey,
    token: u64,
    wait: Duration,
    log_offset: Option<u64>,
) -> Option<protocol::RunState> {
    let lines = log_offset.and_then(|offset| Some((offset, s.runs.logs.written(key)?)));
    let Some((offset, mut written)) = lines else {
        return s.runs.state(key, token, wait).await;
    };
    let batched = tokio::time::Instant::now() + LOG_BATCH;
    let new_lines = async {
        if written.wait_for(|n| *n > offset).await.is_err() {
            std::future::pending::<()>().await;
        }
        tokio::time::sleep_until(batched).await;
    };
    tokio::select! {
        state = s.runs.state(key, token, wait) => state,
        () = new_lines => s.runs.state(key, token, Duration::ZERO).await,
    }
}

/// `state` with the run's log lines from `offset` when the request asked for them
/// (read after the state: a `done` state's chunk holds the run's last lines).
fn with_log(
    s: &Served,
    key: logs::RunKey,
    mut state: protocol::RunState,
    offset: Option<u64>,
) -> protocol::RunState {
    if let Some(offset) = offset {
        state.log = s.runs.logs.read(key, offset, 1_000).map(|mut chunk| {
            chunk.done = chunk.done || state.phase == protocol::Phase::Done;
            chunk
        });
    }
    state
}

async fn kill(State(s): State<Arc<Served>>, q: Signed<protocol::KillRequest>) -> Response {
    match s.runs.kill((q.body.run_id, q.body.shard), q.body.token) {
        Some(killed) => q.reply.ok(&protocol::KillReply { killed }),
        None => unknown_run(&q.reply),
    }
}

async fn log(State(s): State<Arc<Served>>, q: Signed<protocol::LogRequest>) -> Response {
    let Signed { body: q, reply } = q;
    let key = (q.run_id, q.shard);
    if !s.runs.knows(key, q.token) {
        return unknown_run(&reply);
    }
    match s.runs.logs.read(key, q.offset, q.limit.min(1_000)) {
        Some(mut chunk) => {
            chunk.done = chunk.done || s.runs.is_done(key);
            reply.ok(&chunk)
        }
        None => unknown_run(&reply),
    }
}

fn unknown_run(reply: &Replier) -> Response {
    reply.refuse(
        404,
        "unknown_run",
        "no run with this id and token on this instance (never admitted, or its result was dropped after the retention)".into(),
    )
}

async fn not_found(State(s): State<Arc<Served>>, h: HeaderMap) -> Response {
    let nonce = nonce_of(&h);
    refuse(
        &s.verifier,
        &nonce,
        404,
        "not_found",
        "no such endpoint in protocol v1".into(),
    )
}
