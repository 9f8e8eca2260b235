//! The registration endpoint on loopback: a Rust executor server and the Python
//! executor register through it by heartbeat (real processes, signed requests), a
//! scheduler whose group is registered dispatches to both — a sharding broadcast
//! over the two — and each leaves when it stops; what is not signed by the group,
//! or not valid, is refused and nothing is stored. Every wait is bounded.

use crate::support;

use jobwheel::memory::{LocalLocks, MemoryStore};
use jobwheel::prelude::*;
use jobwheel::remote::protocol;
use jobwheel::remote::{RegistryServer, RemoteGroup};
use jobwheel::store::{JobStore, NodeRegistry};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use support::remote::*;

async fn registry(store: &MemoryStore) -> (RegistryServer, String) {
    let r = RegistryServer::builder(Arc::new(store.clone()))
        .group("billing", SECRET)
        .unwrap()
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    let url = format!("http://{}", r.local_addr());
    (r, url)
}

/// The registered addresses of `billing`, once they are exactly `want` (at most 10 s).
async fn until_registered(store: &MemoryStore, want: &[&str]) -> Vec<jobwheel::ExecutorRecord> {
    let mut want: Vec<&str> = want.to_vec();
    want.sort();
    let mut last = Vec::new();
    for _ in 0..200 {
        let page = store.executors(Some("billing")).await.unwrap();
        let addresses: Vec<&str> = page.items.iter().map(|r| r.info.address.as_str()).collect();
        if addresses == want {
            return page.items;
        }
        last = addresses.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("registered {last:?}, wanted {want:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_and_python_executors_register_through_the_endpoint_run_shards_and_leave() {
    let Some(python_check) = python_executor() else {
        return;
    };
    drop(python_check);
    let store = MemoryStore::new();
    let (registry, url) = registry(&store).await;
    let seen = Seen::default();
    let rust = instance_builder("i-rust", &seen)
        .register_at(&url)
        .beat_every(Duration::from_millis(100))
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    let rust_base = base(&rust);
    let python = python_executor_with(&["--register", &url, "--beat-every", "0.1"]).unwrap();
    let registered = until_registered(&store, &[&rust_base, &python.base]).await;
    let py = registered
        .iter()
        .find(|r| r.info.address == python.base)
        .unwrap();
    assert_eq!(
        (
            py.info.handlers.clone(),
            py.info.capacity,
            py.info.version.as_str()
        ),
        (
            ["chatty", "echo", "fail", "report", "shard", "wait"]
                .map(String::from)
                .to_vec(),
            4,
            "0.1.0-python"
        )
    );

    // A scheduler on the same store sends a sharding broadcast to both.
    let scheduler = Scheduler::builder()
        .store(store.clone())
        .locks(LocalLocks::new())
        .remote(RemoteGroup::registered("billing", SECRET).unwrap())
        .config(SchedulerConfig::default().poll_interval(Duration::from_millis(100)))
        .build()
        .unwrap();
    let running = scheduler.start().await.unwrap();
    let job = Job::builder("split", "shard", Schedule::once(Timestamp::now()))
        .payload(json!({}))
        .remote(broadcast())
        .build()
        .unwrap();
    scheduler.upsert(job).await.unwrap();
    let run = ended_runs(&store, "split", 1).await.remove(0);
    running.shutdown().await;
    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    // The Rust instance ran its one shard of two: its index is its place in address
    // order.
    let rust_index = u64::from(rust_base > python.base);
    let shards: Vec<_> = seen.0.lock().unwrap().iter().map(|s| s.2.clone()).collect();
    assert_eq!(shards.len(), 1, "{shards:?}");
    assert_eq!(
        (&shards[0]["index"], &shards[0]["total"]),
        (&json!(rust_index), &json!(2))
    );

    // Each leaves when it stops.
    python.signal("TERM");
    until_registered(&store, &[&rust_base]).await;
    rust.shutdown().await;
    until_registered(&store, &[]).await;
    registry.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_refuses_what_the_group_did_not_sign_or_cannot_be_registered() {
    let store = MemoryStore::new();
    let (registry, url) = registry(&store).await;
    let info = |capacity: u32| {
        json!({"group": "billing", "address": "http://127.0.0.1:9", "handlers": ["echo"],
               "capacity": capacity, "version": "1"})
    };
    // Unsigned, signed with another secret, for a group the endpoint does not serve.
    let bytes = serde_json::to_vec(&info(4)).unwrap();
    let (s, v, verified) = raw(&url, protocol::REGISTER, bytes.clone(), None).await;
    assert_eq!(
        (s, v["error"].as_str(), verified),
        (401, Some("unsigned"), true)
    );
    let other = jobwheel::remote::auth::Secret::new("t", "another-secret-of-enough-bytes").unwrap();
    let (ts, n) = (
        Timestamp::now().as_millis(),
        jobwheel::remote::auth::nonce(),
    );
    let sig = other.sign_request("POST", protocol::REGISTER, ts, &n, &bytes);
    let (s, v, _) = raw(&url, protocol::REGISTER, bytes, Some((ts, n, sig))).await;
    assert_eq!((s, v["error"].as_str()), (401, Some("bad_signature")));
    let mut payroll = info(4);
    payroll["group"] = json!("payroll");
    let (s, v, verified) = ask(&url, protocol::REGISTER, &payroll).await;
    assert_eq!(
        (s, v["error"].as_str(), verified),
        (401, Some("bad_signature"), false),
        "an unknown group is refused like a bad signature"
    );
    // A caller without any secret cannot tell a group that exists from one that
    // does not: the same status, body and headers (both answers signed, with a key
    // it does not have).
    let mut answers = Vec::new();
    for group in ["billing", "payroll"] {
        let mut body = info(4);
        body["group"] = json!(group);
        let bytes = serde_json::to_vec(&body).unwrap();
        let (ts, n) = (
            Timestamp::now().as_millis(),
            jobwheel::remote::auth::nonce(),
        );
        let sig = other.sign_request("POST", protocol::REGISTER, ts, &n, &bytes);
        let r = reqwest::Client::new()
            .post(format!("{url}{}", protocol::REGISTER))
            .header(jobwheel::remote::auth::TIMESTAMP, ts)
            .header(jobwheel::remote::auth::NONCE, &n)
            .header(jobwheel::remote::auth::SIGNATURE, sig)
            .body(bytes)
            .send()
            .await
            .unwrap();
        let mut names: Vec<String> = r.headers().keys().map(|k| k.to_string()).collect();
        names.retain(|n| n != "date");
        names.sort();
        answers.push((r.status().as_u16(), names, r.text().await.unwrap()));
    }
    assert_eq!(
        answers[0], answers[1],
        "a known group with a wrong secret and an unknown group answer alike"
    );
    assert!(
        answers[0]
            .1
            .contains(&jobwheel::remote::auth::SIGNATURE.to_string()),
        "{answers:?}"
    );
    // Skewed, replayed.
    let (s, v, _) = signed(&url, protocol::REGISTER, &info(4), 120_000, None).await;
    assert_eq!((s, v["error"].as_str()), (401, Some("skewed_timestamp")));
    let nonce = jobwheel::remote::auth::nonce();
    let (s, _, _) = signed(&url, protocol::REGISTER, &info(4), 0, Some(&nonce)).await;
    assert_eq!(s, 200);
    let (s, v, _) = signed(&url, protocol::REGISTER, &info(4), 0, Some(&nonce)).await;
    assert_eq!((s, v["error"].as_str()), (401, Some("replayed")));
    store
        .deregister_executor("billing", "http://127.0.0.1:9")
        .await
        .unwrap();
    // Not valid: refused naming the field, nothing stored.
    let (s, v, verified) = ask(&url, protocol::REGISTER, &info(0)).await;
    assert_eq!(
        (s, v["error"].as_str(), verified),
        (400, Some("bad_request"), true)
    );
    assert!(
        v["message"].as_str().unwrap().contains("executor.capacity"),
        "{v}"
    );
    let mut bad = info(4);
    bad["address"] = json!("ftp://127.0.0.1:9");
    let (s, v, _) = ask(&url, protocol::REGISTER, &bad).await;
    assert!(
        s == 400 && v["message"].as_str().unwrap().contains("executor.address"),
        "{v}"
    );
    let (s, _, _) = raw(&url, protocol::REGISTER, vec![b' '; 128 << 10], None).await;
    assert_eq!(s, 413);
    assert!(store.executors(None).await.unwrap().items.is_empty());
    // Registered, then left.
    let (s, v, verified) = ask(&url, protocol::REGISTER, &info(4)).await;
    assert_eq!((s, verified), (200, true), "{v}");
    assert!(v["at"].as_i64().is_some(), "{v}");
    let page = store.executors(Some("billing")).await.unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(
        page.items[0].last_beat.as_millis(),
        v["at"].as_i64().unwrap()
    );
    let leave = json!({"group": "billing", "address": "http://127.0.0.1:9"});
    let (s, v, _) = ask(&url, protocol::LEAVE, &leave).await;
    assert_eq!((s, &v["removed"]), (200, &json!(true)));
    let (s, v, _) = ask(&url, protocol::LEAVE, &leave).await;
    assert_eq!((s, &v["removed"]), (200, &json!(false)));
    registry.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_answers_what_the_protocol_document_describes() {
    use support::openapi::{answer_schema, conforms, request_schema};
    let doc = support::remote::protocol_doc();
    let mut documented: Vec<&str> = doc["paths"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .filter(|p| p.starts_with("/v1/registry/"))
        .collect();
    documented.sort();
    assert_eq!(documented, [protocol::REGISTER, protocol::LEAVE]);
    let store = MemoryStore::new();
    let (registry, url) = registry(&store).await;
    let beat = json!({"group": "billing", "address": "http://127.0.0.1:9102", "handlers": ["echo"], "capacity": 4, "version": "0.1.0"});
    let leave = json!({"group": "billing", "address": "http://127.0.0.1:9102"});
    // Each path's example, beat first so the leave finds the registration.
    for (path, example) in [(protocol::REGISTER, &beat), (protocol::LEAVE, &leave)] {
        conforms(&doc, request_schema(&doc, "post", path), example)
            .unwrap_or_else(|e| panic!("{path}: the example: {e}"));
        let (status, answer, verified) = ask(&url, path, example).await;
        assert_eq!((status, verified), (200, true), "{path}: {answer}");
        let schema = answer_schema(&doc, "post", path, 200).expect("documented");
        conforms(&doc, schema, &answer).unwrap_or_else(|e| panic!("{path}: {e}: {answer}"));
    }
    assert_eq!(
        ask(&url, protocol::LEAVE, &leave).await.1,
        json!({"removed": false}),
        "the beat registered the leave's instance, which is gone"
    );
    // A refusal's body is documented.
    let (status, answer, _) = raw(&url, protocol::REGISTER, b"{}".to_vec(), None).await;
    let schema = answer_schema(&doc, "post", protocol::REGISTER, status)
        .unwrap_or_else(|| panic!("{status} is not documented"));
    conforms(&doc, schema, &answer).unwrap();
    registry.shutdown().await;
}

/// The field an [`jobwheel::Error::Invalid`] names.
fn field<T: std::fmt::Debug>(r: jobwheel::Result<T>) -> String {
    match r {
        Err(jobwheel::Error::Invalid { field, .. }) => field.to_string(),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn bad_endpoint_settings_are_refused_with_the_field_named() {
    let store: Arc<dyn JobStore> = Arc::new(MemoryStore::new());
    assert_eq!(
        field(RegistryServer::builder(store.clone()).group("billing", "")),
        "registry.secret"
    );
    assert_eq!(
        field(RegistryServer::builder(store.clone()).group("bad group", SECRET)),
        "registry.group"
    );
    let twice = RegistryServer::builder(store.clone())
        .group("billing", SECRET)
        .unwrap()
        .group("billing", SECRET);
    assert_eq!(field(twice), "registry.group");
    let none = RegistryServer::builder(store.clone())
        .bind("127.0.0.1:0")
        .await;
    assert_eq!(field(none), "registry.group");
    let small = RegistryServer::builder(store)
        .group("billing", SECRET)
        .unwrap()
        .max_body_bytes(10)
        .bind("127.0.0.1:0")
        .await;
    assert_eq!(field(small), "registry.max_body_bytes");
}
