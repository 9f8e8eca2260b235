//! Remote executor test helpers: an executor server with the suite's handlers, the
//! Python executor as a child process, and hand-signed protocol requests.

use jobwheel::placement::BlockStrategy;
use jobwheel::prelude::*;
use jobwheel::remote::protocol::{self, RunState};
use jobwheel::remote::{ExecutorServer, ExecutorServerBuilder, auth};
use serde_json::{Value, json};
use std::io::BufRead;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

pub const SECRET: &str = "test-secret-0123456789abcdef";

/// Sends the `tracing` events of handlers on executor servers in this process to
/// their runs' logs.
pub fn init_logs() {
    static INIT: OnceLock<()> = OnceLock::new();
    INIT.get_or_init(|| {
        use tracing_subscriber::layer::SubscriberExt;
        let _ = tracing::subscriber::set_global_default(
            tracing_subscriber::registry().with(jobwheel::run_log_layer()),
        );
    });
}

/// What the instances' `echo` handlers saw: (instance, job, payload).
#[derive(Clone, Default)]
pub struct Seen(pub Arc<Mutex<Vec<(String, String, Value)>>>);

/// An executor server on a free loopback port serving the suite's handlers:
/// `echo` (records what it saw), `fail` (a permanent failure), `wait` (sleeps the
/// payload's `ms`, or until cancelled when there is none) and `chatty` (logs three
/// lines and then its payload, then waits to be cancelled), `report` (logs the
/// payload's `lines` lines, holds `hold_ms`, then logs `report: finished` through
/// its run's logger and succeeds) and `shard` (for a shard of a sharding
/// broadcast: logs and records its shard and attempt, and fails attempt 1 of the
/// shard whose index is the payload's `fail_shard`).
pub async fn instance(name: &str, seen: &Seen) -> ExecutorServer {
    instance_builder(name, seen)
        .bind("127.0.0.1:0")
        .await
        .unwrap()
}

/// The builder of [`instance`], to add settings before binding.
pub fn instance_builder(name: &str, seen: &Seen) -> ExecutorServerBuilder {
    init_logs();
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
    let wait = |ctx: JobContext| async move {
        let ms = ctx.payload().get("ms").and_then(Value::as_u64);
        tokio::select! {
            _ = async {
                match ms {
                    Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                    None => std::future::pending().await,
                }
            } => Ok(()),
            // Cancelled: the executor ends the run.
            _ = ctx.cancel.cancelled() => std::future::pending().await,
        }
    };
    let chatty = |ctx: JobContext| async move {
        for i in 0..3 {
            tracing::info!(line = i, "step <{i}>");
        }
        tracing::info!("payload {}", ctx.payload());
        ctx.cancel.cancelled().await;
        // Cancelled: the executor ends the run.
        std::future::pending::<()>().await;
        Ok(())
    };
    // `report`: logs `lines` lines (default 3, each padded with `pad` x's) through
    // `tracing`, waits `hold_ms`
    // (default 0), logs one more line through the run's logger, and succeeds.
    let report = |ctx: JobContext| async move {
        let n = ctx
            .payload()
            .get("lines")
            .and_then(Value::as_u64)
            .unwrap_or(3);
        let pad = "x".repeat(
            ctx.payload()
                .get("pad")
                .and_then(Value::as_u64)
                .unwrap_or(0) as usize,
        );
        for i in 0..n {
            tracing::info!("report line {i} {pad}");
        }
        let hold = ctx
            .payload()
            .get("hold_ms")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(hold)).await;
        ctx.log.line("report: finished");
        Ok(())
    };
    let (s, n) = (seen.clone(), name.to_string());
    let shard = move |ctx: JobContext| {
        let (s, n) = (s.clone(), n.clone());
        async move {
            let Some(shard) = ctx.shard else {
                return Err(JobError::msg("not a shard").permanent());
            };
            tracing::info!(
                "shard {}/{} attempt {}",
                shard.index,
                shard.total,
                ctx.attempt
            );
            s.0.lock().unwrap().push((
                n,
                ctx.job.id().to_string(),
                json!({"index": shard.index, "total": shard.total, "attempt": ctx.attempt, "fire_at": ctx.fire_at.as_millis()}),
            ));
            if ctx.payload().get("fail_shard").and_then(Value::as_u64) == Some(shard.index.into())
                && ctx.attempt == 1
            {
                return Err(JobError::msg(format!("shard {} failed once", shard.index)));
            }
            Ok(())
        }
    };
    ExecutorServer::builder("billing", SECRET)
        .unwrap()
        .instance(name)
        .handler("shard", shard)
        .handler("echo", echo)
        .handler("fail", fail)
        .handler("wait", wait)
        .handler("chatty", chatty)
        .handler("report", report)
        .capacity(4)
}

/// The base URL of a server.
pub fn base(s: &ExecutorServer) -> String {
    format!("http://{}", s.local_addr())
}

/// The Python executor of `examples/python_executor/`, killed on drop.
pub struct PythonExecutor {
    child: std::process::Child,
    pub base: String,
}

impl PythonExecutor {
    /// Sends `signal` (`KILL`, `STOP`, `CONT`) to the process.
    pub fn signal(&self, signal: &str) {
        let ok = std::process::Command::new("kill")
            .args([format!("-{signal}"), self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{signal} failed");
    }
}

impl Drop for PythonExecutor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the Python executor on a free loopback port; `None` (reported skipped,
/// a failure under `CI=true`) when there is no `python3`.
pub fn python_executor() -> Option<PythonExecutor> {
    start_python(false, &[])
}

/// [`python_executor`] with more command-line arguments (`--register URL`, …).
pub fn python_executor_with(args: &[&str]) -> Option<PythonExecutor> {
    start_python(false, args)
}

/// [`python_executor`] with its wall clock 8 hours ahead (libfaketime preloaded
/// into it); `None` (reported skipped) without libfaketime.
pub fn python_executor_eight_hours_ahead() -> Option<PythonExecutor> {
    start_python(true, &[])
}

fn start_python(skewed: bool, more: &[&str]) -> Option<PythonExecutor> {
    let mut cmd = std::process::Command::new("python3");
    if skewed {
        let Some(lib) = super::libfaketime() else {
            super::skip("libfaketime is not installed");
            return None;
        };
        cmd.env("LD_PRELOAD", lib).env("FAKETIME", "+8h");
    }
    let spawned = cmd
        .args([
            "examples/python_executor/executor.py",
            "--group",
            "billing",
            "--bind",
            "127.0.0.1:0",
            "--capacity",
            "4",
        ])
        .args(more)
        .env("JOBWHEEL_GROUP_SECRET", SECRET)
        .stdout(std::process::Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            super::skip(&format!("python3 cannot be started: {e}"));
            return None;
        }
    };
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = first
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("the Python executor said {first:?}"))
        .to_string();
    Some(PythonExecutor {
        child,
        base: format!("http://{addr}"),
    })
}

/// A signed request `skew_ms` off this machine's clock, with `nonce` or a fresh one:
/// (status, answer body, whether the answer's signature verifies).
pub async fn signed(
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
    let sig = secret.sign_request("POST", &target(base, path), ts, &nonce, &body);
    raw(base, path, body, Some((ts, nonce, sig))).await
}

/// What a request for `path` at `base` signs as its target: the URL for an
/// instance, the path for a registration endpoint.
pub fn target(base: &str, path: &str) -> String {
    if path.starts_with("/v1/registry/") {
        path.to_string()
    } else {
        auth::addressed(base, path)
    }
}

/// A signed request with a fresh nonce on this machine's clock.
pub async fn ask(base: &str, path: &str, body: &Value) -> (u16, Value, bool) {
    signed(base, path, body, 0, None).await
}

pub async fn raw(
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

/// A run request of `handler` for job `job`, token 7, payload `payload`.
pub fn run_request(run_id: i64, job: &str, handler: &str, block: BlockStrategy) -> Value {
    run_with(run_id, job, handler, block, json!({"n": run_id}))
}

/// [`run_request`] with this payload.
pub fn run_with(
    run_id: i64,
    job: &str,
    handler: &str,
    block: BlockStrategy,
    payload: Value,
) -> Value {
    json!({
        "run_id": run_id, "token": 7, "fire_at": 0, "attempt": 1, "trigger": "manual", "node": "test",
        "job": {"id": job, "handler": handler, "schedule": {"kind": "once", "at": "2026-01-01T00:00:00Z"}, "payload": payload},
        "block": block.as_str(),
    })
}

pub async fn result(base: &str, run_id: i64, wait_ms: u64) -> RunState {
    result_of(base, run_id, 7, wait_ms).await
}

pub async fn result_of(base: &str, run_id: i64, token: u64, wait_ms: u64) -> RunState {
    let (status, v, ok) = ask(
        base,
        protocol::RESULT,
        &json!({"run_id": run_id, "token": token, "wait_ms": wait_ms}),
    )
    .await;
    assert!(ok && status == 200, "{status} {v}");
    serde_json::from_value(v).unwrap()
}

/// The protocol's OpenAPI document, as the code generates it (equal to the
/// committed `docs/executor-protocol.json`: `protocol_document_is_committed`).
pub fn protocol_doc() -> Value {
    serde_json::from_str(&jobwheel::remote::openapi()).unwrap()
}

/// A request body for each endpoint of the protocol, in an order where every one is
/// answered 200 by a suite instance (a run of its own, a handler it serves).
pub fn protocol_examples() -> Vec<(&'static str, Value)> {
    vec![
        (
            protocol::RUN,
            json!({
                "run_id": 21, "token": 7,
                "job": {"id": "export.daily", "handler": "echo", "payload": {"month": "2026-11"}},
                "fire_at": 1764806400000i64, "attempt": 1, "trigger": "schedule",
                "node": "scheduler-1", "timeout_ms": 60000, "block": "serial", "wait_ms": 2000,
            }),
        ),
        (
            protocol::RESULT,
            json!({"run_id": 21, "token": 7, "wait_ms": 1000}),
        ),
        (
            protocol::LOG,
            json!({"run_id": 21, "token": 7, "offset": 0, "limit": 100}),
        ),
        (protocol::KILL, json!({"run_id": 21, "token": 7})),
        (protocol::IDLE_BEAT, json!({"job_id": "export.daily"})),
        (protocol::BEAT, json!({})),
    ]
}

/// The target of a sharding broadcast over group `billing`.
pub fn broadcast() -> jobwheel::placement::RemoteTarget {
    jobwheel::placement::RemoteTarget::new("billing")
        .unwrap()
        .routing(jobwheel::placement::Routing::ShardingBroadcast)
}

/// The ended runs of `job`, once at least `n` have ended (at most 15 s).
pub async fn ended_runs(
    store: &jobwheel::memory::MemoryStore,
    job: &str,
    n: usize,
) -> Vec<jobwheel::RunRecord> {
    for _ in 0..300 {
        let runs: Vec<jobwheel::RunRecord> = jobwheel::store::RunLog::runs(
            store,
            &RunQuery::new().job(JobId::new(job).unwrap()).limit(100),
        )
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.status != RunStatus::Running)
        .collect();
        if runs.len() >= n {
            return runs;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("fewer than {n} ended runs of {job} within 15 s");
}
