//! Accounts and tokens: list, add and remove the ones kept in the store (admins only,
//! each change audited); the configuration file's are listed and stay as they are.

use super::answers::{AccessList, AccessRemoved};
use super::extract::{AdminChange, AdminReader};
use super::{ApiResult, P, St, json, json_body, path};
use crate::admin::access::{self, NewAccount, NewToken};
use crate::record::CredentialKind;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::Response;

pub(super) async fn list(State(s): St, AdminReader(p): AdminReader) -> ApiResult<Response> {
    let items = access::list(s.store.as_ref(), &s.config, &p.actor()).await?;
    Ok(json(StatusCode::OK, &AccessList { items }))
}

pub(super) async fn add_account(
    State(s): St,
    AdminChange(p): AdminChange,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let a: NewAccount = json_body(body)?;
    let v = access::add_account(s.store.as_ref(), &s.config, &p.actor(), a).await?;
    s.auth
        .refresh(s.store.as_ref(), std::time::Duration::ZERO)
        .await;
    Ok(json(StatusCode::CREATED, &v))
}

pub(super) async fn add_token(
    State(s): St,
    AdminChange(p): AdminChange,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let t: NewToken = json_body(body)?;
    let v = access::add_token(s.store.as_ref(), &s.config, &p.actor(), t).await?;
    s.auth
        .refresh(s.store.as_ref(), std::time::Duration::ZERO)
        .await;
    Ok(json(StatusCode::CREATED, &v))
}

async fn remove(
    s: St,
    p: AdminChange,
    kind: CredentialKind,
    name: P<String>,
) -> ApiResult<Response> {
    let (State(s), AdminChange(p)) = (s, p);
    let name = path(name)?;
    let v = access::remove(s.store.as_ref(), &s.config, &p.actor(), kind, &name).await?;
    s.auth
        .refresh(s.store.as_ref(), std::time::Duration::ZERO)
        .await;
    Ok(json(StatusCode::OK, &AccessRemoved { removed: v }))
}

pub(super) async fn remove_account(s: St, p: AdminChange, name: P<String>) -> ApiResult<Response> {
    remove(s, p, CredentialKind::Account, name).await
}

pub(super) async fn remove_token(s: St, p: AdminChange, name: P<String>) -> ApiResult<Response> {
    remove(s, p, CredentialKind::Token, name).await
}
