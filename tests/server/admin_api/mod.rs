//! The admin API over real HTTP against a served instance (`jobwheel::admin::Server`):
//! every endpoint, every role, CSRF, read-only mode, the audit log, size limits,
//! stable paging, and the OpenAPI document against the endpoints exercised. On the
//! embedded SQLite store, and on PostgreSQL when `JOBWHEEL_POSTGRES_URL` is set.

use crate::support;

mod access;
mod audit;
mod cluster;
mod config;
mod generated;
mod jobs;
mod read_only;
mod runs;
mod sessions;

use serde_json::{Value, json};
use std::time::Duration;
use support::admin::*;
use support::servers::{Answer, HttpServer};

pub const JOB: &str = "report.daily";

pub fn cron_job(id: &str, expr: &str, handler: &str) -> Value {
    json!({
        "id": id,
        "handler": handler,
        "schedule": {"kind": "cron", "expr": expr, "zone": "Asia/Shanghai"},
        "payload": {"note": "<script>alert(1)</script>"},
        "remote": {"group": "billing"},
    })
}

/// Waits (bounded, real time: a run on an executor instance) until `f` is `Some`.
pub async fn until<T, F, Fut>(what: &str, f: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    for _ in 0..300 {
        if let Some(t) = f().await {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

/// The newest audit entry about `target`.
pub async fn last_audit(api: &Api, admin: &Who, target: &str) -> Value {
    let a = api
        .call(
            admin,
            "GET",
            "/api/v1/audit",
            &format!("/api/v1/audit?target={}&limit=1", urlenc(target)),
            None,
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    a.body["items"][0].clone()
}

fn urlenc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// One served instance and its callers.
pub struct Ctx {
    pub api: Api,
    /// The admin token.
    pub admin: Who,
    /// The viewer token.
    pub viewer_token: Who,
    /// Sessions of ada (admin), otto (operator), vera (viewer), olga (operator of
    /// group `other` only).
    pub ada: Who,
    pub otto: Who,
    pub vera: Who,
    pub olga: Who,
    /// The webhook the server posts alarm events to.
    pub hook: HttpServer,
}

/// The whole suite against one store: one server, the phases in turn.
async fn suite(store_url: &str, prefix: Option<&str>) {
    let hook = HttpServer::start(Answer::Status(200)).await;
    let (config, tokens) = config(store_url, prefix, false, Some(&hook.url));
    let server = serve(config).await;
    let api = Api::new(&server);
    let doc = sessions::without_credentials(&api).await;
    let c = sessions::log_in(api, &tokens, hook).await;
    jobs::create_read_act(&c).await;
    jobs::dependencies_as_each_caller_sees_them(&c).await;
    runs::on_an_instance(&c).await;
    runs::a_local_runs_log(&c, store_url, prefix).await;
    access::accounts_and_tokens_at_runtime(&c).await;
    audit::audit_paging_logout(&c).await;
    generated::every_operation_takes_generated_input(&c, &doc).await;
    every_operation_checks_its_role(&c, &doc).await;
    check_document(&c.api, &doc);
    server.shutdown().await;
}

/// Every documented operation refuses a caller without credentials (401) and one
/// whose role is below the operation's `x-role` (403), before looking at its
/// arguments.
async fn every_operation_checks_its_role(c: &Ctx, doc: &Value) {
    let rank = |r: &str| ["viewer", "operator", "admin"].iter().position(|x| *x == r);
    let callers = [
        ("viewer", c.viewer_token.clone()),
        ("viewer", c.vera.clone()),
        ("operator", c.otto.clone()),
    ];
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            let method = method.to_uppercase();
            let Some(need) = rank(op["x-role"].as_str().unwrap()) else {
                continue; // no credentials needed
            };
            let real = path.replace(
                "{id}",
                if path.starts_with("/api/v1/jobs") {
                    JOB
                } else {
                    "1"
                },
            );
            let body = (method == "POST" || method == "PUT").then(|| b"{}".to_vec());
            let a = c
                .api
                .call(&Who::Anon, &method, path, &real, body.clone())
                .await;
            assert_eq!(a.status, 401, "{method} {path} without credentials");
            for (role, who) in &callers {
                if rank(role).unwrap() < need {
                    let a = c.api.call(who, &method, path, &real, body.clone()).await;
                    assert_eq!(
                        (a.status, a.body["error"].as_str()),
                        (403, Some("forbidden")),
                        "{method} {path} as a {role}"
                    );
                }
            }
        }
    }
}

/// Every operation the document lists was exercised, every one exercised is
/// documented, and every status the suite was answered is among the operation's
/// documented responses.
fn check_document(api: &Api, doc: &Value) {
    let mut documented = std::collections::BTreeMap::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            assert!(op["x-role"].is_string(), "{method} {path} names its role");
            let codes: std::collections::BTreeSet<u16> = op["responses"]
                .as_object()
                .unwrap()
                .keys()
                .map(|k| k.parse().unwrap())
                .collect();
            documented.insert((method.to_uppercase(), path.clone()), codes);
        }
    }
    let called = api.called.lock().unwrap().clone();
    assert_eq!(
        called.keys().collect::<Vec<_>>(),
        documented.keys().collect::<Vec<_>>(),
        "the operations exercised are exactly the documented ones"
    );
    for (op, statuses) in &called {
        for s in statuses {
            assert!(
                documented[op].contains(s),
                "{op:?} answered {s}, which the document does not list"
            );
        }
    }
    let mut errors = Vec::new();
    let mut checked = 0;
    for ((method, path, status), bodies) in api.samples.lock().unwrap().iter() {
        let Some(schema) = support::openapi::answer_schema(doc, method, path, *status) else {
            continue;
        };
        for body in bodies {
            checked += 1;
            if let Err(e) = support::openapi::conforms(doc, schema, body) {
                errors.push(format!("{method} {path} {status}: {e}: {body}"));
            }
        }
    }
    assert!(
        checked > 100,
        "answers were checked against their schemas: {checked}"
    );
    assert!(
        errors.is_empty(),
        "answers differ from the document:\n{}",
        errors.join("\n")
    );
}

/// The committed `docs/admin-api.json` is the document the code generates, and the
/// one the server serves.
#[test]
fn admin_document_is_committed() {
    support::openapi::committed_equals("docs/admin-api.json", &jobwheel::admin::openapi());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_api_on_sqlite() {
    let dir = std::env::temp_dir().join(format!("jobwheel-api-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.join("jobs.db").display());
    suite(&url, None).await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_api_on_postgres() {
    let Some(url) = support::server_url("JOBWHEEL_POSTGRES_URL") else {
        return;
    };
    let prefix = format!("api{}_", fastrand::u32(..));
    suite(&url, Some(&prefix)).await;
    support::drop_pg_tables(&url, &prefix).await;
}
