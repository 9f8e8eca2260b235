//! Credentials: none, forged, wrong passwords; logging in; the session cookie.

use super::Ctx;
use super::support::admin::*;
use super::support::servers::HttpServer;
use serde_json::{Value, json};

/// Health and the document answer without credentials; everything else is 401.
/// Returns the document.
pub async fn without_credentials(api: &Api) -> Value {
    // No credentials: only health, the document and logging in.
    assert_eq!(
        api.call(&Who::Anon, "GET", "/api/v1/health", "/api/v1/health", None)
            .await
            .status,
        200
    );
    let doc = api
        .call(
            &Who::Anon,
            "GET",
            "/api/v1/openapi.json",
            "/api/v1/openapi.json",
            None,
        )
        .await;
    assert_eq!(
        doc.body,
        serde_json::from_str::<Value>(&jobwheel::admin::openapi()).unwrap(),
        "the server serves the generated document"
    );
    let anon = api
        .call(&Who::Anon, "GET", "/api/v1/jobs", "/api/v1/jobs", None)
        .await;
    assert_eq!(
        (anon.status, anon.body["error"].as_str()),
        (401, Some("unauthenticated"))
    );
    let forged = api
        .call(
            &Who::Token("jw_forged".into()),
            "GET",
            "/api/v1/jobs",
            "/api/v1/jobs",
            None,
        )
        .await;
    assert_eq!(forged.status, 401, "an unknown token is refused");
    let forged_cookie = Who::Session {
        cookie: "jobwheel_session=7b7d.00".into(),
        csrf: None,
    };
    let a = api
        .call(&forged_cookie, "GET", "/api/v1/jobs", "/api/v1/jobs", None)
        .await;
    assert_eq!(a.status, 401, "a forged session cookie is refused");
    // A session for the admin signed as the server signs them, but with the secret
    // an executor of group `billing` holds: refused (the two secrets differ, and the
    // server refuses to start with them equal).
    let body = hex::encode(
        json!({"u": "ada", "e": 4_102_444_800_000i64, "n": "00112233445566778899aabbccddeeff"})
            .to_string(),
    );
    let sig = {
        use hmac::{KeyInit, Mac};
        let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(GROUP_SECRET.as_bytes()).unwrap();
        m.update(body.as_bytes());
        hex::encode(m.finalize().into_bytes())
    };
    let signed_by_an_executor = Who::Session {
        cookie: format!("jobwheel_session={body}.{sig}"),
        csrf: None,
    };
    let a = api
        .call(
            &signed_by_an_executor,
            "GET",
            "/api/v1/session",
            "/api/v1/session",
            None,
        )
        .await;
    assert_eq!(
        (a.status, a.body["error"].as_str()),
        (401, Some("unauthenticated")),
        "a session signed with a group's secret is refused"
    );

    doc.body
}

/// Wrong passwords are refused alike; the accounts log in.
pub async fn log_in(api: Api, tokens: &Tokens, hook: HttpServer) -> Ctx {
    let admin = Who::Token(tokens.admin.clone());
    let viewer_token = Who::Token(tokens.viewer.clone());
    // The console's page: a strict policy, no sniffing, no framing.
    let page = reqwest::get(format!("{}/", api.base)).await.unwrap();
    let h = page.headers();
    let csp = h["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["x-frame-options"], "DENY");
    for script in ["core.js", "pages.js", "app.js"] {
        let js = reqwest::get(format!("{}/assets/{script}", api.base))
            .await
            .unwrap();
        assert!(
            js.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/javascript")
        );
        let text = js.text().await.unwrap();
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
        ] {
            assert!(
                !text.contains(sink),
                "{script} never parses text as HTML ({sink})"
            );
        }
    }

    // Logging in.
    for (name, pw) in [("ada", "wrong-password"), ("nobody", "ada-password-1")] {
        let a = api
            .send(
                &Who::Anon,
                "POST",
                "/api/v1/session",
                "/api/v1/session",
                json!({"name": name, "password": pw}),
            )
            .await;
        assert_eq!(
            (a.status, a.body["error"].as_str()),
            (401, Some("bad_credentials")),
            "{name}"
        );
        assert!(a.set_cookie.is_none());
    }
    let a = api
        .send(
            &Who::Anon,
            "POST",
            "/api/v1/session",
            "/api/v1/session",
            json!({"name": "ada", "password": "ada-password-1"}),
        )
        .await;
    let set = a.set_cookie.clone().unwrap();
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(attr), "the session cookie is {attr}: {set}");
    }
    let ada = api.login("ada", "ada-password-1").await;
    let otto = api.login("otto", "otto-password-1").await;
    let vera = api.login("vera", "vera-password-1").await;
    let olga = api.login("olga", "olga-password-1").await;
    let me = api
        .call(&vera, "GET", "/api/v1/session", "/api/v1/session", None)
        .await;
    assert_eq!(
        (me.body["name"].as_str(), me.body["role"].as_str()),
        (Some("vera"), Some("viewer"))
    );
    Ctx {
        api,
        admin,
        viewer_token,
        ada,
        otto,
        vera,
        olga,
        hook,
    }
}
