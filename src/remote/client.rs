//! Signed calls from a scheduler node to executor instances: each request signed
//! on the instance's clock as last learned from its signed answers, each answer's
//! signature checked before it is read.

use super::auth::{self, Secret};
use super::protocol::ErrorBody;
use crate::error::{Error, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Why a call to an instance failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CallError {
    /// No answer (connection refused, timeout, reset).
    Unreachable(String),
    /// A signed refusal.
    Refused {
        status: u16,
        code: String,
        message: String,
    },
    /// An answer that is not signed with the group's secret, or unreadable.
    Unauthentic(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Unreachable(m) => write!(f, "unreachable: {m}"),
            CallError::Refused {
                status,
                code,
                message,
            } => write!(f, "refused {status} {code}: {message}"),
            CallError::Unauthentic(m) => write!(f, "unauthentic answer: {m}"),
        }
    }
}

fn now_ms() -> i64 {
    crate::time::Timestamp::now().as_millis()
}

/// A group's HTTP client: its secret, pooled connections, and each instance's
/// clock offset.
pub(crate) struct Client {
    secret: Secret,
    http: reqwest::Client,
    /// Per instance: its clock minus this node's, from its signed answers.
    offsets: Mutex<HashMap<String, i64>>,
    request_timeout: Duration,
    max_answer_bytes: usize,
}

impl Client {
    /// A client signing with `secret`. Errors: [`Error::Backend`] when the HTTP
    /// client cannot be built.
    pub(crate) fn new(secret: Secret, config: &super::RemoteGroupConfig) -> Result<Client> {
        let mut http = reqwest::Client::builder().pool_max_idle_per_host(64);
        for root in config.tls_roots()? {
            http = http.add_root_certificate(root);
        }
        let http = http
            .build()
            .map_err(|e| Error::backend("remote", "client", false, e))?;
        Ok(Client {
            secret,
            http,
            offsets: Mutex::default(),
            request_timeout: config.request_timeout,
            max_answer_bytes: config.max_answer_bytes,
        })
    }

    /// The secret, to build a client with other settings.
    pub(crate) fn secret(&self) -> &Secret {
        &self.secret
    }
}

impl Client {
    /// One signed request and its verified answer. An instance whose clock is off
    /// refuses the first request as skewed; its signed refusal carries its clock,
    /// and the request is signed again on it once.
    pub(crate) async fn call<Q: Serialize, A: DeserializeOwned>(
        &self,
        instance: &str,
        path: &str,
        q: &Q,
        timeout: Option<Duration>,
    ) -> std::result::Result<A, CallError> {
        let body = serde_json::to_vec(q).map_err(|e| CallError::Unauthentic(e.to_string()))?;
        let mut last = None;
        for _ in 0..2 {
            let offset = self
                .offsets
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(instance)
                .copied()
                .unwrap_or(0);
            let sent = now_ms();
            let ts = sent + offset;
            let nonce = auth::nonce();
            // A request to an instance names it, so it passes there only; the
            // registration endpoint is not one, and its requests name the path.
            let target = if path.starts_with("/v1/registry/") {
                path.to_string()
            } else {
                auth::addressed(instance, path)
            };
            let sig = self.secret.sign_request("POST", &target, ts, &nonce, &body);
            let resp = self
                .http
                .post(format!("{instance}{path}"))
                .header("content-type", "application/json")
                .header(auth::TIMESTAMP, ts)
                .header(auth::NONCE, &nonce)
                .header(auth::SIGNATURE, sig)
                .timeout(timeout.unwrap_or(self.request_timeout))
                .body(body.clone())
                .send()
                .await
                .map_err(|e| CallError::Unreachable(kind_of(&e)))?;
            let status = resp.status().as_u16();
            let header = |n: &str| {
                resp.headers()
                    .get(n)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string)
            };
            let (rts, rsig) = (header(auth::TIMESTAMP), header(auth::SIGNATURE));
            if resp
                .content_length()
                .is_some_and(|l| l > self.max_answer_bytes as u64)
            {
                return Err(CallError::Unauthentic("answer too large".into()));
            }
            let bytes = resp
                .bytes()
                .await
                .map_err(|e| CallError::Unreachable(kind_of(&e)))?;
            if bytes.len() > self.max_answer_bytes {
                return Err(CallError::Unauthentic("answer too large".into()));
            }
            let (Some(rts), Some(rsig)) = (rts.and_then(|t| t.parse::<i64>().ok()), rsig) else {
                return Err(CallError::Unauthentic(format!(
                    "HTTP {status} without a signature"
                )));
            };
            if !self
                .secret
                .verify_response(&rsig, status, &nonce, rts, &bytes)
            {
                let hint = if status == 401 {
                    ": the peer refused our signature, so the secret this side was given is probably not the group's secret there (or the peer serves no such group)"
                } else {
                    ""
                };
                return Err(CallError::Unauthentic(format!(
                    "HTTP {status} whose signature does not verify with the group's secret{hint}"
                )));
            }
            let received = now_ms();
            self.offsets
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(instance.to_string(), rts - (sent + received) / 2);
            if (200..300).contains(&status) {
                return serde_json::from_slice(&bytes)
                    .map_err(|e| CallError::Unauthentic(e.to_string()));
            }
            let e: ErrorBody = serde_json::from_slice(&bytes).unwrap_or(ErrorBody {
                error: "unknown".into(),
                message: String::from_utf8_lossy(&bytes).chars().take(200).collect(),
            });
            let refused = CallError::Refused {
                status,
                code: e.error,
                message: e.message,
            };
            let skewed =
                matches!(&refused, CallError::Refused { code, .. } if code == "skewed_timestamp");
            last = Some(refused);
            if !skewed {
                break;
            }
        }
        Err(last.expect("at least one attempt"))
    }
}

/// What kind of transport failure, without the URL reqwest's message may carry.
fn kind_of(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        "connection failed".into()
    } else {
        "transport error".into()
    }
}
