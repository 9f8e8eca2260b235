//! Two tenants on one server, over real HTTP: admins limited to executor group
//! `billing` and to `payroll`, and an unlimited admin. A tenant reads nothing of the
//! other's jobs through the audit log, learns no more than "taken" from creating an
//! id the other holds, and a job id removed and created again in its group does
//! not bring the other tenant's runs, payloads, errors, alarms or audit entries
//! with it; the unlimited admin keeps the whole history.

use crate::support;

use jobwheel::admin::{Server, ServerConfig};
use jobwheel::admin::{hash_password, new_token};
use serde_json::{Value, json};
use std::time::Duration;
use support::admin::*;

const SHARED: &str = "shared.report";
/// In the payroll job's payload and nowhere else.
const PAYROLL_SECRET: &str = "payroll-salaries-2026";

struct Tenants {
    server: Server,
    api: Api,
    root: Who,
    bill: Who,
    paula: Who,
}

async fn start(store: &str, prefix: Option<&str>) -> Tenants {
    let tokens: Vec<(String, String)> = (0..3).map(|_| new_token()).collect();
    let mut text = format!(
        "listen = \"127.0.0.1:0\"\nstore = \"{store}\"\nsession_secret = \"{}\"\npoll_interval = \"50ms\"\n\
         [[users]]\nname = \"root\"\npassword_hash = \"{}\"\nrole = \"admin\"\n",
        "t".repeat(40),
        hash_password("root-password-1"),
    );
    if let Some(p) = prefix {
        text.insert_str(0, &format!("prefix = \"{p}\"\n"));
    }
    for (i, (name, group)) in [
        ("root", None),
        ("bill", Some("billing")),
        ("paula", Some("payroll")),
    ]
    .iter()
    .enumerate()
    {
        text.push_str(&format!(
            "[[tokens]]\nname = \"{name}\"\nsha256 = \"{}\"\nrole = \"admin\"\n",
            tokens[i].1
        ));
        if let Some(g) = group {
            text.push_str(&format!("groups = [\"{g}\"]\n"));
        }
    }
    for g in ["billing", "payroll"] {
        text.push_str(&format!(
            "[[groups]]\nname = \"{g}\"\nsecret = \"{GROUP_SECRET}-{g}\"\n"
        ));
    }
    let server = serve(ServerConfig::from_toml(&text).unwrap()).await;
    let api = Api::new(&server);
    let who = |i: usize| Who::Token(tokens[i].0.clone());
    Tenants {
        server,
        api,
        root: who(0),
        bill: who(1),
        paula: who(2),
    }
}

fn job(group: &str, payload: Value) -> Value {
    json!({
        "id": SHARED,
        "handler": "report",
        "schedule": {"kind": "cron", "expr": "0 0 9 * * ?", "zone": "UTC"},
        "payload": payload,
        "remote": {"group": group},
    })
}

impl Tenants {
    async fn send(&self, who: &Who, method: &str, path: &str, body: Option<Value>) -> Answer {
        self.api
            .call(
                who,
                method,
                path,
                path,
                body.map(|b| b.to_string().into_bytes()),
            )
            .await
    }

    /// The runs of the shared id `who` sees.
    async fn runs(&self, who: &Who) -> Vec<Value> {
        let a = self
            .send(who, "GET", &format!("/api/v1/runs?job={SHARED}"), None)
            .await;
        assert_eq!(a.status, 200, "{}", a.body);
        a.body["items"].as_array().unwrap().clone()
    }
}

async fn isolation(store: &str, prefix: Option<&str>) {
    let t = start(store, prefix).await;
    // Payroll's job, triggered: no payroll instance is up, so its run fails (with
    // an error naming why) and stays in the log.
    let a = t
        .send(
            &t.paula,
            "POST",
            "/api/v1/jobs",
            Some(job("payroll", json!({"note": PAYROLL_SECRET}))),
        )
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
    let a = t
        .send(
            &t.paula,
            "POST",
            &format!("/api/v1/jobs/{SHARED}/trigger"),
            None,
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let mut old = Vec::new();
    for _ in 0..200 {
        old = t.runs(&t.paula).await;
        if old.iter().any(|r| r["status"] != "running") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let old_run = old
        .iter()
        .find(|r| r["status"] != "running")
        .unwrap_or_else(|| panic!("payroll's run ended within 10 s: {old:?}"))
        .clone();

    // Billing's admin reads no payroll entry in the audit log.
    let a = t.send(&t.bill, "GET", "/api/v1/audit", None).await;
    assert_eq!(a.status, 200);
    assert!(
        !a.body.to_string().contains(SHARED) && !a.body.to_string().contains(PAYROLL_SECRET),
        "billing reads none of payroll's audit entries: {}",
        a.body
    );
    // Creating payroll's id as billing: refused as taken, and nothing more.
    let a = t
        .send(
            &t.bill,
            "POST",
            "/api/v1/jobs",
            Some(job("billing", json!({}))),
        )
        .await;
    assert_eq!(a.status, 409, "{}", a.body);
    let said = a.body.to_string();
    assert!(
        !said.contains("payroll") && !said.contains(PAYROLL_SECRET),
        "the refusal says nothing of the job holding the id: {said}"
    );
    let a = t
        .send(&t.bill, "GET", &format!("/api/v1/jobs/{SHARED}"), None)
        .await;
    assert_eq!(a.status, 404, "another group's job answers as absent");

    // The job is removed, and billing creates the id again in its own group.
    let a = t
        .send(&t.root, "DELETE", &format!("/api/v1/jobs/{SHARED}"), None)
        .await;
    assert_eq!(a.status, 200);
    let a = t
        .send(
            &t.bill,
            "POST",
            "/api/v1/jobs",
            Some(job("billing", json!({"note": "billing"}))),
        )
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
    // None of the old job's records come with the id.
    assert_eq!(t.runs(&t.bill).await, Vec::<Value>::new());
    let old_id = old_run["id"].as_i64().unwrap();
    for path in [
        format!("/api/v1/runs/{old_id}"),
        format!("/api/v1/runs/{old_id}/log"),
    ] {
        let a = t.send(&t.bill, "GET", &path, None).await;
        assert_eq!(a.status, 404, "{path}: {}", a.body);
    }
    for path in ["/api/v1/alarms", "/api/v1/audit", "/api/v1/overview"] {
        let a = t.send(&t.bill, "GET", path, None).await;
        assert_eq!(a.status, 200);
        let text = a.body.to_string();
        assert!(
            !text.contains(PAYROLL_SECRET) && !text.contains(&format!("\"id\":{old_id},")),
            "{path} shows nothing of the old job: {text}"
        );
    }
    let a = t.send(&t.bill, "GET", "/api/v1/audit", None).await;
    let actions: Vec<&str> = a.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["target"] == SHARED)
        .map(|e| e["action"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        actions,
        vec!["job.create"],
        "billing reads its own creation only"
    );
    // The unlimited admin keeps the history: the old run is there.
    let runs = t.runs(&t.root).await;
    assert!(
        runs.iter().any(|r| r["id"] == old_run["id"]),
        "the old run stays in the log: {runs:?}"
    );
    t.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_on_sqlite_see_nothing_of_each_other() {
    let dir = std::env::temp_dir().join(format!("jobwheel-tenants-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.join("jobs.db").display());
    isolation(&url, None).await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_on_postgres_see_nothing_of_each_other() {
    let Some(url) = support::server_url("JOBWHEEL_POSTGRES_URL") else {
        return;
    };
    let prefix = format!("tenants{}_", fastrand::u32(..));
    isolation(&url, Some(&prefix)).await;
    support::drop_pg_tables(&url, &prefix).await;
}
