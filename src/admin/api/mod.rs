//! The routes under `/api/v1`, and what the handlers share: JSON bodies decoded with
//! the failing field named, size limits answered as JSON, paging.

mod access;
mod answers;
mod cluster;
mod extract;
mod jobs;
mod openapi;
mod runs;
mod session;

use super::{AdminState, ApiError};
use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::de::DeserializeOwned;
use std::sync::{Arc, LazyLock};

pub(crate) use openapi::openapi;

/// The document, generated once.
pub(super) static OPENAPI: LazyLock<String> = LazyLock::new(openapi);

/// Handlers' state.
pub(super) type St = axum::extract::State<Arc<AdminState>>;
/// Handlers' result.
pub(super) type ApiResult<T> = Result<T, ApiError>;

/// The routes.
pub(super) fn routes(state: Arc<AdminState>, max_body_bytes: usize) -> Router {
    Router::new()
        .route("/api/v1/health", get(session::health))
        .route("/metrics", get(cluster::metrics))
        .route("/api/v1/openapi.json", get(session::openapi))
        .route(
            "/api/v1/session",
            get(session::whoami)
                .post(session::login)
                .delete(session::logout),
        )
        .route("/api/v1/jobs", get(jobs::list).post(jobs::create))
        .route(
            "/api/v1/jobs/{id}",
            get(jobs::get_one).put(jobs::update).delete(jobs::remove),
        )
        .route("/api/v1/jobs/{id}/copy", post(jobs::copy))
        .route("/api/v1/jobs/{id}/pause", post(jobs::pause))
        .route("/api/v1/jobs/{id}/resume", post(jobs::resume))
        .route("/api/v1/jobs/{id}/trigger", post(jobs::trigger))
        .route("/api/v1/jobs/{id}/fires", get(jobs::fires))
        .route("/api/v1/jobs/{id}/dependencies", get(jobs::dependencies))
        .route("/api/v1/jobs/{id}/release", post(jobs::release))
        .route("/api/v1/jobs/{id}/skip", post(jobs::skip))
        .route("/api/v1/cron/preview", get(jobs::cron_preview))
        .route("/api/v1/defaults", get(jobs::defaults))
        .route("/api/v1/runs", get(runs::list))
        .route("/api/v1/runs/{id}", get(runs::get_one))
        .route("/api/v1/runs/{id}/log", get(runs::log))
        .route("/api/v1/runs/{id}/kill", post(runs::kill))
        .route("/api/v1/stats/daily", get(cluster::daily))
        .route("/api/v1/overview", get(cluster::overview))
        .route("/api/v1/nodes", get(cluster::nodes))
        .route("/api/v1/executors", get(cluster::executors))
        .route("/api/v1/alarms", get(cluster::alarms))
        .route("/api/v1/alarms/{id}/retry", post(cluster::retry_alarm))
        .route("/api/v1/alarms/{id}/discard", post(cluster::discard_alarm))
        .route("/api/v1/audit", get(cluster::audit))
        .route("/api/v1/access", get(access::list))
        .route("/api/v1/access/accounts", post(access::add_account))
        .route(
            "/api/v1/access/accounts/{name}",
            axum::routing::delete(access::remove_account),
        )
        .route("/api/v1/access/tokens", post(access::add_token))
        .route(
            "/api/v1/access/tokens/{name}",
            axum::routing::delete(access::remove_token),
        )
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(axum::middleware::from_fn(log_request))
        .layer(axum::middleware::map_response(secure_headers))
        .with_state(state)
}

/// Logs each request when it is answered: refusals of credentials presented, roles
/// and rate (401, 403, 429) at `warn` with the caller's address, other refusals
/// (among them a 401 to a request that presented no credentials: the console asking
/// who is logged in before the login page) at `info`, failures at `error`, the rest
/// at `debug`.
async fn log_request(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let peer = req
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip());
    let presented = req
        .headers()
        .contains_key(axum::http::header::AUTHORIZATION)
        || req
            .headers()
            .get_all(axum::http::header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.contains(crate::admin::auth::SESSION_COOKIE));
    let started = std::time::Instant::now();
    let r = next.run(req).await;
    let status = r.status().as_u16();
    let code = r
        .extensions()
        .get::<crate::admin::error::RefusalCode>()
        .map_or("", |c| c.0);
    let ms = started.elapsed().as_millis() as u64;
    match status {
        500.. => {
            tracing::error!(%method, ?path, status, code, ?peer, ms, "admin API request failed")
        }
        401 if !presented && code == "unauthenticated" => {
            tracing::info!(%method, ?path, status, code, ?peer, ms, "admin API request without credentials")
        }
        401 | 403 | 429 => {
            tracing::warn!(%method, ?path, status, code, ?peer, ms, "admin API request refused");
        }
        400.. => {
            tracing::info!(%method, ?path, status, code, ?peer, ms, "admin API request refused")
        }
        _ => tracing::debug!(%method, ?path, status, ?peer, ms, "admin API request"),
    }
    r
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint")
}

/// Headers on every answer: no sniffing, no framing, no caching of API answers.
pub(super) async fn secure_headers(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    r
}

/// A query string, checked after the caller is (so a caller without credentials
/// learns nothing from a bad query).
pub(super) type Q<T> = Result<axum::extract::Query<T>, axum::extract::rejection::QueryRejection>;
/// A path parameter, likewise.
pub(super) type P<T> = Result<axum::extract::Path<T>, axum::extract::rejection::PathRejection>;

/// The query, or 400 `invalid` naming `query`.
pub(super) fn query<T>(q: Q<T>) -> ApiResult<T> {
    q.map(|axum::extract::Query(t)| t)
        .map_err(|e| ApiError::invalid_field("query", &e.body_text()))
}

/// The path parameter, or 400 `invalid` naming `id`.
pub(super) fn path<T>(p: P<T>) -> ApiResult<T> {
    p.map(|axum::extract::Path(t)| t)
        .map_err(|e| ApiError::invalid_field("id", &e.body_text()))
}

/// A request's body. Errors: 413 `too_large` over the size limit.
pub(super) fn body_bytes(body: Result<Bytes, BytesRejection>) -> ApiResult<Bytes> {
    body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                "the request body is over the server's limit (max_body_bytes)",
            )
        } else {
            ApiError::new(StatusCode::BAD_REQUEST, "invalid", e.body_text())
        }
    })
}

/// A JSON body decoded as `T`, the failing field named (`body.<path>`).
///
/// Errors: 413 `too_large` over the size limit; 400 `invalid` otherwise.
pub(super) fn json_body<T: DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> ApiResult<T> {
    let bytes = body_bytes(body)?;
    let de = &mut serde_json::Deserializer::from_slice(&bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            "body".to_string()
        } else {
            format!("body.{path}")
        };
        ApiError::invalid_field(&field, &e.into_inner().to_string())
    })
}

/// A JSON answer with `status`.
pub(super) fn json<T: serde::Serialize>(status: StatusCode, value: &T) -> Response {
    (status, axum::Json(value)).into_response()
}

/// A page size from a query: 1-1000, 50 by default.
pub(super) fn page_size(limit: Option<usize>) -> ApiResult<usize> {
    match limit {
        None => Ok(50),
        Some(n) if (1..=1000).contains(&n) => Ok(n),
        Some(n) => Err(ApiError::invalid("limit", n, "must be 1-1000")),
    }
}
