//! Executor instances that register by heartbeat in the scheduler's store: a
//! scheduler whose group is `RemoteGroup::registered` sends runs only to instances
//! that beat lately (on the store's clock) and serve the job's handler; an instance
//! that stops is removed at once, one that falls silent after `dead_after`. Real
//! HTTP on loopback; every wait is bounded.

use crate::support;

use jobwheel::memory::{LocalLocks, MemoryStore};
use jobwheel::placement::{RemoteTarget, Routing};
use jobwheel::prelude::*;
use jobwheel::remote::{ExecutorServer, RemoteGroup, RemoteGroupConfig};
use jobwheel::store::{Jobs, NodeRegistry, RunLog};
use jobwheel::{ExecutorInfo, JobStore};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::remote::SECRET;

/// Which instance ran which job.
type Ran = Arc<Mutex<Vec<(String, String)>>>;

/// An executor server of group `billing` serving `handlers`, each recording the
/// run, registered in `store` with a beat every 100 ms.
async fn registered(
    name: &str,
    handlers: &[&str],
    store: &Arc<dyn JobStore>,
    ran: &Ran,
) -> ExecutorServer {
    let mut b = ExecutorServer::builder("billing", SECRET)
        .unwrap()
        .instance(name)
        .register(store.clone())
        .beat_every(Duration::from_millis(100));
    for h in handlers {
        let (ran, name) = (ran.clone(), name.to_string());
        b = b.handler(*h, move |ctx: JobContext| {
            let (ran, name) = (ran.clone(), name.clone());
            async move {
                ran.lock().unwrap().push((name, ctx.job.id().to_string()));
                Ok(())
            }
        });
    }
    b.bind("127.0.0.1:0").await.unwrap()
}

fn base(s: &ExecutorServer) -> String {
    format!("http://{}", s.local_addr())
}

/// Waits until the group's live instances are `want` (in address order).
async fn until_instances(group: &RemoteGroup, mut want: Vec<String>) {
    want.sort();
    let mut seen = Vec::new();
    for _ in 0..100 {
        seen = group.instances().await.unwrap();
        if seen == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("instances {seen:?}, wanted {want:?}");
}

/// Runs a one-shot job of `handler` with `routing` and answers the instance that
/// ran it.
async fn ran_on(
    scheduler: &Scheduler,
    store: &MemoryStore,
    ran: &Ran,
    id: &str,
    handler: &str,
    routing: Routing,
) -> String {
    let target = RemoteTarget::new("billing").unwrap().routing(routing);
    let job = Job::builder(id, handler, Schedule::once(jobwheel::Timestamp::now()))
        .remote(target)
        .build()
        .unwrap();
    scheduler.upsert(job).await.unwrap();
    for _ in 0..200 {
        let runs = store
            .runs(&RunQuery::new().job(JobId::new(id).unwrap()).limit(10))
            .await
            .unwrap();
        if let Some(r) = runs.iter().find(|r| r.status != RunStatus::Running) {
            assert_eq!(r.status, RunStatus::Succeeded, "{r:?}");
            let ran = ran.lock().unwrap();
            let (instance, _) = ran.iter().find(|(_, job)| job == id).unwrap();
            return instance.clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{id} did not finish within 10 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_go_to_live_registered_instances_that_serve_the_handler() {
    support::remote::init_logs();
    let store = MemoryStore::new();
    let shared: Arc<dyn JobStore> = Arc::new(store.clone());
    let ran = Ran::default();
    let a = registered("a", &["echo"], &shared, &ran).await;
    let b = registered("b", &["echo"], &shared, &ran).await;
    let c = registered("c", &["report"], &shared, &ran).await;
    let group = RemoteGroup::registered("billing", SECRET)
        .unwrap()
        .with_config(
            RemoteGroupConfig::default()
                .dead_after(Duration::from_millis(500))
                .refresh(Duration::from_millis(50)),
        )
        .unwrap();
    let scheduler = Scheduler::builder()
        .store(store.clone())
        .locks(LocalLocks::new())
        .remote(group.clone())
        .config(SchedulerConfig::default().poll_interval(Duration::from_millis(100)))
        .build()
        .unwrap();
    let running = scheduler.start().await.unwrap();
    until_instances(&group, vec![base(&a), base(&b), base(&c)]).await;

    // Registered on the store's clock, with what each serves.
    let records = store.executors(Some("billing")).await.unwrap().items;
    let now = store.now().await.unwrap();
    for r in &records {
        assert!(now.duration_since(r.last_beat) < Duration::from_secs(1));
        assert!(r.registered_at <= r.last_beat);
        assert_eq!(r.info.capacity, 64);
    }
    let c_record = records.iter().find(|r| r.info.address == base(&c)).unwrap();
    assert_eq!(c_record.info.handlers, ["report"]);

    // Among the instances that serve `echo`, first and last by address.
    let mut echo = [("a", base(&a)), ("b", base(&b))];
    echo.sort_by(|x, y| x.1.cmp(&y.1));
    let s = &scheduler;
    assert_eq!(
        ran_on(s, &store, &ran, "j-first", "echo", Routing::First).await,
        echo[0].0
    );
    assert_eq!(
        ran_on(s, &store, &ran, "j-last", "echo", Routing::Last).await,
        echo[1].0
    );
    // Only c serves `report`, whatever the addresses.
    for (i, routing) in [Routing::First, Routing::Last].into_iter().enumerate() {
        assert_eq!(
            ran_on(s, &store, &ran, &format!("j-report-{i}"), "report", routing).await,
            "c"
        );
    }

    // An instance that stops removes itself: runs go to the one left at once.
    let (gone, left) = (echo[1].0, echo[0].0);
    let (gone_server, left_server) = if gone == "a" { (a, b) } else { (b, a) };
    gone_server.shutdown().await;
    until_instances(&group, vec![base(&left_server), base(&c)]).await;
    assert_eq!(
        ran_on(s, &store, &ran, "j-last-2", "echo", Routing::Last).await,
        left
    );

    // One that falls silent without deregistering is dead after `dead_after` on the
    // store's clock, and removed from the store.
    let silent = ExecutorInfo {
        group: "billing".into(),
        address: "http://127.0.0.1:9".into(),
        handlers: vec!["echo".into()],
        capacity: 1,
        version: "0".into(),
    };
    store.executor_beat(&silent).await.unwrap();
    until_instances(
        &group,
        vec![base(&left_server), base(&c), silent.address.clone()],
    )
    .await;
    until_instances(&group, vec![base(&left_server), base(&c)]).await;
    let addresses: Vec<String> = store
        .executors(Some("billing"))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|r| r.info.address)
        .collect();
    assert!(
        !addresses.contains(&silent.address),
        "reaped: {addresses:?}"
    );

    running.shutdown().await;
    left_server.shutdown().await;
    c.shutdown().await;
    assert!(
        store.executors(None).await.unwrap().items.is_empty(),
        "stopped instances deregistered"
    );
}

#[tokio::test]
async fn a_registered_group_or_instance_that_cannot_work_says_why() {
    let group = RemoteGroup::registered("billing", SECRET).unwrap();
    let e = group.instances().await.unwrap_err();
    assert_eq!(e.field(), Some("remote.instances"), "{e}");

    let store: Arc<dyn JobStore> = Arc::new(MemoryStore::new());
    let wildcard = ExecutorServer::builder("billing", SECRET)
        .unwrap()
        .handler("echo", |_ctx: JobContext| async { Ok(()) })
        .register(store.clone())
        .bind("0.0.0.0:0")
        .await
        .unwrap_err();
    assert_eq!(wildcard.field(), Some("executor.address"), "{wildcard}");
    let bad = ExecutorServer::builder("billing", SECRET)
        .unwrap()
        .handler("echo", |_ctx: JobContext| async { Ok(()) })
        .register(store.clone())
        .advertise("ftp://10.0.0.1")
        .bind("127.0.0.1:0")
        .await
        .unwrap_err();
    assert_eq!(bad.field(), Some("executor.address"), "{bad}");
    let fast = ExecutorServer::builder("billing", SECRET)
        .unwrap()
        .handler("echo", |_ctx: JobContext| async { Ok(()) })
        .register(store.clone())
        .beat_every(Duration::from_millis(1))
        .bind("127.0.0.1:0")
        .await
        .unwrap_err();
    assert_eq!(fast.field(), Some("executor.beat_every"), "{fast}");
    assert!(
        store.executors(None).await.unwrap().items.is_empty(),
        "nothing registered by a server that did not start"
    );
    let e = RemoteGroup::registered("billing", SECRET)
        .unwrap()
        .with_config(RemoteGroupConfig::default().dead_after(Duration::from_millis(1)))
        .unwrap_err();
    assert_eq!(e.field(), Some("remote.dead_after"), "{e}");
}
