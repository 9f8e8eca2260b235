//! [`EmailAlarm`] (feature `email`): sends each alarm event as an e-mail over SMTP
//! (lettre, tokio, rustls).
//!
//! ```no_run
//! # fn t() -> jobwheel::Result<()> {
//! use jobwheel::alarm::email::{EmailAlarm, SmtpSecurity};
//! let alarm = EmailAlarm::builder("smtp.example.com")
//!     .security(SmtpSecurity::StartTls)
//!     .credentials("alerts", std::env::var("SMTP_PASSWORD").unwrap_or_default())
//!     .from("jobwheel <jobs@example.com>")
//!     .to("oncall@example.com")
//!     .build()?;
//! # Ok(()) }
//! ```
//!
//! Recipients are the deployment's `to` list plus the job's own
//! ([`AlarmPolicy::recipients`](crate::AlarmPolicy::recipients), as XXL-JOB's alarm
//! e-mail field); a job recipient that is not an address is skipped with a warning.
//! The default template ([`DefaultTemplate`]) gives the kind and job in the subject,
//! and a plain-text and an HTML part with the job, handler, fire time in the job's zone
//! and in UTC, attempt and max attempts, node, duration, error, whether it will retry
//! and the next fire; any [`EmailTemplate`] (a closure works) replaces it.
//!
//! A transient SMTP failure (connection refused, timeout, 4xx) is retryable, so the
//! outbox retries it with backoff; a permanent 5xx answer is not. The password never
//! appears in `Debug` output or in errors.

use crate::alarm::{AlarmError, JobAlarm};
use crate::error::{Error, Result};
use crate::record::AlarmEvent;
use async_trait::async_trait;
use lettre::message::{Mailbox, MultiPart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// How the connection to the SMTP server is secured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SmtpSecurity {
    /// STARTTLS, required (default port 587). The default.
    #[default]
    StartTls,
    /// TLS from the first byte (default port 465).
    ImplicitTls,
    /// No TLS (default port 25): for a relay on the same host or network only.
    Plain,
}

/// Subject and bodies of one alarm e-mail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmailContent {
    /// Subject line.
    pub subject: String,
    /// Plain-text part.
    pub text: String,
    /// HTML part.
    pub html: String,
}

/// Renders an event as an e-mail. Closures `Fn(&AlarmEvent) -> EmailContent`
/// implement it.
pub trait EmailTemplate: Send + Sync + 'static {
    /// The e-mail for `event`.
    fn render(&self, event: &AlarmEvent) -> EmailContent;
}

impl<F: Fn(&AlarmEvent) -> EmailContent + Send + Sync + 'static> EmailTemplate for F {
    fn render(&self, event: &AlarmEvent) -> EmailContent {
        self(event)
    }
}

/// The built-in template: every fact an operator needs, as text and as an HTML table.
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultTemplate;

impl DefaultTemplate {
    /// The facts as (label, value) rows, in the order both parts show them.
    pub fn rows(e: &AlarmEvent) -> Vec<(&'static str, String)> {
        let mut rows = vec![
            ("Event", e.kind.as_str().to_string()),
            ("Job", e.job_id.to_string()),
            ("Handler", e.handler.clone()),
            ("Fire time", e.fire_at_local()),
            ("Fire time (UTC)", e.fire_at.to_string()),
            ("Attempt", format!("{} of {}", e.attempt, e.max_attempts)),
            ("Node", e.node.clone()),
            (
                "Duration",
                e.duration_ms
                    .map_or_else(|| "unknown".into(), |ms| format!("{ms} ms")),
            ),
            ("Error", e.error.clone().unwrap_or_else(|| "none".into())),
            (
                "Will retry",
                if e.will_retry { "yes" } else { "no" }.to_string(),
            ),
            (
                "Next fire",
                e.next_fire_local().map_or_else(
                    || "none".into(),
                    |l| format!("{l} / {}", e.next_fire_at.unwrap_or_default()),
                ),
            ),
        ];
        if let Some(run) = e.run_id {
            rows.insert(3, ("Run", run.to_string()));
        }
        if let Some(c) = e.covers_local() {
            rows.push(("Missed fires", c));
        }
        if !e.blocked.is_empty() {
            let ids: Vec<String> = e.blocked.iter().map(ToString::to_string).collect();
            rows.push(("Blocked children", ids.join(", ")));
        }
        if !e.waiting_for.is_empty() {
            let ids: Vec<String> = e.waiting_for.iter().map(ToString::to_string).collect();
            rows.push(("Waiting for", ids.join(", ")));
        }
        if e.suppressed > 0 {
            rows.push((
                "Suppressed",
                format!("{} similar alarms since the last one", e.suppressed),
            ));
        }
        rows
    }
}

impl EmailTemplate for DefaultTemplate {
    fn render(&self, e: &AlarmEvent) -> EmailContent {
        let rows = DefaultTemplate::rows(e);
        let subject = format!(
            "[jobwheel] {} {} (attempt {}/{})",
            e.kind.as_str(),
            e.job_id,
            e.attempt,
            e.max_attempts
        );
        let width = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
        let text = rows
            .iter()
            .map(|(l, v)| format!("{l:width$}  {v}\n"))
            .collect::<String>();
        let html = format!(
            "<html><body><h3>{}</h3><table>{}</table></body></html>",
            escape(&e.summary()),
            rows.iter()
                .map(|(l, v)| format!("<tr><th align=\"left\">{l}</th><td>{}</td></tr>", escape(v)))
                .collect::<String>()
        );
        EmailContent {
            subject,
            text,
            html,
        }
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// Sends alarm events by e-mail. Build with [`EmailAlarm::builder`].
#[derive(Clone)]
pub struct EmailAlarm {
    name: String,
    server: String,
    from: Mailbox,
    to: Vec<Mailbox>,
    template: Arc<dyn EmailTemplate>,
    transport: AsyncSmtpTransport<Tokio1Executor>,
}

impl fmt::Debug for EmailAlarm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmailAlarm")
            .field("name", &self.name)
            .field("server", &self.server)
            .field("from", &self.from.to_string())
            .field(
                "to",
                &self.to.iter().map(ToString::to_string).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// Builds an [`EmailAlarm`].
#[derive(Clone)]
pub struct EmailBuilder {
    host: String,
    port: Option<u16>,
    security: SmtpSecurity,
    credentials: Option<(String, String)>,
    from: Option<String>,
    to: Vec<String>,
    timeout: Duration,
    name: String,
    template: Arc<dyn EmailTemplate>,
}

impl fmt::Debug for EmailBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmailBuilder")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("security", &self.security)
            .field("user", &self.credentials.as_ref().map(|(u, _)| u))
            .field("password", &self.credentials.as_ref().map(|_| "<redacted>"))
            .field("from", &self.from)
            .field("to", &self.to)
            .finish_non_exhaustive()
    }
}

impl EmailAlarm {
    /// A builder for the SMTP server at `host`: STARTTLS, no credentials, 15 s timeout,
    /// the default template.
    pub fn builder(host: impl Into<String>) -> EmailBuilder {
        EmailBuilder {
            host: host.into(),
            port: None,
            security: SmtpSecurity::StartTls,
            credentials: None,
            from: None,
            to: Vec::new(),
            timeout: Duration::from_secs(15),
            name: "email".into(),
            template: Arc::new(DefaultTemplate),
        }
    }

    /// The message this alarm sends for `event`. Errors: no valid recipient (
    /// permanent).
    pub fn message(&self, event: &AlarmEvent) -> std::result::Result<Message, AlarmError> {
        let content = self.template.render(event);
        let mut b = Message::builder()
            .from(self.from.clone())
            .subject(content.subject);
        let mut any = false;
        let mut seen = std::collections::HashSet::new();
        let job_recipients = event.recipients.iter().filter_map(|r| match r.parse::<Mailbox>() {
            Ok(m) => Some(m),
            Err(_) => {
                tracing::warn!(job = %event.job_id, recipient = %r, "not an e-mail address; skipped");
                None
            }
        });
        for m in self.to.iter().cloned().chain(job_recipients) {
            if seen.insert(m.email.to_string().to_ascii_lowercase()) {
                b = b.to(m);
                any = true;
            }
        }
        if !any {
            return Err(AlarmError::permanent("no valid recipient"));
        }
        b.multipart(MultiPart::alternative_plain_html(
            content.text,
            content.html,
        ))
        .map_err(|e| AlarmError::permanent(format!("building the message: {e}")))
    }
}

impl EmailBuilder {
    /// The port (default: 587 STARTTLS, 465 implicit TLS, 25 plain).
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }

    /// How the connection is secured.
    pub fn security(mut self, security: SmtpSecurity) -> Self {
        self.security = security;
        self
    }

    /// Authenticates with a user and password.
    pub fn credentials(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.credentials = Some((user.into(), password.into()));
        self
    }

    /// The sender (`jobs@example.com` or `Name <jobs@example.com>`). Required.
    pub fn from(mut self, from: impl Into<String>) -> Self {
        self.from = Some(from.into());
        self
    }

    /// Adds a recipient of every alarm.
    pub fn to(mut self, to: impl Into<String>) -> Self {
        self.to.push(to.into());
        self
    }

    /// Longest time one SMTP conversation may take (default 15 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Name in logs and outbox errors (default `email`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Replaces the template.
    pub fn template(mut self, template: impl EmailTemplate) -> Self {
        self.template = Arc::new(template);
        self
    }

    /// Checks everything. Errors: [`Error::Invalid`] naming `email.host`, `email.from`,
    /// `email.to` or `email.timeout`. Recipients may come from jobs alone, so an empty
    /// `to` is allowed.
    pub fn build(self) -> Result<EmailAlarm> {
        if self.host.is_empty() || self.host.contains(char::is_whitespace) {
            return Err(Error::invalid(
                "email.host",
                &self.host,
                "must be a host name",
            ));
        }
        if self.timeout.is_zero() {
            return Err(Error::invalid("email.timeout", "0s", "must be positive"));
        }
        let from_text = self
            .from
            .ok_or_else(|| Error::invalid("email.from", "(none)", "a sender is required"))?;
        let from: Mailbox = from_text
            .parse()
            .map_err(|e| Error::invalid("email.from", &from_text, format!("{e}")))?;
        let to = self
            .to
            .iter()
            .map(|t| {
                t.parse::<Mailbox>()
                    .map_err(|e| Error::invalid("email.to", t, format!("{e}")))
            })
            .collect::<Result<Vec<_>>>()?;
        let tls_err = |e: lettre::transport::smtp::Error| {
            Error::invalid("email.host", &self.host, e.to_string())
        };
        let mut t = match self.security {
            SmtpSecurity::StartTls => {
                AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(&self.host).map_err(tls_err)?
            }
            SmtpSecurity::ImplicitTls => {
                AsyncSmtpTransport::<Tokio1Executor>::relay(&self.host).map_err(tls_err)?
            }
            SmtpSecurity::Plain => {
                AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&self.host).port(25)
            }
        };
        if let Some(p) = self.port {
            t = t.port(p);
        }
        if let Some((user, password)) = self.credentials {
            t = t.credentials(Credentials::new(user, password));
        }
        let transport = t.timeout(Some(self.timeout)).build();
        let port = self.port.unwrap_or(match self.security {
            SmtpSecurity::StartTls => 587,
            SmtpSecurity::ImplicitTls => 465,
            SmtpSecurity::Plain => 25,
        });
        Ok(EmailAlarm {
            name: self.name,
            server: format!("{}:{port}", self.host),
            from,
            to,
            template: self.template,
            transport,
        })
    }
}

#[async_trait]
impl JobAlarm for EmailAlarm {
    fn name(&self) -> &str {
        &self.name
    }

    async fn alarm(&self, event: &AlarmEvent) -> std::result::Result<(), AlarmError> {
        let message = self.message(event)?;
        match self.transport.send(message).await {
            Ok(_) => Ok(()),
            Err(e) => {
                let message = format!("SMTP {}: {e}", self.server);
                if e.is_permanent() {
                    Err(AlarmError::permanent(message))
                } else {
                    Err(AlarmError::retryable(message))
                }
            }
        }
    }
}
