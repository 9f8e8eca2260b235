//! The claim window on a paused clock: how many due fires a node claims beyond its
//! free executor slots follows how fast its slots free up. Fast handlers: a node with
//! two slots claims fires by the hundred per round trip. Slow handlers: it claims only
//! what it has slots for, and another node takes the rest at once. A node that
//! started fires on the strength of fast runs and then met slow ones gives the fires
//! still waiting for a slot back, and another node runs them.

use crate::support;

use jobwheel::lock::{Lease, LockProvider, LockRequest};
use jobwheel::memory::LocalLocks;
use jobwheel::store::{Jobs, RunLog};
use jobwheel::{
    Clock, Job, JobContext, JobError, LocalExecutor, RunQuery, RunStatus, Schedule, Scheduler,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::*;

/// Locks that remember how many keys each `acquire` granted.
#[derive(Clone)]
struct Counting {
    inner: LocalLocks,
    granted: Arc<Mutex<Vec<usize>>>,
}

impl Counting {
    fn new(inner: LocalLocks) -> Self {
        Counting {
            inner,
            granted: Arc::default(),
        }
    }
    fn granted(&self) -> Vec<usize> {
        self.granted.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl LockProvider for Counting {
    fn name(&self) -> &'static str {
        "counting"
    }
    async fn acquire(
        &self,
        owner: &str,
        requests: &[LockRequest],
    ) -> jobwheel::Result<Vec<Option<Lease>>> {
        let leases = self.inner.acquire(owner, requests).await?;
        let n = leases.iter().filter(|l| l.is_some()).count();
        self.granted.lock().unwrap().push(n);
        Ok(leases)
    }
    async fn renew(&self, leases: &[Lease], ttl: Duration) -> jobwheel::Result<Vec<Option<Lease>>> {
        self.inner.renew(leases, ttl).await
    }
    async fn release(&self, leases: &[Lease]) -> jobwheel::Result<Vec<bool>> {
        self.inner.release(leases).await
    }
}

async fn one_shots(
    store: &jobwheel::memory::MemoryStore,
    tag: &str,
    n: usize,
    due: jobwheel::Timestamp,
) {
    let jobs: Vec<(Job, Option<jobwheel::Timestamp>)> = (0..n)
        .map(|i| {
            let job = Job::builder(format!("{tag}{i:04}"), "h", Schedule::once(due))
                .build()
                .unwrap();
            (job, Some(due))
        })
        .collect();
    store.upsert_many(&jobs).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn fast_handlers_are_claimed_far_beyond_the_slots() {
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let locks = Counting::new(locks);
    let log = Log::default();
    let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (l, c, r, m) = (log.clone(), clock.clone(), running.clone(), most.clone());
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks.clone())
        .handler("h", move |ctx: JobContext| {
            l.record(&ctx, &*c);
            let now = r.fetch_add(1, Ordering::SeqCst) + 1;
            m.fetch_max(now, Ordering::SeqCst);
            let r = r.clone();
            async move {
                tokio::task::yield_now().await;
                r.fetch_sub(1, Ordering::SeqCst);
                Ok::<(), JobError>(())
            }
        })
        .executor(LocalExecutor::with_concurrency(2).unwrap())
        .config(config("n1"))
        .build()
        .unwrap();
    one_shots(&store, "o", 2_000, clock.now()).await;
    let h = s.start().await.unwrap();
    advance(Duration::from_secs(3)).await;
    h.shutdown().await;
    let ran = log.all();
    let mut per_job: HashMap<String, usize> = HashMap::new();
    for seen in &ran {
        *per_job.entry(seen.job.clone()).or_default() += 1;
    }
    assert_eq!(per_job.len(), 2_000, "every one-shot ran");
    assert!(per_job.values().all(|&n| n == 1), "each ran once");
    assert!(
        most.load(Ordering::SeqCst) <= 2,
        "never more handlers at once than the executor's 2 slots: {}",
        most.load(Ordering::SeqCst)
    );
    let granted = locks.granted();
    let largest = granted.iter().copied().max().unwrap_or(0);
    // The first claim is only the free slots (no run has ended yet); once runs end in
    // no time the line is `claim_window` long.
    assert_eq!(
        granted.first(),
        Some(&2),
        "the first claim fills the free slots"
    );
    assert!(
        largest >= 500,
        "claims beyond the slots come by the hundred: largest claim {largest} ({} claims)",
        granted.len()
    );
}

#[tokio::test(start_paused = true)]
async fn slow_handlers_claim_only_free_slots_and_leave_the_rest_to_other_nodes() {
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let log = Log::default();
    let node = |id: &str, locks: Counting| {
        let (l, c) = (log.clone(), clock.clone());
        Scheduler::builder()
            .store(store.clone())
            .locks(locks)
            .handler("h", move |ctx: JobContext| {
                l.record(&ctx, &*c);
                async {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    Ok::<(), JobError>(())
                }
            })
            .executor(LocalExecutor::with_concurrency(2).unwrap())
            .config(config(id))
            .build()
            .unwrap()
    };
    let (la, lb) = (Counting::new(locks.clone()), Counting::new(locks));
    let (a, b) = (node("a", la.clone()), node("b", lb.clone()));
    let due = clock.now();
    one_shots(&store, "a", 4, due).await;
    let ha = a.start().await.unwrap();
    let hb = b.start().await.unwrap();
    advance(Duration::from_millis(1_100)).await;
    let first = log.all();
    assert_eq!(
        first.len(),
        4,
        "all four started within a poll interval: {first:?}"
    );
    for id in ["a", "b"] {
        assert_eq!(
            first.iter().filter(|s| s.node == id).count(),
            2,
            "each node runs two: {first:?}"
        );
    }
    assert!(
        la.granted().iter().chain(&lb.granted()).all(|&n| n <= 2),
        "no node claimed beyond its two free slots: a {:?}, b {:?}",
        la.granted(),
        lb.granted()
    );
    // After runs of 5 s a quarter of a poll interval starts no run: still no line.
    one_shots(&store, "b", 8, clock.now()).await;
    advance(Duration::from_secs(6)).await;
    assert!(
        la.granted().iter().chain(&lb.granted()).all(|&n| n <= 2),
        "with a 5 s mean run time no node claims beyond its free slots: a {:?}, b {:?}",
        la.granted(),
        lb.granted()
    );
    ha.shutdown().await;
    hb.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn started_fires_whose_slot_does_not_free_up_are_given_back_to_other_nodes() {
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let log = Log::default();
    let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    // "w…" jobs end at once, "s…" jobs take 3 s.
    let node = |id: &str| {
        let (l, c, r, m) = (log.clone(), clock.clone(), running.clone(), most.clone());
        Scheduler::builder()
            .store(store.clone())
            .locks(locks.clone())
            .handler("h", move |ctx: JobContext| {
                l.record(&ctx, &*c);
                let slow = ctx.job.id().as_str().starts_with('s');
                m.fetch_max(r.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                let r = r.clone();
                async move {
                    if slow {
                        tokio::time::sleep(Duration::from_secs(3)).await;
                    }
                    r.fetch_sub(1, Ordering::SeqCst);
                    Ok::<(), JobError>(())
                }
            })
            .executor(LocalExecutor::with_concurrency(2).unwrap())
            .config(config(id))
            .build()
            .unwrap()
    };
    let (a, b) = (node("a"), node("b"));
    // Node a runs a stream of one-shots that end at once (1,000 a second, until the
    // burst: its measured start rate lets it claim and start far beyond its slots)...
    let t0 = clock.now();
    let stream_len = 2_500;
    let stream: Vec<(Job, Option<jobwheel::Timestamp>)> = (0..stream_len)
        .map(|i| {
            let at = t0 + Duration::from_millis(i);
            let job = Job::builder(format!("w{i:04}"), "h", Schedule::once(at))
                .build()
                .unwrap();
            (job, Some(at))
        })
        .collect();
    store.upsert_many(&stream).await.unwrap();
    // ...when a burst of slow ones comes due: a starts more than its two slots take
    // on the strength of its fast runs. Node b joins just after.
    let due = t0 + Duration::from_millis(2_500);
    one_shots(&store, "s", 40, due).await;
    let ha = a.start().await.unwrap();
    advance(Duration::from_millis(2_600)).await;
    let hb = b.start().await.unwrap();
    advance(Duration::from_secs(40)).await;
    let returned_metric = ha.scheduler().metrics().returned + hb.scheduler().metrics().returned;
    ha.shutdown().await;
    hb.shutdown().await;

    let slow: Vec<Seen> = log
        .all()
        .into_iter()
        .filter(|s| s.job.starts_with('s'))
        .collect();
    let mut per_job: HashMap<String, usize> = HashMap::new();
    for seen in &slow {
        *per_job.entry(seen.job.clone()).or_default() += 1;
    }
    assert_eq!(per_job.len(), 40, "every slow one-shot ran");
    assert!(
        per_job.values().all(|&n| n == 1),
        "each ran once: {per_job:?}"
    );
    assert!(
        slow.iter().all(|s| s.attempt == 1 && s.fire_at == due),
        "a fire given back runs as the same fire and attempt"
    );
    assert!(
        most.load(Ordering::SeqCst) <= 4,
        "never more handlers at once than the two nodes' 4 slots"
    );
    let on_b = slow.iter().filter(|s| s.node == "b").count();
    assert!(on_b >= 10, "node b ran a share of the burst: {on_b} of 40");

    let runs = store
        .runs(&RunQuery::new().status(RunStatus::Returned).limit(10_000))
        .await
        .unwrap();
    assert!(!runs.is_empty(), "node a gave started fires back");
    assert_eq!(runs.len() as u64, returned_metric, "each counted once");
    for r in &runs {
        assert_eq!(r.node, "a");
        assert_eq!((r.fire_at, r.attempt), (due, 1));
        let message = r.error.as_deref().unwrap_or_default();
        assert!(
            message.contains("not executed") && message.contains("node a"),
            "{message}"
        );
        let ran = slow.iter().find(|s| s.job == r.job_id.as_str()).unwrap();
        assert!(
            ran.started >= r.ended_at.unwrap(),
            "{} executed at {} before it was given back at {:?}",
            r.job_id,
            ran.started,
            r.ended_at
        );
    }
    let succeeded = store
        .runs(&RunQuery::new().status(RunStatus::Succeeded).limit(10_000))
        .await
        .unwrap();
    assert_eq!(
        succeeded.len() as u64,
        stream_len + 40,
        "one succeeded record per one-shot"
    );
}
