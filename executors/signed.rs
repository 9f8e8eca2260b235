//! Signed HTTP answers, shared by the servers of the remote protocol (the executor
//! server and the registration endpoint): a request's signature, timestamp and
//! nonce checked before its body is read, and every answer — refusals included —
//! signed over the request's nonce with the responder's clock.

use super::auth::{self, Refusal, Verifier};
use super::protocol::ErrorBody;
use crate::error::{Error, Result};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::time::Duration;

pub(crate) fn now_ms() -> i64 {
    crate::time::Timestamp::now().as_millis()
}

/// A signed answer bound to the request's nonce.
pub(crate) fn answer(v: &Verifier, nonce: &str, status: StatusCode, body: Vec<u8>) -> Response {
    let ts = now_ms();
    let sig = v.secret().sign_response(status.as_u16(), nonce, ts, &body);
    let mut r = (status, body).into_response();
    let h = r.headers_mut();
    h.insert("content-type", HeaderValue::from_static("application/json"));
    h.insert(auth::TIMESTAMP, HeaderValue::from(ts));
    if let Ok(v) = HeaderValue::from_str(&sig) {
        h.insert(auth::SIGNATURE, v);
    }
    r
}

pub(crate) fn json_answer<T: Serialize>(v: &Verifier, nonce: &str, body: &T) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    answer(v, nonce, StatusCode::OK, bytes)
}

pub(crate) fn refuse(
    v: &Verifier,
    nonce: &str,
    status: u16,
    code: &str,
    message: String,
) -> Response {
    let body = serde_json::to_vec(&ErrorBody {
        error: code.to_string(),
        message,
    })
    .unwrap_or_default();
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    answer(v, nonce, status, body)
}

/// Checks a request's signature and decodes its body; the error is the answer.
pub(crate) fn authed<T: DeserializeOwned>(
    v: &Verifier,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Body,
) -> std::result::Result<(T, String), Box<Response>> {
    let h = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let nonce = h(auth::NONCE).unwrap_or("").to_string();
    let body = match body {
        Ok(b) => b,
        Err(e) => {
            return Err(Box::new(refuse(
                v,
                &nonce,
                e.status().as_u16(),
                "too_large",
                e.body_text(),
            )));
        }
    };
    let path = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    if let Err(r) = v.check(
        now_ms(),
        method.as_str(),
        path,
        h(auth::TIMESTAMP),
        h(auth::NONCE),
        h(auth::SIGNATURE),
        body,
    ) {
        let status = if r == Refusal::Overloaded { 503 } else { 401 };
        tracing::warn!(refusal = r.as_str(), path, "signed request refused");
        return Err(Box::new(refuse(
            v,
            &nonce,
            status,
            r.as_str(),
            refusal_message(r),
        )));
    }
    match serde_json::from_slice(body) {
        Ok(v) => Ok((v, nonce)),
        Err(e) => Err(Box::new(refuse(
            v,
            &nonce,
            400,
            "bad_request",
            e.to_string(),
        ))),
    }
}

fn refusal_message(r: Refusal) -> String {
    match r {
        Refusal::Unsigned => "sign the request: x-jobwheel-timestamp, x-jobwheel-nonce, x-jobwheel-signature",
        Refusal::BadSignature => "the signature does not match this group's secret",
        Refusal::Skewed => "the timestamp is outside the replay window of this instance's clock (given in x-jobwheel-timestamp)",
        Refusal::Replayed => "this nonce was already used",
        Refusal::Overloaded => "too many requests within the replay window",
    }
    .to_string()
}

/// A request body, or why it could not be read (too large).
pub(crate) type Body = std::result::Result<Bytes, BytesRejection>;

/// A refusal that cannot be signed: the request names no group this server knows
/// (or its body cannot be read far enough to tell), so there is no secret to sign
/// with. An unknown group is refused like a bad signature, so a caller without a
/// group's secret learns nothing about which groups exist.
pub(crate) fn unsigned_refusal(status: StatusCode, code: &str, message: &str) -> Response {
    let body = serde_json::to_vec(&ErrorBody {
        error: code.to_string(),
        message: message.to_string(),
    })
    .unwrap_or_default();
    let mut r = (status, body).into_response();
    r.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    r
}

/// The request's nonce header, or `""`.
pub(crate) fn nonce_of(headers: &HeaderMap) -> String {
    headers
        .get(auth::NONCE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// Checks a server's replay window: 1 s to 1 h. Errors: [`Error::Invalid`] on `field`.
pub(crate) fn check_replay_window(field: &'static str, window: Duration) -> Result<()> {
    crate::limits::duration(field, window, Duration::from_secs(3600))?;
    if window < Duration::from_secs(1) {
        return Err(Error::invalid(
            field,
            format!("{window:?}"),
            "must be at least 1s",
        ));
    }
    Ok(())
}
