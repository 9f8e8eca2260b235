//! The executor protocol's conformance suite, run against the Rust executor server
//! and the Python executor of `examples/python_executor/` (real processes on
//! loopback): signatures and their refusals, block strategies, kill, log tail, and
//! the OpenAPI document checked against what each answers. Every wait is bounded.

use crate::support;

use jobwheel::placement::BlockStrategy;
use jobwheel::remote::auth;
use jobwheel::remote::protocol::{self, Phase, RunState};
use serde_json::{Value, json};
use std::time::Duration;
use support::remote::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_executor_server_passes_the_protocol_suite() {
    let server = instance("i-a", &Seen::default()).await;
    suite(&base(&server)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_executor_passes_the_protocol_suite() {
    let Some(python) = python_executor() else {
        return;
    };
    suite(&python.base).await;
}

/// A request captured on its way to instance A and sent to instance B of the same
/// group within the replay window is refused at B (its signature names A), and B
/// runs nothing; A ran it once.
async fn a_request_for_one_instance_does_not_run_at_another(a: &str, b: &str) {
    let good = auth::Secret::new("t", SECRET).unwrap();
    let body =
        serde_json::to_vec(&run_request(77, "replayed", "echo", BlockStrategy::Serial)).unwrap();
    let (ts, n) = (jobwheel::Timestamp::now().as_millis(), auth::nonce());
    let sig = good.sign_request("POST", &target(a, protocol::RUN), ts, &n, &body);
    let captured = Some((ts, n, sig));
    let (status, _, verified) = raw(a, protocol::RUN, body.clone(), captured.clone()).await;
    assert_eq!((status, verified), (200, true), "A runs it");
    let (status, v, _) = raw(b, protocol::RUN, body, captured).await;
    assert_eq!(
        (status, v["error"].as_str()),
        (401, Some("bad_signature")),
        "B refuses the replay: {v}"
    );
    let (status, v, _) = ask(b, protocol::RESULT, &json!({"run_id": 77, "token": 7})).await;
    assert_eq!(
        (status, v["error"].as_str()),
        (404, Some("unknown_run")),
        "B never admitted the run: {v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_replayed_to_another_rust_instance_is_refused() {
    let (a, b) = (
        instance("i-a", &Seen::default()).await,
        instance("i-b", &Seen::default()).await,
    );
    a_request_for_one_instance_does_not_run_at_another(&base(&a), &base(&b)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_replayed_to_another_python_instance_is_refused() {
    let (Some(a), Some(b)) = (python_executor(), python_executor()) else {
        return;
    };
    a_request_for_one_instance_does_not_run_at_another(&a.base, &b.base).await;
}

async fn suite(b: &str) {
    refuses_requests_without_a_valid_fresh_signature(b).await;
    applies_block_strategies(b).await;
    tails_logs_and_kills(b).await;
    keeps_shards_apart(b).await;
    answers_what_the_protocol_document_describes(b).await;
}

async fn refuses_requests_without_a_valid_fresh_signature(b: &str) {
    let body = run_request(1, "j", "echo", BlockStrategy::Serial);
    // No signature.
    let (status, v, verified) =
        raw(b, protocol::RUN, serde_json::to_vec(&body).unwrap(), None).await;
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
    let (status, v, verified) = raw(b, protocol::RUN, bytes.clone(), Some((ts, n, sig))).await;
    assert_eq!(
        (status, v["error"].as_str(), verified),
        (401, Some("bad_signature"), true)
    );
    // A body changed after signing.
    let good = auth::Secret::new("t", SECRET).unwrap();
    let n = auth::nonce();
    let sig = good.sign_request("POST", &target(b, protocol::RUN), ts, &n, b"{}");
    let (status, v, _) = raw(b, protocol::RUN, bytes.clone(), Some((ts, n, sig))).await;
    assert_eq!((status, v["error"].as_str()), (401, Some("bad_signature")));
    // Signed for the path alone, or for another instance's address.
    for signed_for in [
        protocol::RUN.to_string(),
        auth::addressed("http://127.0.0.1:1", protocol::RUN),
    ] {
        let n = auth::nonce();
        let sig = good.sign_request("POST", &signed_for, ts, &n, &bytes);
        let (status, v, _) = raw(b, protocol::RUN, bytes.clone(), Some((ts, n, sig))).await;
        assert_eq!(
            (status, v["error"].as_str()),
            (401, Some("bad_signature")),
            "signed for {signed_for}"
        );
    }
    // Skewed by more than the replay window either way.
    for skew in [-120_000, 120_000] {
        let (status, v, verified) = signed(b, protocol::BEAT, &json!({}), skew, None).await;
        assert_eq!(
            (status, v["error"].as_str(), verified),
            (401, Some("skewed_timestamp"), true)
        );
    }
    // A replay of an accepted request.
    let n = auth::nonce();
    let (status, _, verified) = signed(b, protocol::BEAT, &json!({}), 0, Some(&n)).await;
    assert_eq!((status, verified), (200, true));
    let (status, v, _) = signed(b, protocol::BEAT, &json!({}), 0, Some(&n)).await;
    assert_eq!((status, v["error"].as_str()), (401, Some("replayed")));
    // Nothing was admitted.
    let (status, v, _) = ask(b, protocol::RESULT, &json!({"run_id": 1, "token": 7})).await;
    assert_eq!((status, v["error"].as_str()), (404, Some("unknown_run")));
    // Oversized bodies are refused before anything else.
    let big = vec![b' '; 2 << 20];
    let (status, v, _) = raw(b, protocol::RUN, big, None).await;
    assert_eq!((status, v["error"].as_str()), (413, Some("too_large")));
}

async fn applies_block_strategies(b: &str) {
    let run = |id, block, payload| run_with(id, "j", "wait", block, payload);
    // The first run takes 400 ms; the second would wait until cancelled.
    let (s, v, _) = ask(
        b,
        protocol::RUN,
        &run(1, BlockStrategy::Serial, json!({"ms": 400})),
    )
    .await;
    assert_eq!((s, v["phase"].as_str()), (200, Some("running")));
    // Serial: the second run of the job waits behind the first.
    let (s, v, _) = ask(b, protocol::RUN, &run(2, BlockStrategy::Serial, json!({}))).await;
    assert_eq!((s, v["phase"].as_str()), (200, Some("queued")));
    // A retransmission answers the same run's state.
    let (s, v, _) = ask(b, protocol::RUN, &run(2, BlockStrategy::Serial, json!({}))).await;
    assert_eq!((s, v["phase"].as_str()), (200, Some("queued")));
    // Discard later: refused while the job is in progress.
    let (s, v, _) = ask(
        b,
        protocol::RUN,
        &run(3, BlockStrategy::DiscardLater, json!({})),
    )
    .await;
    assert_eq!((s, v["error"].as_str()), (409, Some("discarded")));
    // Another job is not blocked.
    let (s, v, _) = ask(b, protocol::IDLE_BEAT, &json!({"job_id": "other"})).await;
    assert_eq!((s, v["idle"].as_bool()), (200, Some(true)));
    let (s, v, _) = ask(b, protocol::IDLE_BEAT, &json!({"job_id": "j"})).await;
    assert_eq!((s, v["idle"].as_bool()), (200, Some(false)));
    let (s, v, _) = ask(b, protocol::BEAT, &json!({})).await;
    assert_eq!(
        (s, &v["running"], &v["queued"]),
        (200, &json!(1), &json!(1)),
        "{v}"
    );
    // The first ends; the queued one starts.
    let r1 = result(b, 1, 5_000).await;
    assert_eq!(
        (r1.phase, r1.outcome.unwrap().status.as_str()),
        (Phase::Done, "succeeded")
    );
    let mut r2 = result(b, 2, 0).await;
    for _ in 0..100 {
        if r2.phase == Phase::Running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        r2 = result(b, 2, 0).await;
    }
    assert_eq!(r2.phase, Phase::Running);
    // Cover early: the running run is cancelled and the new one runs.
    let (s, v, _) = ask(
        b,
        protocol::RUN,
        &run(4, BlockStrategy::CoverEarly, json!({"ms": 200})),
    )
    .await;
    assert_eq!((s, v["phase"].as_str()), (200, Some("running")));
    let r2 = result(b, 2, 5_000).await;
    assert_eq!(
        r2.outcome.unwrap().status,
        "cancelled",
        "the covered run is cancelled"
    );
    assert_eq!(result(b, 4, 0).await.phase, Phase::Running);
    assert_eq!(
        result(b, 4, 5_000).await.outcome.unwrap().status,
        "succeeded"
    );
    // Unknown runs and handlers.
    let (s, v, _) = ask(b, protocol::RESULT, &json!({"run_id": 99, "token": 7})).await;
    assert_eq!((s, v["error"].as_str()), (404, Some("unknown_run")));
    let (s, v, _) = ask(b, protocol::RESULT, &json!({"run_id": 1, "token": 8})).await;
    assert_eq!(
        (s, v["error"].as_str()),
        (404, Some("unknown_run")),
        "another token is another run"
    );
    let (s, v, _) = ask(
        b,
        protocol::RUN,
        &run_request(5, "k", "nobody", BlockStrategy::Serial),
    )
    .await;
    assert_eq!((s, v["error"].as_str()), (422, Some("unknown_handler")));
}

async fn keeps_shards_apart(b: &str) {
    let shard = |index: u32, total: u32, attempt: u32, payload: Value| {
        let mut r = run_with(60, "s", "shard", BlockStrategy::DiscardLater, payload);
        r["shard"] = json!({"index": index, "total": total});
        r["attempt"] = json!(attempt);
        r
    };
    let result_of_shard =
        |index: u32| json!({"run_id": 60, "token": 7, "wait_ms": 5_000, "shard": index});
    // Two shards of one run are two runs: both admitted although the job's block
    // strategy discards a second run, each ends on its own and is asked for by index.
    for index in 0..2 {
        let (s, v, _) = ask(
            b,
            protocol::RUN,
            &shard(index, 2, 1, json!({"fail_shard": 1})),
        )
        .await;
        assert_eq!(s, 200, "shard {index}: {v}");
    }
    let (s, v, _) = ask(b, protocol::RESULT, &result_of_shard(0)).await;
    assert_eq!(
        (s, v["outcome"]["status"].as_str()),
        (200, Some("succeeded")),
        "{v}"
    );
    let (s, v, _) = ask(b, protocol::RESULT, &result_of_shard(1)).await;
    assert_eq!(
        (s, v["outcome"]["status"].as_str()),
        (200, Some("failed")),
        "{v}"
    );
    // The run without a shard is not any of them.
    let (s, v, _) = ask(b, protocol::RESULT, &json!({"run_id": 60, "token": 7})).await;
    assert_eq!((s, v["error"].as_str()), (404, Some("unknown_run")));
    // Each shard's handler was told its shard, and logged to its own log.
    let (s, v, _) = ask(
        b,
        protocol::LOG,
        &json!({"run_id": 60, "token": 7, "shard": 1, "offset": 0}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let lines: Vec<&str> = v["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(lines.len(), 1, "{v}");
    assert!(lines[0].ends_with("shard 1/2 attempt 1"), "{v}");
    // A retransmission of an ended shard answers its result; the shard's retry (a
    // later attempt) runs it again.
    let (s, v, _) = ask(b, protocol::RUN, &shard(1, 2, 1, json!({"fail_shard": 1}))).await;
    assert_eq!(
        (s, v["outcome"]["status"].as_str()),
        (200, Some("failed")),
        "{v}"
    );
    let (s, v, _) = ask(b, protocol::RUN, &shard(1, 2, 2, json!({"fail_shard": 1}))).await;
    assert_eq!(s, 200, "{v}");
    let (s, v, _) = ask(b, protocol::RESULT, &result_of_shard(1)).await;
    assert_eq!(
        (s, v["outcome"]["status"].as_str()),
        (200, Some("succeeded")),
        "{v}"
    );
    // A shard outside its total is refused.
    let (s, v, _) = ask(b, protocol::RUN, &shard(2, 2, 1, json!({}))).await;
    assert_eq!((s, v["error"].as_str()), (400, Some("bad_request")), "{v}");
}

async fn tails_logs_and_kills(b: &str) {
    let (s, _, _) = ask(
        b,
        protocol::RUN,
        &run_request(11, "chatty-job", "chatty", BlockStrategy::Serial),
    )
    .await;
    assert_eq!(s, 200);
    let mut lines = Vec::new();
    let mut offset = 0;
    for _ in 0..100 {
        let (s, v, ok) = ask(
            b,
            protocol::LOG,
            &json!({"run_id": 11, "token": 7, "offset": offset}),
        )
        .await;
        assert!(ok && s == 200, "{s} {v}");
        let chunk: protocol::LogChunk = serde_json::from_value(v).unwrap();
        offset = chunk.next_offset;
        lines.extend(chunk.lines);
        if lines.len() >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(lines[2].contains("step <2> line=2"), "{lines:?}");
    assert!(
        lines[3].ends_with(r#"payload {"n":11}"#),
        "the handler saw the payload the request carried: {lines:?}"
    );
    let (s, v, _) = ask(b, protocol::KILL, &json!({"run_id": 11, "token": 7})).await;
    assert_eq!((s, v["killed"].as_bool()), (200, Some(true)));
    let r = result(b, 11, 5_000).await;
    assert_eq!(r.outcome.unwrap().status, "cancelled");
    let (_, v, _) = ask(
        b,
        protocol::LOG,
        &json!({"run_id": 11, "token": 7, "offset": offset}),
    )
    .await;
    assert_eq!(
        (v["lines"].as_array().map(Vec::len), v["done"].as_bool()),
        (Some(0), Some(true))
    );
    let (s, v, _) = ask(b, protocol::KILL, &json!({"run_id": 11, "token": 7})).await;
    assert_eq!(
        (s, v["killed"].as_bool()),
        (200, Some(false)),
        "an ended run is not killed again"
    );

    // The lines also come with a result answer that asks from an offset (how a
    // scheduler takes them to its store); an answer not asked for them has none.
    let with_log = |offset: u64| json!({"run_id": 11, "token": 7, "log_offset": offset});
    let (s, v, _) = ask(b, protocol::RESULT, &with_log(0)).await;
    assert_eq!(s, 200, "{v}");
    let state: RunState = serde_json::from_value(v).unwrap();
    let chunk = state
        .log
        .expect("the answer carries the log it was asked for");
    assert_eq!(chunk.lines, lines, "the same lines as the log endpoint's");
    assert_eq!(
        (
            chunk.first_offset,
            chunk.next_offset,
            chunk.done,
            chunk.more
        ),
        (0, 4, true, false)
    );
    let (_, v, _) = ask(b, protocol::RESULT, &with_log(3)).await;
    assert_eq!(v["log"]["lines"], json!([lines[3]]), "{v}");
    assert_eq!(v["log"]["next_offset"], 4, "{v}");
    let (_, v, _) = ask(b, protocol::RESULT, &json!({"run_id": 11, "token": 7})).await;
    assert!(v.get("log").is_none(), "not asked for: {v}");
    // A page cut by its limit says more lines are there.
    let (_, v, _) = ask(
        b,
        protocol::LOG,
        &json!({"run_id": 11, "token": 7, "offset": 1, "limit": 2}),
    )
    .await;
    assert_eq!(
        (v["next_offset"].as_u64(), v["more"].as_bool()),
        (Some(3), Some(true)),
        "{v}"
    );
}

async fn answers_what_the_protocol_document_describes(b: &str) {
    use support::openapi::{answer_schema, conforms, request_schema};
    let doc = support::remote::protocol_doc();
    assert_eq!(doc["openapi"], "3.1.0");
    // The executor's paths (a scheduler's registration endpoint serves the others:
    // remote_registration.rs checks those).
    let mut documented: Vec<&str> = doc["paths"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .filter(|p| !p.starts_with("/v1/registry/"))
        .collect();
    documented.sort();
    let examples = support::remote::protocol_examples();
    let mut served: Vec<&str> = examples.iter().map(|(p, _)| *p).collect();
    served.sort();
    assert_eq!(documented, served);
    // Each path's example conforms to the documented request, and its answer to the
    // documented answer (no undocumented field).
    for (path, example) in &examples {
        conforms(&doc, request_schema(&doc, "post", path), example)
            .unwrap_or_else(|e| panic!("{path}: the example: {e}"));
        let (status, answer, verified) = ask(b, path, example).await;
        assert!(verified, "{path}: the answer is signed");
        assert_eq!(status, 200, "{path}: {answer}");
        let schema = answer_schema(&doc, "post", path, 200).expect("documented");
        conforms(&doc, schema, &answer).unwrap_or_else(|e| panic!("{path}: {e}: {answer}"));
    }
    // Refusals are documented per path, with their body.
    let (status, answer, _) = raw(b, protocol::RUN, b"{}".to_vec(), None).await;
    let schema = answer_schema(&doc, "post", protocol::RUN, status)
        .unwrap_or_else(|| panic!("{status} is not documented"));
    conforms(&doc, schema, &answer).unwrap();
    let (status, answer, _) = ask(b, protocol::RESULT, &json!({"run_id": 404, "token": 1})).await;
    assert_eq!(status, 404);
    let schema = answer_schema(&doc, "post", protocol::RESULT, 404).expect("404 documented");
    conforms(&doc, schema, &answer).unwrap();
}

/// The committed `docs/executor-protocol.json` is the document the code generates.
#[test]
fn protocol_document_is_committed() {
    support::openapi::committed_equals("docs/executor-protocol.json", &jobwheel::remote::openapi());
}

/// Sends `request` (raw bytes) to `base` over TCP and reads the answer's status
/// line within 10 s; `None` when the connection closed without one.
async fn raw_status(base: &str, request: &[u8]) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://");
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    conn.write_all(request).await.unwrap();
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buf = [0u8; 4096];
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    got.extend_from_slice(&buf[..n]);
                    if got.windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "answered within 10 s, not read to the end of the stream"
    );
    let text = String::from_utf8_lossy(&got);
    text.lines()
        .next()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
}

/// The Python executor answers every bad request, before reading a body it cannot
/// bound: a negative or non-numeric Content-Length, and a signed body nested deeper
/// than its JSON parser goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_executor_answers_bad_lengths_and_deep_bodies() {
    let Some(python) = python_executor() else {
        return;
    };
    for length in ["-1", "abc", "1e3", "+5"] {
        let request = format!(
            "POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n{{}}"
        );
        let status = raw_status(&python.base, request.as_bytes()).await;
        assert!(
            status.as_deref().is_some_and(|s| s.contains(" 400 ")),
            "Content-Length {length}: {status:?}"
        );
    }
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let secret = auth::Secret::new("t", SECRET).unwrap();
    let (ts, n) = (jobwheel::Timestamp::now().as_millis(), auth::nonce());
    let sig = secret.sign_request(
        "POST",
        &target(&python.base, protocol::RUN),
        ts,
        &n,
        deep.as_bytes(),
    );
    let (status, v, verified) = raw(
        &python.base,
        protocol::RUN,
        deep.into_bytes(),
        Some((ts, n, sig)),
    )
    .await;
    assert_eq!(
        (status, v["error"].as_str(), verified),
        (400, Some("bad_request"), true),
        "{v}"
    );
    // Still serving.
    let (status, _, _) = ask(&python.base, protocol::BEAT, &json!({})).await;
    assert_eq!(status, 200);
}
