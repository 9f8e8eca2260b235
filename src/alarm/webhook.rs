//! [`WebhookAlarm`] (feature `webhook`): POSTs each alarm event as JSON to a URL.
//!
//! # The body (`WebhookFormat::Jobwheel`, version 1)
//!
//! ```json
//! {
//!   "version": 1,
//!   "type": "jobwheel.alarm",
//!   "summary": "final_failure: job reports.daily (handler report) attempt 3/3",
//!   "event": {
//!     "kind": "final_failure", "job_id": "reports.daily", "handler": "report",
//!     "run_id": 42, "fire_at": 1796631000000, "zone": "Europe/Berlin",
//!     "attempt": 3, "max_attempts": 3, "node": "web-1-8d1f", "duration_ms": 1250,
//!     "error": "timeout talking to db", "will_retry": false,
//!     "next_fire_at": 1796717400000, "recipients": [], "occurred_at": 1796631001250,
//!     "suppressed": 0, "covers": null
//!   },
//!   "fire_at_utc": "2026-12-07T08:30:00.000Z",
//!   "fire_at_local": "2026-12-07 09:30:00 CET (+01:00)",
//!   "next_fire_at_utc": "2026-12-08T08:30:00.000Z"
//! }
//! ```
//!
//! Instants in `event` are epoch milliseconds (UTC); `kind` is one of `final_failure`,
//! `failure`, `lost`, `misfire`, `recovery`. A `misfire` event's `covers` is the span
//! of scheduled fires the misfire stood for (`{"fires": 12, "first": …, "through": …}`),
//! `null` for other kinds. New fields may be added within version 1;
//! a change of meaning bumps `version`. `Slack`, `DingTalk` and `Feishu` send those
//! services' text-message shapes instead, with the same facts as text.
//!
//! # Signature
//!
//! With a secret, each request carries `X-Jobwheel-Timestamp` (Unix seconds) and
//! `X-Jobwheel-Signature: v1=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>`. A
//! receiver recomputes the HMAC over the raw body bytes, compares in constant time,
//! and rejects timestamps more than a few minutes old (replays). In Python:
//!
//! ```text
//! expected = "v1=" + hmac.new(secret, f"{ts}.".encode() + body, hashlib.sha256).hexdigest()
//! ok = hmac.compare_digest(expected, request.headers["X-Jobwheel-Signature"]) \
//!      and abs(time.time() - int(ts)) < 300
//! ```
//!
//! In Rust, [`verify_signature`] does the same check.
//!
//! # Outcomes
//!
//! A 2xx answer is success. A timeout, a connection error, 408, 429 and 5xx are
//! retryable failures (the outbox retries them with backoff); any other answer is a
//! permanent failure. The secret and the values of custom headers never appear in
//! `Debug` output or in errors.

use crate::alarm::{AlarmError, JobAlarm};
use crate::error::{Error, Result};
use crate::record::AlarmEvent;
use async_trait::async_trait;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::json;
use sha2::Sha256;
use std::fmt;
use std::time::Duration;

/// The body shape a [`WebhookAlarm`] sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum WebhookFormat {
    /// jobwheel's versioned JSON (module docs).
    #[default]
    Jobwheel,
    /// Slack incoming webhook: `{"text": …}`.
    Slack,
    /// DingTalk robot: `{"msgtype": "text", "text": {"content": …}}`.
    DingTalk,
    /// Feishu / Lark bot: `{"msg_type": "text", "content": {"text": …}}`.
    Feishu,
}

/// Posts alarm events to an HTTP endpoint. Build with [`WebhookAlarm::builder`].
#[derive(Clone)]
pub struct WebhookAlarm {
    name: String,
    url: reqwest::Url,
    secret: Option<Vec<u8>>,
    headers: Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>,
    format: WebhookFormat,
    client: reqwest::Client,
}

impl fmt::Debug for WebhookAlarm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookAlarm")
            .field("name", &self.name)
            .field("url", &redacted_url(&self.url))
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>(),
            )
            .field("format", &self.format)
            .finish()
    }
}

/// The URL without user info or query (tokens often travel there).
fn redacted_url(url: &reqwest::Url) -> String {
    format!(
        "{}://{}{}{}",
        url.scheme(),
        url.host_str().unwrap_or(""),
        url.port().map(|p| format!(":{p}")).unwrap_or_default(),
        url.path()
    )
}

/// Builds a [`WebhookAlarm`].
#[derive(Clone)]
pub struct WebhookBuilder {
    url: String,
    name: String,
    secret: Option<Vec<u8>>,
    headers: Vec<(String, String)>,
    format: WebhookFormat,
    timeout: Duration,
}

impl fmt::Debug for WebhookBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookBuilder")
            .field("name", &self.name)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field("format", &self.format)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl WebhookAlarm {
    /// A builder posting to `url` (`http` or `https`), jobwheel format, no secret,
    /// 10 s timeout.
    pub fn builder(url: impl Into<String>) -> WebhookBuilder {
        WebhookBuilder {
            url: url.into(),
            name: "webhook".into(),
            secret: None,
            headers: Vec::new(),
            format: WebhookFormat::Jobwheel,
            timeout: Duration::from_secs(10),
        }
    }

    /// The body this alarm sends for `event`.
    pub fn body(&self, event: &AlarmEvent) -> serde_json::Value {
        body(self.format, event)
    }
}

impl WebhookBuilder {
    /// Name in logs and outbox errors (default `webhook`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Signs each request with HMAC-SHA256 under `secret` (module docs).
    pub fn secret(mut self, secret: impl AsRef<[u8]>) -> Self {
        self.secret = Some(secret.as_ref().to_vec());
        self
    }

    /// Adds a header to every request (for example `Authorization`).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The body shape.
    pub fn format(mut self, format: WebhookFormat) -> Self {
        self.format = format;
        self
    }

    /// Longest time one request may take (default 10 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Checks everything. Errors: [`Error::Invalid`] naming `webhook.url`,
    /// `webhook.timeout`, `webhook.secret` or `webhook.header`.
    pub fn build(self) -> Result<WebhookAlarm> {
        let url = reqwest::Url::parse(&self.url)
            .map_err(|e| Error::invalid("webhook.url", &self.url, e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Error::invalid(
                "webhook.url",
                redacted_url(&url),
                "must be an http or https URL",
            ));
        }
        if self.timeout.is_zero() {
            return Err(Error::invalid("webhook.timeout", "0s", "must be positive"));
        }
        if self.secret.as_ref().is_some_and(Vec::is_empty) {
            return Err(Error::invalid(
                "webhook.secret",
                "\"\"",
                "must not be empty",
            ));
        }
        let headers = self
            .headers
            .iter()
            .map(|(n, v)| {
                let name = reqwest::header::HeaderName::from_bytes(n.as_bytes())
                    .map_err(|_| Error::invalid("webhook.header", n, "not a valid header name"))?;
                let mut value = reqwest::header::HeaderValue::from_str(v).map_err(|_| {
                    Error::invalid("webhook.header", n, "value is not a valid header value")
                })?;
                value.set_sensitive(true);
                Ok((name, value))
            })
            .collect::<Result<Vec<_>>>()?;
        let client = reqwest::Client::builder()
            .timeout(self.timeout)
            .build()
            .map_err(|e| Error::invalid("webhook.url", redacted_url(&url), e.to_string()))?;
        Ok(WebhookAlarm {
            name: self.name,
            url,
            secret: self.secret,
            headers,
            format: self.format,
            client,
        })
    }
}

fn body(format: WebhookFormat, e: &AlarmEvent) -> serde_json::Value {
    match format {
        WebhookFormat::Jobwheel => json!({
            "version": 1,
            "type": "jobwheel.alarm",
            "summary": e.summary(),
            "event": e,
            "fire_at_utc": e.fire_at.to_string(),
            "fire_at_local": e.fire_at_local(),
            "next_fire_at_utc": e.next_fire_at.map(|t| t.to_string()),
        }),
        WebhookFormat::Slack => json!({ "text": text(e) }),
        WebhookFormat::DingTalk => json!({ "msgtype": "text", "text": { "content": text(e) } }),
        WebhookFormat::Feishu => json!({ "msg_type": "text", "content": { "text": text(e) } }),
    }
}

/// The event as a few lines of text, for chat-style webhooks.
fn text(e: &AlarmEvent) -> String {
    let mut t = format!(
        "[jobwheel] {}\nfire: {} ({})\nnode: {}",
        e.summary(),
        e.fire_at_local(),
        e.fire_at,
        e.node
    );
    if let Some(err) = &e.error {
        t.push_str(&format!("\nerror: {err}"));
    }
    t.push_str(if e.will_retry {
        "\nwill retry"
    } else {
        "\nno retry"
    });
    if let Some(n) = e.next_fire_local() {
        t.push_str(&format!("\nnext fire: {n}"));
    }
    if let Some(c) = e.covers_local() {
        t.push_str(&format!("\nmisfire: {c}"));
    }
    if e.suppressed > 0 {
        t.push_str(&format!("\n({} similar alarms suppressed)", e.suppressed));
    }
    t
}

/// `v1=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>`.
pub fn signature(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any size");
    mac.update(format!("{timestamp}.").as_bytes());
    mac.update(body);
    let bytes = mac.finalize().into_bytes();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("v1={hex}")
}

/// What a receiver checks: `header` is the signature of `body` at `timestamp` under
/// `secret` (compared in constant time), and `timestamp` is within `tolerance` of
/// `now` (both Unix seconds).
pub fn verify_signature(
    secret: &[u8],
    timestamp: i64,
    body: &[u8],
    header: &str,
    now: i64,
    tolerance: Duration,
) -> bool {
    let Some(hex) = header.strip_prefix("v1=") else {
        return false;
    };
    let Some(given) = (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()
    else {
        return false;
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any size");
    mac.update(format!("{timestamp}.").as_bytes());
    mac.update(body);
    mac.verify_slice(&given).is_ok() && now.abs_diff(timestamp) <= tolerance.as_secs()
}

#[async_trait]
impl JobAlarm for WebhookAlarm {
    fn name(&self) -> &str {
        &self.name
    }

    async fn alarm(&self, event: &AlarmEvent) -> std::result::Result<(), AlarmError> {
        let body = serde_json::to_vec(&body(self.format, event))
            .map_err(|e| AlarmError::permanent(format!("encoding the body: {e}")))?;
        let mut req = self
            .client
            .post(self.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(
                reqwest::header::USER_AGENT,
                concat!("jobwheel/", env!("CARGO_PKG_VERSION")),
            );
        for (n, v) in &self.headers {
            req = req.header(n, v);
        }
        if let Some(secret) = &self.secret {
            let ts = chrono::Utc::now().timestamp();
            req = req
                .header("X-Jobwheel-Timestamp", ts.to_string())
                .header("X-Jobwheel-Signature", signature(secret, ts, &body));
        }
        let where_to = redacted_url(&self.url);
        let resp = req.body(body).send().await.map_err(|e| {
            // reqwest's message can include the URL; say only what kind of failure.
            let kind = if e.is_timeout() {
                "timed out"
            } else if e.is_connect() {
                "could not connect"
            } else {
                "request failed"
            };
            AlarmError::retryable(format!("POST {where_to}: {kind}"))
        })?;
        let status = resp.status();
        if status.is_success() {
            return Ok(());
        }
        let message = format!("POST {where_to}: HTTP {}", status.as_u16());
        if status.is_server_error() || status.as_u16() == 408 || status.as_u16() == 429 {
            Err(AlarmError::retryable(message))
        } else {
            Err(AlarmError::permanent(message))
        }
    }
}
