//! The executor server over TLS (rustls) on loopback: a scheduler that trusts the
//! instance's certificate dispatches over `https://`; one that does not refuses to
//! talk to it, and the instance serves no plain HTTP. Every wait is bounded.

use crate::support;

use jobwheel::memory::{LocalLocks, MemoryStore};
use jobwheel::placement::RemoteTarget;
use jobwheel::prelude::*;
use jobwheel::remote::{ExecutorServer, RemoteGroup, RemoteGroupConfig};
use jobwheel::store::{NodeRegistry, RunLog};
use jobwheel::{JobStore, RunRecord};
use std::sync::Arc;
use std::time::Duration;

use support::remote::SECRET;

/// A self-signed certificate for 127.0.0.1 and localhost: (certificate, key), PEM.
fn self_signed() -> (String, String) {
    let c =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
    (c.cert.pem(), c.signing_key.serialize_pem())
}

async fn wait_for_end(store: &MemoryStore, job: &str) -> RunRecord {
    for _ in 0..200 {
        let runs = store
            .runs(&RunQuery::new().job(JobId::new(job).unwrap()).limit(10))
            .await
            .unwrap();
        if let Some(r) = runs.into_iter().find(|r| r.status != RunStatus::Running) {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{job} did not end within 10 s");
}

async fn run_once(store: &MemoryStore, group: RemoteGroup, job: &str) -> RunRecord {
    let scheduler = Scheduler::builder()
        .store(store.clone())
        .locks(LocalLocks::new())
        .remote(group)
        .config(SchedulerConfig::default().poll_interval(Duration::from_millis(100)))
        .build()
        .unwrap();
    let running = scheduler.start().await.unwrap();
    let target = RemoteTarget::new("billing").unwrap();
    let j = Job::builder(job, "echo", Schedule::once(jobwheel::Timestamp::now()))
        .remote(target)
        .build()
        .unwrap();
    scheduler.upsert(j).await.unwrap();
    let run = wait_for_end(store, job).await;
    running.shutdown().await;
    run
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_runs_travel_over_tls_to_a_trusted_instance_only() {
    support::remote::init_logs();
    let (cert, key) = self_signed();
    let store = MemoryStore::new();
    let shared: Arc<dyn JobStore> = Arc::new(store.clone());
    let server = ExecutorServer::builder("billing", SECRET)
        .unwrap()
        .handler("echo", |_ctx: JobContext| async { Ok(()) })
        .tls(cert.clone(), key)
        .register(shared)
        .beat_every(Duration::from_millis(100))
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    let https = format!("https://{}", server.local_addr());

    // A registered TLS instance advertises https://.
    let mut advertised = Vec::new();
    for _ in 0..100 {
        advertised = store
            .executors(Some("billing"))
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|r| r.info.address)
            .collect();
        if !advertised.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(advertised, std::slice::from_ref(&https));

    // Trusting the instance's certificate: the run goes through.
    let trusting = RemoteGroup::registered("billing", SECRET)
        .unwrap()
        .with_config(RemoteGroupConfig::default().tls_roots_pem(cert.clone()))
        .unwrap();
    let run = run_once(&store, trusting, "over-tls").await;
    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");

    // Not trusting it: no request reaches the handler; the attempt fails.
    let untrusting = RemoteGroup::fixed("billing", SECRET, [https.as_str()])
        .unwrap()
        .with_config(RemoteGroupConfig::default().lost_after(1))
        .unwrap();
    let run = run_once(&store, untrusting, "untrusted").await;
    assert_eq!(run.status, RunStatus::Failed, "{run:?}");
    let error = run.error.unwrap_or_default();
    assert!(error.contains("lost contact"), "{error}");

    // No plain HTTP on the TLS port.
    let plain = reqwest::Client::new()
        .post(format!("http://{}/v1/beat", server.local_addr()))
        .body("{}")
        .timeout(Duration::from_secs(5))
        .send()
        .await;
    assert!(plain.is_err(), "plain HTTP answered: {plain:?}");
    server.shutdown().await;
}

#[tokio::test]
async fn bad_tls_material_is_refused_with_the_field_named() {
    let (cert, key) = self_signed();
    let server = |cert: String, key: String| {
        ExecutorServer::builder("billing", SECRET)
            .unwrap()
            .handler("echo", |_ctx: JobContext| async { Ok(()) })
            .tls(cert, key)
            .bind("127.0.0.1:0")
    };
    let e = server("not a certificate".into(), key.clone())
        .await
        .unwrap_err();
    assert_eq!(e.field(), Some("executor.tls.cert"), "{e}");
    let e = server(cert.clone(), "not a key".into()).await.unwrap_err();
    assert_eq!(e.field(), Some("executor.tls.key"), "{e}");
    let (_, other_key) = self_signed();
    let e = server(cert, other_key).await.unwrap_err();
    assert_eq!(
        e.field(),
        Some("executor.tls.key"),
        "a key of another certificate: {e}"
    );
    let e = RemoteGroup::registered("billing", SECRET)
        .unwrap()
        .with_config(RemoteGroupConfig::default().tls_roots_pem("nothing".to_string()))
        .unwrap_err();
    assert_eq!(e.field(), Some("remote.tls_roots_pem"), "{e}");
}
