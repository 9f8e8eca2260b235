//! The audit log (admins only, paged by id), paging of jobs under concurrent
//! inserts, logging out.

use super::{Ctx, cron_job};

pub async fn audit_paging_logout(c: &Ctx) {
    let Ctx {
        api,
        admin,
        otto,
        vera,
        ..
    } = c;
    // The audit log is for admins; it pages by id.
    let a = api
        .call(otto, "GET", "/api/v1/audit", "/api/v1/audit", None)
        .await;
    assert_eq!(a.status, 403);
    let all = api
        .call(
            admin,
            "GET",
            "/api/v1/audit",
            "/api/v1/audit?limit=1000",
            None,
        )
        .await
        .body["items"]
        .as_array()
        .unwrap()
        .clone();
    let page1 = api
        .call(admin, "GET", "/api/v1/audit", "/api/v1/audit?limit=3", None)
        .await
        .body;
    let next = page1["next"].as_i64().unwrap();
    let page2 = api
        .call(
            admin,
            "GET",
            "/api/v1/audit",
            &format!("/api/v1/audit?limit=3&before={next}"),
            None,
        )
        .await
        .body;
    let ids: Vec<i64> = page1["items"]
        .as_array()
        .unwrap()
        .iter()
        .chain(page2["items"].as_array().unwrap())
        .map(|e| e["id"].as_i64().unwrap())
        .collect();
    let want: Vec<i64> = all
        .iter()
        .take(6)
        .map(|e| e["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, want, "two pages are the newest six entries");
    assert!(
        all.iter()
            .any(|e| e["action"] == "session.login" && e["actor"] == "user:vera")
    );

    // Paging stays stable while jobs are inserted concurrently.
    for i in 0..30 {
        let a = api
            .send(
                admin,
                "POST",
                "/api/v1/jobs",
                "/api/v1/jobs",
                cron_job(&format!("page.{i:02}"), "0 0 1 * * ?", "echo"),
            )
            .await;
        assert_eq!(a.status, 201);
    }
    let writer = {
        let (api, admin) = (api.clone(), admin.clone());
        tokio::spawn(async move {
            for i in 0..30 {
                let id = format!("page.{i:02}a");
                api.send(
                    &admin,
                    "POST",
                    "/api/v1/jobs",
                    "/api/v1/jobs",
                    cron_job(&id, "0 0 1 * * ?", "echo"),
                )
                .await;
            }
        })
    };
    let mut seen_ids = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..100 {
        let q = match &after {
            Some(a) => format!("/api/v1/jobs?q=page.&limit=7&after={a}"),
            None => "/api/v1/jobs?q=page.&limit=7".to_string(),
        };
        let a = api.call(vera, "GET", "/api/v1/jobs", &q, None).await;
        seen_ids.extend(
            a.body["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|j| j["job"]["id"].as_str().unwrap().to_string()),
        );
        match a.body["next"].as_str() {
            Some(n) => after = Some(n.to_string()),
            None => break,
        }
    }
    writer.await.unwrap();
    let mut sorted = seen_ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, seen_ids, "pages are in id order with no repeat");
    for i in 0..30 {
        assert!(
            seen_ids.contains(&format!("page.{i:02}")),
            "page.{i:02} is on a page"
        );
    }

    // A malformed query or id is refused as JSON, naming it.
    let a = api
        .call(vera, "GET", "/api/v1/runs", "/api/v1/runs?limit=many", None)
        .await;
    assert_eq!((a.status, a.body["field"].as_str()), (400, Some("query")));
    let a = api
        .call(vera, "GET", "/api/v1/runs/{id}", "/api/v1/runs/abc", None)
        .await;
    assert_eq!((a.status, a.body["field"].as_str()), (400, Some("id")));

    // Logging out ends the session in the browser.
    let a = api
        .call(vera, "DELETE", "/api/v1/session", "/api/v1/session", None)
        .await;
    assert_eq!(a.status, 204);
    assert!(a.set_cookie.unwrap().contains("Max-Age=0"));
}
