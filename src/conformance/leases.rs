//! Checks of [`JobLeases`](crate::store::JobLeases), for a store that keeps each
//! job's lease in its row: a claim agrees with [`rules::claim`] in every state and
//! takes at most the wanted candidates in their order; leases are exclusive, fenced
//! and owner-checked; a finish frees or keeps the lease in its own write; claims
//! racing over the same fires start each once; a removed job's running run stays in
//! the log and finishes.

use super::store::{cleanup, finish_one, finish_req, jid, job, long_ago};
use super::unique;
use crate::lock::{Lease, LockRequest};
use crate::record::*;
use crate::store::JobsExt as _;
use crate::store::rules::{self, JobState};
use crate::store::{DueQuery, JobLeases, JobStore, RunQuery};
use crate::time::Timestamp;
use std::time::Duration;

/// The store's job leases; the checks are called only for a store that has them.
fn leases(store: &dyn JobStore) -> &dyn JobLeases {
    store
        .job_leases()
        .expect("the job lease checks run on a store with job leases")
}

/// A claim of job `id`'s fire at `fire_at` (definition version `version`) for `node`,
/// its lease for `ttl`.
fn claim_req(id: &str, fire_at: Timestamp, version: u64, node: &str, ttl: Duration) -> ClaimRun {
    ClaimRun {
        job_id: jid(id),
        fire_at,
        version,
        node: node.into(),
        attempt: 1,
        trigger: TriggerKind::Schedule,
        covers: None,
        context: FireContext::default(),
        ttl,
    }
}

async fn claim(store: &dyn JobStore, reqs: &[ClaimRun], want: usize) -> Vec<ClaimOutcome> {
    let out = leases(store)
        .claim_runs(reqs, want)
        .await
        .expect("claim_runs");
    assert_eq!(out.len(), reqs.len(), "one outcome per candidate");
    out
}

fn lease_req(id: &str, ttl: Duration) -> LockRequest {
    LockRequest {
        key: id.to_string(),
        ttl,
    }
}

async fn state(store: &dyn JobStore, id: &str) -> Option<JobState> {
    store
        .get(&jid(id))
        .await
        .unwrap()
        .as_ref()
        .map(JobState::from)
}

async fn running_runs(store: &dyn JobStore, id: &str) -> Vec<RunRecord> {
    store
        .runs(&RunQuery::new().job(jid(id)).status(RunStatus::Running))
        .await
        .unwrap()
}

/// Every claim condition, alone and together — no job, paused, another version,
/// running, another fire, the lease held by another node, held but expired: the
/// store claims exactly when [`rules::claim`] says so and refuses with its reason;
/// a claim grants a token past the job's last one, which becomes its last token,
/// records the run `Running` under it (listed by the run log, on the claiming node)
/// and takes the job out of the due fires.
pub async fn claim_rules_agree(store: &dyn JobStore) {
    let p = unique("rules-claim");
    let t0 = long_ago(store).await;
    let hour = Duration::from_secs(3600);
    let mut n = 0;
    for removed in [false, true] {
        for paused in [false, true] {
            for running in [false, true] {
                for stale_version in [false, true] {
                    for other_fire in [false, true] {
                        for lease in ["free", "held", "expired"] {
                            n += 1;
                            let id = format!("{p}-{n}");
                            store.upsert(&job(&id), Some(t0)).await.unwrap();
                            if running {
                                let out = claim(
                                    store,
                                    &[claim_req(&id, t0, 1, "node-x", Duration::from_millis(1))],
                                    1,
                                )
                                .await;
                                assert!(
                                    matches!(out[0], ClaimOutcome::Started { .. }),
                                    "{id}: {out:?}"
                                );
                            }
                            match lease {
                                "held" | "expired" if !running => {
                                    let ttl = if lease == "held" {
                                        hour
                                    } else {
                                        Duration::from_millis(1)
                                    };
                                    let got = leases(store)
                                        .acquire_jobs("node-x", &[lease_req(&id, ttl)])
                                        .await
                                        .unwrap();
                                    assert!(got[0].is_some(), "{id}: a free lease is granted");
                                }
                                _ => {}
                            }
                            if paused {
                                store.set_enabled(&jid(&id), false, None).await.unwrap();
                            }
                            if removed {
                                store.remove(&jid(&id)).await.unwrap();
                            }
                            // Expired leases: let them lapse.
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            let before = state(store, &id).await;
                            let version = before.as_ref().map_or(1, |s| s.version);
                            let req = claim_req(
                                &id,
                                if other_fire {
                                    t0 + Duration::from_secs(1)
                                } else {
                                    t0
                                },
                                if stale_version { version + 1 } else { version },
                                "node-a",
                                hour,
                            );
                            let free = lease != "held" || running;
                            // A running job's lease was claimed for 1 ms: lapsed, so
                            // the job's run decides (`Running`).
                            let want = rules::claim(before.as_ref(), free, &req);
                            let got = claim(store, std::slice::from_ref(&req), 1).await;
                            let what = format!(
                                "{id} (removed {removed}, paused {paused}, running {running}, stale {stale_version}, other fire {other_fire}, lease {lease})"
                            );
                            match (&want, &got[0]) {
                                (
                                    Ok(()),
                                    ClaimOutcome::Started {
                                        run_id,
                                        started_at,
                                        lease,
                                    },
                                ) => {
                                    let before = before.expect("a claimed job exists");
                                    let after = state(store, &id).await.unwrap();
                                    assert!(
                                        lease.token > before.last_token,
                                        "{what}: the token is new"
                                    );
                                    assert_eq!(after.last_token, lease.token, "{what}");
                                    assert_eq!(after.running, Some(*run_id), "{what}");
                                    assert_eq!(lease.owner, "node-a", "{what}");
                                    assert_eq!(lease.key, id, "{what}");
                                    assert!(lease.expires_at > *started_at, "{what}");
                                    let runs = running_runs(store, &id).await;
                                    assert_eq!(runs.len(), 1, "{what}: one running run");
                                    assert_eq!(runs[0].id, *run_id, "{what}");
                                    assert_eq!(runs[0].token, lease.token, "{what}");
                                    assert_eq!(runs[0].node, "node-a", "{what}");
                                    assert_eq!(runs[0].fire_at, t0, "{what}");
                                    assert_eq!(runs[0].started_at, *started_at, "{what}");
                                    let due = store.due(&DueQuery::new(t0, 100_000)).await.unwrap();
                                    assert!(
                                        !due.items.iter().any(|f| f.job_id.as_str() == id),
                                        "{what}: a claimed job is not due"
                                    );
                                }
                                (Err(w), ClaimOutcome::Refused(g)) => {
                                    assert_eq!(w, g, "{what}: the store's reason differs");
                                    assert_eq!(
                                        state(store, &id).await,
                                        before,
                                        "{what}: a refused claim writes nothing"
                                    );
                                }
                                (want, got) => {
                                    panic!("{what}: rules say {want:?}, the store {got:?}")
                                }
                            }
                            cleanup(store, &[id]).await;
                        }
                    }
                }
            }
        }
    }
}

/// A claim takes up to `want` of its candidates, in their order, skipping the ones
/// it may not claim: the rest are `Left`; a job named twice is decided by its first
/// candidate.
pub async fn claims_take_at_most_want_in_order(store: &dyn JobStore) {
    let p = unique("claim-want");
    let t0 = long_ago(store).await;
    let hour = Duration::from_secs(3600);
    let ids: Vec<String> = (0..6).map(|i| format!("{p}-{i}")).collect();
    for id in &ids {
        store.upsert(&job(id), Some(t0)).await.unwrap();
    }
    // The second is paused: refused, and it does not count.
    store.set_enabled(&jid(&ids[1]), false, None).await.unwrap();
    let mut reqs: Vec<ClaimRun> = ids
        .iter()
        .map(|id| claim_req(id, t0, if id == &ids[1] { 2 } else { 1 }, "node-a", hour))
        .collect();
    // The first again, after it: refused, the first decided.
    reqs.insert(2, claim_req(&ids[0], t0, 1, "node-a", hour));
    let out = claim(store, &reqs, 3).await;
    let kinds: Vec<&str> = out
        .iter()
        .map(|o| match o {
            ClaimOutcome::Started { .. } => "started",
            ClaimOutcome::Refused(_) => "refused",
            ClaimOutcome::Left => "left",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "started", "refused", "refused", "started", "started", "left", "left"
        ],
        "{out:?}"
    );
    assert_eq!(out[1], ClaimOutcome::Refused(StartRefusal::Disabled));
    assert_eq!(out[2], ClaimOutcome::Refused(StartRefusal::Running));
    for id in &ids[4..] {
        assert!(
            running_runs(store, id).await.is_empty(),
            "{id}: a candidate left is not started"
        );
    }
    cleanup(store, &ids).await;
}

/// Leases in job rows are exclusive (the holder included), fenced (each grant's
/// token past the job's last one, which it becomes), owner- and token-checked on
/// renewal and release, expire, and keep a leased job out of the due fires while
/// they last; a key no job has is granted and excludes nothing.
pub async fn job_leases_are_exclusive_and_fenced(store: &dyn JobStore) {
    let p = unique("job-leases");
    let t0 = long_ago(store).await;
    let l = leases(store);
    let id = format!("{p}-a");
    store.upsert(&job(&id), Some(t0)).await.unwrap();
    let before = state(store, &id).await.unwrap().last_token;
    let hour = Duration::from_secs(3600);
    let a = l
        .acquire_jobs("node-a", &[lease_req(&id, hour)])
        .await
        .unwrap()[0]
        .clone()
        .expect("a free lease is granted");
    assert!(a.token > before, "the token is past the job's last one");
    assert_eq!(state(store, &id).await.unwrap().last_token, a.token);
    for who in ["node-a", "node-b"] {
        assert_eq!(
            l.acquire_jobs(who, &[lease_req(&id, hour)]).await.unwrap(),
            [None],
            "{who}: a held lease is not granted"
        );
    }
    let due = store.due(&DueQuery::new(t0, 100_000)).await.unwrap();
    assert!(
        !due.items.iter().any(|f| f.job_id.as_str() == id),
        "a leased job is not due"
    );
    // Renewal and release check the owner and the token.
    let wrong_owner = Lease {
        owner: "node-b".into(),
        ..a.clone()
    };
    let wrong_token = Lease {
        token: a.token - 1,
        ..a.clone()
    };
    assert_eq!(
        l.renew_jobs(&[wrong_owner.clone(), wrong_token.clone()], hour)
            .await
            .unwrap(),
        [None, None]
    );
    assert_eq!(
        l.release_jobs(&[wrong_owner, wrong_token]).await.unwrap(),
        [false, false]
    );
    let renewed = l.renew_jobs(std::slice::from_ref(&a), hour).await.unwrap()[0]
        .clone()
        .expect("the holder renews");
    assert_eq!(renewed.token, a.token, "a renewal keeps the token");
    assert_eq!(l.release_jobs(&[renewed]).await.unwrap(), [true]);
    let due = store.due(&DueQuery::new(t0, 100_000)).await.unwrap();
    assert!(
        due.items.iter().any(|f| f.job_id.as_str() == id),
        "a released job is due again"
    );
    // Expiry: a short lease lapses, and the next grant's token is greater.
    let short = l
        .acquire_jobs("node-a", &[lease_req(&id, Duration::from_millis(50))])
        .await
        .unwrap()[0]
        .clone()
        .expect("granted");
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(
        l.renew_jobs(std::slice::from_ref(&short), hour)
            .await
            .unwrap(),
        [None],
        "an expired lease is not renewed"
    );
    let b = l
        .acquire_jobs("node-b", &[lease_req(&id, hour)])
        .await
        .unwrap()[0]
        .clone()
        .expect("an expired lease is granted again");
    assert!(b.token > short.token, "tokens increase");
    assert_eq!(l.release_jobs(&[short]).await.unwrap(), [false]);
    // No job: granted to anyone, and it excludes nothing.
    let none = format!("{p}-none");
    let x = l
        .acquire_jobs("node-a", &[lease_req(&none, hour)])
        .await
        .unwrap();
    let y = l
        .acquire_jobs("node-b", &[lease_req(&none, hour)])
        .await
        .unwrap();
    assert!(x[0].is_some() && y[0].is_some(), "{x:?} {y:?}");
    cleanup(store, &[id]).await;
}

/// A finish written with [`LeaseEnd::Release`] frees the lease in the same step (any
/// node may claim the job's next fire at once); one with [`LeaseEnd::Keep`] keeps it
/// with its holder and token (no other node may); one left `Untouched` leaves it.
pub async fn a_finish_frees_or_keeps_the_lease(store: &dyn JobStore) {
    let p = unique("finish-lease");
    let t0 = long_ago(store).await;
    let hour = Duration::from_secs(3600);
    for (k, end) in [
        LeaseEnd::Release,
        LeaseEnd::Keep(Duration::from_secs(600)),
        LeaseEnd::Untouched,
    ]
    .into_iter()
    .enumerate()
    {
        let id = format!("{p}-{k}");
        store.upsert(&job(&id), Some(t0)).await.unwrap();
        let out = claim(store, &[claim_req(&id, t0, 1, "node-a", hour)], 1).await;
        let ClaimOutcome::Started { run_id, lease, .. } = out[0].clone() else {
            panic!("{id}: {out:?}");
        };
        let next = t0 + Duration::from_secs(60);
        let mut req = finish_req(run_id, &id, lease.token, RunStatus::Succeeded, Some(next));
        req.lease = end;
        assert!(matches!(
            finish_one(store, req).await,
            FinishOutcome::Finished {
                rescheduled: true,
                ..
            }
        ));
        let other = leases(store)
            .acquire_jobs("node-b", &[lease_req(&id, hour)])
            .await
            .unwrap();
        match end {
            LeaseEnd::Release => {
                assert!(other[0].is_some(), "{id}: released by the finish");
            }
            _ => {
                assert_eq!(other, [None], "{id} ({end:?}): still held");
                let renewed = leases(store)
                    .renew_jobs(std::slice::from_ref(&lease), hour)
                    .await
                    .unwrap();
                assert!(renewed[0].is_some(), "{id} ({end:?}): held by its holder");
            }
        }
        let runs = store.runs(&RunQuery::new().job(jid(&id))).await.unwrap();
        assert_eq!(runs.len(), 1, "{id}: one run");
        assert_eq!(runs[0].status, RunStatus::Succeeded, "{id}");
        assert_eq!(runs[0].token, lease.token, "{id}");
        assert!(runs[0].ended_at.is_some(), "{id}");
        cleanup(store, &[id]).await;
    }
}

/// Claims racing over the same candidates (four claimers, each wanting all of
/// them, in different orders) start every fire exactly once.
pub async fn racing_claims_start_each_fire_once(store: &dyn JobStore) {
    let p = unique("claim-race");
    let t0 = long_ago(store).await;
    let hour = Duration::from_secs(3600);
    let ids: Vec<String> = (0..40).map(|i| format!("{p}-{i:02}")).collect();
    for id in &ids {
        store.upsert(&job(id), Some(t0)).await.unwrap();
    }
    let calls = (0..4).map(|k| {
        let mut order: Vec<&String> = ids.iter().collect();
        order.rotate_left(k * 10);
        let reqs: Vec<ClaimRun> = order
            .iter()
            .map(|id| claim_req(id, t0, 1, &format!("node-{k}"), hour))
            .collect();
        async move { leases(store).claim_runs(&reqs, reqs.len()).await }
    });
    let outs = futures::future::join_all(calls).await;
    let started: usize = outs
        .iter()
        .map(|o| {
            o.as_ref()
                .expect("claim_runs")
                .iter()
                .filter(|c| matches!(c, ClaimOutcome::Started { .. }))
                .count()
        })
        .sum();
    assert_eq!(started, ids.len(), "every fire started once: {outs:?}");
    for id in &ids {
        assert_eq!(running_runs(store, id).await.len(), 1, "{id}: one run");
    }
    cleanup(store, &ids).await;
}

/// A job removed while its claimed run runs: the run stays in the log as running,
/// its lease excludes nothing (a renewal goes on), and its finish records it.
pub async fn a_removed_jobs_claimed_run_finishes(store: &dyn JobStore) {
    let p = unique("claim-removed");
    let t0 = long_ago(store).await;
    let hour = Duration::from_secs(3600);
    let id = format!("{p}-a");
    store.upsert(&job(&id), Some(t0)).await.unwrap();
    let out = claim(store, &[claim_req(&id, t0, 1, "node-a", hour)], 1).await;
    let ClaimOutcome::Started { run_id, lease, .. } = out[0].clone() else {
        panic!("{out:?}");
    };
    store.remove(&jid(&id)).await.unwrap();
    let runs = running_runs(store, &id).await;
    assert_eq!(runs.len(), 1, "the run stays in the log");
    assert_eq!((runs[0].id, runs[0].token), (run_id, lease.token));
    assert!(
        leases(store)
            .renew_jobs(std::slice::from_ref(&lease), hour)
            .await
            .unwrap()[0]
            .is_some(),
        "the run's lease is renewed"
    );
    let mut req = finish_req(run_id, &id, lease.token, RunStatus::Succeeded, None);
    req.lease = LeaseEnd::Release;
    assert!(matches!(
        finish_one(store, req).await,
        FinishOutcome::Finished {
            rescheduled: false,
            ..
        }
    ));
    let runs = store.runs(&RunQuery::new().job(jid(&id))).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, RunStatus::Succeeded);
}
