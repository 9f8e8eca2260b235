//! The `jobwheel` command line, run as a process: `cron` against the library's own
//! fire computation, and every store verb against SQLite and PostgreSQL with
//! `--json` parsed back, the exit codes scripts rely on, and escaped output; and the
//! same verbs through a served instance's API with a token.

use crate::support;

use jobwheel::prelude::*;
use jobwheel::schedule::CronSchedule;
use jobwheel::store::Jobs;
use jobwheel::{RunQuery, RunStatus, Timestamp};
use serde_json::Value;
use std::process::{Command, Output};
use std::time::Duration;

/// Runs `jobwheel args…` (with `url` as `--url` when given) to its end.
fn jobwheel(url: Option<&str>, prefix: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_jobwheel"));
    cmd.env_remove("JOBWHEEL_URL").env_remove("JOBWHEEL_PREFIX");
    if let Some(url) = url {
        cmd.args(["--url", url, "--prefix", prefix]);
    }
    cmd.args(args).output().expect("jobwheel runs")
}

/// Its JSON output, asserting exit 0.
fn json(url: Option<&str>, prefix: &str, args: &[&str]) -> Value {
    let out = jobwheel(url, prefix, args);
    assert!(
        out.status.success(),
        "{args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// The audit log's actions, oldest first, and its entries.
/// The audit entries not made by the test's own set-up through the library, newest
/// first, and their actions oldest first.
async fn audit_of(store: &dyn jobwheel::JobStore) -> (Vec<String>, Vec<jobwheel::AuditRecord>) {
    let audit: Vec<_> = store
        .audit(&jobwheel::AuditQuery::new(100))
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.entry.actor != "library")
        .collect();
    let actions = audit.iter().rev().map(|e| e.entry.action.clone()).collect();
    (actions, audit)
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exited")
}

#[test]
fn cron_lists_the_fires_the_engine_computes_in_the_zone_and_describes_them() {
    let expr = "0 30 9 ? * MON-FRI";
    let v = json(
        None,
        "",
        &[
            "cron",
            expr,
            "--zone",
            "Asia/Shanghai",
            "--next",
            "7",
            "--after",
            "2026-12-04T00:00:00Z",
            "--json",
        ],
    );
    let schedule = CronSchedule::new(expr, "Asia/Shanghai").unwrap();
    let mut t = support::at("2026-12-04T00:00:00Z");
    let fires = v["fires"].as_array().unwrap();
    assert_eq!(fires.len(), 7);
    for f in fires {
        t = schedule.next_after(t).unwrap();
        assert_eq!(f["at"], serde_json::to_value(t).unwrap());
        assert!(
            f["local"].as_str().unwrap().ends_with("09:30:00+08:00"),
            "{f}"
        );
    }
    assert_eq!(
        (v["form"].as_str(), v["zone"].as_str()),
        (Some("quartz"), Some("Asia/Shanghai"))
    );
    assert_eq!(
        v["description"].as_str(),
        Some("At 09:30, Monday through Friday")
    );
    // The Unix form numbers Sunday 0.
    let v = json(None, "", &["cron", "0 9 * * 0", "--json", "--next", "1"]);
    assert_eq!(v["description"].as_str(), Some("At 09:00, Sunday"));
    // Bad input: exit 2, the field and the value named, nothing on stdout.
    for (args, named) in [
        (vec!["cron", "0 0 25 * * ?"], "schedule.cron"),
        (
            vec!["cron", "0 0 * * *", "--zone", "Mars/Base"],
            "schedule.zone",
        ),
        (vec!["cron", "0 0 * * *", "--next", "0"], "--next 0"),
        (
            vec!["cron", "0 0 * * *", "--after", "yesterday"],
            "--after \"yesterday\"",
        ),
    ] {
        let out = jobwheel(None, "", &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), 2, "{args:?}: {err}");
        assert!(err.contains(named), "{args:?}: {err}");
        assert!(out.stdout.is_empty());
    }
    // A store command without a store is a usage error.
    assert_eq!(code(&jobwheel(None, "", &["jobs", "list"])), 2);
}

/// Every store verb against the store at `url` (tables under `prefix`).
async fn store_verbs(url: &str, prefix: &str) {
    let u = Some(url);
    support::remote::init_logs();
    // Nothing changes the schema but `migrate`.
    let out = jobwheel(u, prefix, &["jobs", "list"]);
    assert_eq!(
        code(&out),
        1,
        "an unmigrated store fails: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(u, prefix, &["migrate", "--json"])["migrated"], true);

    // A scheduler node with jobs and a failed run whose error holds an escape code.
    let backend = BackendConfig::new(url)
        .prefix(prefix)
        .connect()
        .await
        .unwrap();
    let store = backend.store.clone();
    let scheduler = Scheduler::builder()
        .backend(backend)
        .handler("report", |_ctx: JobContext| async { Ok(()) })
        .handler("boom", |_ctx: JobContext| async {
            tracing::info!("checking <disk>");
            tracing::warn!("disk \u{1b}[31mfull");
            Err(JobError::msg("disk \u{1b}[31mfull").permanent())
        })
        .config(SchedulerConfig::default().poll_interval(Duration::from_millis(100)))
        .build()
        .unwrap();
    let daily = Schedule::cron("0 0 9 * * ?", "Asia/Shanghai").unwrap();
    scheduler
        .upsert(
            Job::builder("report.daily", "report", daily)
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    scheduler
        .upsert(
            Job::builder("boom.once", "boom", Schedule::once(Timestamp::now()))
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    let running = scheduler.start().await.unwrap();
    let mut failed = Vec::new();
    for _ in 0..200 {
        failed = scheduler
            .runs(&RunQuery::new().status(RunStatus::Failed))
            .await
            .unwrap();
        if !failed.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(failed.len(), 1, "the failing one-shot ran");
    // runs log: the local run's lines from the store (the handler's events, then the
    // node's own line on how it ended), escape codes shown escaped.
    let id = failed[0].id.0.to_string();
    let out = jobwheel(u, prefix, &["runs", "log", &id]);
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.len(),
        3,
        "the handler's two lines and the node's: {text}"
    );
    assert!(lines[2].contains("run failed"), "{text}");
    assert!(lines[0].ends_with("checking <disk>"), "{text}");
    assert!(lines[1].ends_with("disk \\u{1b}[31mfull"), "{text}");
    let j = json(u, prefix, &["runs", "log", &id, "--offset", "1", "--json"]);
    assert_eq!(
        (
            &j["log"]["first_offset"],
            &j["log"]["done"],
            j["log"]["lines"].as_array().unwrap().len()
        ),
        (&serde_json::json!(1), &serde_json::json!(true), 2)
    );
    assert_eq!(
        code(&jobwheel(u, prefix, &["runs", "log", "999999"])),
        3,
        "no such run"
    );

    // jobs list / get
    let list = json(u, prefix, &["jobs", "list", "--json"]);
    let ids: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["job"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["boom.once", "report.daily"]);
    let got = json(u, prefix, &["jobs", "get", "report.daily", "--json"]);
    let stored = store
        .get(&JobId::new("report.daily").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        got["next_fire_at"],
        serde_json::to_value(stored.next_fire_at()).unwrap()
    );
    assert_eq!(got["job"]["handler"], "report");

    // runs, nodes, doctor
    let runs = json(
        u,
        prefix,
        &["runs", "--job", "boom.once", "--status", "failed", "--json"],
    );
    assert_eq!(runs["items"].as_array().unwrap().len(), 1, "{runs}");
    assert_eq!(
        runs["items"][0]["error"], "disk \u{1b}[31mfull",
        "JSON keeps the text exact"
    );
    let table = jobwheel(u, prefix, &["runs", "--job", "boom.once"]);
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(
        !text.contains('\u{1b}'),
        "no raw escape code reaches a terminal: {text:?}"
    );
    assert!(text.contains("disk \\u{1b}[31mfull"), "{text}");
    let out = jobwheel(u, prefix, &["runs", "--status", "exploded"]);
    assert_eq!(code(&out), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("status \"exploded\""));
    let nodes = json(u, prefix, &["nodes", "--json"])["items"].clone();
    assert_eq!(nodes.as_array().unwrap().len(), 1, "{nodes}");
    assert_eq!(nodes[0]["info"]["node_id"], scheduler.node_id());
    let instance = jobwheel::ExecutorInfo {
        group: "billing".into(),
        address: "http://127.0.0.1:9101".into(),
        handlers: vec!["export".into()],
        capacity: 8,
        version: "1.0".into(),
    };
    jobwheel::store::NodeRegistry::executor_beat(&*store, &instance)
        .await
        .unwrap();
    let executors =
        json(u, prefix, &["executors", "--group", "billing", "--json"])["items"].clone();
    assert_eq!(executors.as_array().unwrap().len(), 1, "{executors}");
    assert_eq!(executors[0]["info"]["address"], "http://127.0.0.1:9101");
    let none = json(u, prefix, &["executors", "--group", "payroll", "--json"]);
    assert_eq!(none["items"], serde_json::json!([]));
    let doctor = json(u, prefix, &["doctor", "--json"]);
    assert_eq!(doctor["healthy"], true, "{doctor}");
    assert_eq!(
        doctor["schema"]["found"], doctor["schema"]["known"],
        "a migrated store is at the newest version: {doctor}"
    );
    assert!(doctor["schema"]["known"].as_i64().unwrap() >= 4, "{doctor}");
    assert!(
        doctor["clock_skew_ms"].as_i64().unwrap().abs() < 1_000,
        "{doctor}"
    );
    let naming = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| !j["job"]["alarm"]["events"].as_array().unwrap().is_empty())
        .count();
    assert_eq!(
        (doctor["alarm_jobs"].as_u64(), &doctor["alarms_configured"]),
        (Some(naming as u64), &Value::Null),
        "jobs naming alarm events counted; no jobwheel.toml, no alarms known: {doctor}"
    );
    running.shutdown().await;

    // pause / resume / trigger / rm, each checked in the store.
    let id = JobId::new("report.daily").unwrap();
    assert_eq!(
        json(u, prefix, &["jobs", "pause", "report.daily", "--json"])["job"]["enabled"],
        false
    );
    let rec = store.get(&id).await.unwrap().unwrap();
    assert!(!rec.job.enabled(), "paused");
    json(u, prefix, &["jobs", "resume", "report.daily", "--json"]);
    let rec = store.get(&id).await.unwrap().unwrap();
    assert!(rec.job.enabled());
    assert_eq!(
        rec.next_fire_at(),
        rec.job.schedule().first_fire(store.now().await.unwrap())
    );
    let once = r#"{"date":"2026-01-01","note":"<once>"}"#;
    let args = [
        "jobs",
        "trigger",
        "report.daily",
        "--payload",
        once,
        "--json",
    ];
    let said = json(u, prefix, &args);
    let rec = store.get(&id).await.unwrap().unwrap();
    assert_eq!(rec.next_trigger().as_str(), "manual");
    assert_eq!(said["next_trigger"], "manual");
    assert_eq!(
        said["next_fire_at"],
        serde_json::to_value(rec.next_fire_at()).unwrap(),
        "it names the fire it made: {said}"
    );
    let out = jobwheel(u, prefix, &["jobs", "trigger", "report.daily"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("jobwheel runs --job report.daily"),
        "it says how to find the run: {text}"
    );
    let out = jobwheel(u, prefix, &args);
    assert_eq!(code(&out), 0);
    assert_eq!(
        rec.next_payload(),
        Some(&serde_json::from_str(once).unwrap()),
        "--payload overrides that fire's payload"
    );
    let out = jobwheel(
        u,
        prefix,
        &["jobs", "trigger", "report.daily", "--payload", "{nope"],
    );
    assert_eq!(code(&out), 2, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--payload"));
    assert_eq!(
        store.get(&id).await.unwrap().unwrap().next_payload(),
        Some(&serde_json::from_str(once).unwrap()),
        "a refused --payload writes nothing"
    );
    json(u, prefix, &["jobs", "rm", "report.daily", "--json"]);
    assert!(store.get(&id).await.unwrap().is_none());
    // A job that does not exist: exit 3 for every verb that names one.
    for verb in ["get", "pause", "resume", "trigger", "rm"] {
        let out = jobwheel(u, prefix, &["jobs", verb, "report.daily"]);
        assert_eq!(
            code(&out),
            3,
            "{verb}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // An id the store would refuse: exit 2 naming it.
    let out = jobwheel(u, prefix, &["jobs", "get", ""]);
    assert_eq!(code(&out), 2, "{}", String::from_utf8_lossy(&out.stderr));

    // add / edit from a JSON definition, as the API takes it.
    let file = std::env::temp_dir().join(format!("jobwheel-cli-job-{}.json", fastrand::u64(..)));
    let def = |expr: &str, id: &str| {
        serde_json::json!({
            "id": id, "handler": "report",
            "schedule": {"kind": "cron", "expr": expr, "zone": "Asia/Shanghai"},
        })
        .to_string()
    };
    let f = file.to_str().unwrap();
    std::fs::write(&file, def("0 30 9 * * ?", "report.weekly")).unwrap();
    assert_eq!(
        json(u, prefix, &["jobs", "add", "--file", f, "--json"])["job"]["id"],
        "report.weekly"
    );
    let weekly = JobId::new("report.weekly").unwrap();
    let rec = store.get(&weekly).await.unwrap().expect("added");
    assert_eq!(
        rec.next_fire_at(),
        rec.job.schedule().first_fire(store.now().await.unwrap())
    );
    let out = jobwheel(u, prefix, &["jobs", "add", "--file", f]);
    assert_eq!(code(&out), 1, "a second add of one id fails");
    std::fs::write(&file, def("0 0 8 * * ?", "report.weekly")).unwrap();
    assert_eq!(
        json(
            u,
            prefix,
            &["jobs", "edit", "report.weekly", "--file", f, "--json"]
        )["job"]["schedule"]["expr"],
        "0 0 8 * * ?"
    );
    let rec = store.get(&weekly).await.unwrap().unwrap();
    assert!(format!("{:?}", rec.job.schedule()).contains("0 0 8 * * ?"));
    let out = jobwheel(u, prefix, &["jobs", "edit", "report.other", "--file", f]);
    assert_eq!(code(&out), 2, "edit keeps the id");
    std::fs::write(&file, r#"{"id": "x", "handler": "h", "schedule": {"kind": "once", "at": "2030-01-01T00:00:00Z"}, "colour": 1}"#).unwrap();
    let out = jobwheel(u, prefix, &["jobs", "add", "--file", f]);
    assert_eq!(code(&out), 2);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("colour"),
        "the unknown field is named"
    );
    let _ = std::fs::remove_file(&file);

    // alarms: the failed one-shot's event is in the outbox.
    let alarms = json(u, prefix, &["alarms", "--json"])["items"].clone();
    assert!(
        alarms
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["event"]["job_id"] == "boom.once"),
        "{alarms}"
    );
    // The table spells the kind as the JSON, the API and the console do.
    let kind = alarms
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["event"]["job_id"] == "boom.once")
        .map(|a| a["event"]["kind"].as_str().unwrap().to_string())
        .unwrap();
    let table = jobwheel(u, prefix, &["alarms"]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains("boom.once") && l.contains(&*kind)),
        "{kind} in {text}"
    );
    let out = jobwheel(u, prefix, &["alarms", "--status", "lost"]);
    assert_eq!(code(&out), 2);

    // Every change above is in the audit log, by the command line's user.
    let (actions, audit) = audit_of(&*store).await;
    assert_eq!(
        actions,
        [
            "job.pause",
            "job.resume",
            "job.trigger",
            "job.trigger",
            "job.trigger",
            "job.remove",
            "job.create",
            "job.update"
        ]
    );
    assert!(audit.iter().all(|e| e.entry.actor.starts_with("cli:")));
    let update = &audit[0].entry;
    assert_eq!(
        update.before.as_ref().unwrap()["job"]["schedule"]["expr"],
        "0 30 9 * * ?"
    );
    assert_eq!(
        update.after.as_ref().unwrap()["job"]["schedule"]["expr"],
        "0 0 8 * * ?"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_store_verb_works_on_sqlite() {
    let dir = std::env::temp_dir().join(format!("jobwheel-cli-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.join("jobs.db").display());
    store_verbs(&url, "cli_").await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A store never migrated: every verb but `migrate` says to run it (not that a table
/// is missing), on SQLite and on PostgreSQL, and after `migrate` the verbs work.
#[test]
fn an_unmigrated_store_names_jobwheel_migrate() {
    let dir = std::env::temp_dir().join(format!("jobwheel-cli-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let sqlite = format!("sqlite://{}?mode=rwc", dir.join("jobs.db").display());
    let prefix = format!("fresh{:08x}_", fastrand::u32(..));
    let mut urls = vec![sqlite.clone()];
    urls.extend(support::server_url("JOBWHEEL_POSTGRES_URL"));
    for url in &urls {
        for args in [&["jobs", "list"][..], &["runs"], &["doctor"], &["alarms"]] {
            let out = jobwheel(Some(url), &prefix, args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(code(&out), 1, "{args:?} on {url}: {err}");
            assert!(
                err.contains("no jobwheel tables yet: run `jobwheel migrate` first"),
                "{args:?} on {url}: {err}"
            );
        }
    }
    let out = jobwheel(Some(&sqlite), &prefix, &["migrate"]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let out = jobwheel(Some(&sqlite), &prefix, &["jobs", "list"]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_store_verb_works_on_postgres() {
    let Some(url) = support::server_url("JOBWHEEL_POSTGRES_URL") else {
        return;
    };
    let prefix = format!("cli{:08x}_", fastrand::u32(..));
    store_verbs(&url, &prefix).await;
    support::drop_pg_tables(&url, &prefix).await;
}

/// Runs `jobwheel --server base --token token args…` off the runtime's threads.
async fn via_server(base: &str, token: &str, args: &[&str]) -> Output {
    let (base, token) = (base.to_string(), token.to_string());
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_jobwheel"))
            .env_remove("JOBWHEEL_URL")
            .args(["--server", &base, "--token", &token])
            .args(&args)
            .output()
            .expect("jobwheel runs")
    })
    .await
    .unwrap()
}

fn parsed(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_verbs_work_through_a_server_with_a_token() {
    use support::admin::{config_file, serve};
    let dir = std::env::temp_dir().join(format!("jobwheel-cli-api-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.join("jobs.db").display());
    let (config, tokens, config_text) = config_file(&url, None, false, None);
    let server = serve(config).await;
    let base = format!("http://{}", server.local_addr());
    let admin = tokens.admin.as_str();

    let file = dir.join("job.json");
    std::fs::write(
        &file,
        r#"{"id": "report.daily", "handler": "report", "remote": {"group": "billing"},
            "schedule": {"kind": "cron", "expr": "0 30 9 * * ?", "zone": "Asia/Shanghai"}}"#,
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let added = parsed(&via_server(&base, admin, &["--json", "jobs", "add", "--file", f]).await);
    assert_eq!(added["job"]["id"], "report.daily");
    let stored = server
        .store()
        .get(&JobId::new("report.daily").unwrap())
        .await
        .unwrap()
        .expect("stored through the server");
    let list = parsed(&via_server(&base, admin, &["--json", "jobs", "list"]).await);
    assert_eq!(
        list["items"][0]["next_fire_at"],
        serde_json::to_value(stored.next_fire_at()).unwrap()
    );
    let paused =
        parsed(&via_server(&base, admin, &["--json", "jobs", "pause", "report.daily"]).await);
    assert_eq!(paused["job"]["enabled"], false);
    let resumed =
        parsed(&via_server(&base, admin, &["--json", "jobs", "resume", "report.daily"]).await);
    assert_eq!(resumed["job"]["enabled"], true);
    // A parent of report.daily, and the dependencies both ways.
    let parent = dir.join("parent.json");
    std::fs::write(
        &parent,
        r#"{"id": "report.parent", "handler": "report", "remote": {"group": "billing"},
            "schedule": {"kind": "never"}, "children": [{"job": "report.daily"}]}"#,
    )
    .unwrap();
    let p = parent.to_str().unwrap();
    via_server(&base, admin, &["jobs", "add", "--file", p]).await;
    let deps = parsed(&via_server(&base, admin, &["--json", "jobs", "deps", "report.daily"]).await);
    assert_eq!(
        deps["parents"],
        serde_json::json!([{"job": "report.parent", "on": "success"}])
    );
    assert_eq!(deps["queued"], serde_json::json!([]));
    let text = via_server(&base, admin, &["jobs", "deps", "report.parent"]).await;
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("downstream: report.daily (on success)"),
        "{text}"
    );
    assert!(text.contains("upstream:   none"), "{text}");
    // Releases and skips of instants: refused for a job that waits for no
    // parents, and for an instant with nothing queued; a bad instant is usage.
    let rel = [
        "jobs",
        "release",
        "report.daily",
        "--instant",
        "2026-01-01T00:00:00Z",
    ];
    let out = via_server(&base, admin, &rel).await;
    assert_ne!(code(&out), 0);
    assert!(String::from_utf8_lossy(&out.stderr).contains("job.after"));
    let skip = [
        "jobs",
        "skip",
        "report.daily",
        "--instant",
        "2026-01-01T00:00:00Z",
    ];
    assert_eq!(
        code(&via_server(&base, admin, &skip).await),
        3,
        "nothing queued"
    );
    let bad = ["jobs", "skip", "report.daily", "--instant", "tomorrow"];
    let out = via_server(&base, admin, &bad).await;
    assert_eq!(code(&out), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--instant"));
    // Closing a cycle through the command line is refused, naming it.
    let cyclic = dir.join("cyclic.json");
    std::fs::write(
        &cyclic,
        r#"{"id": "report.daily", "handler": "report", "remote": {"group": "billing"},
            "schedule": {"kind": "never"}, "children": [{"job": "report.parent"}]}"#,
    )
    .unwrap();
    let c = cyclic.to_str().unwrap();
    let out = via_server(&base, admin, &["jobs", "edit", "report.daily", "--file", c]).await;
    assert_ne!(code(&out), 0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("job.children") && err.contains("report.daily → report.parent → report.daily"),
        "{err}"
    );
    let triggered =
        parsed(&via_server(&base, admin, &["--json", "jobs", "trigger", "report.daily"]).await);
    assert_eq!(triggered["next_trigger"], "manual");
    assert_eq!(triggered["next_payload"], Value::Null);
    let args = [
        "--json",
        "jobs",
        "trigger",
        "report.daily",
        "--payload",
        r#"{"n":1}"#,
    ];
    let triggered = parsed(&via_server(&base, admin, &args).await);
    assert_eq!(triggered["next_payload"], serde_json::json!({"n": 1}));
    for verb in [
        &["--json", "runs"][..],
        &["--json", "nodes"],
        &["--json", "executors"],
        &["--json", "alarms"],
    ] {
        assert!(
            parsed(&via_server(&base, admin, verb).await)["items"].is_array(),
            "{verb:?}"
        );
    }
    // runs log through the server: a local run of a node embedded on the same store.
    support::remote::init_logs();
    let node = Scheduler::builder()
        .backend(BackendConfig::new(&url).connect().await.unwrap())
        .handler("say", |_ctx: JobContext| async {
            tracing::info!("said <once>");
            Ok(())
        })
        .config(SchedulerConfig::default().poll_interval(Duration::from_millis(100)))
        .build()
        .unwrap();
    let running = node.start().await.unwrap();
    let far = Timestamp::from_millis(4_102_444_800_000);
    node.upsert(
        Job::builder("say.once", "say", Schedule::once(far))
            .build()
            .unwrap(),
    )
    .await
    .unwrap();
    node.trigger_now("say.once").await.unwrap();
    let mut done = Vec::new();
    for _ in 0..200 {
        done = node
            .runs(&RunQuery::new().status(RunStatus::Succeeded))
            .await
            .unwrap();
        if !done.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(done.len(), 1, "the embedded node ran the job");
    let id = done[0].id.0.to_string();
    let out = via_server(&base, admin, &["runs", "log", &id]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.trim_end().ends_with("said <once>"), "{text}");
    let j = parsed(&via_server(&base, admin, &["--json", "runs", "log", &id]).await);
    assert_eq!(j["log"]["done"], true);
    running.shutdown().await;
    node.remove("say.once").await.unwrap();

    let table = via_server(&base, admin, &["jobs", "list"]).await;
    assert!(String::from_utf8_lossy(&table.stdout).contains("report.daily"));

    // The server's refusals become the exit codes.
    let viewer = via_server(&base, &tokens.viewer, &["jobs", "pause", "report.daily"]).await;
    assert_eq!(code(&viewer), 1);
    assert!(String::from_utf8_lossy(&viewer.stderr).contains("forbidden"));
    assert_eq!(
        code(&via_server(&base, admin, &["jobs", "get", "nope"]).await),
        3
    );
    assert_eq!(
        code(&via_server(&base, admin, &["runs", "--status", "exploded"]).await),
        2
    );
    assert_eq!(
        code(&via_server(&base, "jw_wrong", &["jobs", "list"]).await),
        1
    );
    assert_eq!(
        code(&via_server(&base, admin, &["doctor"]).await),
        2,
        "doctor needs the store"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_jobwheel"))
        .env_remove("JOBWHEEL_TOKEN")
        .args(["--server", &base, "jobs", "list"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "--server without a token is a usage error");
    assert_eq!(
        parsed(&via_server(&base, admin, &["--json", "jobs", "rm", "report.daily"]).await)["removed"],
        "report.daily"
    );

    // Audited as the token.
    let (actions, audit) = audit_of(&**server.store()).await;
    assert_eq!(
        actions,
        [
            "job.create",
            "job.pause",
            "job.resume",
            "job.create",
            "job.trigger",
            "job.trigger",
            "job.remove"
        ]
    );
    assert!(audit.iter().all(|e| e.entry.actor == "token:ci"));

    // One command line over two transports: on the store (`--url`, with the
    // server's configuration file) each verb prints the JSON it prints through the
    // server, and the same table.
    let cfg = dir.join("jobwheel.toml");
    std::fs::write(&cfg, &config_text).unwrap();
    let on_store = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_jobwheel"))
            .env_remove("JOBWHEEL_SERVER")
            .env_remove("JOBWHEEL_TOKEN")
            .args(["--url", &url, "--config", cfg.to_str().unwrap()])
            .args(args)
            .output()
            .expect("jobwheel runs")
    };
    // A read's own instant (`now`) and a node's heartbeat move on between two
    // reads; nothing else may differ.
    fn settled(mut v: Value) -> Value {
        fn strip(v: &mut Value) {
            match v {
                Value::Object(m) => {
                    m.remove("last_beat");
                    m.remove("now");
                    m.values_mut().for_each(strip);
                }
                Value::Array(a) => a.iter_mut().for_each(strip),
                _ => {}
            }
        }
        strip(&mut v);
        v
    }
    let reads: [&[&str]; 11] = [
        &["jobs", "list"],
        &["jobs", "get", "report.parent"],
        &["jobs", "deps", "report.parent"],
        &["runs"],
        &["runs", "--job", "say.once", "--status", "succeeded"],
        &["runs", "log", &id],
        &["nodes"],
        &["executors", "--group", "billing"],
        &["alarms"],
        &["access", "list"],
        &["jobs", "get", "nope"],
    ];
    for verb in reads {
        let json: Vec<&str> = ["--json"].iter().chain(verb).copied().collect();
        // Runs of the removed job may still be ending: read both again, a few times,
        // until they agree.
        let mut last = None;
        for _ in 0..10 {
            let (a, b) = (on_store(&json), via_server(&base, admin, &json).await);
            assert_eq!(code(&a), code(&b), "{verb:?}: the same exit code");
            let (a, b) = if a.status.success() {
                (settled(parsed(&a)), settled(parsed(&b)))
            } else {
                (Value::Null, Value::Null)
            };
            if a == b {
                last = None;
                break;
            }
            last = Some((a, b));
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert_eq!(
            last, None,
            "{verb:?}: the store's JSON and the server's differ"
        );
    }
    for verb in [
        &["jobs", "list"][..],
        &["jobs", "get", "report.parent"],
        &["runs", "log", &id],
    ] {
        assert_eq!(
            String::from_utf8_lossy(&on_store(verb).stdout),
            String::from_utf8_lossy(&via_server(&base, admin, verb).await.stdout),
            "{verb:?}: the same table"
        );
    }
    // A change answers the same way on both (a job's view), audited as each caller.
    fn shape(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                Value::Object(m.iter().map(|(k, v)| (k.clone(), shape(v))).collect())
            }
            Value::Array(a) => Value::Array(a.iter().take(1).map(shape).collect()),
            Value::String(_) => Value::String("text".into()),
            Value::Number(_) => Value::String("number".into()),
            other => other.clone(),
        }
    }
    let pause = ["--json", "jobs", "pause", "report.parent"];
    let a = parsed(&on_store(&pause));
    let b = parsed(&via_server(&base, admin, &pause).await);
    assert_eq!(a["job"]["enabled"], false);
    assert_eq!(shape(&a), shape(&b), "{a}\n{b}");
    let (_, audit) = audit_of(&**server.store()).await;
    assert_eq!(
        (
            audit[1].entry.actor.starts_with("cli:"),
            audit[0].entry.actor.as_str()
        ),
        (true, "token:ci"),
        "the store's change is the command line user's, the server's the token's"
    );
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
