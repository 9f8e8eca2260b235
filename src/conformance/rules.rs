//! Table-driven agreement with [`store::rules`](crate::store::rules): every
//! combination of job state, run state and request is driven through the store, and
//! the store's decision must be the rules' decision for the state it was in.

use super::store::{
    cleanup, finish_one, finish_req, jid, job, long_ago, record, start_one, start_req, started,
};
use super::unique;
use crate::record::*;
use crate::schedule::Schedule;
use crate::store::JobsExt as _;
use crate::store::rules::{self, JobState, RunState};
use crate::store::{JobStore, RunQuery};
use std::time::Duration;

/// The state of job `id` as the rules read it (`None`: no such job).
async fn job_state(store: &dyn JobStore, id: &str) -> Option<JobState> {
    store
        .get(&jid(id))
        .await
        .unwrap()
        .as_ref()
        .map(JobState::from)
}

/// The state of run `run` of job `id` as the rules read it.
async fn run_state(store: &dyn JobStore, id: &str, run: RunId) -> Option<RunState> {
    store
        .runs(&RunQuery::new().job(jid(id)).limit(1000))
        .await
        .unwrap()
        .iter()
        .find(|r| r.id == run)
        .map(RunState::from)
}

/// How many runs job `id` has.
async fn run_count(store: &dyn JobStore, id: &str) -> usize {
    store
        .runs(&RunQuery::new().job(jid(id)).limit(1000))
        .await
        .unwrap()
        .len()
}

/// Every start condition, alone and together (a repeat of the start that recorded
/// the running run among them): the store starts exactly when
/// [`rules::start`] says so, and refuses with the reason it gives.
pub async fn start_rules_agree(store: &dyn JobStore) {
    let p = unique("rules-start");
    let t0 = long_ago(store).await;
    let mut n = 0;
    for removed in [false, true] {
        for paused in [false, true] {
            for running in [false, true] {
                for stale_version in [false, true] {
                    for other_fire in [false, true] {
                        for token in [4u64, 5, 6] {
                            n += 1;
                            let id = format!("{p}-{n}");
                            store.upsert(&job(&id), Some(t0)).await.unwrap();
                            // last_token 5, due at t0, idle.
                            let run = started(store, start_req(&id, t0, 1, 5)).await;
                            finish_one(
                                store,
                                finish_req(run, &id, 5, RunStatus::Succeeded, Some(t0)),
                            )
                            .await;
                            // Running a run the request `(t0, token 5, attempt 1)`
                            // recorded: the same request again is a repeat.
                            let running_run = if running {
                                Some(started(store, start_req(&id, t0, 1, 5)).await)
                            } else {
                                None
                            };
                            if paused {
                                store.set_enabled(&jid(&id), false, None).await.unwrap();
                            }
                            if removed {
                                store.remove(&jid(&id)).await.unwrap();
                            }
                            let state = job_state(store, &id).await;
                            let version = state.as_ref().map_or(1, |s| s.version);
                            let req = start_req(
                                &id,
                                if other_fire {
                                    t0 + Duration::from_secs(1)
                                } else {
                                    t0
                                },
                                if stale_version {
                                    version.saturating_sub(1).max(1) + u64::from(version == 1)
                                } else {
                                    version
                                },
                                token,
                            );
                            let run = match running_run {
                                Some(r) => run_state(store, &id, r).await,
                                None => None,
                            };
                            let runs_before = run_count(store, &id).await;
                            let want = rules::start(state.as_ref(), run.as_ref(), &req);
                            let got = start_one(store, req.clone()).await;
                            match (&want, &got) {
                                (
                                    Ok(rules::Admit::Recorded),
                                    StartOutcome::Started { run_id, .. },
                                ) => {
                                    assert_eq!(
                                        Some(*run_id),
                                        running_run,
                                        "{id}: a repeated start is answered with its run"
                                    );
                                    assert_eq!(
                                        run_count(store, &id).await,
                                        runs_before,
                                        "{id}: a repeated start writes no run"
                                    );
                                    assert_eq!(
                                        job_state(store, &id).await,
                                        state,
                                        "{id}: a repeated start leaves the job as it was"
                                    );
                                }
                                (Ok(rules::Admit::Record), StartOutcome::Started { .. }) => {
                                    let after = record(store, &id).await;
                                    assert_eq!(
                                        after.last_token, token,
                                        "{id}: a start sets last_token"
                                    );
                                    assert!(
                                        after.running.is_some(),
                                        "{id}: a start marks the job running"
                                    );
                                }
                                (Err(w), StartOutcome::Refused(g)) => assert_eq!(
                                    w, g,
                                    "{id}: state {state:?}, request {req:?}: the store's reason differs from the rules'"
                                ),
                                _ => panic!(
                                    "{id}: state {state:?}, request {req:?}: rules say {want:?}, the store {got:?}"
                                ),
                            }
                            cleanup(store, &[id]).await;
                        }
                    }
                }
            }
        }
    }
    // Two starts of one job in one batch: the second finds it running.
    let id = format!("{p}-batch");
    store.upsert(&job(&id), Some(t0)).await.unwrap();
    let reqs = [start_req(&id, t0, 1, 1), start_req(&id, t0, 1, 2)];
    let got = store.start_runs(&reqs).await.unwrap();
    assert!(matches!(got[0], StartOutcome::Started { .. }), "{got:?}");
    assert_eq!(
        got[1],
        StartOutcome::Refused(StartRefusal::Running),
        "items are decided in order"
    );
    cleanup(store, &[id]).await;
}

/// Every finish condition, alone and together: the store finishes exactly when
/// [`rules::finish`] says so, refuses with its reason, and applies the next state only
/// when the rules say the job is unchanged.
pub async fn finish_rules_agree(store: &dyn JobStore) {
    let p = unique("rules-finish");
    let t0 = long_ago(store).await;
    let next = t0 + Duration::from_secs(60);
    let other_job = format!("{p}-other");
    store.upsert(&job(&other_job), None).await.unwrap();
    let mut n = 0;
    for change in ["none", "upsert", "trigger", "remove", "recreate"] {
        for run_kind in ["running", "finished", "missing"] {
            for takeover in [false, true] {
                for token in [6u64, 7, 8] {
                    for wrong_job in [false, true] {
                        n += 1;
                        let id = format!("{p}-{n}");
                        store.upsert(&job(&id), Some(t0)).await.unwrap();
                        let mut run = started(store, start_req(&id, t0, 1, 7)).await;
                        match run_kind {
                            "finished" => {
                                finish_one(store, finish_req(run, &id, 7, RunStatus::Failed, None))
                                    .await;
                            }
                            "missing" => run = RunId(i64::MAX - 11),
                            _ => {}
                        }
                        match change {
                            "upsert" => {
                                let changed = crate::job::Job::builder(
                                    &id,
                                    "noop",
                                    Schedule::every(Duration::from_secs(30)).unwrap(),
                                )
                                .build()
                                .unwrap();
                                store.upsert(&changed, Some(t0)).await.unwrap();
                            }
                            "trigger" => store
                                .trigger(&jid(&id), t0 + Duration::from_secs(5), None)
                                .await
                                .unwrap(),
                            "remove" => {
                                store.remove(&jid(&id)).await.unwrap();
                            }
                            "recreate" => {
                                store.remove(&jid(&id)).await.unwrap();
                                store.upsert(&job(&id), Some(t0)).await.unwrap();
                            }
                            _ => {}
                        }
                        let job_before = job_state(store, &id).await;
                        let run_before = run_state(store, &id, run).await;
                        let mut req = finish_req(
                            run,
                            if wrong_job { &other_job } else { &id },
                            token,
                            RunStatus::Succeeded,
                            Some(next),
                        );
                        req.takeover = takeover;
                        // The rules read the job the request names, as a store does.
                        let req_job = job_state(store, req.job_id.as_str()).await;
                        let want = rules::finish(run_before.as_ref(), req_job.as_ref(), &req);
                        let got = finish_one(store, req.clone()).await;
                        let what = format!(
                            "{id} ({change}, run {run_kind}, takeover {takeover}, token {token}, wrong job {wrong_job}): run {run_before:?}, job {job_before:?}"
                        );
                        match (&want, &got) {
                            (Ok(resched), FinishOutcome::Finished { rescheduled, .. }) => {
                                assert_eq!(resched, rescheduled, "{what}: rescheduled");
                                if let Some(after) = job_state(store, &id).await {
                                    assert_eq!(after.last_token, token, "{what}: last_token");
                                    assert_eq!(
                                        after.running, None,
                                        "{what}: the running run is cleared"
                                    );
                                    let want_next = if *resched {
                                        Some(next)
                                    } else {
                                        job_before.as_ref().and_then(|j| j.next_fire_at)
                                    };
                                    assert_eq!(after.next_fire_at, want_next, "{what}: next fire");
                                }
                                let done = run_state(store, &id, run)
                                    .await
                                    .expect("the run stays in the log");
                                assert!(!done.running, "{what}: the run is finished");
                            }
                            (Err(w), FinishOutcome::Refused(g)) => {
                                assert_eq!(
                                    w, g,
                                    "{what}: the store's reason differs from the rules'"
                                );
                            }
                            _ => panic!("{what}: rules say {want:?}, the store {got:?}"),
                        }
                        cleanup(store, &[id]).await;
                    }
                }
            }
        }
    }
    cleanup(store, &[other_job]).await;
}
