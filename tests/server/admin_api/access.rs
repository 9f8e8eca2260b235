//! Accounts and tokens added and removed at runtime: admins only, validated, kept
//! hashed (no answer or audit entry shows a hash), admitted and refused at once on
//! this server without a restart, limited by the adder's groups, and one of eight
//! concurrent adds of a name wins.

use super::support::admin::*;
use super::{Ctx, last_audit};
use serde_json::{Value, json};

const ACCOUNTS: &str = "/api/v1/access/accounts";
const TOKENS: &str = "/api/v1/access/tokens";
const ACCOUNT: &str = "/api/v1/access/accounts/{name}";
const TOKEN: &str = "/api/v1/access/tokens/{name}";

async fn list(c: &Ctx, who: &Who) -> Vec<Value> {
    let a = c
        .api
        .call(who, "GET", "/api/v1/access", "/api/v1/access", None)
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    a.body["items"].as_array().unwrap().clone()
}

fn names(items: &[Value], kind: &str) -> Vec<String> {
    items
        .iter()
        .filter(|v| v["kind"] == kind)
        .map(|v| v["name"].as_str().unwrap().to_string())
        .collect()
}

pub async fn accounts_and_tokens_at_runtime(c: &Ctx) {
    let Ctx {
        api,
        ada,
        otto,
        olga,
        ..
    } = c;
    let rita = json!({"name": "rita", "password": "rita-password-1", "role": "operator"});

    // Only admins manage them.
    for who in [otto, olga] {
        let a = api
            .send(who, "POST", ACCOUNTS, ACCOUNTS, rita.clone())
            .await;
        assert_eq!(
            (a.status, a.body["error"].as_str()),
            (403, Some("forbidden"))
        );
    }

    // Bad input is refused naming the field, and nothing is stored.
    for (body, field) in [
        (
            json!({"name": "r ita", "password": "rita-password-1", "role": "viewer"}),
            "name",
        ),
        (
            json!({"name": "rita", "password": "short", "role": "viewer"}),
            "password",
        ),
        (
            json!({"name": "rita", "password": "rita-password-1", "role": "root"}),
            "body.role",
        ),
        (
            json!({"name": "rita", "password": "rita-password-1", "role": "viewer", "x": 1}),
            "body",
        ),
        (
            json!({"name": "rita", "password": "rita-password-1", "role": "viewer", "groups": []}),
            "groups",
        ),
    ] {
        let a = api
            .send(ada, "POST", ACCOUNTS, ACCOUNTS, body.clone())
            .await;
        assert_eq!(a.status, 400, "{body}: {}", a.body);
        assert!(
            a.body["field"].as_str().unwrap_or("").starts_with(field),
            "{body}: names {field}: {}",
            a.body
        );
    }
    assert!(!names(&list(c, ada).await, "account").contains(&"rita".to_string()));

    // An account added now logs in now, as its role; its password is kept hashed.
    let a = api
        .send(ada, "POST", ACCOUNTS, ACCOUNTS, rita.clone())
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
    assert_eq!(
        (&a.body["source"], &a.body["role"]),
        (&json!("store"), &json!("operator"))
    );
    let entry = last_audit(api, ada, "rita").await;
    assert_eq!(
        (&entry["action"], &entry["actor"], &entry["after"]["role"]),
        (
            &json!("account.add"),
            &json!("user:ada"),
            &json!("operator")
        )
    );
    let session = api.login("rita", "rita-password-1").await;
    let me = api
        .call(&session, "GET", "/api/v1/session", "/api/v1/session", None)
        .await;
    assert_eq!((me.status, &me.body["role"]), (200, &json!("operator")));
    let listed = list(c, ada).await;
    let text = serde_json::to_string(&listed).unwrap() + &entry.to_string();
    for secret in ["rita-password-1", "argon2", "secret_hash", "sha256"] {
        assert!(!text.contains(secret), "no {secret} is shown: {text}");
    }
    assert!(
        listed
            .iter()
            .any(|v| v["name"] == "ada" && v["source"] == "configuration"),
        "the configuration's accounts are listed: {listed:?}"
    );

    // Names are unique per kind; the configuration's stay as they are.
    let a = api
        .send(ada, "POST", ACCOUNTS, ACCOUNTS, rita.clone())
        .await;
    assert_eq!(
        (a.status, a.body["error"].as_str()),
        (409, Some("conflict"))
    );
    let a = api
        .send(
            ada,
            "POST",
            ACCOUNTS,
            ACCOUNTS,
            json!({"name": "otto", "password": "otto-password-9", "role": "admin"}),
        )
        .await;
    assert_eq!(
        (a.status, a.body["error"].as_str()),
        (409, Some("conflict"))
    );
    let a = api
        .call(ada, "DELETE", ACCOUNT, "/api/v1/access/accounts/otto", None)
        .await;
    assert_eq!(
        (a.status, a.body["error"].as_str()),
        (409, Some("conflict"))
    );
    let a = api
        .call(
            ada,
            "DELETE",
            ACCOUNT,
            "/api/v1/access/accounts/nobody",
            None,
        )
        .await;
    assert_eq!(
        (a.status, a.body["error"].as_str()),
        (404, Some("not_found"))
    );

    // A token is shown once, works at once, and stops working when removed.
    let a = api
        .send(
            ada,
            "POST",
            TOKENS,
            TOKENS,
            json!({"name": "deploy", "role": "viewer"}),
        )
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
    let token = Who::Token(a.body["token"].as_str().unwrap().to_string());
    let jobs = api
        .call(&token, "GET", "/api/v1/jobs", "/api/v1/jobs", None)
        .await;
    assert_eq!(jobs.status, 200);
    let refused = api
        .call(
            &token,
            "POST",
            "/api/v1/jobs/{id}/pause",
            "/api/v1/jobs/x/pause",
            None,
        )
        .await;
    assert_eq!(
        refused.status, 403,
        "a viewer token may not change anything"
    );
    assert!(!list(c, ada).await.iter().any(|v| v.get("token").is_some()));
    let a = api
        .call(ada, "DELETE", TOKEN, "/api/v1/access/tokens/deploy", None)
        .await;
    assert_eq!(
        (a.status, &a.body["removed"]["name"]),
        (200, &json!("deploy"))
    );
    let gone = api
        .call(&token, "GET", "/api/v1/jobs", "/api/v1/jobs", None)
        .await;
    assert_eq!(gone.status, 401, "a removed token is refused at once");
    assert_eq!(
        last_audit(api, ada, "deploy").await["action"],
        "token.remove"
    );

    // A removed account's session ends, and it cannot log in again.
    let a = api
        .call(ada, "DELETE", ACCOUNT, "/api/v1/access/accounts/rita", None)
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let me = api
        .call(&session, "GET", "/api/v1/session", "/api/v1/session", None)
        .await;
    assert_eq!(me.status, 401, "the removed account's session is refused");
    let again = api
        .send(
            &Who::Anon,
            "POST",
            "/api/v1/session",
            "/api/v1/session",
            json!({"name": "rita", "password": "rita-password-1"}),
        )
        .await;
    assert_eq!(again.status, 401);

    // An admin limited to a group adds and removes only what stays within it.
    let a = api
        .send(ada, "POST", ACCOUNTS, ACCOUNTS, json!({"name": "gina", "password": "gina-password-1", "role": "admin", "groups": ["other"]}))
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
    let gina = api.login("gina", "gina-password-1").await;
    for groups in [Value::Null, json!(["billing"]), json!(["other", "billing"])] {
        let a = api
            .send(
                &gina,
                "POST",
                TOKENS,
                TOKENS,
                json!({"name": "wide", "role": "admin", "groups": groups}),
            )
            .await;
        assert_eq!(
            (a.status, a.body["error"].as_str()),
            (403, Some("forbidden")),
            "groups {groups}: {}",
            a.body
        );
    }
    let a = api
        .send(
            &gina,
            "POST",
            TOKENS,
            TOKENS,
            json!({"name": "narrow", "role": "operator", "groups": ["other"]}),
        )
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
    let seen = list(c, &gina).await;
    assert_eq!(
        names(&seen, "account"),
        vec!["gina", "olga"],
        "a limited admin sees the accounts within its groups only"
    );
    let a = api
        .call(
            &gina,
            "DELETE",
            ACCOUNT,
            "/api/v1/access/accounts/ada",
            None,
        )
        .await;
    assert_eq!(
        a.status, 404,
        "an account outside its groups is not there for it: {}",
        a.body
    );

    // Eight adds of one token name at once: one is stored, once audited.
    let adds = (0..8).map(|_| {
        api.send(
            ada,
            "POST",
            TOKENS,
            TOKENS,
            json!({"name": "race", "role": "viewer"}),
        )
    });
    let answers = futures::future::join_all(adds).await;
    let mut statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
    statuses.sort();
    assert_eq!(statuses, [201, 409, 409, 409, 409, 409, 409, 409]);
    let audit = api
        .call(
            ada,
            "GET",
            "/api/v1/audit",
            "/api/v1/audit?target=race&limit=100",
            None,
        )
        .await;
    assert_eq!(
        audit.body["items"].as_array().unwrap().len(),
        1,
        "{}",
        audit.body
    );
    for name in ["race", "narrow"] {
        let a = api
            .call(
                ada,
                "DELETE",
                TOKEN,
                &format!("/api/v1/access/tokens/{name}"),
                None,
            )
            .await;
        assert_eq!(a.status, 200);
    }
    let a = api
        .call(ada, "DELETE", ACCOUNT, "/api/v1/access/accounts/gina", None)
        .await;
    assert_eq!(a.status, 200);
}
