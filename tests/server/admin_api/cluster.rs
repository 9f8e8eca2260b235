//! Two servers on one PostgreSQL store form a cluster: either answers the API (a
//! session made on one is accepted by the other), both scheduler nodes are listed,
//! and a job created through one fires once per fire across both.

use super::support::admin::*;
use super::support::remote::{Seen, instance_builder};
use super::{cron_job, until};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_store_form_a_cluster() {
    let Some(url) = super::support::server_url("JOBWHEEL_POSTGRES_URL") else {
        return;
    };
    let prefix = format!("apic{}_", fastrand::u32(..));
    let (config, tokens) = config(&url, Some(&prefix), false, None);
    let (a, b) = (serve(config.clone()).await, serve(config).await);
    let (api_a, api_b) = (Api::new(&a), Api::new(&b));
    let admin = Who::Token(tokens.admin.clone());

    let ada = api_a.login("ada", "ada-password-1").await;
    let me = api_b
        .call(&ada, "GET", "/api/v1/session", "/api/v1/session", None)
        .await;
    assert_eq!(
        (me.status, me.body["name"].as_str()),
        (200, Some("ada")),
        "a session made on one server is good on the other"
    );
    // A token added through one server is admitted by the other within 250 ms, and
    // refused there within its refresh of the stored credentials (2 s) once removed.
    let t = api_a
        .send(
            &ada,
            "POST",
            "/api/v1/access/tokens",
            "/api/v1/access/tokens",
            serde_json::json!({"name": "both", "role": "viewer"}),
        )
        .await;
    assert_eq!(t.status, 201, "{}", t.body);
    let token = Who::Token(t.body["token"].as_str().unwrap().to_string());
    let status_on_b = |who: Who| {
        let api_b = &api_b;
        async move {
            api_b
                .call(&who, "GET", "/api/v1/session", "/api/v1/session", None)
                .await
                .status
        }
    };
    // Server b does not know it: it reads the store again before refusing (at most
    // every 250 ms).
    let added = std::time::Instant::now();
    until("server b to admit the token", || async {
        (status_on_b(token.clone()).await == 200).then_some(())
    })
    .await;
    assert!(
        added.elapsed() < Duration::from_secs(1),
        "{:?}",
        added.elapsed()
    );
    let t = api_a
        .call(
            &ada,
            "DELETE",
            "/api/v1/access/tokens/{name}",
            "/api/v1/access/tokens/both",
            None,
        )
        .await;
    assert_eq!(t.status, 200, "{}", t.body);
    let removed = std::time::Instant::now();
    until("server b to refuse the token", || async {
        (status_on_b(token.clone()).await == 401).then_some(())
    })
    .await;
    assert!(
        removed.elapsed() < Duration::from_secs(3),
        "{:?}",
        removed.elapsed()
    );

    let nodes = until("both scheduler nodes to beat", || async {
        let n = api_b
            .call(&admin, "GET", "/api/v1/nodes", "/api/v1/nodes", None)
            .await;
        (n.body["items"].as_array().unwrap().len() == 2).then_some(n)
    })
    .await;
    assert_eq!(nodes.body["items"].as_array().unwrap().len(), 2);

    let instance = instance_builder("i-1", &Seen::default())
        .register_at(&api_a.base)
        .beat_every(Duration::from_millis(200))
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    let created = api_a
        .send(
            &ada,
            "POST",
            "/api/v1/jobs",
            "/api/v1/jobs",
            cron_job("tick", "* * * * * ?", "echo"),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let runs = until("five fires of the job", || async {
        let r = api_b
            .call(
                &admin,
                "GET",
                "/api/v1/runs",
                "/api/v1/runs?job=tick&status=succeeded&limit=1000",
                None,
            )
            .await;
        let items = r.body["items"].as_array().unwrap().clone();
        (items.len() >= 5).then_some(items)
    })
    .await;
    let mut fires: Vec<&str> = runs
        .iter()
        .map(|r| r["fire_at"].as_str().unwrap())
        .collect();
    let n = fires.len();
    fires.sort();
    fires.dedup();
    assert_eq!(fires.len(), n, "each fire ran once across the two servers");

    // The node filter is the store's: a page of one run of a node holds one of its
    // runs, and a node with none gives an empty last page.
    let seen: std::collections::BTreeSet<&str> =
        runs.iter().map(|r| r["node"].as_str().unwrap()).collect();
    for node in seen {
        let path = format!("/api/v1/runs?job=tick&node={node}&limit=1");
        let r = api_b.call(&admin, "GET", "/api/v1/runs", &path, None).await;
        let items = r.body["items"].as_array().unwrap();
        assert_eq!(items.len(), 1, "{node}: {}", r.body);
        assert_eq!(items[0]["node"], node);
    }
    let r = api_b
        .call(
            &admin,
            "GET",
            "/api/v1/runs",
            "/api/v1/runs?job=tick&node=nobody&limit=1",
            None,
        )
        .await;
    assert_eq!(r.body["items"], serde_json::json!([]), "{}", r.body);
    assert!(r.body["next"].is_null(), "no page after: {}", r.body);

    instance.shutdown().await;
    a.shutdown().await;
    b.shutdown().await;
    super::support::drop_pg_tables(&url, &prefix).await;
}
