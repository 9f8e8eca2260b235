//! How the command line reaches jobwheel, two ways behind one trait: a running
//! server's admin API over HTTP with a bearer token (`--server`, `--token`), or the
//! same admin API served in this process over the store (`--url`, or the store of
//! `jobwheel.toml`). Every verb is written once against [`Transport`], so it prints
//! the same columns and the same `--json` either way; on a store the caller is an
//! admin named `cli:$USER` (see [`LocalCaller`]), through a server the token's
//! owner, with its role and groups.

use super::Failure;
use crate::admin::auth::LocalCaller;
use crate::admin::config::{Redacted, ServerConfig};
use crate::admin::{AdminState, router};
use crate::ops::Ops;
use crate::remote::RemoteGroup;
use axum::body::Body;
use serde_json::Value;
use std::sync::Arc;
use tower::ServiceExt;

/// Where the verbs' requests go.
#[async_trait::async_trait]
pub(crate) trait Transport: Send + Sync {
    /// Calls `method /api/v1{path}` with a JSON `body`; the answer's JSON. A refusal
    /// maps to the exit codes: 400 → 2, 404 → 3, anything else → 1, with the API's
    /// message.
    async fn call(&self, method: &str, path: &str, body: Option<String>) -> Result<Value, Failure>;
}

/// An answer's status and body as the verbs see it (see [`Transport::call`]).
fn answer(status: u16, bytes: &[u8], from: &str) -> Result<Value, Failure> {
    let value: Value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(bytes)
            .map_err(|e| Failure::Failed(format!("{from} answered {status}, not JSON: {e}")))?
    };
    match status {
        200..=299 => Ok(value),
        _ => {
            let message = value["message"].as_str().unwrap_or("refused").to_string();
            Err(match status {
                400 => Failure::Usage(message),
                404 => Failure::NotFound(message),
                _ => Failure::Failed(format!(
                    "{status} {}: {message}",
                    value["error"].as_str().unwrap_or("")
                )),
            })
        }
    }
}

/// A running server's admin API, with a bearer token.
pub(crate) struct Api {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl Api {
    /// A client of the server at `server` (`http(s)://…`) with `token`. Errors
    /// (exit 2): no token, or not an http(s) URL.
    pub(crate) fn new(server: &str, token: Option<String>) -> Result<Api, Failure> {
        let token = token.ok_or_else(|| {
            Failure::Usage("--server needs a token: --token or JOBWHEEL_TOKEN".into())
        })?;
        let base = server.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(Failure::Usage(format!(
                "invalid --server {server:?}: must be an http(s):// URL"
            )));
        }
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .map_err(|e| Failure::Failed(e.to_string()))?;
        Ok(Api { base, token, http })
    }
}

#[async_trait::async_trait]
impl Transport for Api {
    async fn call(&self, method: &str, path: &str, body: Option<String>) -> Result<Value, Failure> {
        let method = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|e| Failure::Failed(e.to_string()))?;
        let mut r = self
            .http
            .request(method, format!("{}/api/v1{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            r = r.header("content-type", "application/json").body(b);
        }
        let resp = r
            .send()
            .await
            .map_err(|e| Failure::Failed(format!("cannot reach {}: {e}", self.base)))?;
        let status = resp.status().as_u16();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| Failure::Failed(e.to_string()))?;
        answer(status, &bytes, "the server")
    }
}

/// The admin API served in this process over a store: the server's routes and
/// handlers, called without a socket, as an admin named `cli:$USER`.
pub(crate) struct Local {
    router: axum::Router,
    caller: LocalCaller,
    max_body_bytes: usize,
}

impl Local {
    /// The API over `ops` (the command line's operations on the store), with the
    /// payload and body limits, accounts and executor `groups` of `config` (the
    /// defaults without one). Read-only mode is a server's: the command line on
    /// the store changes it as the store's credentials allow.
    pub(crate) fn new(
        ops: Ops,
        config: Option<&ServerConfig>,
        groups: Vec<RemoteGroup>,
    ) -> Result<Local, Failure> {
        let mut config = config.cloned().unwrap_or_default();
        config.read_only = false;
        // No session is made here: a secret of its own keeps the cookie checks
        // well-defined.
        config.session_secret = Redacted(crate::admin::auth::new_token().0);
        let max_body_bytes = config.max_body_bytes;
        let state = Arc::new(AdminState::unchecked(ops, &config, groups));
        Ok(Local {
            router: router(state, max_body_bytes),
            caller: LocalCaller::cli(&super::store::user()),
            max_body_bytes,
        })
    }
}

#[async_trait::async_trait]
impl Transport for Local {
    async fn call(&self, method: &str, path: &str, body: Option<String>) -> Result<Value, Failure> {
        let mut req = axum::http::Request::builder()
            .method(method)
            .uri(format!("/api/v1{path}"));
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        let mut req = req
            .body(body.map_or_else(Body::empty, Body::from))
            .map_err(|e| Failure::Failed(e.to_string()))?;
        req.extensions_mut().insert(self.caller.clone());
        let resp = match self.router.clone().oneshot(req).await {
            Ok(r) => r,
            Err(never) => match never {},
        };
        let status = resp.status().as_u16();
        // An answer is bounded by what the API answers; this bound only keeps a
        // mistake from reading without end.
        let bytes = axum::body::to_bytes(resp.into_body(), 64 * self.max_body_bytes)
            .await
            .map_err(|e| Failure::Failed(e.to_string()))?;
        answer(status, &bytes, "the API")
    }
}
