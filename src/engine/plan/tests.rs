//! The plans' decisions, one rule at a time.

use super::*;
use crate::executor::Outcome;
use crate::handler::JobError;
use crate::policy::{AlarmPolicy, RetryPolicy};
use std::sync::Arc;

const S: Duration = Duration::from_secs(1);

fn t(secs: i64) -> Timestamp {
    Timestamp::from_millis(1_767_225_600_000 + secs * 1000) // 2026-01-01T00:00:00Z
}

/// Every 10 s from the epoch, 3 attempts with a 5 s backoff base, the given
/// misfire policy and alarms for every kind.
fn job(misfire: MisfirePolicy) -> Job {
    Job::builder("j", "h", Schedule::every(10 * S).unwrap())
        .retry(RetryPolicy::new(3, 5 * S, 60 * S).unwrap())
        .misfire(misfire)
        .misfire_threshold(2 * S)
        .alarm(AlarmPolicy {
            events: vec![
                AlarmKind::Failure,
                AlarmKind::FinalFailure,
                AlarmKind::Lost,
                AlarmKind::Misfire,
                AlarmKind::Recovery,
            ],
            misfire_min_fires: 2,
            recipients: Vec::new(),
        })
        .build()
        .unwrap()
}

fn fire(job: &Job, at: Timestamp, trigger: TriggerKind, attempt: u32) -> DueFire {
    DueFire {
        job_id: job.id().clone(),
        job: Arc::new(job.clone()),
        version: 1,
        fire: FireState {
            at,
            trigger,
            attempt,
            resume_after: None,
            context: FireContext::default(),
        },
    }
}

fn run_of(plan: StartPlan) -> Attempt {
    match plan {
        StartPlan::Run(a) => a,
        other => panic!("expected a run, got {other:?}"),
    }
}

#[test]
fn an_on_time_fire_runs_as_scheduled() {
    let j = job(MisfirePolicy::FireOnce);
    let a = run_of(plan_start(
        &j,
        &fire(&j, t(10), TriggerKind::Schedule, 0),
        t(11),
        S,
    ));
    assert_eq!(
        (a.attempt, a.trigger, a.base, a.covers),
        (1, TriggerKind::Schedule, t(10), None)
    );
}

#[test]
fn a_late_fire_follows_the_misfire_policy() {
    // 35 s late: the fires of 10, 20, 30 and 40 s are missed.
    let now = t(45);
    let j = job(MisfirePolicy::FireOnce);
    let a = run_of(plan_start(
        &j,
        &fire(&j, t(10), TriggerKind::Schedule, 0),
        now,
        S,
    ));
    assert_eq!(a.trigger, TriggerKind::Misfire);
    assert_eq!(a.base, now, "the schedule resumes after the late run");
    assert_eq!(a.covers.map(|c| (c.fires, c.through)), Some((4, now)));

    let j = job(MisfirePolicy::Skip);
    match plan_start(&j, &fire(&j, t(10), TriggerKind::Schedule, 0), now, S) {
        StartPlan::Skip { attempt, next, .. } => {
            assert_eq!(next, Some(t(50)));
            assert_eq!(attempt.covers.map(|c| c.fires), Some(4));
        }
        other => panic!("{other:?}"),
    }

    let j = job(MisfirePolicy::CatchUp { max: 2 });
    match plan_start(&j, &fire(&j, t(10), TriggerKind::Schedule, 0), now, S) {
        StartPlan::Skip { attempt, next, .. } => {
            // The oldest two are skipped in one record; 30 s and 40 s run in turn.
            assert_eq!(
                attempt.covers.map(|c| (c.fires, c.through)),
                Some((2, t(20)))
            );
            assert_eq!(next, Some(t(30)));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn retries_and_manual_triggers_are_never_misfires() {
    let j = job(MisfirePolicy::Skip);
    let mut f = fire(&j, t(10), TriggerKind::Retry, 1);
    f.fire.resume_after = Some(t(0));
    let a = run_of(plan_start(&j, &f, t(100), S));
    assert_eq!(
        (a.attempt, a.trigger, a.base),
        (2, TriggerKind::Retry, t(0))
    );
}

fn attempt(n: u32) -> Attempt {
    Attempt {
        fire_at: t(10),
        attempt: n,
        trigger: TriggerKind::Schedule,
        base: t(10),
        covers: None,
        context: FireContext::default(),
    }
}

fn failed(e: JobError) -> Ended {
    Ended::of(&Outcome::Failed(e))
}

#[test]
fn a_failure_backs_off_then_gives_up_with_a_final_alarm() {
    let j = job(MisfirePolicy::FireOnce);
    let p = plan_finish(&j, &attempt(1), failed(JobError::msg("boom")), t(11), 0.0);
    assert!(p.will_retry);
    assert_eq!(
        (
            p.next.as_ref().map(|n| n.at),
            p.next.as_ref().expect("a next fire").trigger
        ),
        (Some(t(16)), TriggerKind::Retry)
    );
    assert_eq!(
        p.next.as_ref().expect("a next fire").resume_after,
        Some(t(10))
    );
    assert_eq!(p.alarms, [AlarmKind::Failure]);
    let p = plan_finish(&j, &attempt(2), failed(JobError::msg("boom")), t(20), 0.0);
    assert_eq!(
        p.next.as_ref().map(|n| n.at),
        Some(t(30)),
        "the second delay doubles"
    );
    let p = plan_finish(&j, &attempt(3), failed(JobError::msg("boom")), t(40), 0.0);
    assert!(!p.will_retry);
    assert_eq!(
        (
            p.next.as_ref().map(|n| n.at),
            p.next.as_ref().expect("a next fire").trigger
        ),
        (Some(t(20)), TriggerKind::Schedule)
    );
    assert_eq!(p.alarms, [AlarmKind::Failure, AlarmKind::FinalFailure]);
}

#[test]
fn a_handler_can_refuse_retries_or_set_the_delay() {
    let j = job(MisfirePolicy::FireOnce);
    let e = JobError::msg("gone").permanent();
    let p = plan_finish(&j, &attempt(1), failed(e), t(11), 0.0);
    assert!(!p.will_retry);
    assert_eq!(
        p.next.as_ref().expect("a next fire").trigger,
        TriggerKind::Schedule
    );
    assert!(p.alarms.contains(&AlarmKind::FinalFailure));

    let e = JobError::msg("slow down").retry_after(600 * S);
    let p = plan_finish(&j, &attempt(1), failed(e.clone()), t(11), 0.0);
    assert_eq!(p.next.as_ref().map(|n| n.at), Some(t(611)));
    // With no attempt left, the advice changes nothing.
    let p = plan_finish(&j, &attempt(3), failed(e), t(11), 0.0);
    assert!(!p.will_retry);
}

#[test]
fn an_interrupted_run_is_retried_at_once_and_success_after_failure_recovers() {
    let j = job(MisfirePolicy::FireOnce);
    let lost = Ended::new(RunStatus::Lost, Some("node died".into()));
    let p = plan_finish(&j, &attempt(1), lost, t(50), 0.0);
    assert_eq!(
        p.next.as_ref().map(|n| n.at),
        Some(t(10)),
        "the same fire, keeping its instant"
    );
    assert!(p.alarms.contains(&AlarmKind::Lost));
    let p = plan_finish(&j, &attempt(2), Ended::of(&Outcome::Succeeded), t(20), 0.0);
    assert_eq!(p.alarms, [AlarmKind::Recovery]);
    assert_eq!(p.next.as_ref().map(|n| n.at), Some(t(20)));
}

#[test]
fn a_payload_override_stays_with_its_fire_and_no_further() {
    let j = job(MisfirePolicy::FireOnce);
    let over = serde_json::json!({"date": "2026-01-01"});
    let mut f = fire(&j, t(10), TriggerKind::Manual, 0);
    f.fire.context.payload = Some(over.clone());
    let a = run_of(plan_start(&j, &f, t(100), S));
    assert_eq!(
        a.context.payload.as_ref(),
        Some(&over),
        "a late manual fire keeps it"
    );
    let retry = plan_finish(&j, &a, failed(JobError::msg("boom")), t(101), 0.0);
    assert_eq!(
        retry.next.as_ref().and_then(FireState::payload),
        Some(&over),
        "its retry keeps it"
    );
    let lost = Ended::new(RunStatus::Lost, None);
    let again = plan_finish(&j, &a, lost, t(101), 0.0);
    assert_eq!(
        again.next.as_ref().and_then(FireState::payload),
        Some(&over),
        "so does a lost run's"
    );
    let back = plan_return(&f, S, "n1");
    assert_eq!(
        back.next.as_ref().and_then(FireState::payload),
        Some(&over),
        "a fire given back keeps it"
    );
    let done = plan_finish(&j, &a, Ended::of(&Outcome::Succeeded), t(101), 0.0);
    assert_eq!(
        done.next.as_ref().and_then(FireState::payload),
        None,
        "the fire done, the schedule runs its own"
    );
    let mut third = attempt(3);
    third.context = FireContext::with_payload(Some(over));
    let last = plan_finish(&j, &third, failed(JobError::msg("boom")), t(101), 0.0);
    assert_eq!(
        last.next.as_ref().and_then(FireState::payload),
        None,
        "retries exhausted: its own again"
    );
}

#[test]
fn outcomes_map_to_statuses_and_messages() {
    let e = JobError::msg("boom").retry_after(S);
    let ended = Ended::of(&Outcome::Failed(e));
    assert_eq!(
        (ended.status, ended.error.as_deref(), ended.retry),
        (RunStatus::Failed, Some("boom"), RetryAdvice::After(S))
    );
    assert_eq!(Ended::of(&Outcome::TimedOut).status, RunStatus::TimedOut);
    assert_eq!(
        Ended::of(&Outcome::Panicked("oops".into()))
            .error
            .as_deref(),
        Some("handler panicked: oops")
    );
}

#[test]
fn a_killed_run_is_cancelled_not_retried_and_alarms_only_when_asked() {
    let j = job(MisfirePolicy::FireOnce);
    let p = plan_finish(
        &j,
        &attempt(1),
        Ended::killed("killed on n1".into()),
        t(11),
        0.0,
    );
    assert_eq!(
        (p.status, p.will_retry, p.error.as_deref()),
        (RunStatus::Cancelled, false, Some("killed on n1"))
    );
    assert_eq!(
        p.next.as_ref().map(|n| (n.at, n.trigger)),
        j.schedule()
            .next_after(t(10))
            .map(|at| (at, TriggerKind::Schedule)),
        "the schedule goes on from the fire's base"
    );
    assert!(p.alarms.is_empty(), "no failure alarm: {:?}", p.alarms);
    // An instance's report of a kill is the same.
    let remote = Ended::of(&Outcome::Failed(JobError::killed(
        "killed on 10.0.0.1:9999",
    )));
    assert_eq!((remote.status, remote.killed), (RunStatus::Cancelled, true));
    let asks = j
        .to_builder()
        .alarm(AlarmPolicy {
            events: vec![AlarmKind::Killed],
            misfire_min_fires: 2,
            recipients: Vec::new(),
        })
        .build()
        .unwrap();
    let p = plan_finish(&asks, &attempt(1), remote, t(11), 0.0);
    assert_eq!(
        p.alarms,
        [AlarmKind::Killed],
        "a policy that asks hears of it"
    );
}
