//! `GET /metrics` on a served instance: refused without credentials, and with a
//! viewer's token the Prometheus text parses (with a parser crate) and holds every
//! instrument the engine names, counting the runs of a job that fired on an executor;
//! and a real Prometheus (Debian's package) scraping a served instance, with the
//! shipped alert rules loaded.

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
    // With a webhook alarm, so its delivery counters are scraped too.
    let hook = support::servers::HttpServer::start(support::servers::Answer::Status(200)).await;
    let (cfg, tokens) = config(&url, None, false, Some(&hook.url));
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
    // Many scrapes at once, good and bad credentials interleaved: each good one is
    // answered in full, each bad one refused.
    let scrapes = (0..32).map(|k| {
        let token = if k % 2 == 0 {
            tokens.viewer.clone()
        } else {
            format!("jw_{k:064}")
        };
        let s = scrape(Some(token));
        async move {
            let r = s.await.unwrap();
            (k, r.status().as_u16(), r.text().await.unwrap())
        }
    });
    for (k, status, body) in futures::future::join_all(scrapes).await {
        if k % 2 == 0 {
            assert_eq!(status, 200);
            let p =
                prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).unwrap();
            assert!(p.samples.iter().any(|s| s.metric == i::FIRE_LAG));
        } else {
            assert_eq!(status, 401, "{body}");
        }
    }
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
        .find(|s| s.metric == i::FIRE_LAG && s.labels.get("group") == Some("billing"))
        .unwrap();
    let prometheus_parse::Value::Histogram(buckets) = &lag.value else {
        unreachable!()
    };
    assert!(buckets.len() > 10, "seconds buckets: {buckets:?}");
    assert!(
        buckets.last().unwrap().count >= succeeded as f64,
        "every run's lag is counted"
    );
    // The group's live instance and its dispatches: read at the node's next
    // registry check (every quarter heartbeat).
    let mut live = None;
    for _ in 0..100 {
        let text = scrape(Some(tokens.viewer.clone()))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let p = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
        live = p.samples.iter().find_map(|s| match s.value {
            prometheus_parse::Value::Gauge(v)
                if s.metric == i::LIVE_EXECUTORS && s.labels.get("group") == Some("billing") =>
            {
                Some(v)
            }
            _ => None,
        });
        if live == Some(1.0) {
            let dispatched = p.samples.iter().find_map(|s| match &s.value {
                prometheus_parse::Value::Histogram(b)
                    if s.metric == i::DISPATCH && s.labels.get("group") == Some("billing") =>
                {
                    b.last().map(|b| b.count)
                }
                _ => None,
            });
            assert!(
                dispatched.is_some_and(|n| n >= succeeded as f64),
                "every run was dispatched to billing: {dispatched:?}"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(live, Some(1.0), "billing's one instance is live");
    instance.shutdown().await;
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Queries Prometheus's HTTP API: the first result's value, if any.
async fn query(client: &reqwest::Client, prom: &str, q: &str) -> Option<f64> {
    let enc: String = q
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let r = client
        .get(format!("{prom}/api/v1/query?query={enc}"))
        .send()
        .await
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&r.bytes().await.ok()?).ok()?;
    v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_scrapes_the_server_with_the_alert_rules_loaded() {
    for tool in ["/usr/bin/prometheus", "/usr/bin/promtool"] {
        if !std::path::Path::new(tool).exists() {
            support::skip(&format!(
                "{tool} is not installed (scripts/test installs Debian's prometheus)"
            ));
            return;
        }
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let rules = root.join("docs/prometheus/alerts.yml");
    let check = std::process::Command::new("/usr/bin/promtool")
        .args(["check", "rules"])
        .arg(&rules)
        .output()
        .unwrap();
    assert!(check.status.success(), "promtool check rules: {check:?}");

    let dir = std::env::temp_dir().join(format!("jobwheel-prom-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.join("jobs.db").display());
    let (cfg, tokens) = config(&url, None, false, None);
    let server = serve(cfg).await;
    let target = server.local_addr().to_string();
    let base = format!("http://{target}");
    let instance = instance_builder("i-1", &Seen::default())
        .register_at(&base)
        .beat_every(Duration::from_millis(200))
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    let api = Api::new(&server);
    let admin = Who::Token(tokens.admin.clone());
    let job = json!({
        "id": "every.second", "handler": "echo", "remote": {"group": "billing"},
        "schedule": {"kind": "cron", "expr": "* * * * * ?", "zone": "UTC"},
    });
    assert_eq!(
        api.send(&admin, "POST", "/api/v1/jobs", "/api/v1/jobs", job)
            .await
            .status,
        201
    );

    std::fs::write(dir.join("token"), &tokens.viewer).unwrap();
    std::fs::copy(&rules, dir.join("alerts.yml")).unwrap();
    std::fs::write(
        dir.join("prometheus.yml"),
        format!(
            "global: {{ scrape_interval: 1s, evaluation_interval: 1s }}\n\
             rule_files: [alerts.yml]\n\
             scrape_configs:\n  - job_name: jobwheel\n    authorization: {{ credentials_file: {} }}\n    static_configs: [{{ targets: [\"{target}\"] }}]\n",
            dir.join("token").display()
        ),
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let prom = format!("http://127.0.0.1:{port}");
    let mut child = tokio::process::Command::new("/usr/bin/prometheus")
        .arg(format!(
            "--config.file={}",
            dir.join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    // Through Prometheus: the runs counter and the lag histogram hold at least the
    // runs the log holds (other tests' nodes in this process count too), the scrape
    // is up, and every shipped rule is loaded.
    let client = reqwest::Client::new();
    let (mut runs, mut lagged, mut up) = (None, None, None);
    let mut logged = 0;
    for _ in 0..120 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let r = api
            .call(
                &admin,
                "GET",
                "/api/v1/runs",
                "/api/v1/runs?job=every.second&status=succeeded&limit=1000",
                None,
            )
            .await;
        logged = r.body["items"].as_array().unwrap().len();
        runs = query(
            &client,
            &prom,
            r#"sum(jobwheel_runs_finished_total{outcome="succeeded"})"#,
        )
        .await;
        lagged = query(&client, &prom, "sum(jobwheel_fire_lag_seconds_count)").await;
        up = query(&client, &prom, r#"up{job="jobwheel"}"#).await;
        if logged >= 3 && runs.is_some_and(|n| n >= 3.0) && lagged.is_some_and(|n| n >= 3.0) {
            break;
        }
    }
    let log = std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
    assert_eq!(
        up,
        Some(1.0),
        "Prometheus scrapes /metrics with the token\n{log}"
    );
    let runs = runs.unwrap_or_else(|| panic!("the runs counter through Prometheus\n{log}"));
    assert!(
        logged >= 3 && runs >= 3.0,
        "{runs} runs counted, {logged} in the log"
    );
    assert!(lagged.unwrap() >= 3.0, "every run's fire lag is a sample");
    let p99 = query(
        &client,
        &prom,
        "histogram_quantile(0.99, sum by (le) (jobwheel_fire_lag_seconds_bucket))",
    )
    .await;
    assert!(
        p99.is_some_and(|v| (0.0..60.0).contains(&v)),
        "a lag p99: {p99:?}"
    );
    let rules: serde_json::Value = serde_json::from_slice(
        &client
            .get(format!("{prom}/api/v1/rules"))
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap(),
    )
    .unwrap();
    let loaded = rules["data"]["groups"][0]["rules"]
        .as_array()
        .map_or(0, Vec::len);
    let shipped = std::fs::read_to_string(root.join("docs/prometheus/alerts.yml"))
        .unwrap()
        .matches("- alert:")
        .count();
    assert_eq!(loaded, shipped, "every shipped alert rule is loaded");
    if let Ok(out) = std::env::var("JOBWHEEL_PANELS") {
        pictures_of_the_panels(&api, &admin, &prom, root, &out).await;
    }
    let _ = child.kill().await;
    instance.shutdown().await;
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// With `JOBWHEEL_PANELS=docs/screenshots`: lets the served instance run a mixed
/// workload for `JOBWHEEL_PANELS_SECONDS` (180), scraped by the Prometheus above, then
/// takes a picture of each key dashboard panel's query on Prometheus's graph page in
/// Chromium (`tests/browser/panels.mjs`). The pictures in docs/book/src/architecture.md.
async fn pictures_of_the_panels(
    api: &Api,
    admin: &Who,
    prom: &str,
    root: &std::path::Path,
    out: &str,
) {
    // Beside the job every second: one failing every 5 s, one sleeping 1.5 s every
    // 2 s (its fires wait for the previous run: serial), and a burst each 30 s.
    let jobs = [
        json!({"id": "fails.often", "handler": "fail", "remote": {"group": "billing"},
               "schedule": {"kind": "cron", "expr": "*/5 * * * * ?", "zone": "UTC"},
               "retry": {"max_attempts": 1}}),
        json!({"id": "slow.report", "handler": "wait", "payload": {"ms": 1500}, "remote": {"group": "billing"},
               "schedule": {"kind": "cron", "expr": "*/2 * * * * ?", "zone": "UTC"}}),
    ];
    for job in jobs {
        let a = api
            .send(admin, "POST", "/api/v1/jobs", "/api/v1/jobs", job)
            .await;
        assert_eq!(a.status, 201, "{}", a.body);
    }
    for i in 0..20 {
        let job = json!({"id": format!("burst.{i}"), "handler": "echo", "remote": {"group": "billing"},
                         "schedule": {"kind": "cron", "expr": "0,30 * * * * ?", "zone": "UTC"}});
        assert_eq!(
            api.send(admin, "POST", "/api/v1/jobs", "/api/v1/jobs", job)
                .await
                .status,
            201
        );
    }
    let seconds: u64 = std::env::var("JOBWHEEL_PANELS_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(180);
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let q = |quantile: &str, metric: &str, name: &str| {
        format!(
            "label_replace(histogram_quantile({quantile}, sum by (le) (rate({metric}_bucket[30s]))), \"series\", \"{name}\", \"\", \"\")"
        )
    };
    let range = format!("{}s", seconds + 30);
    let panels = json!([
        {"name": "prometheus-fire-lag", "range": range,
         "expr": format!("{} or {}", q("0.5", "jobwheel_fire_lag_seconds", "fire lag p50"), q("0.99", "jobwheel_fire_lag_seconds", "fire lag p99"))},
        {"name": "prometheus-claim-lag-pickup", "range": range,
         "expr": format!("{} or {}", q("0.99", "jobwheel_claim_lag_seconds", "claim lag p99"), q("0.99", "jobwheel_pickup_seconds", "pickup p99"))},
        {"name": "prometheus-runs-by-outcome", "range": range,
         "expr": "sum by (outcome) (rate(jobwheel_runs_finished_total{group=\"billing\"}[30s])) > 0"},
        {"name": "prometheus-fleet", "range": range,
         // `or` matches series on their labels, not their names: each gets its own.
         "expr": "label_replace(jobwheel_live_nodes, \"series\", \"live nodes\", \"\", \"\") \
                  or label_replace(jobwheel_live_executors, \"series\", \"live executors of $1\", \"group\", \"(.*)\") \
                  or label_replace(jobwheel_running, \"series\", \"running\", \"\", \"\") \
                  or label_replace(jobwheel_armed, \"series\", \"armed\", \"\", \"\")"},
    ]);
    let out_dir = root.join(out);
    std::fs::create_dir_all(&out_dir).unwrap();
    let run = tokio::process::Command::new("node")
        .arg("panels.mjs")
        .current_dir(root.join("tests/browser"))
        .env("JW_PROM", prom)
        .env("JW_OUT", &out_dir)
        .env("JW_PANELS", panels.to_string())
        .output()
        .await
        .unwrap();
    assert!(
        run.status.success(),
        "panels.mjs: {}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    println!("{}", String::from_utf8_lossy(&run.stdout));
}
