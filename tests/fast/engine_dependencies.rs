//! Child jobs on the memory backend and a paused tokio clock: each fire of a parent
//! that ends as a link asks runs the child exactly once, after the parent, even when
//! the child is slower than the parent's period; retries release nothing until the
//! fire's end.

use crate::support;
use jobwheel::store::JobsExt as _;

use jobwheel::dependency::{ChildLink, ChildOn};
use jobwheel::store::{AlarmOutbox, Jobs};
use jobwheel::{
    Job, JobContext, JobError, JobId, RetryPolicy, RunStatus, Schedule, Scheduler, TriggerKind,
};
use std::collections::BTreeSet;
use std::time::Duration;
use support::*;

const S: Duration = Duration::from_secs(1);

pub(crate) fn id(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

/// A job that fires only when released, with no retry, releasing `children` on success.
pub(crate) fn never(name: &str, handler: &str, children: &[&str]) -> jobwheel::JobBuilder {
    Job::builder(name, handler, Schedule::never())
        .retry(RetryPolicy::none())
        .children(
            children
                .iter()
                .map(|c| ChildLink::on_success(id(c)))
                .collect(),
        )
}

/// Stores the diamond a → b, c → `d` (`d` as given, waiting for b and c): `a`
/// fires every minute, `b` runs handler `h`, `c` handler `flaky`.
pub(crate) async fn failing_diamond(sched: &Scheduler, d: Job) {
    sched.upsert(d).await.unwrap();
    for (name, handler) in [("b", "h"), ("c", "flaky")] {
        sched
            .upsert(never(name, handler, &["d"]).build().unwrap())
            .await
            .unwrap();
    }
    sched
        .upsert(
            never("a", "h", &["b", "c"])
                .schedule(Schedule::every(Duration::from_secs(60)).unwrap())
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
}

/// A handler that records its runs and fails every fire released for an instant
/// after `t0`.
pub(crate) fn fails_after(
    log: &Log,
    clock: &std::sync::Arc<jobwheel::TokioClock>,
    t0: jobwheel::Timestamp,
) -> impl Fn(JobContext) -> std::future::Ready<Result<(), JobError>> + Send + Sync + 'static {
    let (log, clock) = (log.clone(), clock.clone());
    move |ctx: JobContext| {
        log.record(&ctx, &*clock);
        let fail = ctx.upstream.first().is_some_and(|u| u.fire_at > t0);
        std::future::ready(if fail {
            Err(JobError::msg("branch c failed"))
        } else {
            Ok(())
        })
    }
}

#[tokio::test(start_paused = true)]
async fn each_parent_fire_runs_each_child_once_after_it() {
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let log = Log::default();
    let slow_log = log.clone();
    let slow_clock = clock.clone();
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("h", recording(&log, &clock))
        // Slower than the parent's period: releases queue up behind its runs.
        .handler("slow", move |ctx: JobContext| {
            slow_log.record(&ctx, &*slow_clock);
            // The handler is told which upstream run released it (a panic here
            // records the run failed, which the test would see).
            assert_eq!(ctx.upstream.len(), 1, "{:?}", ctx.upstream);
            assert_eq!(ctx.upstream[0].job, id("a"));
            async {
                tokio::time::sleep(Duration::from_secs(150)).await;
                Ok::<(), JobError>(())
            }
        })
        .config(config("n1"))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    let sched = h.scheduler();
    let every = |secs| Schedule::every(Duration::from_secs(secs)).unwrap();
    sched
        .upsert(
            Job::builder("b", "slow", Schedule::never())
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    sched
        .upsert(Job::builder("c", "h", every(3 * 3600)).build().unwrap())
        .await
        .unwrap();
    sched
        .upsert(Job::builder("f", "h", Schedule::never()).build().unwrap())
        .await
        .unwrap();
    sched
        .upsert(
            Job::builder("a", "h", every(60))
                .children(vec![
                    ChildLink::on_success(id("b")),
                    ChildLink::on_success(id("c")),
                    ChildLink {
                        job: id("f"),
                        on: ChildOn::Failure,
                    },
                    ChildLink::on_success(id("missing")),
                ])
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    advance(Duration::from_secs(10 * 60 + 30)).await;
    sched.pause("a").await.unwrap();
    // The slow child works off its queue: eleven releases of 150 s each.
    advance(Duration::from_secs(30 * 60)).await;
    h.shutdown().await;

    let parent = runs_of(&store, "a").await;
    assert_eq!(parent.len(), 11, "fires at 0, 1, … 10 min: {parent:?}");
    assert!(parent.iter().all(|r| r.status == RunStatus::Succeeded));
    for child in ["b", "c"] {
        let (runs, own): (Vec<_>, Vec<_>) = runs_of(&store, child)
            .await
            .into_iter()
            .partition(|r| r.trigger == TriggerKind::Upstream);
        // c keeps its own schedule (every 3 h, the first fire at once); b has none.
        let own: Vec<_> = own.iter().map(|r| (r.trigger, r.fire_at)).collect();
        let want_own = if child == "c" {
            vec![(TriggerKind::Schedule, at("2026-01-01T00:00:00Z"))]
        } else {
            vec![]
        };
        assert_eq!(own, want_own, "{child}: fires of its own");
        assert!(
            runs.iter().all(|r| r.status == RunStatus::Succeeded),
            "{child}: {runs:?}"
        );
        // Exactly once per parent fire, naming the parent run that released it,
        // started after that run ended.
        let released: Vec<_> = runs.iter().map(|r| r.context.upstream.clone()).collect();
        assert!(
            released.iter().all(|u| u.len() == 1),
            "{child}: {released:?}"
        );
        let fires: BTreeSet<_> = released.iter().map(|u| u[0].fire_at).collect();
        assert_eq!(
            fires.len(),
            runs.len(),
            "{child}: a parent fire ran it twice"
        );
        let want: BTreeSet<_> = parent.iter().map(|r| r.fire_at).collect();
        assert_eq!(fires, want, "{child}: one run per parent fire");
        for r in &runs {
            let up = &r.context.upstream[0];
            let p = parent
                .iter()
                .find(|p| p.id == up.run)
                .expect("names a parent run");
            assert_eq!(p.fire_at, up.fire_at);
            assert!(
                r.started_at >= p.ended_at.unwrap(),
                "{child} ran before its parent ended"
            );
        }
    }
    assert!(
        runs_of(&store, "f").await.is_empty(),
        "no failure: f never runs"
    );
    let b = runs_of(&store, "b").await;
    let started: Vec<_> = b.iter().map(|r| r.started_at).collect();
    assert!(
        started
            .windows(2)
            .all(|w| w[1].duration_since(w[0]) >= 150 * S),
        "the slow child ran its queue one after another: {started:?}"
    );
    assert!(
        store.releases(None, 100).await.unwrap().is_empty(),
        "queue drained"
    );
    assert!(store.get(&id("missing")).await.unwrap().is_none());
    // c's schedule goes on: its next fire is its own, 3 h after the first.
    let c = store.get(&id("c")).await.unwrap().unwrap();
    assert_eq!(c.next_trigger(), TriggerKind::Schedule);
    assert_eq!(c.next_fire_at(), Some(at("2026-01-01T03:00:00Z")));
}

#[tokio::test(start_paused = true)]
async fn a_fire_releases_its_children_once_at_its_end_not_per_attempt() {
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let log = Log::default();
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("h", recording(&log, &clock))
        .handler("boom", failing(&log, &clock))
        .config(config("n1"))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    let sched = h.scheduler();
    for child in ["ok", "bad", "any"] {
        sched
            .upsert(Job::builder(child, "h", Schedule::never()).build().unwrap())
            .await
            .unwrap();
    }
    let link = |job: &str, on| ChildLink { job: id(job), on };
    sched
        .upsert(
            Job::builder("p", "boom", Schedule::never())
                .retry(RetryPolicy::new(3, S, S).unwrap())
                .children(vec![
                    link("ok", ChildOn::Success),
                    link("bad", ChildOn::Failure),
                    link("any", ChildOn::Always),
                ])
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    sched.trigger_now("p").await.unwrap();
    advance(60 * S).await;
    h.shutdown().await;
    let p = runs_of(&store, "p").await;
    assert_eq!(p.len(), 3, "three attempts: {p:?}");
    assert!(runs_of(&store, "ok").await.is_empty(), "the fire failed");
    for child in ["bad", "any"] {
        let runs = runs_of(&store, child).await;
        assert_eq!(runs.len(), 1, "{child}: once for the fire, not per attempt");
        let up = &runs[0].context.upstream[0];
        assert_eq!(up.run, p[2].id, "released by the last attempt");
        assert_eq!(up.status, RunStatus::Failed);
        assert_eq!(up.fire_at, p[0].fire_at, "keyed by the fire, not the retry");
    }
    // The final failure raised one `blocked` alarm naming the child it did not
    // release (besides its final-failure alarm).
    let alarms = store.alarms(&jobwheel::AlarmQuery::new(100)).await.unwrap();
    let blocked: Vec<_> = alarms
        .iter()
        .filter(|a| a.event.kind == jobwheel::AlarmKind::Blocked)
        .collect();
    assert_eq!(blocked.len(), 1, "{alarms:?}");
    assert_eq!(blocked[0].event.job_id, id("p"));
    assert_eq!(blocked[0].event.blocked, vec![id("ok")]);
    assert_eq!(blocked[0].event.run_id, Some(p[2].id));
    assert!(
        alarms
            .iter()
            .any(|a| a.event.kind == jobwheel::AlarmKind::FinalFailure),
        "{alarms:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn children_that_lead_back_to_the_job_are_refused_naming_the_cycle() {
    let (store, _log, h) = recording_scheduler("2026-01-01T00:00:00Z").await;
    let s = h.scheduler();
    let never = |name: &str, children: &[&str]| {
        Job::builder(name, "h", Schedule::never())
            .children(
                children
                    .iter()
                    .map(|c| ChildLink::on_success(id(c)))
                    .collect(),
            )
            .build()
            .unwrap()
    };
    s.upsert(never("a", &["b"])).await.unwrap();
    s.upsert(never("b", &["c", "x"])).await.unwrap();
    let err = s.upsert(never("c", &["a"])).await.unwrap_err();
    match &err {
        jobwheel::Error::Invalid { field, value, .. } => {
            assert_eq!(*field, "job.children");
            assert_eq!(value, "c → a → b → c");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        store.get(&id("c")).await.unwrap().is_none(),
        "nothing stored"
    );
    // A batch that closes a cycle within itself is refused whole.
    let err = s
        .upsert_many(vec![never("p", &["q"]), never("q", &["p"])])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("job.children"), "{err}");
    assert!(store.get(&id("p")).await.unwrap().is_none());
    // Without a cycle, the same jobs are stored.
    s.upsert(never("c", &["x"])).await.unwrap();
    h.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_cycle_written_past_the_check_stops_at_the_longest_chain() {
    let (store, log, h) = recording_scheduler("2026-01-01T00:00:00Z").await;
    // Written straight to the store (as two racing upserts could leave it).
    for (me, child) in [("a", "b"), ("b", "a")] {
        let job = Job::builder(me, "h", Schedule::never())
            .child(id(child))
            .build()
            .unwrap();
        store.upsert(&job, None).await.unwrap();
    }
    h.scheduler().trigger_now("a").await.unwrap();
    advance(Duration::from_secs(600)).await;
    h.shutdown().await;
    let runs = log.all().len();
    assert_eq!(
        runs,
        1 + jobwheel::dependency::MAX_DEPTH as usize,
        "the trigger's run and one per release up to the longest chain"
    );
    let last = runs_of(&store, "a")
        .await
        .into_iter()
        .chain(runs_of(&store, "b").await);
    let depth = last
        .map(|r| r.context.upstream.first().map_or(0, |u| u.depth))
        .max();
    assert_eq!(depth, Some(jobwheel::dependency::MAX_DEPTH));
}

#[tokio::test(start_paused = true)]
async fn a_diamond_runs_its_join_once_per_origin_fire_after_both_branches() {
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let log = Log::default();
    let (slow_log, slow_clock) = (log.clone(), clock.clone());
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("h", recording(&log, &clock))
        // One branch is slower than the origin's period.
        .handler("slow", move |ctx: JobContext| {
            slow_log.record(&ctx, &*slow_clock);
            async {
                tokio::time::sleep(Duration::from_secs(75)).await;
                Ok::<(), JobError>(())
            }
        })
        .config(config("n1"))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    let sched = h.scheduler();
    let job = |name: &str, handler: &str, children: &[&str]| {
        Job::builder(name, handler, Schedule::never()).children(
            children
                .iter()
                .map(|c| ChildLink::on_success(id(c)))
                .collect(),
        )
    };
    // The join first: it may be stored before its parents list it.
    sched
        .upsert(
            job("d", "h", &[])
                .after(vec![id("b"), id("c")])
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    sched
        .upsert(job("b", "h", &["d"]).build().unwrap())
        .await
        .unwrap();
    sched
        .upsert(job("c", "slow", &["d"]).build().unwrap())
        .await
        .unwrap();
    sched
        .upsert(
            job("a", "h", &["b", "c"])
                .schedule(Schedule::every(Duration::from_secs(60)).unwrap())
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    advance(Duration::from_secs(5 * 60 + 30)).await;
    sched.pause("a").await.unwrap();
    advance(Duration::from_secs(15 * 60)).await;
    h.shutdown().await;

    let a = runs_of(&store, "a").await;
    assert_eq!(a.len(), 6, "fires at 0 … 5 min");
    let d = runs_of(&store, "d").await;
    let instants: Vec<_> = d
        .iter()
        .map(|r| {
            let ups: Vec<_> = r
                .context
                .upstream
                .iter()
                .map(|u| (u.job.to_string(), u.fire_at))
                .collect();
            assert_eq!(ups.len(), 2, "both branches named: {ups:?}");
            assert_eq!((ups[0].0.as_str(), ups[1].0.as_str()), ("b", "c"));
            assert_eq!(ups[0].1, ups[1].1, "one instant");
            ups[0].1
        })
        .collect();
    let want: Vec<_> = a.iter().map(|r| r.fire_at).collect();
    let mut got = instants.clone();
    got.sort();
    assert_eq!(got, want, "d once per fire of a, keyed by a's instant");
    // Never before both branches of its instant ended.
    for r in &d {
        for u in &r.context.upstream {
            let branch = runs_of(&store, u.job.as_str()).await;
            let up = branch.iter().find(|x| x.id == u.run).unwrap();
            assert!(
                r.started_at >= up.ended_at.unwrap(),
                "d ran before {} ended",
                u.job
            );
        }
    }
    assert!(store.releases(None, 100).await.unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_join_is_refused_when_a_parent_it_waits_for_does_not_release_it() {
    let (store, _log, h) = recording_scheduler("2026-01-01T00:00:00Z").await;
    let s = h.scheduler();
    s.upsert(Job::builder("b", "h", Schedule::never()).build().unwrap())
        .await
        .unwrap();
    let err = s
        .upsert(
            Job::builder("d", "h", Schedule::never())
                .after(vec![id("b")])
                .build()
                .unwrap(),
        )
        .await
        .unwrap_err();
    match &err {
        jobwheel::Error::Invalid { field, value, .. } => {
            assert_eq!((*field, value.as_str()), ("job.after", "b"));
        }
        other => panic!("{other:?}"),
    }
    assert!(store.get(&id("d")).await.unwrap().is_none());
    h.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_branch_blocks_its_instant_until_an_operator_releases_or_skips_it() {
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let log = Log::default();
    let t0 = at("2026-01-01T00:00:00Z");
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("h", recording(&log, &clock))
        // Fails for every instant after the first.
        .handler("flaky", fails_after(&log, &clock, t0))
        .config(config("n1"))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    let sched = h.scheduler();
    let d = never("d", "h", &[]).after(vec![id("b"), id("c")]);
    failing_diamond(sched, d.build().unwrap()).await;
    advance(Duration::from_secs(150)).await;
    sched.pause("a").await.unwrap();
    advance(Duration::from_secs(60)).await;

    let (t1, t2) = (t0 + 60 * S, t0 + 120 * S);
    let d = runs_of(&store, "d").await;
    assert_eq!(
        d.len(),
        1,
        "only the instant both branches succeeded: {d:?}"
    );
    assert_eq!(d[0].context.upstream[0].fire_at, t0);
    let waiting: Vec<_> = store
        .releases(Some(&id("d")), 10)
        .await
        .unwrap()
        .into_iter()
        .map(|q| (q.from.job.to_string(), q.from.fire_at))
        .collect();
    assert_eq!(waiting, vec![("b".to_string(), t1), ("b".to_string(), t2)]);
    let alarms = store.alarms(&jobwheel::AlarmQuery::new(100)).await.unwrap();
    let blocked: Vec<_> = alarms
        .iter()
        .filter(|a| a.event.kind == jobwheel::AlarmKind::Blocked)
        .map(|a| (a.event.job_id.to_string(), a.event.blocked.clone()))
        .collect();
    assert_eq!(
        blocked,
        vec![
            ("c".to_string(), vec![id("d")]),
            ("c".to_string(), vec![id("d")])
        ],
        "each failed branch fire raised `blocked` naming d"
    );

    // An operator releases the first blocked instant: d runs once for it.
    assert_eq!(sched.release_instant("d", t1).await.unwrap(), vec![id("c")]);
    advance(10 * S).await;
    let d = runs_of(&store, "d").await;
    assert_eq!(d.len(), 2);
    let ups = &d[1].context.upstream;
    assert_eq!((ups[0].job.as_str(), ups[0].fire_at), ("b", t1));
    assert_eq!((ups[1].job.as_str(), ups[1].fire_at), ("c", t1));
    assert!(ups[0].released_by.is_none());
    assert!(
        ups[1].released_by.is_some(),
        "c's place was taken by the operator"
    );
    // And skips the other: nothing runs for it, and it is gone.
    assert_eq!(sched.skip_instant("d", t2).await.unwrap(), 1);
    assert!(matches!(
        sched.skip_instant("d", t2).await.unwrap_err(),
        jobwheel::Error::NotFound { .. }
    ));
    advance(60 * S).await;
    assert_eq!(runs_of(&store, "d").await.len(), 2);
    assert!(store.releases(None, 10).await.unwrap().is_empty());
    // A job that waits for no parents is triggered, not released.
    assert!(matches!(
        sched.release_instant("b", t1).await.unwrap_err(),
        jobwheel::Error::Invalid {
            field: "job.after",
            ..
        }
    ));
    h.shutdown().await;
}
