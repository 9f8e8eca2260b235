//! `GET /metrics` on a served instance: refused without credentials, and with a
//! viewer's token the Prometheus text parses (with a parser crate) and holds every
//! instrument the engine names, counting the runs of a job that fired on an executor.

use crate::support;

use jobwheel::engine::instruments as i;
use serde_json::json;
use std::time::Duration;
use support::admin::{Api, Who, config, serve};
use support::remote::{Seen, instance_builder};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_served_behind_credentials_for_prometheus() {
    let dir = std::env::temp_dir().join(format!("jobwheel-metrics-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.join("jobs.db").display());
    let (cfg, tokens) = config(&url, None, false, None);
    let server = serve(cfg).await;
    let base = format!("http://{}", server.local_addr());
    let instance = instance_builder("i-1", &Seen::default())
        .register_at(&base)
        .beat_every(Duration::from_millis(200))
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    let api = Api::new(&server);
    let admin = Who::Token(tokens.admin.clone());
    let job = json!({
        "id": "tick", "handler": "echo", "remote": {"group": "billing"},
        "schedule": {"kind": "cron", "expr": "* * * * * ?", "zone": "UTC"},
    });
    let a = api
        .send(&admin, "POST", "/api/v1/jobs", "/api/v1/jobs", job)
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
    let mut succeeded = 0;
    for _ in 0..100 {
        let r = api
            .call(
                &admin,
                "GET",
                "/api/v1/runs",
                "/api/v1/runs?job=tick&status=succeeded",
                None,
            )
            .await;
        succeeded = r.body["items"].as_array().unwrap().len();
        if succeeded >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(succeeded >= 2, "the job fired");

    let client = reqwest::Client::new();
    let scrape = |token: Option<String>| {
        let mut r = client.get(format!("{base}/metrics"));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        r.send()
    };
    let refused = scrape(None).await.unwrap();
    assert_eq!(refused.status().as_u16(), 401, "no credentials, no metrics");
    let refused = scrape(Some("jw_not-a-token".into())).await.unwrap();
    assert_eq!(refused.status().as_u16(), 401);
    let r = scrape(Some(tokens.viewer.clone())).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let text = r.text().await.unwrap();
    let parsed = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
    for (name, kind, _, _) in i::ALL {
        let found = parsed.samples.iter().find(|s| s.metric == *name);
        let found = found.unwrap_or_else(|| panic!("{name} is scraped:\n{text}"));
        let ok = matches!(
            (kind, &found.value),
            (&"counter", prometheus_parse::Value::Counter(_))
                | (&"gauge", prometheus_parse::Value::Gauge(_))
                | (&"histogram", prometheus_parse::Value::Histogram(_))
        );
        assert!(ok, "{name} is a {kind}: {:?}", found.value);
    }
    // Runs of this process's nodes (other tests' servers share the recorder): at
    // least this job's.
    let finished: f64 = parsed
        .samples
        .iter()
        .filter(|s| s.metric == i::RUNS_FINISHED && s.labels.get("outcome") == Some("succeeded"))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v) => v,
            _ => 0.0,
        })
        .sum();
    assert!(finished >= succeeded as f64, "{finished} >= {succeeded}");
    let lag = parsed
        .samples
        .iter()
        .find(|s| s.metric == i::FIRE_LAG)
        .unwrap();
    let prometheus_parse::Value::Histogram(buckets) = &lag.value else {
        unreachable!()
    };
    assert!(buckets.len() > 10, "seconds buckets: {buckets:?}");
    assert!(
        buckets.last().unwrap().count >= succeeded as f64,
        "every run's lag is counted"
    );
    instance.shutdown().await;
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
