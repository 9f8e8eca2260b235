//! The server's configuration: a TOML file, then environment overrides, every field
//! validated with its name.
//!
//! ```toml
//! listen = "127.0.0.1:8080"
//! store = "postgres://jobwheel@db/jobwheel"
//! session_secret = "…at least 32 characters, signs sessions and CSRF tokens…"
//!
//! [[users]]
//! name = "alice"
//! password_hash = "$argon2id$v=19$m=19456,t=2,p=1$…"   # jobwheel hash-password
//! role = "admin"
//!
//! [[tokens]]
//! name = "deploy-bot"
//! sha256 = "…64 hex digits…"                           # jobwheel new-token
//! role = "operator"
//! groups = ["billing"]
//!
//! [[groups]]
//! name = "billing"
//! secret = "…at least 16 characters…"
//!
//! [[webhook_alarms]]
//! url = "https://hooks.example.com/jobwheel"
//! format = "slack"
//!
//! [[email_alarms]]
//! host = "smtp.example.com"
//! from = "jobs@example.com"
//! to = ["oncall@example.com"]
//! ```
//!
//! Environment overrides (after the file): `JOBWHEEL_LISTEN`, `JOBWHEEL_URL` (the
//! store), `JOBWHEEL_PREFIX`, `JOBWHEEL_SESSION_SECRET`, `JOBWHEEL_READ_ONLY`
//! (`true`/`false`), `JOBWHEEL_SESSION_TTL` (`12h`), `JOBWHEEL_SECURE_COOKIES`,
//! `JOBWHEEL_MAX_BODY_BYTES`, `JOBWHEEL_MAX_PAYLOAD_BYTES`, `JOBWHEEL_POLL_INTERVAL`,
//! `JOBWHEEL_LOGIN_CONCURRENCY`. `JOBWHEEL_SECRET` is refused: it named the session
//! secret once and is what executors were given for their group's secret, so one
//! exported value would have been both. The reference with every field and default is
//! docs/book/src/server.md.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::time::Duration;

/// What an account or token may do; each role may do everything the one before may.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Reads jobs, runs, logs, statistics, nodes, executors and alarms.
    Viewer,
    /// Also pauses, resumes and triggers jobs, kills runs, retries and discards alarms.
    Operator,
    /// Also creates, edits, copies and removes jobs, and reads the audit log.
    Admin,
}

impl Role {
    /// The role's name as it is stored and shown: `viewer`, `operator` or `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    /// The role a stored credential names (`None`: not a role this version knows).
    pub(crate) fn from_stored(text: &str) -> Option<Role> {
        [Role::Viewer, Role::Operator, Role::Admin]
            .into_iter()
            .find(|r| r.as_str() == text)
    }
}

/// Text that is never printed: `Debug` shows `"***"`.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Redacted(pub String);

impl std::fmt::Debug for Redacted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("\"***\"")
    }
}

/// Everything `jobwheel serve` reads. Unknown fields are refused (naming them), so a
/// misspelt setting is never silently ignored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ServerConfig {
    /// Address the admin API, the console and the registration endpoint listen on
    /// (default `127.0.0.1:8080`).
    #[serde(default = "default_listen")]
    pub listen: String,
    /// The store's URL (default `sqlite://jobwheel.db?mode=rwc`, in the working
    /// directory).
    #[serde(default = "default_store")]
    pub store: String,
    /// Table or key prefix of the store (the backend's default without it).
    #[serde(default)]
    pub prefix: Option<String>,
    /// Signs session cookies and CSRF tokens: at least 32 characters, required, and
    /// different from every group's secret. Every server of a cluster has the same
    /// one.
    #[serde(default)]
    pub session_secret: Redacted,
    /// Refuse every change (403 `read_only`): a console for people who only look.
    #[serde(default)]
    pub read_only: bool,
    /// How long a login lasts (default 12 h, 1 min to 30 days).
    #[serde(default = "default_session_ttl", with = "humantime_serde")]
    pub session_ttl: Duration,
    /// Mark the session cookie `Secure` (set it when the console is served over
    /// HTTPS, directly or behind a proxy).
    #[serde(default)]
    pub secure_cookies: bool,
    /// Largest request body accepted (default 1 MiB; 1 KiB to 16 MiB); larger ones
    /// are refused with 413.
    #[serde(default = "default_max_body")]
    pub max_body_bytes: usize,
    /// Largest job payload, and trigger payload override, accepted (bytes of JSON;
    /// default 64 KiB, at most `max_body_bytes`). The server's scheduler node, its
    /// API and the command line reading this file refuse larger ones naming the
    /// field.
    #[serde(default = "default_max_payload")]
    pub max_payload_bytes: usize,
    /// How often the server's scheduler node polls the store for due fires (default
    /// 1 s, 10 ms to 1 min). A change through this server's API wakes it at once.
    #[serde(default = "default_poll_interval", with = "humantime_serde")]
    pub poll_interval: Duration,
    /// Password checks run at once (default 2, 1-64): each holds argon2's memory (19
    /// MiB for hashes of `jobwheel hash-password`), so this bounds what logins cost
    /// however many arrive; 8 more per check may wait, the rest are refused 429.
    #[serde(default = "default_login_concurrency")]
    pub login_concurrency: usize,
    /// How long audit entries are kept (default 365 days).
    #[serde(default = "default_audit_retention", with = "humantime_serde")]
    pub audit_retention: Duration,
    /// People who log in to the console.
    #[serde(default)]
    pub users: Vec<UserConfig>,
    /// API tokens for scripts and the command line (`Authorization: Bearer …`).
    #[serde(default)]
    pub tokens: Vec<TokenConfig>,
    /// Remote executor groups this server dispatches to.
    #[serde(default)]
    pub groups: Vec<GroupConfig>,
    /// Webhooks every alarm event is posted to.
    #[serde(default)]
    pub webhook_alarms: Vec<WebhookConfig>,
    /// SMTP servers every alarm event is mailed through.
    #[serde(default)]
    pub email_alarms: Vec<EmailConfig>,
}

/// An alarm posted to a webhook (`jobwheel::alarm::webhook::WebhookAlarm`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct WebhookConfig {
    /// `http(s)://` URL.
    pub url: String,
    /// Signs each request with HMAC-SHA256 (the receiver checks it).
    #[serde(default)]
    pub secret: Option<Redacted>,
    /// Body shape: `jobwheel` (default), `slack`, `dingtalk` or `feishu`.
    #[serde(default)]
    pub format: Option<String>,
}

/// An alarm sent by e-mail (`jobwheel::alarm::email::EmailAlarm`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct EmailConfig {
    /// SMTP host.
    pub host: String,
    /// Port (default by `security`: 587, 465 or 25).
    #[serde(default)]
    pub port: Option<u16>,
    /// `starttls` (default), `tls` or `plain` (a relay on the same network only).
    #[serde(default)]
    pub security: Option<String>,
    /// SMTP account, with `password`.
    #[serde(default)]
    pub user: Option<String>,
    /// SMTP password.
    #[serde(default)]
    pub password: Option<Redacted>,
    /// Sender address.
    pub from: String,
    /// Recipients of every alarm (jobs may name more).
    #[serde(default)]
    pub to: Vec<String>,
}

impl WebhookConfig {
    /// The alarm. Errors: [`Error::Invalid`] naming `webhook.*`.
    pub fn alarm(&self) -> Result<crate::alarm::webhook::WebhookAlarm> {
        use crate::alarm::webhook::{WebhookAlarm, WebhookFormat};
        let mut b = WebhookAlarm::builder(&self.url);
        if let Some(s) = &self.secret {
            b = b.secret(&s.0);
        }
        let format = match self.format.as_deref() {
            None | Some("jobwheel") => WebhookFormat::Jobwheel,
            Some("slack") => WebhookFormat::Slack,
            Some("dingtalk") => WebhookFormat::DingTalk,
            Some("feishu") => WebhookFormat::Feishu,
            Some(other) => {
                return Err(Error::invalid(
                    "webhook.format",
                    other,
                    "must be jobwheel, slack, dingtalk or feishu",
                ));
            }
        };
        b.format(format).build()
    }
}

impl EmailConfig {
    /// The alarm. Errors: [`Error::Invalid`] naming `email.*`.
    pub fn alarm(&self) -> Result<crate::alarm::email::EmailAlarm> {
        use crate::alarm::email::{EmailAlarm, SmtpSecurity};
        let security = match self.security.as_deref() {
            None | Some("starttls") => SmtpSecurity::StartTls,
            Some("tls") => SmtpSecurity::ImplicitTls,
            Some("plain") => SmtpSecurity::Plain,
            Some(other) => {
                return Err(Error::invalid(
                    "email.security",
                    other,
                    "must be starttls, tls or plain",
                ));
            }
        };
        let mut b = EmailAlarm::builder(&self.host)
            .security(security)
            .from(&self.from);
        if let Some(port) = self.port {
            b = b.port(port);
        }
        match (&self.user, &self.password) {
            (Some(u), Some(p)) => b = b.credentials(u, &p.0),
            (None, None) => {}
            _ => {
                return Err(Error::invalid(
                    "email.user",
                    self.user.as_deref().unwrap_or("(none)"),
                    "user and password go together",
                ));
            }
        }
        for t in &self.to {
            b = b.to(t);
        }
        b.build()
    }
}

/// An account that logs in with a password.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct UserConfig {
    /// Login name: 1-64 of `[A-Za-z0-9._@-]`.
    pub name: String,
    /// Its password, hashed with argon2 (a PHC string: `jobwheel hash-password`).
    pub password_hash: Redacted,
    /// What it may do.
    pub role: Role,
    /// When set, the only executor groups whose jobs it sees and acts on.
    #[serde(default)]
    pub groups: Option<Vec<String>>,
}

/// An API token: the server keeps only the SHA-256 of the token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TokenConfig {
    /// Its name in the audit log (`token:<name>`): 1-64 of `[A-Za-z0-9._@-]`.
    pub name: String,
    /// SHA-256 of the token, 64 hex digits (`jobwheel new-token` prints both).
    pub sha256: String,
    /// What it may do.
    pub role: Role,
    /// When set, the only executor groups whose jobs it sees and acts on.
    #[serde(default)]
    pub groups: Option<Vec<String>>,
}

/// A remote executor group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct GroupConfig {
    /// The group's name, as jobs name it.
    pub name: String,
    /// The secret its instances and this server sign requests with (at least 16
    /// characters).
    pub secret: Redacted,
    /// Fixed instance addresses; empty (default): instances register through this
    /// server's registration endpoint or beat into the store.
    #[serde(default)]
    pub addresses: Vec<String>,
}

fn default_listen() -> String {
    "127.0.0.1:8080".into()
}
fn default_store() -> String {
    "sqlite://jobwheel.db?mode=rwc".into()
}
fn default_session_ttl() -> Duration {
    Duration::from_secs(12 * 3600)
}
fn default_max_body() -> usize {
    1 << 20
}
/// The scheduler's own default, so a server and an embedded scheduler agree.
fn default_max_payload() -> usize {
    crate::engine::SchedulerConfig::default().max_payload_bytes
}
fn default_poll_interval() -> Duration {
    Duration::from_secs(1)
}
fn default_login_concurrency() -> usize {
    2
}
fn default_audit_retention() -> Duration {
    Duration::from_secs(365 * 86_400)
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: default_listen(),
            store: default_store(),
            prefix: None,
            session_secret: Redacted::default(),
            read_only: false,
            session_ttl: default_session_ttl(),
            secure_cookies: false,
            max_body_bytes: default_max_body(),
            max_payload_bytes: default_max_payload(),
            poll_interval: default_poll_interval(),
            login_concurrency: default_login_concurrency(),
            audit_retention: default_audit_retention(),
            users: Vec::new(),
            tokens: Vec::new(),
            groups: Vec::new(),
            webhook_alarms: Vec::new(),
            email_alarms: Vec::new(),
        }
    }
}

/// Names of users, tokens and groups: 1-64 of `[A-Za-z0-9._@-]`.
pub(crate) fn check_name(field: &'static str, name: &str) -> Result<()> {
    let ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._@-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            field,
            name,
            "must be 1-64 of [A-Za-z0-9._@-]",
        ))
    }
}

impl ServerConfig {
    /// Parses a TOML document. Errors: [`Error::Invalid`] naming the field (or
    /// `config` for a syntax error) and what was wrong.
    pub fn from_toml(text: &str) -> Result<ServerConfig> {
        toml::from_str(text).map_err(|e| {
            let what = e.message().to_string();
            let at = e
                .span()
                .map(|s| text[..s.start.min(text.len())].lines().count().max(1))
                .unwrap_or(0);
            Error::invalid("config", format!("line {at}"), what)
        })
    }

    /// Applies the environment overrides read through `var` (so tests pass their own).
    /// Errors: [`Error::Invalid`] naming the variable and its value.
    pub fn override_from(&mut self, var: impl Fn(&str) -> Option<String>) -> Result<()> {
        if let Some(v) = var("JOBWHEEL_LISTEN") {
            self.listen = v;
        }
        if let Some(v) = var("JOBWHEEL_URL") {
            self.store = v;
        }
        if let Some(v) = var("JOBWHEEL_PREFIX") {
            self.prefix = Some(v);
        }
        if var("JOBWHEEL_SECRET").is_some() {
            return Err(Error::invalid(
                "JOBWHEEL_SECRET",
                "(hidden)",
                "is not read: the session secret is JOBWHEEL_SESSION_SECRET, and an executor's group secret JOBWHEEL_GROUP_SECRET; unset it",
            ));
        }
        if let Some(v) = var("JOBWHEEL_SESSION_SECRET") {
            self.session_secret = Redacted(v);
        }
        if let Some(v) = var("JOBWHEEL_LOGIN_CONCURRENCY") {
            self.login_concurrency = v.parse().map_err(|_| {
                Error::invalid("JOBWHEEL_LOGIN_CONCURRENCY", &v, "must be a number")
            })?;
        }
        if let Some(v) = var("JOBWHEEL_READ_ONLY") {
            self.read_only = parse_bool("JOBWHEEL_READ_ONLY", &v)?;
        }
        if let Some(v) = var("JOBWHEEL_SECURE_COOKIES") {
            self.secure_cookies = parse_bool("JOBWHEEL_SECURE_COOKIES", &v)?;
        }
        if let Some(v) = var("JOBWHEEL_SESSION_TTL") {
            self.session_ttl = humantime_serde::re::humantime::parse_duration(&v)
                .map_err(|e| Error::invalid("JOBWHEEL_SESSION_TTL", &v, e.to_string()))?;
        }
        if let Some(v) = var("JOBWHEEL_MAX_BODY_BYTES") {
            self.max_body_bytes = v.parse().map_err(|_| {
                Error::invalid("JOBWHEEL_MAX_BODY_BYTES", &v, "must be a number of bytes")
            })?;
        }
        if let Some(v) = var("JOBWHEEL_POLL_INTERVAL") {
            self.poll_interval = humantime_serde::re::humantime::parse_duration(&v)
                .map_err(|e| Error::invalid("JOBWHEEL_POLL_INTERVAL", &v, e.to_string()))?;
        }
        if let Some(v) = var("JOBWHEEL_MAX_PAYLOAD_BYTES") {
            self.max_payload_bytes = v.parse().map_err(|_| {
                Error::invalid(
                    "JOBWHEEL_MAX_PAYLOAD_BYTES",
                    &v,
                    "must be a number of bytes",
                )
            })?;
        }
        Ok(())
    }

    /// Checks every field. Errors: [`Error::Invalid`] naming the first bad one.
    pub fn validate(&self) -> Result<()> {
        self.listen
            .parse::<SocketAddr>()
            .map_err(|e| Error::invalid("listen", &self.listen, e.to_string()))?;
        if self.store.trim().is_empty() {
            return Err(Error::invalid("store", "", "must be a store URL"));
        }
        if self.session_secret.0.chars().count() < 32 {
            return Err(Error::invalid(
                "session_secret",
                if self.session_secret.0.is_empty() {
                    "empty"
                } else {
                    "(hidden)"
                },
                "must be at least 32 characters (it signs sessions; the server never starts without one)",
            ));
        }
        let day = 86_400;
        if !(60..=30 * day).contains(&self.session_ttl.as_secs()) {
            return Err(Error::invalid(
                "session_ttl",
                humantime_serde::re::humantime::format_duration(self.session_ttl),
                "must be 1 min to 30 days",
            ));
        }
        if !(1024..=(16 << 20)).contains(&self.max_body_bytes) {
            return Err(Error::invalid(
                "max_body_bytes",
                self.max_body_bytes,
                "must be 1024-16777216",
            ));
        }
        if !(1..=self.max_body_bytes).contains(&self.max_payload_bytes) {
            return Err(Error::invalid(
                "max_payload_bytes",
                self.max_payload_bytes,
                format!("must be 1-{} (max_body_bytes)", self.max_body_bytes),
            ));
        }
        if !(Duration::from_millis(10)..=Duration::from_secs(60)).contains(&self.poll_interval) {
            return Err(Error::invalid(
                "poll_interval",
                humantime_serde::re::humantime::format_duration(self.poll_interval),
                "must be 10 ms to 1 min",
            ));
        }
        if !(1..=64).contains(&self.login_concurrency) {
            return Err(Error::invalid(
                "login_concurrency",
                self.login_concurrency,
                "must be 1-64",
            ));
        }
        if self.audit_retention < Duration::from_secs(day) {
            return Err(Error::invalid(
                "audit_retention",
                humantime_serde::re::humantime::format_duration(self.audit_retention),
                "must be at least 1 day",
            ));
        }
        if self.users.is_empty() && self.tokens.is_empty() {
            return Err(Error::invalid(
                "users",
                "none",
                "add a user (jobwheel hash-password) or a token (jobwheel new-token): there is no default account",
            ));
        }
        let mut names = std::collections::HashSet::new();
        for u in &self.users {
            check_name("users.name", &u.name)?;
            if !names.insert(u.name.clone()) {
                return Err(Error::invalid("users.name", &u.name, "appears twice"));
            }
            super::auth::passwords::check_hash(&u.password_hash.0).map_err(|e| {
                Error::invalid(
                    "users.password_hash",
                    &u.name,
                    format!("{e}: use jobwheel hash-password"),
                )
            })?;
            check_groups("users.groups", &u.groups)?;
        }
        for t in &self.tokens {
            check_name("tokens.name", &t.name)?;
            if !names.insert(format!("token:{}", t.name)) {
                return Err(Error::invalid("tokens.name", &t.name, "appears twice"));
            }
            if t.sha256.len() != 64 || hex::decode(&t.sha256).is_err() {
                return Err(Error::invalid(
                    "tokens.sha256",
                    &t.name,
                    "must be 64 hex digits: the SHA-256 of the token (jobwheel new-token)",
                ));
            }
            check_groups("tokens.groups", &t.groups)?;
        }
        let mut groups = std::collections::HashSet::new();
        for g in &self.groups {
            check_name("groups.name", &g.name)?;
            if !groups.insert(&g.name) {
                return Err(Error::invalid("groups.name", &g.name, "appears twice"));
            }
            if g.secret.0.chars().count() < 16 {
                return Err(Error::invalid(
                    "groups.secret",
                    &g.name,
                    "must be at least 16 characters",
                ));
            }
            if g.secret.0.as_bytes() == self.session_secret.0.as_bytes() {
                return Err(Error::invalid(
                    "session_secret",
                    "(hidden)",
                    format!(
                        "must differ from group {}'s secret: an executor of the group holds it, and with it could sign sessions",
                        g.name
                    ),
                ));
            }
        }
        for w in &self.webhook_alarms {
            w.alarm()?;
        }
        for e in &self.email_alarms {
            e.alarm()?;
        }
        Ok(())
    }
}

fn check_groups(field: &'static str, groups: &Option<Vec<String>>) -> Result<()> {
    for g in groups.iter().flatten() {
        check_name(field, g)?;
    }
    Ok(())
}

fn parse_bool(field: &'static str, v: &str) -> Result<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(Error::invalid(field, v, "must be true or false")),
    }
}

#[cfg(test)]
mod tests {
    use super::Role;

    #[test]
    fn a_role_is_stored_under_its_serde_name() {
        for role in [Role::Viewer, Role::Operator, Role::Admin] {
            let serde = serde_json::to_value(role).unwrap();
            assert_eq!(serde, serde_json::Value::String(role.as_str().into()));
            assert_eq!(Role::from_stored(role.as_str()), Some(role));
        }
        assert_eq!(Role::from_stored("root"), None);
        assert_eq!(Role::from_stored("Admin"), None);
    }
}
