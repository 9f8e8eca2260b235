//! A run on an executor instance registered through the server: trigger, detail,
//! log tail, kill; then statistics, overview, nodes and the alarm outbox.

use super::support::remote::{Seen, instance_builder};
use super::{Ctx, JOB, last_audit, until};
use jobwheel::remote::ExecutorServer;
use serde_json::{Value, json};
use std::time::Duration;

pub async fn on_an_instance(c: &Ctx) {
    let Ctx {
        api,
        admin,
        otto,
        hook,
        vera,
        ..
    } = c;
    let path = format!("/api/v1/jobs/{JOB}");
    let seen = Seen::default();
    let instance: ExecutorServer = instance_builder("i-1", &seen)
        .register_at(&api.base)
        .beat_every(Duration::from_millis(200))
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    let a = until("the instance to register", || async {
        let a = api
            .call(vera, "GET", "/api/v1/executors", "/api/v1/executors", None)
            .await;
        (!a.body["items"].as_array().unwrap().is_empty()).then_some(a)
    })
    .await;
    assert_eq!(a.body["items"][0]["info"]["group"], "billing");
    assert_eq!(a.body["groups"], json!(["billing"]));
    // The job asks to hear of its runs being killed (no policy does by default).
    let mut def = api
        .call(admin, "GET", "/api/v1/jobs/{id}", &path, None)
        .await
        .body["job"]
        .clone();
    def["alarm"] = json!({"events": ["final_failure", "lost", "misfire", "killed"]});
    let a = api
        .send(admin, "PUT", "/api/v1/jobs/{id}", &path, def)
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let a = api
        .call(
            vera,
            "POST",
            "/api/v1/jobs/{id}/trigger",
            &format!("{path}/trigger"),
            None,
        )
        .await;
    assert_eq!(a.status, 403);
    let once = json!({"note": "<b>once</b>", "pages": [1, 2]});
    let url = format!("{path}/trigger");
    let trigger = |body| api.send(otto, "POST", "/api/v1/jobs/{id}/trigger", &url, body);
    let deep: Value =
        serde_json::from_str(&format!("{}{}", "[".repeat(100), "]".repeat(100))).unwrap();
    let a = trigger(json!({"payload": deep})).await;
    assert_eq!(
        (a.status, a.body["field"].as_str()),
        (400, Some("payload")),
        "an override nested too deep is refused naming it: {}",
        a.body
    );
    let a = trigger(json!({"payload": once, "extra": 1})).await;
    assert_eq!(a.status, 400, "unknown fields are refused: {}", a.body);
    let a = trigger(json!({"payload": once})).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["next_trigger"], "manual");
    assert_eq!(a.body["next_payload"], once, "the job holds the override");
    assert_eq!(
        a.body["job"]["payload"]["note"], "<script>alert(1)</script>",
        "its definition does not change"
    );
    let audit = last_audit(api, admin, JOB).await;
    assert_eq!(
        (
            &audit["action"],
            &audit["after"]["next"]["context"]["payload"]
        ),
        (&json!("job.trigger"), &once)
    );
    let run = until("the triggered run to start", || async {
        let a = api
            .call(
                vera,
                "GET",
                "/api/v1/runs",
                &format!("/api/v1/runs?job={JOB}&status=running&trigger=manual"),
                None,
            )
            .await;
        a.body["items"].as_array().unwrap().first().cloned()
    })
    .await;
    let id = run["id"].as_i64().unwrap();
    let a = api
        .call(
            vera,
            "GET",
            "/api/v1/runs/{id}",
            &format!("/api/v1/runs/{id}"),
            None,
        )
        .await;
    assert_eq!(
        (a.body["run"]["status"].as_str(), a.body["group"].as_str()),
        (Some("running"), Some("billing"))
    );
    assert_eq!(
        a.body["run"]["payload"], once,
        "the run records its payload"
    );
    let lines = until("the run's log", || async {
        let a = api
            .call(
                vera,
                "GET",
                "/api/v1/runs/{id}/log",
                &format!("/api/v1/runs/{id}/log?offset=0"),
                None,
            )
            .await;
        let lines = a.body["log"]["lines"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        (lines.len() >= 5).then_some(lines)
    })
    .await;
    // Read while it runs: the lines came back with the dispatcher's result polls
    // and were stored with the run, after the line naming where it went.
    assert!(
        lines[0]
            .as_str()
            .unwrap()
            .starts_with("[jobwheel] dispatched to http://127.0.0.1:"),
        "{lines:?}"
    );
    assert!(lines[1].as_str().unwrap().contains("step <0>"), "{lines:?}");
    assert!(
        lines[4].as_str().unwrap().contains(&once.to_string()),
        "the executor instance ran the override: {lines:?}"
    );
    // The executors list: the instance is live, names itself and reports this run
    // as executing (its answer to a beat sent now); without a probe, no answer.
    let a = api
        .call(vera, "GET", "/api/v1/executors", "/api/v1/executors", None)
        .await;
    let i = &a.body["items"][0];
    assert_eq!(
        (&i["live"], &i["probe"]["instance"], &i["probe"]["running"]),
        (&json!(true), &json!("i-1"), &json!(1)),
        "{i}"
    );
    assert!(i["probe"]["capacity"].as_u64().unwrap() >= 1, "{i}");
    // Sixteen at once: every answer probes and sees the run; an operator limited to
    // another group sees no instance of this one.
    let many =
        (0..16).map(|_| api.call(vera, "GET", "/api/v1/executors", "/api/v1/executors", None));
    for a in futures::future::join_all(many).await {
        assert_eq!(
            (a.status, &a.body["items"][0]["probe"]["running"]),
            (200, &json!(1))
        );
    }
    let a = api
        .call(
            &c.olga,
            "GET",
            "/api/v1/executors",
            "/api/v1/executors",
            None,
        )
        .await;
    assert_eq!(
        a.body["items"],
        json!([]),
        "another group's instances are not shown"
    );
    let a = api
        .call(
            vera,
            "GET",
            "/api/v1/executors",
            "/api/v1/executors?probe=false",
            None,
        )
        .await;
    assert_eq!(
        (&a.body["items"][0]["live"], &a.body["items"][0]["probe"]),
        (&json!(true), &Value::Null)
    );
    let a = api
        .call(
            vera,
            "POST",
            "/api/v1/runs/{id}/kill",
            &format!("/api/v1/runs/{id}/kill"),
            None,
        )
        .await;
    assert_eq!(a.status, 403);
    let a = api
        .call(
            otto,
            "POST",
            "/api/v1/runs/{id}/kill",
            &format!("/api/v1/runs/{id}/kill"),
            None,
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        last_audit(api, admin, &id.to_string()).await["action"],
        "run.kill"
    );
    let ended = until("the killed run to end", || async {
        let a = api
            .call(
                vera,
                "GET",
                "/api/v1/runs/{id}",
                &format!("/api/v1/runs/{id}"),
                None,
            )
            .await;
        (a.body["run"]["status"] != "running").then_some(a.body["run"].clone())
    })
    .await;
    assert_eq!(
        (&ended["status"], &ended["will_retry"]),
        (&json!("cancelled"), &json!(false)),
        "a killed run is cancelled, not retried: {ended}"
    );
    assert!(
        ended["error"].as_str().unwrap().starts_with("killed on"),
        "{ended}"
    );
    // The jobs list shows the job's latest run and how its ended runs went.
    let a = api
        .call(
            vera,
            "GET",
            "/api/v1/jobs",
            &format!("/api/v1/jobs?q={JOB}"),
            None,
        )
        .await;
    let item = a.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job"]["id"] == JOB)
        .unwrap()
        .clone();
    assert_eq!(
        (&item["last_run"]["id"], &item["last_run"]["status"]),
        (&json!(id), &json!("cancelled")),
        "{item}"
    );
    let recent = &item["recent"];
    assert!(
        recent["ended"].as_u64().unwrap() >= 1
            && recent["succeeded"].as_u64() < recent["ended"].as_u64(),
        "the cancelled run is counted, not as a success: {recent}"
    );
    let a = api
        .call(
            otto,
            "POST",
            "/api/v1/runs/{id}/kill",
            &format!("/api/v1/runs/{id}/kill"),
            None,
        )
        .await;
    assert_eq!(
        (a.status, a.body["error"].as_str()),
        (409, Some("conflict"))
    );
    assert_eq!(
        api.call(
            vera,
            "GET",
            "/api/v1/runs/{id}",
            "/api/v1/runs/999999999",
            None
        )
        .await
        .status,
        404
    );
    instance.shutdown().await;

    // Statistics, overview, nodes.
    let a = api
        .call(
            vera,
            "GET",
            "/api/v1/stats/daily",
            "/api/v1/stats/daily",
            None,
        )
        .await;
    let days = a.body["days"].as_array().unwrap();
    assert_eq!(
        days.iter()
            .map(|d| d["cancelled"].as_u64().unwrap())
            .sum::<u64>(),
        1,
        "the killed run is counted cancelled: {}",
        a.body
    );
    let a = api
        .call(
            vera,
            "GET",
            "/api/v1/stats/daily",
            "/api/v1/stats/daily?from=2026-13-01",
            None,
        )
        .await;
    assert_eq!((a.status, a.body["field"].as_str()), (400, Some("from")));
    let a = api
        .call(vera, "GET", "/api/v1/overview", "/api/v1/overview", None)
        .await;
    assert_eq!(a.body["jobs"]["total"], 1, "{}", a.body);
    assert_eq!(a.body["nodes"].as_array().unwrap().len(), 1);
    let a = api
        .call(vera, "GET", "/api/v1/nodes", "/api/v1/nodes", None)
        .await;
    assert_eq!(a.body["items"].as_array().unwrap().len(), 1);

    // The alarm outbox: the killed run's alarm (its job asks for kills) is posted to
    // the configured webhook, so it is sent, and a sent event is neither retried nor
    // discarded.
    let alarm = until("the run's alarm event to be done", || async {
        let a = api
            .call(
                vera,
                "GET",
                "/api/v1/alarms",
                "/api/v1/alarms?limit=10",
                None,
            )
            .await;
        a.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["status"] == "sent")
            .cloned()
    })
    .await;
    let aid = alarm["id"].as_i64().unwrap();
    assert_eq!(
        (&alarm["event"]["job_id"], &alarm["event"]["kind"]),
        (&json!(JOB), &json!("killed"))
    );
    let posted = hook.requests();
    assert_eq!(posted.len(), 1, "the webhook got the event once");
    let body: serde_json::Value = serde_json::from_slice(&posted[0].body).unwrap();
    assert!(body.to_string().contains(JOB), "{body}");
    let a = api
        .call(
            vera,
            "POST",
            "/api/v1/alarms/{id}/retry",
            &format!("/api/v1/alarms/{aid}/retry"),
            None,
        )
        .await;
    assert_eq!(a.status, 403);
    let a = api
        .call(
            otto,
            "POST",
            "/api/v1/alarms/{id}/retry",
            &format!("/api/v1/alarms/{aid}/retry"),
            None,
        )
        .await;
    assert_eq!(
        (a.status, a.body["error"].as_str()),
        (409, Some("conflict"))
    );
    let a = api
        .call(
            otto,
            "POST",
            "/api/v1/alarms/{id}/discard",
            "/api/v1/alarms/999999999/discard",
            None,
        )
        .await;
    assert_eq!(a.status, 404);
}

/// A local run (a scheduler node embedded in another process, on the same store):
/// its handler's lines through the API from the store, in order, cut at the node's
/// bound with a marker, from an offset; hidden from an operator of another group.
pub async fn a_local_runs_log(c: &Ctx, store_url: &str, prefix: Option<&str>) {
    use jobwheel::prelude::*;
    super::support::remote::init_logs();
    let mut backend = jobwheel::BackendConfig::new(store_url);
    if let Some(p) = prefix {
        backend = backend.prefix(p);
    }
    let node = jobwheel::Scheduler::builder()
        .backend(backend.connect().await.unwrap())
        .handler("chatty", |ctx: JobContext| async move {
            for i in 0..15 {
                tracing::info!(run = ctx.run_id.0, "local step <{i}>");
            }
            Ok(())
        })
        .config(
            SchedulerConfig::default()
                .node_id("embedded-1")
                .log_lines(10)
                .poll_interval(Duration::from_millis(200)),
        )
        .build()
        .unwrap();
    let running = node.start().await.unwrap();
    let far = Timestamp::from_millis(4_102_444_800_000);
    node.upsert(
        Job::builder("local.chatty", "chatty", Schedule::once(far))
            .build()
            .unwrap(),
    )
    .await
    .unwrap();
    node.trigger_now("local.chatty").await.unwrap();
    let id = until("the local run to finish", || async {
        let runs = node
            .runs(&RunQuery::new().job(JobId::new("local.chatty").unwrap()))
            .await
            .unwrap();
        runs.first()
            .filter(|r| r.ended_at.is_some())
            .map(|r| r.id.0)
    })
    .await;
    let log = |who: &'static str, offset: u64| async move {
        let who = match who {
            "vera" => &c.vera,
            _ => &c.olga,
        };
        let path = format!("/api/v1/runs/{id}/log?offset={offset}");
        c.api
            .call(who, "GET", "/api/v1/runs/{id}/log", &path, None)
            .await
    };
    let a = log("vera", 0).await;
    assert_eq!(a.status, 200, "{}", a.body);
    let lines: Vec<String> = a.body["log"]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap().to_string())
        .collect();
    assert_eq!(lines.len(), 11, "ten lines and the cut marker: {lines:?}");
    for (i, l) in lines.iter().take(10).enumerate() {
        assert!(l.contains(&format!("local step <{i}>")), "{lines:?}");
    }
    assert!(lines[10].contains("log cut at 10 lines"), "{lines:?}");
    assert_eq!(
        (
            &a.body["instance"],
            &a.body["log"]["done"],
            &a.body["log"]["first_offset"],
            &a.body["log"]["next_offset"]
        ),
        (&json!("embedded-1"), &json!(true), &json!(0), &json!(11))
    );
    let a = log("vera", 9).await;
    assert_eq!(a.body["log"]["lines"].as_array().unwrap().len(), 2);
    assert_eq!(a.body["log"]["first_offset"], 9);
    let a = log("vera", 11).await;
    assert_eq!(
        (
            a.body["log"]["lines"].as_array().unwrap().len(),
            &a.body["log"]["next_offset"]
        ),
        (0, &json!(11)),
        "nothing past the end"
    );
    // Sixteen readers at once read the same lines; another group's operator none.
    let many = (0..16).map(|_| log("vera", 0));
    for a in futures::future::join_all(many).await {
        assert_eq!(a.body["log"]["lines"].as_array().unwrap().len(), 11);
    }
    let a = log("olga", 0).await;
    assert_eq!(a.status, 404, "{}", a.body);
    running.shutdown().await;
    node.remove("local.chatty").await.unwrap();
}
