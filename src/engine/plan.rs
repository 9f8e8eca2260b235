//! The engine's decisions, as pure functions: what a fire becomes when it starts
//! (misfire policy) and what a run's outcome writes (retry policy, next fire, alarms).

use crate::executor::Outcome;
use crate::job::Job;
use crate::policy::{AlarmKind, MisfirePolicy};
use crate::record::{AlarmEvent, DueFire, NextFire, RunId, RunStatus, TriggerKind};
use crate::schedule::Schedule;
use crate::time::Timestamp;
use std::time::Duration;

/// Most missed fires counted for `CatchUp`; beyond it the oldest are skipped anyway.
const CATCH_UP_SCAN: usize = 100_000;

/// What to do with a fire at its start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StartPlan {
    /// Execute it. `coalesce`: it stands for every missed fire, so the next fire is
    /// the first after *now* rather than after `fire_at`.
    Run {
        trigger: TriggerKind,
        coalesce: bool,
    },
    /// Record a `misfired` run without executing and continue at `next`.
    Skip {
        next: Option<Timestamp>,
        message: String,
    },
}

/// Applies the misfire policy to a fire starting at store time `now`.
pub(crate) fn plan_start(
    job: &Job,
    fire: &DueFire,
    now: Timestamp,
    default_threshold: Duration,
) -> StartPlan {
    let threshold = job.misfire_threshold().unwrap_or(default_threshold);
    let late = now.duration_since(fire.fire_at);
    if fire.trigger != TriggerKind::Schedule || late <= threshold {
        return StartPlan::Run {
            trigger: fire.trigger,
            coalesce: false,
        };
    }
    let schedule = job.schedule();
    match job.misfire() {
        MisfirePolicy::FireOnce => StartPlan::Run {
            trigger: TriggerKind::Misfire,
            coalesce: true,
        },
        MisfirePolicy::Skip => StartPlan::Skip {
            next: schedule.next_after(now),
            message: format!("started {late:?} late (threshold {threshold:?}); skipped"),
        },
        MisfirePolicy::CatchUp { max } => {
            let mut missed = vec![fire.fire_at];
            missed.extend(schedule.fires_between(fire.fire_at, now, CATCH_UP_SCAN));
            let max = max as usize;
            if missed.len() <= max {
                StartPlan::Run {
                    trigger: TriggerKind::Misfire,
                    coalesce: false,
                }
            } else {
                let skipped = missed.len() - max;
                StartPlan::Skip {
                    next: Some(missed[skipped]),
                    message: format!("{skipped} missed fires skipped; catching up the last {max}"),
                }
            }
        }
    }
}

/// What a finished run writes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FinishPlan {
    pub(crate) status: RunStatus,
    pub(crate) error: Option<String>,
    pub(crate) will_retry: bool,
    pub(crate) next: NextFire,
    pub(crate) alarms: Vec<AlarmKind>,
}

fn next_scheduled(schedule: &Schedule, after: Timestamp) -> NextFire {
    NextFire {
        at: schedule.next_after(after),
        trigger: TriggerKind::Schedule,
        attempt: 0,
    }
}

/// Maps an outcome to a status and message.
pub(crate) fn status_of(outcome: &Outcome) -> (RunStatus, Option<String>) {
    match outcome {
        Outcome::Succeeded => (RunStatus::Succeeded, None),
        Outcome::Failed(e) => (RunStatus::Failed, Some(e.clone())),
        Outcome::TimedOut => (RunStatus::TimedOut, Some("timed out".into())),
        Outcome::Cancelled => (RunStatus::Cancelled, Some("cancelled".into())),
        Outcome::Panicked(p) => (RunStatus::Failed, Some(format!("handler panicked: {p}"))),
    }
}

/// Applies the retry policy to a run's final status.
///
/// `attempt` is 1-based; `unit` is a random number in `[0, 1)` for jitter.
#[allow(clippy::too_many_arguments)]
pub(crate) fn plan_finish(
    job: &Job,
    fire_at: Timestamp,
    attempt: u32,
    trigger: TriggerKind,
    coalesce: bool,
    status: RunStatus,
    error: Option<String>,
    now: Timestamp,
    unit: f64,
) -> FinishPlan {
    let policy = job.alarm();
    let mut alarms = Vec::new();
    if trigger == TriggerKind::Misfire && policy.wants(AlarmKind::Misfire) {
        alarms.push(AlarmKind::Misfire);
    }
    let base = if coalesce { now.max(fire_at) } else { fire_at };
    if !status.is_failure() {
        if status == RunStatus::Succeeded && attempt > 1 && policy.wants(AlarmKind::Recovery) {
            alarms.push(AlarmKind::Recovery);
        }
        return FinishPlan {
            status,
            error,
            will_retry: false,
            next: next_scheduled(job.schedule(), base),
            alarms,
        };
    }
    if status == RunStatus::Lost && policy.wants(AlarmKind::Lost) {
        alarms.push(AlarmKind::Lost);
    }
    if policy.wants(AlarmKind::Failure) {
        alarms.push(AlarmKind::Failure);
    }
    let retry = job.retry();
    if retry.should_retry(attempt) {
        // An interrupted run (its node died, its lease was lost, shutdown cancelled
        // it) did not fail on its own: the same fire runs again at once, keeping its
        // instant, so fires that came due meanwhile follow under the misfire policy.
        // A failure of the handler waits out the backoff.
        let at = if matches!(status, RunStatus::Lost | RunStatus::Cancelled) {
            fire_at
        } else {
            now + retry.delay_jittered(attempt, unit)
        };
        FinishPlan {
            status,
            error,
            will_retry: true,
            next: NextFire {
                at: Some(at),
                trigger: TriggerKind::Retry,
                attempt,
            },
            alarms,
        }
    } else {
        if policy.wants(AlarmKind::FinalFailure) {
            alarms.push(AlarmKind::FinalFailure);
        }
        FinishPlan {
            status,
            error,
            will_retry: false,
            next: next_scheduled(job.schedule(), base),
            alarms,
        }
    }
}

/// The zone a job's fire times are best shown in.
pub(crate) fn zone_of(job: &Job) -> String {
    match job.schedule() {
        Schedule::Cron(c) => c.zone().name().to_string(),
        _ => "UTC".to_string(),
    }
}

/// Builds the alarm events of a finish.
#[allow(clippy::too_many_arguments)]
pub(crate) fn events(
    job: &Job,
    fire: &DueFire,
    run_id: RunId,
    attempt: u32,
    node: &str,
    duration: Option<Duration>,
    plan: &FinishPlan,
    now: Timestamp,
) -> Vec<AlarmEvent> {
    plan.alarms
        .iter()
        .map(|kind| AlarmEvent {
            kind: *kind,
            job_id: fire.job_id.clone(),
            handler: job.handler().to_string(),
            run_id: Some(run_id),
            fire_at: fire.fire_at,
            zone: zone_of(job),
            attempt,
            max_attempts: job.retry().max_attempts(),
            node: node.to_string(),
            duration_ms: duration.map(|d| d.as_millis() as u64),
            error: plan.error.clone(),
            will_retry: plan.will_retry,
            next_fire_at: plan.next.at,
            recipients: job.alarm().recipients.clone(),
            occurred_at: now,
            suppressed: 0,
        })
        .collect()
}
