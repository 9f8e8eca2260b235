//! Who is asking, and what they may do: accounts with argon2-hashed passwords, API
//! tokens kept as SHA-256, roles, sessions in signed cookies and CSRF tokens.
//!
//! * **Roles** are ordered: a `viewer` reads everything but the audit log; an
//!   `operator` also pauses, resumes, triggers, kills runs and retries or discards
//!   alarms; an `admin` also creates, edits, copies and removes jobs and reads the
//!   audit log. An account or token limited to executor groups sees and acts on the
//!   jobs of those groups only (and their runs and instances).
//! * **Sessions** are stateless, so every server of a cluster accepts them: the cookie
//!   `jobwheel_session` holds the account name, an expiry and a random nonce, signed
//!   with HMAC-SHA256 under the server's secret; `HttpOnly`, `SameSite=Strict`,
//!   `Path=/`, and `Secure` when configured. The account's role is read from the
//!   configuration on every request, so removing an account ends its sessions. A
//!   session lasts `session_ttl`; logging out clears the cookie (a copy of it stays
//!   valid until it expires: rotate the secret to end every session at once).
//! * **CSRF**: a request authenticated by the cookie that changes anything must carry
//!   `X-CSRF-Token`, the HMAC of the session's nonce (given at login and by `GET
//!   /api/v1/session`); bearer tokens need none (a browser never sends them on its
//!   own).
//! * **Logins** verify the password with argon2 in a fixed pool of threads behind a
//!   bounded queue (429 `busy` when it is full), spend the same time for an unknown
//!   account, and lock an account name out for 5 minutes after 5 failures in a row
//!   (429 `locked_out`), counting logins still being checked as failures so parallel
//!   guesses get no more tries than sequential ones (`auth/passwords.rs`).

pub(crate) mod passwords;

pub use super::config::Role;
use super::config::{ServerConfig, TokenConfig, UserConfig};
use super::error::ApiError;
use crate::time::Timestamp;
use axum::http::HeaderMap;
use hmac::{KeyInit, Mac};
pub use passwords::hash_password;
pub(crate) use passwords::random_bytes;
use passwords::{Attempts, Refused, Verifiers};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use subtle::ConstantTimeEq;

/// The session cookie's name.
pub(crate) const SESSION_COOKIE: &str = "jobwheel_session";
/// The header a cookie-authenticated change carries its CSRF token in.
pub(crate) const CSRF_HEADER: &str = "x-csrf-token";

/// How a request proved who it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Via {
    /// A session cookie with this nonce (its changes need the CSRF token).
    Session(String),
    /// A bearer token.
    Token,
    /// The command line on a store (`jobwheel --url …`), calling this API in its
    /// own process: never a network request (a request extension no HTTP request
    /// can carry).
    Local,
}

/// The caller of a request the command line hands to the API in its own process:
/// an axum request extension, which no HTTP request can carry, so only code in
/// the process that holds the store's credentials anyway can make one.
#[derive(Clone, Debug)]
pub(crate) struct LocalCaller(pub(crate) Principal);

impl LocalCaller {
    /// An admin named `cli:<user>`, audited as [`Actor::cli`](crate::ops::Actor::cli).
    pub(crate) fn cli(user: &str) -> LocalCaller {
        LocalCaller(Principal {
            name: format!("cli:{user}"),
            role: Role::Admin,
            groups: None,
            via: Via::Local,
        })
    }
}

/// The account or token behind a request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Principal {
    /// The account's name, or `token:<name>`: the actor in the audit log.
    pub name: String,
    /// Its role.
    pub role: Role,
    /// The executor groups it is limited to, if any.
    pub groups: Option<Vec<String>>,
    #[serde(skip)]
    pub(crate) via: Via,
}

impl Principal {
    /// Whether it may see and act on a job of `group` (`None`: a local job). An
    /// account limited to groups has no local jobs.
    pub fn sees(&self, group: Option<&str>) -> bool {
        match (&self.groups, group) {
            (None, _) => true,
            (Some(gs), Some(g)) => gs.iter().any(|x| x == g),
            (Some(_), None) => false,
        }
    }

    /// The actor its changes are made and audited as: `user:NAME` for an account,
    /// `token:NAME` for a token, limited to its groups.
    pub fn actor(&self) -> crate::ops::Actor {
        let actor = match &self.via {
            Via::Token => {
                crate::ops::Actor::token(self.name.strip_prefix("token:").unwrap_or(&self.name))
            }
            Via::Session(_) => crate::ops::Actor::user(&self.name),
            Via::Local => {
                crate::ops::Actor::cli(self.name.strip_prefix("cli:").unwrap_or(&self.name))
            }
        };
        match &self.groups {
            Some(gs) => actor.limited_to(gs.clone()),
            None => actor,
        }
    }

    /// `Ok` when its role is at least `need`; 403 `forbidden` otherwise.
    pub fn require(&self, need: Role) -> Result<(), ApiError> {
        if self.role >= need {
            Ok(())
        } else {
            Err(ApiError::forbidden(format!(
                "this needs the {need:?} role; {} is {:?}",
                self.name, self.role
            )))
        }
    }
}

/// The signed content of a session cookie.
#[derive(Serialize, Deserialize)]
struct Claims {
    /// Account name.
    u: String,
    /// Expiry, epoch ms.
    e: i64,
    /// Random nonce (hex), the CSRF token's seed.
    n: String,
}

/// How long a server answers from its copy of the accounts and tokens kept in the
/// store before reading them again: one removed through another server of a cluster
/// is refused here within this time (through this server, at once).
pub(crate) const CREDENTIALS_REFRESH: Duration = Duration::from_secs(2);

/// How often, at most, a server reads the store's accounts and tokens again for a
/// token or account it does not know: one added through another server is admitted
/// within this time, and callers sending unknown credentials cost at most four
/// reads a second.
pub(crate) const UNKNOWN_REREAD: Duration = Duration::from_millis(250);

/// Accounts and tokens added at runtime, as last read from the store.
#[derive(Default)]
struct Stored {
    users: HashMap<String, UserConfig>,
    tokens: Vec<([u8; 32], TokenConfig)>,
    read: Option<std::time::Instant>,
}

impl Stored {
    fn from_records(records: &[crate::record::CredentialRecord]) -> Stored {
        use crate::record::CredentialKind;
        let mut s = Stored {
            read: Some(std::time::Instant::now()),
            ..Stored::default()
        };
        for r in records {
            let c = &r.credential;
            let Some(role) = Role::from_stored(&c.role) else {
                continue;
            };
            match c.kind {
                CredentialKind::Account => {
                    s.users.insert(
                        c.name.clone(),
                        UserConfig {
                            name: c.name.clone(),
                            password_hash: super::config::Redacted(c.secret_hash.clone()),
                            role,
                            groups: c.groups.clone(),
                        },
                    );
                }
                CredentialKind::Token => {
                    let Some(h) = hex::decode(&c.secret_hash)
                        .ok()
                        .and_then(|h| <[u8; 32]>::try_from(h).ok())
                    else {
                        continue;
                    };
                    s.tokens.push((
                        h,
                        TokenConfig {
                            name: c.name.clone(),
                            sha256: c.secret_hash.clone(),
                            role,
                            groups: c.groups.clone(),
                        },
                    ));
                }
            }
        }
        s
    }
}

/// The accounts and tokens, and the keys that sign sessions.
pub(crate) struct Auth {
    secret: Vec<u8>,
    users: HashMap<String, UserConfig>,
    tokens: Vec<([u8; 32], TokenConfig)>,
    /// The store's accounts and tokens: the configuration's win a name both hold.
    stored: std::sync::RwLock<Arc<Stored>>,
    /// One read of the store at a time.
    reading: tokio::sync::Mutex<()>,
    ttl: Duration,
    secure: bool,
    attempts: Arc<Attempts>,
    verifiers: Verifiers,
    /// Verified for an unknown account, so a login takes as long either way.
    decoy: String,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("users", &self.users.keys().collect::<Vec<_>>())
            .field("tokens", &self.tokens.len())
            .finish_non_exhaustive()
    }
}

/// A new API token (`jw_` and 64 hex digits) and the SHA-256 the configuration keeps.
pub fn new_token() -> (String, String) {
    let token = format!("jw_{}", hex::encode(random_bytes(32)));
    let sha = hex::encode(Sha256::digest(token.as_bytes()));
    (token, sha)
}

impl Auth {
    /// From a validated configuration.
    pub(crate) fn new(config: &ServerConfig) -> Auth {
        Auth {
            secret: config.session_secret.0.as_bytes().to_vec(),
            users: config
                .users
                .iter()
                .map(|u| (u.name.clone(), u.clone()))
                .collect(),
            tokens: config
                .tokens
                .iter()
                .filter_map(|t| {
                    let h: [u8; 32] = hex::decode(&t.sha256).ok()?.try_into().ok()?;
                    Some((h, t.clone()))
                })
                .collect(),
            stored: std::sync::RwLock::default(),
            reading: tokio::sync::Mutex::new(()),
            ttl: config.session_ttl,
            secure: config.secure_cookies,
            attempts: Arc::default(),
            verifiers: Verifiers::start(config.login_concurrency),
            decoy: hash_password(&hex::encode(random_bytes(16))),
        }
    }

    fn snapshot(&self) -> Arc<Stored> {
        self.stored
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Reads the store's accounts and tokens again when the copy is at least
    /// `older_than` old ([`CREDENTIALS_REFRESH`] on every request;
    /// [`UNKNOWN_REREAD`] for credentials this server does not know; zero after a
    /// change through this server). One read at a time. Returns whether it read. A
    /// failed read keeps the copy (logged): the configuration's accounts and tokens
    /// work whatever the store does.
    pub(crate) async fn refresh(
        &self,
        store: &dyn crate::store::Credentials,
        older_than: Duration,
    ) -> bool {
        let fresh = |s: &Stored| s.read.is_some_and(|t| t.elapsed() < older_than);
        if fresh(&self.snapshot()) {
            return false;
        }
        let _one = self.reading.lock().await;
        if fresh(&self.snapshot()) {
            return false;
        }
        let next = match store.credentials().await {
            Ok(records) => Stored::from_records(&records),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the accounts and tokens kept in the store; using the last read");
                let old = self.snapshot();
                Stored {
                    users: old.users.clone(),
                    tokens: old.tokens.clone(),
                    read: Some(std::time::Instant::now()),
                }
            }
        };
        *self
            .stored
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(next);
        true
    }

    /// Whether an account of `name` is known here (the configuration's or the
    /// store's, as last read).
    pub(crate) fn knows(&self, name: &str) -> bool {
        self.users.contains_key(name) || self.snapshot().users.contains_key(name)
    }

    /// The account of `name`: the configuration's, else the store's.
    fn user(&self, name: &str) -> Option<UserConfig> {
        self.users
            .get(name)
            .cloned()
            .or_else(|| self.snapshot().users.get(name).cloned())
    }

    fn mac(&self, data: &[u8]) -> Vec<u8> {
        let mut m = hmac::Hmac::<Sha256>::new_from_slice(&self.secret)
            .expect("HMAC takes a key of any length");
        m.update(data);
        m.finalize().into_bytes().to_vec()
    }

    /// The CSRF token of the session with `nonce`.
    pub(crate) fn csrf(&self, nonce: &str) -> String {
        hex::encode(self.mac(format!("csrf:{nonce}").as_bytes()))
    }

    /// Checks `name` and `password`; on success, the principal and the session
    /// cookie's `Set-Cookie` value.
    ///
    /// Errors: 401 `bad_credentials` (the same for an unknown account and a wrong
    /// password); 429 `locked_out` after too many failed (or pending) logins of the
    /// account, 429 `busy` when too many logins wait to be checked.
    pub(crate) async fn login(
        &self,
        name: &str,
        password: &str,
        now: Timestamp,
    ) -> Result<(Principal, String), ApiError> {
        let too_many = |code, message: &str| {
            ApiError::new(
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                code,
                message.to_string(),
            )
        };
        let attempt = self.attempts.begin(name).map_err(|r| match r {
            Refused::LockedOut => too_many(
                "locked_out",
                "too many failed logins for this account; try again in 5 minutes",
            ),
            Refused::Busy => too_many(
                "busy",
                "logins to this account are being checked; try again in a moment",
            ),
        })?;
        let user = self.user(name);
        let phc = user
            .as_ref()
            .map_or_else(|| self.decoy.clone(), |u| u.password_hash.0.clone());
        let ok = match self.verifiers.verify(password, phc).await {
            Ok(ok) => ok,
            Err(_) => {
                attempt.withdrawn();
                return Err(too_many(
                    "busy",
                    "the server is checking too many logins; try again in a moment",
                ));
            }
        };
        let Some(user) = user.filter(|_| ok) else {
            drop(attempt); // a failure
            return Err(ApiError::unauthorized(
                "bad_credentials",
                "wrong account name or password",
            ));
        };
        attempt.succeeded();
        let nonce = hex::encode(random_bytes(16));
        let claims = Claims {
            u: user.name.clone(),
            e: now.as_millis() + self.ttl.as_millis() as i64,
            n: nonce.clone(),
        };
        let body = hex::encode(serde_json::to_vec(&claims).expect("claims serialize"));
        let sig = hex::encode(self.mac(body.as_bytes()));
        let cookie = self.cookie(&format!("{body}.{sig}"), self.ttl);
        Ok((
            Principal {
                name: user.name,
                role: user.role,
                groups: user.groups,
                via: Via::Session(nonce),
            },
            cookie,
        ))
    }

    /// A `Set-Cookie` value for the session cookie.
    fn cookie(&self, value: &str, max_age: Duration) -> String {
        let mut c = cookie::Cookie::build((SESSION_COOKIE, value.to_string()))
            .http_only(true)
            .same_site(cookie::SameSite::Strict)
            .path("/")
            .max_age(cookie::time::Duration::seconds(max_age.as_secs() as i64))
            .secure(self.secure)
            .build();
        if max_age.is_zero() {
            c.make_removal();
        }
        c.to_string()
    }

    /// The `Set-Cookie` value that ends the session in the browser.
    pub(crate) fn logout_cookie(&self) -> String {
        self.cookie("", Duration::ZERO)
    }

    /// Who sent a request: a bearer token, or else a session cookie.
    ///
    /// Errors: 401 `unauthenticated` with neither, or with one that is unknown,
    /// forged or expired.
    pub(crate) fn principal(
        &self,
        headers: &HeaderMap,
        now: Timestamp,
    ) -> Result<Principal, ApiError> {
        if let Some(auth) = headers.get(axum::http::header::AUTHORIZATION) {
            let token = auth
                .to_str()
                .ok()
                .and_then(|v| v.strip_prefix("Bearer "))
                .ok_or_else(|| {
                    ApiError::unauthorized("unauthenticated", "a bad Authorization header")
                })?;
            let digest: [u8; 32] = Sha256::digest(token.trim().as_bytes()).into();
            let stored = self.snapshot();
            // Every token is compared, in constant time: the time taken says nothing
            // of which (if any) matched. The configuration's come first and win.
            let found = self
                .tokens
                .iter()
                .chain(stored.tokens.iter())
                .fold(None, |found, (h, t)| {
                    if bool::from(h.ct_eq(&digest)) && found.is_none() {
                        Some(t)
                    } else {
                        found
                    }
                })
                .ok_or_else(|| ApiError::unauthorized("unauthenticated", "unknown token"))?;
            return Ok(Principal {
                name: format!("token:{}", found.name),
                role: found.role,
                groups: found.groups.clone(),
                via: Via::Token,
            });
        }
        let value = headers
            .get_all(axum::http::header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(cookie::Cookie::split_parse)
            .filter_map(|c| c.ok())
            .find(|c| c.name() == SESSION_COOKIE)
            .map(|c| c.value().to_string())
            .ok_or_else(|| ApiError::unauthorized("unauthenticated", "log in first"))?;
        let bad =
            || ApiError::unauthorized("unauthenticated", "the session is not valid; log in again");
        let (body, sig) = value.split_once('.').ok_or_else(bad)?;
        let sig = hex::decode(sig).map_err(|_| bad())?;
        if !bool::from(self.mac(body.as_bytes()).ct_eq(&sig)) {
            return Err(bad());
        }
        let claims: Claims = hex::decode(body)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or_else(bad)?;
        if claims.e <= now.as_millis() {
            return Err(ApiError::unauthorized(
                "unauthenticated",
                "the session expired; log in again",
            ));
        }
        // The account as it is now: a removed one's sessions end, a changed role
        // applies at once.
        let user = self.user(&claims.u).ok_or_else(bad)?;
        Ok(Principal {
            name: user.name,
            role: user.role,
            groups: user.groups,
            via: Via::Session(claims.n),
        })
    }

    /// For a change: a session must carry its CSRF token.
    ///
    /// Errors: 403 `csrf` when the header is missing or wrong.
    pub(crate) fn check_csrf(&self, p: &Principal, headers: &HeaderMap) -> Result<(), ApiError> {
        let Via::Session(nonce) = &p.via else {
            return Ok(());
        };
        let sent = headers
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if bool::from(self.csrf(nonce).as_bytes().ct_eq(sent.as_bytes())) {
            Ok(())
        } else {
            Err(ApiError::new(
                axum::http::StatusCode::FORBIDDEN,
                "csrf",
                "a change made with a session cookie needs its X-CSRF-Token header",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{AuditEntry, Credential, CredentialKind, CredentialRecord};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Credentials that count their reads.
    #[derive(Default)]
    struct Counting(AtomicUsize);

    #[async_trait::async_trait]
    impl crate::store::Credentials for Counting {
        async fn add_credential(
            &self,
            _: &Credential,
            _: &AuditEntry,
        ) -> crate::error::Result<bool> {
            Ok(false)
        }
        async fn remove_credential(
            &self,
            _: CredentialKind,
            _: &str,
            _: &AuditEntry,
        ) -> crate::error::Result<bool> {
            Ok(false)
        }
        async fn credentials(&self) -> crate::error::Result<Vec<CredentialRecord>> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(Vec::new())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unknown_credentials_cost_at_most_four_reads_a_second() {
        let store = Counting::default();
        let auth = Arc::new(Auth::new(&ServerConfig::default()));
        // Callers sending unknown tokens as fast as they can, 64 at a time, for 0.6 s:
        // each asks for a read, and reads happen at most every UNKNOWN_REREAD.
        let started = std::time::Instant::now();
        let mut asked = 0;
        while started.elapsed() < Duration::from_millis(600) {
            let calls = (0..64).map(|_| auth.refresh(&store, UNKNOWN_REREAD));
            futures::future::join_all(calls).await;
            asked += 64;
        }
        let reads = store.0.load(Ordering::SeqCst);
        let bound = 1 + (started.elapsed().as_millis() / UNKNOWN_REREAD.as_millis()) as usize;
        assert!(asked > 1_000, "{asked} requests");
        assert!(
            (1..=bound).contains(&reads),
            "{reads} store reads for {asked} unknown credentials in {:?} (at most {bound})",
            started.elapsed()
        );
        // A change through this server reads at once, whatever the copy's age.
        assert!(auth.refresh(&store, Duration::ZERO).await);
        assert_eq!(store.0.load(Ordering::SeqCst), reads + 1);
    }
}
