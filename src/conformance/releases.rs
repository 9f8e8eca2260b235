//! Child jobs released by a parent's finish: queued once per key, written only with
//! the finish, taken in order under [`rules::takes_release`](crate::store::rules::takes_release).

use super::store::{
    cleanup, finish_one, finish_req, jid, job, long_ago, record, start_req, started,
};
use super::unique;
use crate::dependency::{Release, UpstreamRun};
use crate::record::*;
use crate::schedule::Schedule;
use crate::store::JobStore;
use crate::store::JobsExt as _;
use crate::time::Timestamp;
use std::time::Duration;

const MIN: Duration = Duration::from_secs(60);

/// The parent's `k`-th fire: started at `t0 + k min` under token `k + 1` and
/// finished (succeeded, next at `t0 + (k + 1) min`) with releases of `children`.
/// Returns the finish's outcome and the upstream run it names.
pub(super) async fn parent_fire(
    store: &dyn JobStore,
    parent: &str,
    t0: Timestamp,
    k: u32,
    children: &[&str],
) -> (FinishOutcome, UpstreamRun) {
    let fire = t0 + MIN * k;
    let run = started(store, start_req(parent, fire, 1, u64::from(k) + 1)).await;
    let from = UpstreamRun {
        job: jid(parent),
        fire_at: fire,
        run,
        status: RunStatus::Succeeded,
        depth: 1,
        released_by: None,
        window: None,
    };
    let mut req = finish_req(
        run,
        parent,
        u64::from(k) + 1,
        RunStatus::Succeeded,
        Some(t0 + MIN * (k + 1)),
    );
    req.releases = children
        .iter()
        .map(|c| Release::new(jid(c), from.clone()))
        .collect();
    (finish_one(store, req).await, from)
}

/// Asserts that `id`'s next fire is the release of `from`, due at the store's
/// instant of the write that made it (between `before` and `after`).
async fn assert_released(
    store: &dyn JobStore,
    id: &str,
    from: &UpstreamRun,
    before: Timestamp,
    what: &str,
) -> FireState {
    let after = store.now().await.unwrap();
    let next = record(store, id)
        .await
        .next
        .unwrap_or_else(|| panic!("{what}: {id} has the released fire as its next"));
    assert_eq!(next.trigger, TriggerKind::Upstream, "{what}: trigger");
    assert_eq!(next.attempt, 0, "{what}: a fresh attempt");
    assert_eq!(
        next.context.upstream,
        vec![from.clone()],
        "{what}: names the run"
    );
    assert!(
        next.at >= before && next.at <= after,
        "{what}: due at the store's instant of the write ({} not in {before}..{after})",
        next.at
    );
    next
}

/// A finish's releases are written with it: a child that can take one at once
/// (idle, no fire or a later scheduled one) is made due with trigger `Upstream` and
/// the upstream run in its context; a busy child queues it, once per key, and takes
/// the oldest at its own finish; a paused child keeps it queued until it is resumed
/// (and [`take_releases`](crate::store::Jobs::take_releases) finds nothing left); a
/// release for a missing job is not queued; removing a job drops its queue; a refused finish
/// writes no release.
pub async fn releases_are_queued_once_and_taken_in_order(store: &dyn JobStore) {
    let p = unique("parent");
    let (c, d, gone) = (unique("child-never"), unique("child-sched"), unique("gone"));
    let t0 = long_ago(store).await;
    store.upsert(&job(&p), Some(t0)).await.unwrap();
    let never = job(&c)
        .to_builder()
        .schedule(Schedule::never())
        .build()
        .unwrap();
    store.upsert(&never, None).await.unwrap();
    let far = store.now().await.unwrap() + Duration::from_secs(86_400 * 365);
    store.upsert(&job(&d), Some(far)).await.unwrap();

    // 1. Both children are idle: each takes its release at once.
    let before = store.now().await.unwrap();
    let (out, from0) = parent_fire(store, &p, t0, 0, &[&c, &d, &gone]).await;
    assert!(matches!(out, FinishOutcome::Finished { .. }), "{out:?}");
    let fire_c = assert_released(store, &c, &from0, before, "never-child").await;
    assert_released(
        store,
        &d,
        &from0,
        before,
        "a later scheduled fire gives way",
    )
    .await;
    assert!(
        store
            .releases(Some(&jid(&gone)), 10)
            .await
            .unwrap()
            .is_empty(),
        "no queue for a job that does not exist"
    );
    assert!(store.get(&jid(&gone)).await.unwrap().is_none());
    assert!(
        store.releases(Some(&jid(&c)), 10).await.unwrap().is_empty(),
        "a taken release leaves the queue"
    );

    // 2. The child runs its released fire; releases meanwhile are queued, each key
    // once (a repeated release of the same upstream fire is ignored).
    let mut req = start_req(&c, fire_c.at, 1, 1);
    req.trigger = TriggerKind::Upstream;
    req.context = fire_c.context.clone();
    let run_c = started(store, req).await;
    let ran = super::store::run_of(store, &c, run_c).await;
    assert_eq!(
        ran.context.upstream,
        vec![from0.clone()],
        "the run names it"
    );
    assert_eq!(ran.trigger, TriggerKind::Upstream);
    let (_, from1) = parent_fire(store, &p, t0, 1, &[&c]).await;
    let (_, from2) = parent_fire(store, &p, t0, 2, &[&c]).await;
    let queued = store.releases(Some(&jid(&c)), 10).await.unwrap();
    assert_eq!(
        queued.iter().map(|q| q.from.clone()).collect::<Vec<_>>(),
        vec![from1.clone(), from2.clone()],
        "queued in order while the child runs"
    );
    assert!(queued.iter().all(|q| q.job == jid(&c)));
    assert_eq!(
        record(store, &c).await.next,
        Some(fire_c.clone()),
        "nothing taken while running (the running fire stays the job's next)"
    );
    // The same upstream fire released again (a repeated finish of another run
    // naming the same fire) is not queued twice.
    let run = started(store, start_req(&p, t0 + MIN * 3, 1, 4)).await;
    let mut again = finish_req(run, &p, 4, RunStatus::Succeeded, Some(t0 + MIN * 4));
    again.releases = vec![Release::new(jid(&c), from1.clone())];
    finish_one(store, again).await;
    assert_eq!(
        store.releases(Some(&jid(&c)), 10).await.unwrap().len(),
        2,
        "one per key"
    );

    // A refused finish writes no release.
    let mut refused = finish_req(run, &p, 4, RunStatus::Succeeded, None);
    refused.releases = vec![Release::new(
        jid(&c),
        UpstreamRun {
            fire_at: t0 + MIN * 99,
            ..from1.clone()
        },
    )];
    assert!(matches!(
        finish_one(store, refused).await,
        FinishOutcome::Refused(_)
    ));
    assert_eq!(store.releases(Some(&jid(&c)), 10).await.unwrap().len(), 2);

    // 3. The child's finish takes the oldest.
    let before = store.now().await.unwrap();
    finish_one(store, finish_req(run_c, &c, 1, RunStatus::Succeeded, None)).await;
    let fire_c = assert_released(store, &c, &from1, before, "the child's finish").await;
    let left = store.releases(Some(&jid(&c)), 10).await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].from, from2);
    // A pending released fire goes first: a pass takes nothing.
    assert_eq!(store.take_releases(100).await.unwrap(), 0);

    // 4. Paused during a released run: the child keeps the queue and holds no
    // released fire; resumed, it takes one at once.
    let mut req = start_req(&c, fire_c.at, 1, 2);
    req.trigger = TriggerKind::Upstream;
    let run_c = started(store, req).await;
    store.set_enabled(&jid(&c), false, None).await.unwrap();
    finish_one(store, {
        let mut f = finish_req(run_c, &c, 2, RunStatus::Succeeded, None);
        f.version = 1;
        f
    })
    .await;
    assert_eq!(
        store.releases(Some(&jid(&c)), 10).await.unwrap().len(),
        1,
        "a paused job takes nothing"
    );
    assert_eq!(
        record(store, &c).await.next,
        None,
        "a paused job holds no release"
    );
    let before = store.now().await.unwrap();
    store.set_enabled(&jid(&c), true, None).await.unwrap();
    assert_released(store, &c, &from2, before, "a resume takes it at once").await;
    assert_eq!(
        store.take_releases(100).await.unwrap(),
        0,
        "nothing left to take"
    );
    assert!(store.releases(Some(&jid(&c)), 10).await.unwrap().is_empty());
    assert!(
        store
            .releases(None, 1000)
            .await
            .unwrap()
            .iter()
            .all(|q| q.job != jid(&c)),
        "every job's list agrees"
    );

    // 5. Removing a job drops its queue.
    let (_, _) = parent_fire(store, &p, t0, 4, &[&c]).await;
    assert_eq!(store.releases(Some(&jid(&c)), 10).await.unwrap().len(), 1);
    store.remove(&jid(&c)).await.unwrap();
    assert!(store.releases(Some(&jid(&c)), 10).await.unwrap().is_empty());
    store.upsert(&never, None).await.unwrap();
    assert_eq!(
        record(store, &c).await.next,
        None,
        "a job created again starts with no queue"
    );
    assert_eq!(store.take_releases(100).await.unwrap(), 0);
    cleanup(store, &[p, c, d]).await;
}

/// A job that waits for several parents (`after`) takes their releases of one
/// instant together, once all are queued, as one fire whose context lists every
/// releasing run in the order of `after`; an instant some parent has not released
/// stays queued. Two parents finishing at once, concurrently, release it once.
pub async fn a_fan_in_takes_every_parents_release_of_one_instant_once(store: &dyn JobStore) {
    let (b, c, d) = (unique("fan-b"), unique("fan-c"), unique("fan-d"));
    let t0 = long_ago(store).await;
    for p in [&b, &c] {
        store.upsert(&job(p), Some(t0)).await.unwrap();
    }
    let fan = job(&d)
        .to_builder()
        .schedule(Schedule::never())
        .after(vec![jid(&b), jid(&c)])
        .build()
        .unwrap();
    store.upsert(&fan, None).await.unwrap();
    let upstream_of = |next: &FireState| {
        next.context
            .upstream
            .iter()
            .map(|u| (u.job.to_string(), u.fire_at))
            .collect::<Vec<_>>()
    };
    let mut token = 1;
    // Runs d's released fire to its end.
    async fn run_released(store: &dyn JobStore, d: &str, next: &FireState, token: u64) {
        let mut req = start_req(d, next.at, 1, token);
        req.trigger = TriggerKind::Upstream;
        let run = started(store, req).await;
        finish_one(store, finish_req(run, d, token, RunStatus::Succeeded, None)).await;
    }

    // b releases instants 0 and 1: neither is whole.
    parent_fire(store, &b, t0, 0, &[&d]).await;
    parent_fire(store, &b, t0, 1, &[&d]).await;
    assert_eq!(record(store, &d).await.next, None, "waits for c");
    assert_eq!(store.releases(Some(&jid(&d)), 10).await.unwrap().len(), 2);
    assert_eq!(
        store.take_releases(100).await.unwrap(),
        0,
        "nothing whole to take"
    );
    // c releases instant 0: that instant is whole and taken, both runs named.
    parent_fire(store, &c, t0, 0, &[&d]).await;
    let next = record(store, &d).await.next.expect("released");
    assert_eq!(next.trigger, TriggerKind::Upstream);
    assert_eq!(upstream_of(&next), vec![(b.clone(), t0), (c.clone(), t0)]);
    let left = store.releases(Some(&jid(&d)), 10).await.unwrap();
    assert_eq!(
        left.iter()
            .map(|q| (q.from.job.to_string(), q.from.fire_at))
            .collect::<Vec<_>>(),
        vec![(b.clone(), t0 + MIN)],
        "the other instant stays"
    );
    run_released(store, &d, &next, token).await;
    token += 1;
    assert_eq!(record(store, &d).await.next, None, "instant 1 is not whole");
    // c releases instant 1 as well: taken.
    parent_fire(store, &c, t0, 1, &[&d]).await;
    let next = record(store, &d).await.next.expect("released");
    assert_eq!(
        upstream_of(&next),
        vec![(b.clone(), t0 + MIN), (c.clone(), t0 + MIN)]
    );
    run_released(store, &d, &next, token).await;
    token += 1;

    // b and c finish the same instant at once: d is released once for it.
    for k in 2..6 {
        let child = [d.as_str()];
        let (x, y) = tokio::join!(
            parent_fire(store, &b, t0, k, &child),
            parent_fire(store, &c, t0, k, &child)
        );
        for (out, _) in [&x, &y] {
            assert!(matches!(out, FinishOutcome::Finished { .. }), "{out:?}");
        }
        let next = record(store, &d)
            .await
            .next
            .expect("released once both finished");
        let at = t0 + MIN * k;
        assert_eq!(
            upstream_of(&next),
            vec![(b.clone(), at), (c.clone(), at)],
            "race {k}"
        );
        assert!(
            store.releases(Some(&jid(&d)), 10).await.unwrap().is_empty(),
            "race {k}: both releases were taken together"
        );
        run_released(store, &d, &next, token).await;
        token += 1;
        assert_eq!(
            record(store, &d).await.next,
            None,
            "race {k}: released once"
        );
    }
    cleanup(store, &[b, c, d]).await;
}

/// An operator's release of an instant in place of the parents that did not
/// release it is queued and taken as a finish's would be, with its audit entry in
/// the same step; a skip drops the instant's releases (audited only when it dropped
/// any).
pub async fn operators_release_and_skip_instants(store: &dyn JobStore) {
    let (b, c, d) = (unique("op-b"), unique("op-c"), unique("op-d"));
    let t0 = long_ago(store).await;
    store.upsert(&job(&b), Some(t0)).await.unwrap();
    let fan = job(&d)
        .to_builder()
        .schedule(Schedule::never())
        .after(vec![jid(&b), jid(&c)])
        .build()
        .unwrap();
    store.upsert(&fan, None).await.unwrap();
    let entry = |action: &str| crate::record::AuditEntry {
        actor: "ops@example.com".into(),
        action: action.into(),
        target: d.clone(),
        before: None,
        after: None,
    };
    let audited = |action: &'static str| {
        let target = d.clone();
        async move {
            store
                .audit(&crate::store::AuditQuery::new(100).target(Some(target)))
                .await
                .unwrap()
                .iter()
                .filter(|r| r.entry.action == action)
                .count()
        }
    };
    let (_, from_b) = parent_fire(store, &b, t0, 0, &[&d]).await;
    let in_place = UpstreamRun {
        job: jid(&c),
        fire_at: t0,
        run: RunId(0),
        status: RunStatus::Succeeded,
        depth: 1,
        released_by: Some("ops@example.com".into()),
        window: None,
    };
    store
        .queue_releases(
            &[Release::new(jid(&d), in_place.clone())],
            Some(&entry("job.release")),
        )
        .await
        .unwrap();
    let next = record(store, &d).await.next.expect("released");
    assert_eq!(next.trigger, TriggerKind::Upstream);
    assert_eq!(next.context.upstream, vec![from_b, in_place]);
    assert_eq!(audited("job.release").await, 1, "audited with the release");

    // A skip drops the instant's releases, audited; a skip of nothing is not.
    parent_fire(store, &b, t0, 1, &[&d]).await;
    assert_eq!(store.releases(Some(&jid(&d)), 10).await.unwrap().len(), 1);
    let n = store
        .drop_releases(&jid(&d), t0 + MIN, Some(&entry("job.skip")))
        .await
        .unwrap();
    assert_eq!(n, 1);
    assert!(store.releases(Some(&jid(&d)), 10).await.unwrap().is_empty());
    let n = store
        .drop_releases(&jid(&d), t0 + MIN, Some(&entry("job.skip")))
        .await
        .unwrap();
    assert_eq!(n, 0);
    assert_eq!(
        audited("job.skip").await,
        1,
        "only the skip that dropped some"
    );
    cleanup(store, &[b, d]).await;
}

/// A change that replaces a job's next fire while that fire is a taken release not
/// yet started puts the release back in the queue: a resume and an upsert let the
/// job take it again at once, a trigger's manual fire goes first and the release
/// after it.
pub async fn a_change_returns_a_taken_release(store: &dyn JobStore) {
    let (p, c) = (unique("back-p"), unique("back-c"));
    let t0 = long_ago(store).await;
    store.upsert(&job(&p), Some(t0)).await.unwrap();
    let never = job(&c)
        .to_builder()
        .schedule(Schedule::never())
        .build()
        .unwrap();
    store.upsert(&never, None).await.unwrap();
    let (_, from) = parent_fire(store, &p, t0, 0, &[&c]).await;
    let released = |what: &'static str| {
        let c = c.clone();
        let from = from.clone();
        async move {
            let next = record(store, &c).await.next;
            let next = next.unwrap_or_else(|| panic!("{what}: the release is the next fire"));
            assert_eq!(next.trigger, TriggerKind::Upstream, "{what}");
            assert_eq!(next.context.upstream, vec![from], "{what}");
            assert!(
                store.releases(Some(&jid(&c)), 10).await.unwrap().is_empty(),
                "{what}: taken again"
            );
            next
        }
    };
    released("taken").await;
    // Paused before it started: back in the queue, the job holds no released fire;
    // resumed: taken again.
    store.set_enabled(&jid(&c), false, None).await.unwrap();
    assert_eq!(
        record(store, &c).await.next,
        None,
        "a paused job holds no release"
    );
    assert_eq!(store.releases(Some(&jid(&c)), 10).await.unwrap().len(), 1);
    store.set_enabled(&jid(&c), true, None).await.unwrap();
    released("after a resume").await;
    // Its definition changed: taken again.
    let changed = never
        .to_builder()
        .payload(serde_json::json!({"v": 2}))
        .build()
        .unwrap();
    store.upsert(&changed, None).await.unwrap();
    let next = released("after an upsert").await;
    // Triggered: the manual fire first, the release queued behind it.
    store.trigger(&jid(&c), next.at, None).await.unwrap();
    let manual = record(store, &c).await.next.unwrap();
    assert_eq!(manual.trigger, TriggerKind::Manual);
    let queued = store.releases(Some(&jid(&c)), 10).await.unwrap();
    assert_eq!(queued.len(), 1, "back in the queue");
    assert_eq!(queued[0].from, from);
    let version = record(store, &c).await.version;
    let mut req = start_req(&c, manual.at, version, 1);
    req.trigger = TriggerKind::Manual;
    let run = started(store, req).await;
    let mut end = finish_req(run, &c, 1, RunStatus::Succeeded, None);
    end.version = version;
    finish_one(store, end).await;
    let next = released("after the manual run").await;
    // A started release goes with its run: a trigger during it returns nothing.
    let mut req = start_req(&c, next.at, version, 2);
    req.trigger = TriggerKind::Upstream;
    started(store, req).await;
    store.trigger(&jid(&c), next.at, None).await.unwrap();
    assert!(store.releases(Some(&jid(&c)), 10).await.unwrap().is_empty());
    cleanup(store, &[p, c]).await;
}
