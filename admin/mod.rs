//! The admin side of jobwheel (feature `server`): the HTTP API that the web console,
//! scripts and the command line use, the web console itself, its accounts and roles, the audit of every
//! change, and `serve`, which runs a scheduler node, this API and the executor
//! registration endpoint in one process (the `jobwheel serve` command).
//!
//! | module | what it holds |
//! |---|---|
//! | `config` | [`ServerConfig`]: the TOML file, environment overrides, validation |
//! | `auth` | accounts, tokens, roles, signed session cookies, CSRF, login lock-out |
//! | `api/` | the routes under `/api/v1`, one file per area (session, jobs, runs, cluster) |
//! | `error` | [`ApiError`]: status and JSON body of a refusal |
//! | `views`, `cron` | how jobs and fire previews are shown (shared with the command line) |
//! | `console`, `console/` | the web console: one page, its scripts and style, Chart.js, embedded |
//! | `serve` | [`Server`]: the whole program as one value, started and stopped |
//! | `openapi.json` | the API's OpenAPI 3.1 document, served at `/api/v1/openapi.json` |
//!
//! Every change goes through one check (role, read-only mode, CSRF) and
//! leaves one entry in the store's [`AuditLog`](crate::store::AuditLog) with the
//! state before and after; a change whose audit entry cannot be written answers
//! 500 `audit_failed` (the change itself stands, and the failure is logged).

mod api;
pub mod auth;
pub mod config;
mod console;
pub mod cron;
mod error;
mod serve;
pub mod views;

pub use auth::{Principal, Role};
pub use config::ServerConfig;
pub use error::ApiError;
pub use serve::Server;

use crate::executors::RemoteGroup;
use crate::record::AuditEntry;
use crate::store::JobStore;
use crate::time::Timestamp;
use axum::http::HeaderMap;
use std::collections::HashMap;
use std::sync::Arc;

/// The API's OpenAPI 3.1 document.
pub const OPENAPI: &str = include_str!("openapi.json");

/// What every request handler shares.
pub struct AdminState {
    pub(crate) store: Arc<dyn JobStore>,
    pub(crate) auth: auth::Auth,
    pub(crate) read_only: bool,
    pub(crate) groups: HashMap<String, RemoteGroup>,
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
    /// The state of an API over `store`, with the accounts, read-only mode and
    /// executor groups of `config` (validated).
    pub fn new(
        store: Arc<dyn JobStore>,
        config: &ServerConfig,
        groups: Vec<RemoteGroup>,
    ) -> crate::Result<AdminState> {
        config.validate()?;
        Ok(AdminState {
            store,
            auth: auth::Auth::new(config),
            read_only: config.read_only,
            groups: groups
                .into_iter()
                .map(|g| (g.name().to_string(), g))
                .collect(),
        })
    }

    /// The caller of a read. Errors: 401.
    pub(crate) fn who(&self, headers: &HeaderMap) -> Result<Principal, ApiError> {
        self.auth.principal(headers, Timestamp::now())
    }

    /// The caller of a change that needs `role`. Errors: 401; 403 `read_only`,
    /// `forbidden` (role) or `csrf`.
    pub(crate) fn change(&self, headers: &HeaderMap, role: Role) -> Result<Principal, ApiError> {
        let p = self.who(headers)?;
        if self.read_only {
            return Err(ApiError::new(
                axum::http::StatusCode::FORBIDDEN,
                "read_only",
                "this server is read-only",
            ));
        }
        p.require(role)?;
        self.auth.check_csrf(&p, headers)?;
        Ok(p)
    }

    /// Appends an audit entry. Errors: 500 `audit_failed`.
    pub(crate) async fn audit(
        &self,
        p: &Principal,
        action: &str,
        target: &str,
        before: Option<serde_json::Value>,
        after: Option<serde_json::Value>,
    ) -> Result<(), ApiError> {
        let entry = AuditEntry {
            actor: p.name.clone(),
            action: action.to_string(),
            target: target.to_string(),
            before,
            after,
        };
        self.store.append_audit(&entry).await.map_err(|e| {
            tracing::error!(error = %e, actor = %p.name, action, target, "a change was made but its audit entry could not be written");
            ApiError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "audit_failed",
                format!("the change was made, but its audit entry could not be written: {e}"),
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
