//! Who is asking, as axum extractors: a handler names the caller it needs in its
//! signature, so a handler that forgets to authenticate does not compile and none
//! checks credentials by hand. An extractor named before a handler's path, query and
//! body runs first, so a caller without credentials learns nothing from a bad query
//! or id (401 before 400).
//!
//! | extractor | who passes |
//! |---|---|
//! | [`Reader`] | any account or token (a read) |
//! | [`AdminReader`] | an admin (the audit log) |
//! | [`OperatorChange`] | an operator or admin, on a server that is not read-only, with the CSRF token when authenticated by the session cookie |
//! | [`AdminChange`] | the same for an admin |

use crate::admin::auth::{CREDENTIALS_REFRESH, LocalCaller, UNKNOWN_REREAD};
use crate::admin::{AdminState, ApiError, Principal, Role};
use crate::time::Timestamp;
use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;
use std::sync::Arc;

/// The caller of a request (the store's accounts and tokens read again when the
/// server's copy is stale). Errors: 401.
async fn caller(parts: &Parts, s: &AdminState) -> Result<Principal, ApiError> {
    if let Some(local) = parts.extensions.get::<LocalCaller>() {
        return Ok(local.0.clone());
    }
    let store = s.store.as_ref();
    s.auth.refresh(store, CREDENTIALS_REFRESH).await;
    match s.auth.principal(&parts.headers, Timestamp::now()) {
        // Credentials this server does not know may have been added through another
        // server a moment ago: read again (at most every UNKNOWN_REREAD) and retry.
        Err(_) if s.auth.refresh(store, UNKNOWN_REREAD).await => {
            s.auth.principal(&parts.headers, Timestamp::now())
        }
        answer => answer,
    }
}

/// The caller of a change that needs `role`. Errors: 401; 403 `read_only`,
/// `forbidden` (role) or `csrf`.
async fn changer(parts: &Parts, s: &AdminState, role: Role) -> Result<Principal, ApiError> {
    let p = caller(parts, s).await?;
    if s.read_only {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "read_only",
            "this server is read-only",
        ));
    }
    p.require(role)?;
    s.auth.check_csrf(&p, &parts.headers)?;
    Ok(p)
}

macro_rules! extractor {
    ($(#[$doc:meta])* $name:ident, |$parts:ident, $s:ident| $check:expr) => {
        $(#[$doc])*
        pub(crate) struct $name(pub(crate) Principal);

        impl FromRequestParts<Arc<AdminState>> for $name {
            type Rejection = ApiError;

            async fn from_request_parts(
                $parts: &mut Parts,
                $s: &Arc<AdminState>,
            ) -> Result<Self, ApiError> {
                $check.await.map($name)
            }
        }
    };
}

extractor!(
    /// Any authenticated caller: a read.
    Reader,
    |parts, s| caller(parts, s)
);

extractor!(
    /// An admin: the audit log.
    AdminReader,
    |parts, s| async { caller(parts, s).await.and_then(|p| p.require(Role::Admin).map(|()| p)) }
);

extractor!(
    /// A change an operator may make (pause, resume, trigger, kill, alarm retry and
    /// discard).
    OperatorChange,
    |parts, s| changer(parts, s, Role::Operator)
);

extractor!(
    /// A change only an admin may make (create, update, copy, remove).
    AdminChange,
    |parts, s| changer(parts, s, Role::Admin)
);
