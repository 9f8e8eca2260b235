//! Logging in and out, who am I, health, and the OpenAPI document.

use super::answers::{Health, Session};
use super::extract::Reader;
use super::{ApiResult, St, json, json_body};
use crate::admin::auth::Via;
use crate::record::AuditAction;
use crate::time::Timestamp;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Login {
    /// The account's name.
    name: String,
    /// Its password.
    password: String,
}

/// What the session endpoints answer.
fn session_json(s: &crate::admin::AdminState, p: &crate::admin::Principal) -> Session {
    let csrf = match &p.via {
        Via::Session(n) => Some(s.auth.csrf(n)),
        Via::Token | Via::Local => None,
    };
    Session {
        name: p.name.clone(),
        role: p.role,
        groups: p.groups.clone(),
        csrf,
        read_only: s.read_only,
    }
}

pub(super) async fn login(
    State(s): St,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let req: Login = json_body(body)?;
    s.auth
        .refresh(s.store.as_ref(), crate::admin::auth::CREDENTIALS_REFRESH)
        .await;
    if !s.auth.knows(&req.name) {
        // Perhaps added through another server a moment ago.
        s.auth
            .refresh(s.store.as_ref(), crate::admin::auth::UNKNOWN_REREAD)
            .await;
    }
    let (p, cookie) = match s
        .auth
        .login(&req.name, &req.password, Timestamp::now())
        .await
    {
        Ok(found) => found,
        Err(e) => {
            if e.code() == "bad_credentials" {
                // The name as given, cut to the longest an account may have.
                let name: String = req.name.chars().take(64).collect();
                tracing::warn!(name = ?name, "failed login");
                s.audit("anonymous", AuditAction::SessionLoginFailed, &name)
                    .await?;
            }
            return Err(e);
        }
    };
    s.audit(p.actor().name(), AuditAction::SessionLogin, &p.name)
        .await?;
    let mut r = json(StatusCode::OK, &session_json(&s, &p));
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    Ok(r)
}

pub(super) async fn whoami(State(s): St, Reader(p): Reader) -> ApiResult<Response> {
    Ok(json(StatusCode::OK, &session_json(&s, &p)))
}

pub(super) async fn logout(State(s): St) -> Response {
    let mut r = StatusCode::NO_CONTENT.into_response();
    if let Ok(v) = HeaderValue::from_str(&s.auth.logout_cookie()) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

pub(super) async fn health() -> Response {
    json(StatusCode::OK, &Health { status: "ok" })
}

pub(super) async fn openapi() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        super::OPENAPI.as_str(),
    )
        .into_response()
}
