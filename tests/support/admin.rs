//! Admin API test helpers: a served instance with one account per role, and a
//! client that records which documented operation each call exercised.

use jobwheel::admin::{Server, ServerConfig};
use jobwheel::admin::{hash_password, new_token};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// The group the suite's executor instances serve, and its secret.
pub use super::remote::SECRET as GROUP_SECRET;

/// Accounts of the test configuration: (name, password, role, groups).
pub const ACCOUNTS: &[(&str, &str, &str, Option<&str>)] = &[
    ("ada", "ada-password-1", "admin", None),
    ("otto", "otto-password-1", "operator", None),
    ("vera", "vera-password-1", "viewer", None),
    ("olga", "olga-password-1", "operator", Some("other")),
];

/// Tokens of the configuration, by role.
pub struct Tokens {
    pub admin: String,
    pub viewer: String,
}

/// A configuration over `store` with the accounts above, a token per role, the
/// group `billing`, and alarms posted to `webhook` when given.
pub fn config(
    store: &str,
    prefix: Option<&str>,
    read_only: bool,
    webhook: Option<&str>,
) -> (ServerConfig, Tokens) {
    let (config, tokens, _) = config_file(store, prefix, read_only, webhook);
    (config, tokens)
}

/// As [`config`], with the TOML text it was read from (for `jobwheel --config`).
pub fn config_file(
    store: &str,
    prefix: Option<&str>,
    read_only: bool,
    webhook: Option<&str>,
) -> (ServerConfig, Tokens, String) {
    let (admin, admin_sha) = new_token();
    let (viewer, viewer_sha) = new_token();
    let mut text = format!(
        "listen = \"127.0.0.1:0\"\nstore = \"{store}\"\nsession_secret = \"{}\"\nread_only = {read_only}\nmax_body_bytes = 65536\n",
        "s".repeat(40)
    );
    if let Some(p) = prefix {
        text.push_str(&format!("prefix = \"{p}\"\n"));
    }
    for (name, pw, role, group) in ACCOUNTS {
        text.push_str(&format!(
            "[[users]]\nname = \"{name}\"\npassword_hash = \"{}\"\nrole = \"{role}\"\n",
            hash_password(pw)
        ));
        if let Some(g) = group {
            text.push_str(&format!("groups = [\"{g}\"]\n"));
        }
    }
    text.push_str(&format!(
        "[[tokens]]\nname = \"ci\"\nsha256 = \"{admin_sha}\"\nrole = \"admin\"\n[[tokens]]\nname = \"dash\"\nsha256 = \"{viewer_sha}\"\nrole = \"viewer\"\n"
    ));
    text.push_str(&format!(
        "[[groups]]\nname = \"billing\"\nsecret = \"{GROUP_SECRET}\"\n"
    ));
    if let Some(url) = webhook {
        text.push_str(&format!("[[webhook_alarms]]\nurl = \"{url}\"\n"));
    }
    (
        ServerConfig::from_toml(&text).unwrap(),
        Tokens { admin, viewer },
        text,
    )
}

/// Starts a server on a free loopback port.
pub async fn serve(config: ServerConfig) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    Server::serve(config, listener).await.unwrap()
}

/// `(METHOD, documented path)` → statuses answered.
pub type Called = BTreeMap<(String, String), BTreeSet<u16>>;

/// Up to [`SAMPLES`] answer bodies per `(METHOD, documented path, status)`.
pub type Samples = BTreeMap<(String, String, u16), Vec<Value>>;

/// Bodies kept per operation and status, for the schema check.
pub const SAMPLES: usize = 4;

/// Who a request is from.
#[derive(Clone, Debug)]
pub enum Who {
    /// No credentials.
    Anon,
    /// A bearer token.
    Token(String),
    /// A session cookie, with the CSRF token sent (or not).
    Session {
        cookie: String,
        csrf: Option<String>,
    },
}

impl Who {
    /// The same session without its CSRF header.
    pub fn without_csrf(&self) -> Who {
        match self {
            Who::Session { cookie, .. } => Who::Session {
                cookie: cookie.clone(),
                csrf: None,
            },
            other => other.clone(),
        }
    }
}

/// A client of one server.
#[derive(Clone)]
pub struct Api {
    pub base: String,
    http: reqwest::Client,
    /// `(METHOD, documented path)` of every call made, and the statuses answered.
    pub called: Arc<Mutex<Called>>,
    /// Some answer bodies of every operation and status.
    pub samples: Arc<Mutex<Samples>>,
}

/// An answer: status, `Set-Cookie` (if any), body as JSON (`Null` when empty).
pub struct Answer {
    pub status: u16,
    pub set_cookie: Option<String>,
    pub body: Value,
}

impl Api {
    pub fn new(server: &Server) -> Api {
        Api {
            base: format!("http://{}", server.local_addr()),
            http: reqwest::Client::new(),
            called: Arc::default(),
            samples: Arc::default(),
        }
    }

    /// Calls `method path` (`doc` is the documented path it exercises).
    pub async fn call(
        &self,
        who: &Who,
        method: &str,
        doc: &str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Answer {
        let mut r = self.http.request(
            reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
            format!("{}{path}", self.base),
        );
        match who {
            Who::Anon => {}
            Who::Token(t) => r = r.header("authorization", format!("Bearer {t}")),
            Who::Session { cookie, csrf } => {
                r = r.header("cookie", cookie);
                if let Some(c) = csrf {
                    r = r.header("x-csrf-token", c);
                }
            }
        }
        if let Some(b) = body {
            r = r.header("content-type", "application/json").body(b);
        }
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        self.called
            .lock()
            .unwrap()
            .entry((method.to_string(), doc.to_string()))
            .or_default()
            .insert(status);
        assert_eq!(
            resp.headers()
                .get("x-content-type-options")
                .map(|v| v.to_str().unwrap()),
            Some("nosniff"),
            "{method} {path}: every answer says nosniff"
        );
        let set_cookie = resp
            .headers()
            .get("set-cookie")
            .map(|v| v.to_str().unwrap().to_string());
        let bytes = resp.bytes().await.unwrap();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                panic!(
                    "{method} {path}: not JSON ({e}): {}",
                    String::from_utf8_lossy(&bytes)
                )
            })
        };
        let mut samples = self.samples.lock().unwrap();
        let kept = samples
            .entry((method.to_string(), doc.to_string(), status))
            .or_default();
        if kept.len() < SAMPLES {
            kept.push(body.clone());
        }
        drop(samples);
        Answer {
            status,
            set_cookie,
            body,
        }
    }

    /// `call` with a JSON body.
    pub async fn send(
        &self,
        who: &Who,
        method: &str,
        doc: &str,
        path: &str,
        body: Value,
    ) -> Answer {
        self.call(
            who,
            method,
            doc,
            path,
            Some(serde_json::to_vec(&body).unwrap()),
        )
        .await
    }

    /// Logs in; the session (cookie and CSRF token).
    pub async fn login(&self, name: &str, password: &str) -> Who {
        let a = self
            .send(
                &Who::Anon,
                "POST",
                "/api/v1/session",
                "/api/v1/session",
                serde_json::json!({"name": name, "password": password}),
            )
            .await;
        assert_eq!(a.status, 200, "login {name}: {}", a.body);
        let set = a.set_cookie.expect("login sets the session cookie");
        let cookie = set.split(';').next().unwrap().to_string();
        Who::Session {
            cookie,
            csrf: a.body["csrf"].as_str().map(str::to_string),
        }
    }
}
