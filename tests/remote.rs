//! Remote executors on loopback: a scheduler dispatching to executor servers over
//! real HTTP, and the protocol's refusals, block strategies, kills and log tails
//! driven by hand-signed requests. Every wait is bounded.

use jobwheel::RunRecord;
use jobwheel::executors::protocol::{self, Phase, RunState};
use jobwheel::executors::{ExecutorServer, RemoteGroup, auth, log_layer};
use jobwheel::memory::{LocalLocks, MemoryStore};
use jobwheel::placement::{BlockStrategy, RemoteTarget, Routing};
use jobwheel::prelude::*;
use jobwheel::store::RunLog;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

const SECRET: &str = "test-secret-0123456789abcdef";

fn init_logs() {
    static INIT: OnceLock<()> = OnceLock::new();
    INIT.get_or_init(|| {
        use tracing_subscriber::layer::SubscriberExt;
        let _ = tracing::subscriber::set_global_default(
            tracing_subscriber::registry().with(log_layer()),
        );
    });
}

/// What the instances' handlers saw: (instance, job, payload).
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<(String, String, Value)>>>);

/// An executor server on a free loopback port, serving `echo`, `fail`, `wait` and
/// `chatty`.
async fn instance(name: &str, seen: &Seen, gate: &Arc<tokio::sync::Notify>) -> ExecutorServer {
    let (s, n) = (seen.clone(), name.to_string());
    let echo = move |ctx: JobContext| {
        let (s, n) = (s.clone(), n.clone());
        async move {
            s.0.lock()
                .unwrap()
                .push((n, ctx.job.id().to_string(), ctx.payload().clone()));
            Ok(())
        }
    };
    let fail =
        |_ctx: JobContext| async { Err(JobError::msg("export failed: disk full").permanent()) };
    let g = gate.clone();
    let wait = move |ctx: JobContext| {
        let g = g.clone();
        async move {
            tokio::select! {
                _ = g.notified() => Ok(()),
                // Cancelled: the executor ends the run.
                _ = ctx.cancel.cancelled() => std::future::pending().await,
            }
        }
    };
    let chatty = |ctx: JobContext| async move {
        for i in 0..3 {
            tracing::info!(line = i, "step <{i}>");
        }
        ctx.cancel.cancelled().await;
        // Cancelled: the executor ends the run.
        std::future::pending::<()>().await;
        Ok(())
    };
    ExecutorServer::builder("billing", SECRET)
        .unwrap()
        .instance(name)
        .handler("echo", echo)
        .handler("fail", fail)
        .handler("wait", wait)
        .handler("chatty", chatty)
        .capacity(4)
        .bind("127.0.0.1:0")
        .await
        .unwrap()
}

/// A hand-signed protocol request: (status, answer body, answer verified).
async fn signed(
    base: &str,
    path: &str,
    body: &Value,
    skew_ms: i64,
    nonce: Option<&str>,
) -> (u16, Value, bool) {
    let secret = auth::Secret::new("t", SECRET).unwrap();
    let body = serde_json::to_vec(body).unwrap();
    let ts = jobwheel::Timestamp::now().as_millis() + skew_ms;
    let nonce = nonce.map_or_else(auth::nonce, str::to_string);
    let sig = secret.sign_request("POST", path, ts, &nonce, &body);
    raw(base, path, body, Some((ts, nonce, sig))).await
}

/// A signed request with a fresh nonce on this machine's clock.
async fn ask(base: &str, path: &str, body: &Value) -> (u16, Value, bool) {
    signed(base, path, body, 0, None).await
}

async fn raw(
    base: &str,
    path: &str,
    body: Vec<u8>,
    auth_headers: Option<(i64, String, String)>,
) -> (u16, Value, bool) {
    let secret = auth::Secret::new("t", SECRET).unwrap();
    let mut req = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .timeout(Duration::from_secs(10))
        .body(body);
    let mut nonce = String::new();
    if let Some((ts, n, sig)) = auth_headers {
        req = req
            .header(auth::TIMESTAMP, ts)
            .header(auth::NONCE, &n)
            .header(auth::SIGNATURE, sig);
        nonce = n;
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let h = |n: &str| {
        resp.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let (rts, rsig) = (h(auth::TIMESTAMP), h(auth::SIGNATURE));
    let bytes = resp.bytes().await.unwrap();
    let verified = match (rts.and_then(|t| t.parse().ok()), rsig) {
        (Some(ts), Some(sig)) => secret.verify_response(&sig, status, &nonce, ts, &bytes),
        _ => false,
    };
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        verified,
    )
}

fn run_request(run_id: i64, job: &str, handler: &str, block: BlockStrategy) -> Value {
    json!({
        "run_id": run_id, "token": 7, "fire_at": 0, "attempt": 1, "trigger": "manual", "node": "test",
        "job": {"id": job, "handler": handler, "schedule": {"kind": "once", "at": "2026-01-01T00:00:00Z"}, "payload": {"n": run_id}},
        "block": block.as_str(),
    })
}

async fn result(base: &str, run_id: i64, wait_ms: u64) -> RunState {
    result_of(base, run_id, 7, wait_ms).await
}

async fn result_of(base: &str, run_id: i64, token: u64, wait_ms: u64) -> RunState {
    let (status, v, ok) = ask(
        base,
        protocol::RESULT,
        &json!({"run_id": run_id, "token": token, "wait_ms": wait_ms}),
    )
    .await;
    assert!(ok && status == 200, "{status} {v}");
    serde_json::from_value(v).unwrap()
}

fn base(s: &ExecutorServer) -> String {
    format!("http://{}", s.local_addr())
}

async fn wait_for_run(
    store: &MemoryStore,
    job: &str,
    done: impl Fn(&RunRecord) -> bool,
) -> RunRecord {
    for _ in 0..200 {
        let runs = store
            .runs(&RunQuery::new().job(JobId::new(job).unwrap()).limit(10))
            .await
            .unwrap();
        if let Some(r) = runs.into_iter().find(|r| done(r)) {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no matching run of {job} within 10 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_runs_remote_jobs_on_its_group_and_records_their_outcomes() {
    let (seen, gate) = (Seen::default(), Arc::new(tokio::sync::Notify::new()));
    let servers = [
        instance("i-a", &seen, &gate).await,
        instance("i-b", &seen, &gate).await,
        instance("i-c", &seen, &gate).await,
    ];
    let group = RemoteGroup::fixed("billing", SECRET, servers.iter().map(base)).unwrap();
    let first = group.instances()[0].clone();
    let first_name = servers
        .iter()
        .find(|s| base(s) == first)
        .map(|s| s.local_addr())
        .unwrap();
    let store = MemoryStore::new();
    let scheduler = Scheduler::builder()
        .store(store.clone())
        .locks(LocalLocks::new())
        .remote(group)
        .config(SchedulerConfig::default().poll_interval(Duration::from_millis(100)))
        .build()
        .unwrap();
    let running = scheduler.start().await.unwrap();
    let now = jobwheel::Timestamp::now();
    let target = RemoteTarget::new("billing")
        .unwrap()
        .routing(Routing::First);
    let job = Job::builder("export-1", "echo", Schedule::once(now))
        .payload(json!({"month": "2026-11"}))
        .remote(target.clone())
        .build()
        .unwrap();
    scheduler.upsert(job).await.unwrap();
    let run = wait_for_run(&store, "export-1", |r| r.status != RunStatus::Running).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    let seen_now = seen.0.lock().unwrap().clone();
    assert_eq!(seen_now.len(), 1);
    assert_eq!(seen_now[0].1, "export-1");
    assert_eq!(seen_now[0].2, json!({"month": "2026-11"}));
    // Routing first: the instance with the lowest address.
    let ran_on = servers
        .iter()
        .position(|s| s.local_addr() == first_name)
        .unwrap();
    assert_eq!(seen_now[0].0, ["i-a", "i-b", "i-c"][ran_on]);

    // A permanent failure on the instance is a failed run with its message, not retried.
    let job = Job::builder("export-2", "fail", Schedule::once(now))
        .remote(target.clone())
        .build()
        .unwrap();
    scheduler.upsert(job).await.unwrap();
    let run = wait_for_run(&store, "export-2", |r| r.status != RunStatus::Running).await;
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.error.as_deref(), Some("export failed: disk full"));
    assert!(!run.will_retry);

    // A job naming a group the scheduler does not know is refused, nothing stored.
    let job = Job::builder("export-3", "echo", Schedule::once(now))
        .remote(RemoteTarget::new("payroll").unwrap())
        .build()
        .unwrap();
    let err = scheduler.upsert(job).await.unwrap_err();
    assert!(
        matches!(&err, jobwheel::Error::UnknownGroup { group } if group == "payroll"),
        "{err}"
    );
    running.shutdown().await;
    for s in servers {
        s.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_run_ends_at_its_deadline_on_the_instance_and_a_cancelled_one_is_killed() {
    let (seen, gate) = (Seen::default(), Arc::new(tokio::sync::Notify::new()));
    let server = instance("i-a", &seen, &gate).await;
    let group = RemoteGroup::fixed("billing", SECRET, [base(&server)]).unwrap();
    let store = MemoryStore::new();
    let scheduler = Scheduler::builder()
        .store(store.clone())
        .locks(LocalLocks::new())
        .remote(group.clone())
        .config(
            SchedulerConfig::default()
                .poll_interval(Duration::from_millis(100))
                .shutdown_grace(Duration::from_millis(200)),
        )
        .build()
        .unwrap();
    let running = scheduler.start().await.unwrap();
    let job = Job::builder("slow", "wait", Schedule::once(jobwheel::Timestamp::now()))
        .timeout(Duration::from_millis(300))
        .retry(RetryPolicy::new(1, Duration::from_secs(1), Duration::from_secs(1)).unwrap())
        .remote(RemoteTarget::new("billing").unwrap())
        .build()
        .unwrap();
    scheduler.upsert(job).await.unwrap();
    let run = wait_for_run(&store, "slow", |r| r.status != RunStatus::Running).await;
    assert_eq!(run.status, RunStatus::TimedOut, "{run:?}");
    // The instance was told: its run ends cancelled and its slot is free again.
    let mut state = None;
    for _ in 0..100 {
        let (status, v, _) = ask(
            &base(&server),
            protocol::RESULT,
            &json!({"run_id": run.id.0, "token": run.token, "wait_ms": 100}),
        )
        .await;
        assert_eq!(status, 200, "{v}");
        let s: RunState = serde_json::from_value(v).unwrap();
        if s.phase == Phase::Done {
            state = Some(s);
            break;
        }
    }
    let state = state.expect("the instance's run ended within 10 s");
    // The instance was sent the deadline: its own timer or the scheduler's kill,
    // whichever lands first, ended the run there.
    let status = state.outcome.unwrap().status;
    assert!(
        ["timed_out", "cancelled"].contains(&status.as_str()),
        "{status}"
    );
    let beat = group.beat(&base(&server)).await.unwrap();
    assert_eq!((beat.running, beat.queued), (0, 0));

    // A run the engine cancels (shutdown past its grace) is killed on the instance.
    let job = Job::builder(
        "endless",
        "wait",
        Schedule::once(jobwheel::Timestamp::now()),
    )
    .remote(RemoteTarget::new("billing").unwrap())
    .build()
    .unwrap();
    scheduler.upsert(job).await.unwrap();
    let run = wait_for_run(&store, "endless", |r| r.status == RunStatus::Running).await;
    let mut on_instance = None;
    for _ in 0..100 {
        let (status, v, _) = ask(
            &base(&server),
            protocol::RESULT,
            &json!({"run_id": run.id.0, "token": run.token}),
        )
        .await;
        if status == 200 {
            on_instance = Some(serde_json::from_value::<RunState>(v).unwrap());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        on_instance.expect("the instance admitted the run").phase,
        Phase::Running
    );
    let report = running.shutdown().await;
    assert_eq!(report.cancelled, 1);
    let r = result_of(&base(&server), run.id.0, run.token, 5_000).await;
    assert_eq!(r.outcome.map(|o| o.status).as_deref(), Some("cancelled"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_a_valid_fresh_signature_are_refused() {
    let (seen, gate) = (Seen::default(), Arc::new(tokio::sync::Notify::new()));
    let server = instance("i-a", &seen, &gate).await;
    let b = base(&server);
    let body = run_request(1, "j", "echo", BlockStrategy::Serial);
    // No signature.
    let (status, v, verified) =
        raw(&b, protocol::RUN, serde_json::to_vec(&body).unwrap(), None).await;
    assert_eq!((status, v["error"].as_str()), (401, Some("unsigned")));
    assert!(
        verified,
        "refusals are signed too (over an empty nonce here)"
    );
    // A signature made with another secret.
    let other = auth::Secret::new("t", "another-secret-of-enough-bytes").unwrap();
    let bytes = serde_json::to_vec(&body).unwrap();
    let (ts, n) = (jobwheel::Timestamp::now().as_millis(), auth::nonce());
    let sig = other.sign_request("POST", protocol::RUN, ts, &n, &bytes);
    let (status, v, verified) = raw(&b, protocol::RUN, bytes.clone(), Some((ts, n, sig))).await;
    assert_eq!(
        (status, v["error"].as_str(), verified),
        (401, Some("bad_signature"), true)
    );
    // A body changed after signing.
    let good = auth::Secret::new("t", SECRET).unwrap();
    let n = auth::nonce();
    let sig = good.sign_request("POST", protocol::RUN, ts, &n, b"{}");
    let (status, v, _) = raw(&b, protocol::RUN, bytes.clone(), Some((ts, n, sig))).await;
    assert_eq!((status, v["error"].as_str()), (401, Some("bad_signature")));
    // Skewed by more than the replay window either way.
    for skew in [-120_000, 120_000] {
        let (status, v, verified) = signed(&b, protocol::BEAT, &json!({}), skew, None).await;
        assert_eq!(
            (status, v["error"].as_str(), verified),
            (401, Some("skewed_timestamp"), true)
        );
    }
    // A replay of an accepted request.
    let n = auth::nonce();
    let (status, _, verified) = signed(&b, protocol::BEAT, &json!({}), 0, Some(&n)).await;
    assert_eq!((status, verified), (200, true));
    let (status, v, _) = signed(&b, protocol::BEAT, &json!({}), 0, Some(&n)).await;
    assert_eq!((status, v["error"].as_str()), (401, Some("replayed")));
    // Nothing ran.
    assert!(seen.0.lock().unwrap().is_empty());
    // Oversized bodies are refused before anything else.
    let big = vec![b' '; 2 << 20];
    let (status, v, _) = raw(&b, protocol::RUN, big, None).await;
    assert_eq!((status, v["error"].as_str()), (413, Some("too_large")));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_strategies_queue_discard_and_cover() {
    let (seen, gate) = (Seen::default(), Arc::new(tokio::sync::Notify::new()));
    let server = instance("i-a", &seen, &gate).await;
    let b = base(&server);
    let run = |id, block| run_request(id, "j", "wait", block);
    let (s, v, _) = ask(&b, protocol::RUN, &run(1, BlockStrategy::Serial)).await;
    assert_eq!((s, v["phase"].as_str()), (200, Some("running")));
    // Serial: the second run of the job waits behind the first.
    let (s, v, _) = ask(&b, protocol::RUN, &run(2, BlockStrategy::Serial)).await;
    assert_eq!((s, v["phase"].as_str()), (200, Some("queued")));
    // A retransmission answers the same run's state.
    let (s, v, _) = ask(&b, protocol::RUN, &run(2, BlockStrategy::Serial)).await;
    assert_eq!((s, v["phase"].as_str()), (200, Some("queued")));
    // Discard later: refused while the job is in progress.
    let (s, v, _) = ask(&b, protocol::RUN, &run(3, BlockStrategy::DiscardLater)).await;
    assert_eq!((s, v["error"].as_str()), (409, Some("discarded")));
    // Another job is not blocked.
    let (s, v, _) = ask(&b, protocol::IDLE_BEAT, &json!({"job_id": "other"})).await;
    assert_eq!((s, v["idle"].as_bool()), (200, Some(true)));
    let (s, v, _) = ask(&b, protocol::IDLE_BEAT, &json!({"job_id": "j"})).await;
    assert_eq!((s, v["idle"].as_bool()), (200, Some(false)));
    // The first ends; the queued one starts.
    gate.notify_one();
    let r1 = result(&b, 1, 5_000).await;
    assert_eq!(
        (r1.phase, r1.outcome.unwrap().status.as_str()),
        (Phase::Done, "succeeded")
    );
    let mut r2 = result(&b, 2, 0).await;
    for _ in 0..100 {
        if r2.phase == Phase::Running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        r2 = result(&b, 2, 0).await;
    }
    assert_eq!(r2.phase, Phase::Running);
    // Cover early: the running run is cancelled and the new one runs.
    let (s, v, _) = ask(&b, protocol::RUN, &run(4, BlockStrategy::CoverEarly)).await;
    assert_eq!((s, v["phase"].as_str()), (200, Some("running")));
    let r2 = result(&b, 2, 5_000).await;
    assert_eq!(
        r2.outcome.unwrap().status,
        "cancelled",
        "the covered run is cancelled"
    );
    assert_eq!(result(&b, 4, 0).await.phase, Phase::Running);
    gate.notify_one();
    assert_eq!(
        result(&b, 4, 5_000).await.outcome.unwrap().status,
        "succeeded"
    );
    // Unknown runs and handlers.
    let (s, v, _) = ask(&b, protocol::RESULT, &json!({"run_id": 99, "token": 7})).await;
    assert_eq!((s, v["error"].as_str()), (404, Some("unknown_run")));
    let (s, v, _) = ask(&b, protocol::RESULT, &json!({"run_id": 1, "token": 8})).await;
    assert_eq!(
        (s, v["error"].as_str()),
        (404, Some("unknown_run")),
        "another token is another run"
    );
    let (s, v, _) = ask(
        &b,
        protocol::RUN,
        &run_request(5, "k", "nobody", BlockStrategy::Serial),
    )
    .await;
    assert_eq!((s, v["error"].as_str()), (422, Some("unknown_handler")));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_log_is_tailed_by_offset_and_a_kill_ends_the_run() {
    init_logs();
    let (seen, gate) = (Seen::default(), Arc::new(tokio::sync::Notify::new()));
    let server = instance("i-a", &seen, &gate).await;
    let b = base(&server);
    let (s, _, _) = ask(
        &b,
        protocol::RUN,
        &run_request(1, "j", "chatty", BlockStrategy::Serial),
    )
    .await;
    assert_eq!(s, 200);
    let mut lines = Vec::new();
    let mut offset = 0;
    for _ in 0..100 {
        let (s, v, ok) = ask(
            &b,
            protocol::LOG,
            &json!({"run_id": 1, "token": 7, "offset": offset}),
        )
        .await;
        assert!(ok && s == 200, "{s} {v}");
        let chunk: protocol::LogChunk = serde_json::from_value(v).unwrap();
        offset = chunk.next_offset;
        lines.extend(chunk.lines);
        if lines.len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[2].contains("step <2> line=2"), "{lines:?}");
    let (s, v, _) = ask(&b, protocol::KILL, &json!({"run_id": 1, "token": 7})).await;
    assert_eq!((s, v["killed"].as_bool()), (200, Some(true)));
    let r = result(&b, 1, 5_000).await;
    assert_eq!(r.outcome.unwrap().status, "cancelled");
    let (_, v, _) = ask(
        &b,
        protocol::LOG,
        &json!({"run_id": 1, "token": 7, "offset": offset}),
    )
    .await;
    assert_eq!(
        (v["lines"].as_array().map(Vec::len), v["done"].as_bool()),
        (Some(0), Some(true))
    );
    let (s, v, _) = ask(&b, protocol::KILL, &json!({"run_id": 1, "token": 7})).await;
    assert_eq!(
        (s, v["killed"].as_bool()),
        (200, Some(false)),
        "an ended run is not killed again"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn bad_settings_are_refused_with_the_field_named() {
    for (secret, field) in [
        ("", "executor.secret"),
        ("default_token", "executor.secret"),
    ] {
        let e = ExecutorServer::builder("billing", secret)
            .unwrap_err()
            .to_string();
        assert!(e.contains(field), "{e}");
    }
    let e = ExecutorServer::builder("bad group", SECRET)
        .unwrap_err()
        .to_string();
    assert!(e.contains("executor.group"), "{e}");
    let e = ExecutorServer::builder("billing", SECRET)
        .unwrap()
        .bind("127.0.0.1:0")
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("executor.handlers"), "{e}");
    for (urls, needle) in [
        (vec![], "remote.instances"),
        (vec!["ftp://127.0.0.1:1"], "remote.instances"),
        (vec!["http://127.0.0.1:1/run"], "remote.instances"),
        (vec!["http://user:pw@127.0.0.1:1"], "remote.instances"),
    ] {
        let e = RemoteGroup::fixed("billing", SECRET, urls)
            .unwrap_err()
            .to_string();
        assert!(e.contains(needle), "{e}");
    }
    let e = RemoteGroup::fixed("billing", "short", ["http://127.0.0.1:1"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("remote.secret") && !e.contains("short\""), "{e}");
}

/// Checks `v` against an OpenAPI schema (types, required and unknown properties,
/// enums), resolving `$ref`s in `doc`.
fn conforms(doc: &Value, schema: &Value, v: &Value, at: &str) -> Result<(), String> {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.trim_start_matches("#/components/schemas/");
        return conforms(doc, &doc["components"]["schemas"][name], v, at);
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(v)
    {
        return Err(format!("{at}: {v} is not one of {allowed:?}"));
    }
    let ok = match schema.get("type").and_then(Value::as_str) {
        Some("object") => v.is_object(),
        Some("array") => v.is_array(),
        Some("string") => v.is_string(),
        Some("integer") => v.is_i64() || v.is_u64(),
        Some("boolean") => v.is_boolean(),
        _ => true,
    };
    if !ok {
        return Err(format!("{at}: {v} is not {}", schema["type"]));
    }
    if let (Some(props), Some(obj)) = (
        schema.get("properties").and_then(Value::as_object),
        v.as_object(),
    ) {
        for req in schema["required"].as_array().into_iter().flatten() {
            let k = req.as_str().unwrap();
            if !obj.contains_key(k) {
                return Err(format!("{at}: required {k} missing"));
            }
        }
        for (k, val) in obj {
            match props.get(k) {
                Some(p) => conforms(doc, p, val, &format!("{at}.{k}"))?,
                None if schema["additionalProperties"] == Value::Bool(false) => {
                    return Err(format!("{at}: {k} is not in the schema"));
                }
                None => {}
            }
        }
    }
    if let (Some(items), Some(arr)) = (schema.get("items"), v.as_array()) {
        for (i, x) in arr.iter().enumerate() {
            conforms(doc, items, x, &format!("{at}[{i}]"))?;
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_protocol_document_describes_what_the_server_answers() {
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string("docs/executor-protocol.json").unwrap())
            .unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    let server = ExecutorServer::builder("billing", SECRET)
        .unwrap()
        .handler("export", |_ctx: JobContext| async { Ok(()) })
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    let b = base(&server);
    let mut documented: Vec<&str> = doc["paths"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    documented.sort();
    let mut served = vec![
        protocol::BEAT,
        protocol::IDLE_BEAT,
        protocol::RUN,
        protocol::RESULT,
        protocol::KILL,
        protocol::LOG,
    ];
    served.sort();
    assert_eq!(documented, served);
    // Each path's example, in an order where every one is answered 200.
    for path in [
        protocol::RUN,
        protocol::RESULT,
        protocol::LOG,
        protocol::KILL,
        protocol::IDLE_BEAT,
        protocol::BEAT,
    ] {
        let op = &doc["paths"][path]["post"];
        let body = &op["requestBody"]["content"]["application/json"];
        conforms(&doc, &body["schema"], &body["example"], path).unwrap();
        let (status, answer, verified) = ask(&b, path, &body["example"]).await;
        assert!(verified, "{path}: the answer is signed");
        assert_eq!(status, 200, "{path}: {answer}");
        let schema = &op["responses"]["200"]["content"]["application/json"]["schema"];
        conforms(&doc, schema, &answer, path).unwrap_or_else(|e| panic!("{e}: {answer}"));
    }
    // Refusals are documented per path, with their body.
    let (status, answer, _) = raw(&b, protocol::RUN, b"{}".to_vec(), None).await;
    let refusal = &doc["paths"][protocol::RUN]["post"]["responses"][status.to_string()];
    assert!(refusal.is_object(), "{status} is not documented");
    conforms(
        &doc,
        &refusal["content"]["application/json"]["schema"],
        &answer,
        "401",
    )
    .unwrap();
    let (status, answer, _) = ask(&b, protocol::RESULT, &json!({"run_id": 404, "token": 1})).await;
    assert_eq!(status, 404);
    conforms(
        &doc,
        &json!({"$ref": "#/components/schemas/ErrorBody"}),
        &answer,
        "404",
    )
    .unwrap();
    server.shutdown().await;
}
