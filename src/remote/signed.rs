//! Signed HTTP answers, shared by the servers of the remote protocol (the executor
//! server and the registration endpoint): a request's signature, timestamp and
//! nonce checked before its body is read, and every answer — refusals included —
//! signed over the request's nonce with the responder's clock.

use super::auth::{self, Refusal, Verifier};
use super::protocol::ErrorBody;
use crate::error::{Error, Result};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::sync::Arc;
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

/// Checks a request's signature (for one of `targets`, see
/// [`Verifies::targets`]) and decodes its body; the error is the answer.
pub(crate) fn authed<T: DeserializeOwned>(
    v: &Verifier,
    targets: &[String],
    method: &Method,
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
    let path = targets.first().map_or("", String::as_str);
    if let Err(r) = v.check(
        now_ms(),
        method.as_str(),
        targets,
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
        Refusal::BadSignature => "the signature does not match this group's secret and a request addressed to this instance",
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

/// Picks the verifier a request's signature is checked against: the executor
/// server's one secret, or the secret of the group a registration names.
pub(crate) trait Verifies: Send + Sync + 'static {
    /// The verifier for a request whose body is `body`; the (unsigned) refusal when
    /// no secret applies.
    fn verifier_for(&self, body: &[u8]) -> std::result::Result<Arc<Verifier>, Box<Response>>;

    /// What a request for `path` may be signed for: the path itself, unless the
    /// server is an instance, whose requests name it ([`auth::addressed`]).
    fn targets(&self, path: &str) -> Vec<String> {
        vec![path.to_string()]
    }
}

/// What signs the answers to one request: its secret's verifier and its nonce.
/// Every answer a handler gives goes through it, refusals included.
#[derive(Clone)]
pub(crate) struct Replier {
    verifier: Arc<Verifier>,
    nonce: String,
}

impl Replier {
    /// `200` with `body` as JSON, signed.
    pub(crate) fn ok<T: Serialize>(&self, body: &T) -> Response {
        json_answer(&self.verifier, &self.nonce, body)
    }

    /// A signed refusal: `status`, and `{"error": code, "message": message}`.
    pub(crate) fn refuse(&self, status: u16, code: &str, message: String) -> Response {
        refuse(&self.verifier, &self.nonce, status, code, message)
    }
}

/// A signed request: its signature, timestamp and nonce checked against the secret
/// the server's state picks ([`Verifies`]) before its body is decoded as `T`, and
/// what signs the answers to it. A handler that takes one cannot forget the check;
/// a request that fails it gets the signed refusal and never reaches the handler.
pub(crate) struct Signed<T> {
    /// The decoded body.
    pub(crate) body: T,
    /// Signs the answers.
    pub(crate) reply: Replier,
}

impl<S, T> axum::extract::FromRequest<Arc<S>> for Signed<T>
where
    S: Verifies,
    T: DeserializeOwned,
{
    type Rejection = Response;

    async fn from_request(
        req: axum::extract::Request,
        state: &Arc<S>,
    ) -> std::result::Result<Self, Response> {
        let (parts, body) = req.into_parts();
        let req = axum::extract::Request::from_parts(parts.clone(), body);
        let bytes: Body = Bytes::from_request(req, state).await;
        let verifier = match &bytes {
            Ok(b) => state.verifier_for(b).map_err(|r| *r)?,
            Err(e) => {
                return Err(unsigned_refusal(e.status(), "too_large", &e.body_text()));
            }
        };
        let path = parts
            .uri
            .path_and_query()
            .map_or(parts.uri.path(), |p| p.as_str());
        let targets = state.targets(path);
        let (body, nonce) = authed::<T>(&verifier, &targets, &parts.method, &parts.headers, &bytes)
            .map_err(|r| *r)?;
        Ok(Signed {
            body,
            reply: Replier { verifier, nonce },
        })
    }
}

/// What both servers of the remote protocol (the executor server and the
/// registration endpoint) take alike: the replay window, the largest request body and
/// TLS; checked and served the same way.
#[derive(Clone, Debug)]
pub(crate) struct ServerOptions {
    pub(crate) replay_window: Duration,
    pub(crate) max_body_bytes: usize,
    pub(crate) tls: Option<(Vec<u8>, Vec<u8>)>,
}

/// The names a server's settings are refused under (`executor.*`, `registry.*`).
pub(crate) struct OptionNames {
    pub(crate) server: &'static str,
    pub(crate) replay_window: &'static str,
    pub(crate) max_body_bytes: &'static str,
    pub(crate) tls: super::tls::Fields,
}

impl ServerOptions {
    /// A replay window of 60 s, no TLS, and bodies up to `max_body_bytes`.
    pub(crate) fn new(max_body_bytes: usize) -> ServerOptions {
        ServerOptions {
            replay_window: Duration::from_secs(60),
            max_body_bytes,
            tls: None,
        }
    }

    /// Checks the options: the body limit within `body_range`, the replay window.
    /// Errors: [`Error::Invalid`] named after `names`.
    pub(crate) fn validate(&self, names: &OptionNames, body_range: (usize, usize)) -> Result<()> {
        let (lo, hi) = body_range;
        if !(lo..=hi).contains(&self.max_body_bytes) {
            return Err(Error::invalid(
                names.max_body_bytes,
                self.max_body_bytes,
                format!("must be {lo}-{hi}"),
            ));
        }
        check_replay_window(names.replay_window, self.replay_window)
    }

    /// `app` limited to the body size, served on `listener` (TLS when configured)
    /// until the returned token is cancelled.
    ///
    /// Errors: [`Error::Invalid`] for a bad certificate or key; [`Error::Backend`]
    /// when the listener has no address.
    pub(crate) fn serve(
        &self,
        names: &OptionNames,
        listener: tokio::net::TcpListener,
        app: axum::Router,
    ) -> Result<(
        std::net::SocketAddr,
        tokio_util::sync::CancellationToken,
        tokio::task::JoinHandle<()>,
    )> {
        let addr = listener
            .local_addr()
            .map_err(|e| Error::backend(names.server, "bind", false, e))?;
        let tls = match &self.tls {
            Some((cert, key)) => Some(super::tls::server_config(names.tls, cert, key)?),
            None => None,
        };
        let app = app.layer(axum::extract::DefaultBodyLimit::max(self.max_body_bytes));
        let stop = tokio_util::sync::CancellationToken::new();
        let task = super::tls::spawn_serve(listener, addr, app, tls, stop.clone());
        Ok((addr, stop, task))
    }
}
