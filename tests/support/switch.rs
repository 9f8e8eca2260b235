//! Changing a deployment's lock provider: one store, schedulers on one provider after
//! another, the jobs running throughout.

use jobwheel::store::JobsExt as _;
use jobwheel::{
    Job, JobContext, JobError, JobStore, LockProvider, Schedule, Scheduler, SchedulerConfig,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Ten jobs every 200 ms on `store`; a scheduler on each of `providers` in turn for
/// 1.5 s (the next starting as the previous shuts down). Every job fires in every
/// phase — a provider whose tokens are below the ones the store has seen would be
/// fenced out and fire nothing — and no fire runs twice.
pub async fn every_job_keeps_firing_across_lock_providers(
    store: Arc<dyn JobStore>,
    providers: Vec<(&'static str, Arc<dyn LockProvider>)>,
) {
    let ids: Vec<String> = (0..10)
        .map(|i| format!("switch-{:08x}-{i}", fastrand::u32(..)))
        .collect();
    let now = store.now().await.unwrap();
    for id in &ids {
        let every = Schedule::every(Duration::from_millis(200)).unwrap();
        let job = Job::builder(id, "count", every).build().unwrap();
        store.upsert(&job, Some(now)).await.unwrap();
    }
    let seen: Arc<Mutex<HashMap<(String, i64), u32>>> = Arc::default();
    for (phase, (name, locks)) in providers.into_iter().enumerate() {
        let before = seen.lock().unwrap().clone();
        let s = seen.clone();
        let sched = Scheduler::builder()
            .store(store.clone())
            .locks(locks)
            .handler("count", move |ctx: JobContext| {
                *s.lock()
                    .unwrap()
                    .entry((ctx.job.id().to_string(), ctx.fire_at.as_millis()))
                    .or_default() += 1;
                async { Ok::<(), JobError>(()) }
            })
            .config(
                SchedulerConfig::default()
                    .node_id(format!("switch-{phase}-{name}"))
                    .poll_interval(Duration::from_millis(100)),
            )
            .build()
            .unwrap();
        let handle = sched.start().await.unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        handle.shutdown().await;
        let after = seen.lock().unwrap().clone();
        for id in &ids {
            let fires = |m: &HashMap<(String, i64), u32>| m.keys().filter(|(j, _)| j == id).count();
            let new = fires(&after) - fires(&before);
            assert!(
                new >= 3,
                "{id} fired {new} times in phase {phase} ({name} locks): fenced out?"
            );
        }
    }
    let twice: Vec<_> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(k, _)| k.clone())
        .collect();
    assert!(twice.is_empty(), "fires that ran twice: {twice:?}");
    for id in &ids {
        store
            .remove(&jobwheel::JobId::new(id).unwrap())
            .await
            .unwrap();
    }
}
