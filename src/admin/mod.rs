//! The admin side of jobwheel (feature `server`): the HTTP API that the web console,
//! scripts and the command line use, the web console itself, its accounts and roles, the audit of every
//! change, and `serve`, which runs a scheduler node, this API and the executor
//! registration endpoint in one process (the `jobwheel serve` command).
//!
//! | module | what it holds |
//! |---|---|
//! | `config` | [`ServerConfig`]: the TOML file, environment overrides, validation |
//! | `auth` | accounts, tokens, roles, signed session cookies, CSRF, login lock-out |
//! | `access` | accounts and tokens added and removed at runtime, kept hashed in the store (API and command line) |
//! | `api/` | the routes under `/api/v1`, one file per area (session, jobs, runs, cluster), the types they answer (`answers`) and the table the OpenAPI document is generated from (`openapi`) |
//! | `error` | [`ApiError`]: status and JSON body of a refusal |
//! | `metrics` | `GET /metrics`: the engine's instruments for Prometheus, behind credentials |
//! | `views`, `cron` | how jobs and fire previews are shown (shared with the command line) |
//! | `console`, `console/` | the web console: one page, its scripts and style, Chart.js, embedded |
//! | `serve` | [`Server`]: the whole program as one value, started and stopped |
//! | `cli/` | the `jobwheel` program's verbs; the binary is a thin main over [`cli::main`] |
//!
//! Every change names its caller by an extractor (role, read-only mode, CSRF
//! checked before anything else is read) and goes through the operations layer
//! ([`Ops`]), which writes one entry in the store's
//! [`AuditLog`](crate::store::AuditLog) with the state before and after in the same
//! transaction or script as the change: a change whose audit entry cannot be written
//! is not made.

pub(crate) mod access;
mod api;
pub(crate) mod auth;
pub mod cli;
pub mod config;
mod console;
pub mod cron;
mod error;
mod metrics;
pub use metrics::prometheus_builder;
pub(crate) mod serve;
pub mod views;

pub use auth::{Principal, Role, hash_password, new_token};
pub use config::ServerConfig;
pub use error::ApiError;
pub use serve::Server;

use crate::ops::Ops;
use crate::record::AuditAction;
use crate::record::AuditEntry;
use crate::remote::RemoteGroup;
use crate::store::JobStore;
use std::collections::HashMap;
use std::sync::Arc;

/// The admin API's OpenAPI 3.1 document, generated from the types its handlers
/// decode and answer (`docs/admin-api.json` holds a copy the tests keep equal), and
/// served at `/api/v1/openapi.json`.
pub fn openapi() -> String {
    api::openapi()
}

/// What every request handler shares.
pub struct AdminState {
    pub(crate) store: Arc<dyn JobStore>,
    /// Every change goes through it, as the caller.
    pub(crate) ops: Ops,
    pub(crate) auth: auth::Auth,
    pub(crate) read_only: bool,
    pub(crate) groups: HashMap<String, RemoteGroup>,
    /// The configuration (its accounts and tokens, beside the store's).
    pub(crate) config: Arc<ServerConfig>,
}

impl std::fmt::Debug for AdminState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminState")
            .field("auth", &self.auth)
            .field("read_only", &self.read_only)
            .field("groups", &self.groups.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl AdminState {
    /// The state of an API changing its store through `ops` (a server passes its
    /// scheduler node's, so a change wakes that node's poller), with the accounts,
    /// read-only mode and executor groups of `config` (validated).
    pub fn new(
        ops: Ops,
        config: &ServerConfig,
        groups: Vec<RemoteGroup>,
    ) -> crate::error::Result<AdminState> {
        config.validate()?;
        Ok(AdminState::unchecked(ops, config, groups))
    }

    /// As [`new`](Self::new) without validating `config`: for the command line's
    /// API in its own process, which needs no account (its caller is
    /// [`LocalCaller`](auth::LocalCaller)) and checked the file when it read it.
    pub(crate) fn unchecked(
        ops: Ops,
        config: &ServerConfig,
        groups: Vec<RemoteGroup>,
    ) -> AdminState {
        AdminState {
            store: ops.store().clone(),
            ops,
            auth: auth::Auth::new(config),
            read_only: config.read_only,
            config: Arc::new(config.clone()),
            groups: groups
                .into_iter()
                .map(|g| (g.name().to_string(), g))
                .collect(),
        }
    }

    /// Appends an audit entry about a session (a login) by `actor` (`user:NAME`, or
    /// `anonymous` for a failed login). Errors: 500 `audit_failed`.
    pub(crate) async fn audit(
        &self,
        actor: &str,
        action: AuditAction,
        target: &str,
    ) -> Result<(), ApiError> {
        let entry = AuditEntry::new(actor, action, target, None, None);
        self.store.append_audit(&entry).await.map_err(|e| {
            tracing::error!(error = %e, actor, %action, target, "an audit entry could not be written");
            ApiError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "audit_failed",
                format!("the audit entry could not be written: {e}"),
            )
        })
    }
}

/// The admin API's routes over `state`, and the web console's page and assets.
pub fn router(state: Arc<AdminState>, max_body_bytes: usize) -> axum::Router {
    console::routes()
        .layer(axum::middleware::map_response(api::secure_headers))
        .merge(api::routes(state, max_body_bytes))
}
