//! The engine's decisions, as pure functions: what a fire becomes when it starts
//! (misfire policy) and what a run's outcome writes (retry policy, next fire, alarms).

use crate::executor::Outcome;
use crate::handler::RetryAdvice;
use crate::job::Job;
use crate::policy::{AlarmKind, MisfirePolicy};
use crate::record::{
    AlarmEvent, DueFire, FireContext, FireSpan, FireState, RunId, RunStatus, TriggerKind,
};
use crate::schedule::Schedule;
use crate::time::Timestamp;
use std::time::Duration;

/// What to do with a fire at its start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StartPlan {
    /// Execute it.
    Run(Attempt),
    /// Record a `misfired` run that stands for `attempt.covers` without executing,
    /// and continue at `next`.
    Skip {
        /// The record's attempt (trigger `Misfire`, `covers` set).
        attempt: Attempt,
        /// The job's next fire.
        next: Option<Timestamp>,
        /// Why it was skipped, for the run log.
        message: String,
    },
}

/// One attempt at a fire, as its start and finish need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Attempt {
    /// The fire's instant (the job's `next_fire_at` when it was claimed).
    pub(crate) fire_at: Timestamp,
    /// 1-based.
    pub(crate) attempt: u32,
    /// Why it runs; a late scheduled fire becomes `Misfire`.
    pub(crate) trigger: TriggerKind,
    /// The instant after which the job's schedule continues once this fire is done:
    /// the fire itself, the end of the span a coalescing run stands for, or for a
    /// retry the base of the fire it retries.
    pub(crate) base: Timestamp,
    /// The scheduled fires a misfire record stands for.
    pub(crate) covers: Option<FireSpan>,
    /// What the fire carries (a manual trigger's payload override among it), kept by
    /// its retries and by a fire given back.
    pub(crate) context: FireContext,
}

/// Counts the scheduled fires in `[first, through]`, `first` being one of them.
fn span(schedule: &Schedule, first: Timestamp, through: Timestamp) -> FireSpan {
    FireSpan {
        fires: 1 + schedule.count_between(first, through, FireSpan::MAX_COUNTED - 1),
        first,
        through,
    }
}

impl Attempt {
    /// The next attempt of the fire, as claimed, before the misfire policy looks at
    /// it (and as it runs when planning its start panicked).
    pub(crate) fn as_claimed(fire: &DueFire) -> Self {
        let f = &fire.fire;
        Attempt {
            fire_at: f.at,
            attempt: f.attempt.saturating_add(1),
            trigger: f.trigger,
            base: f.resume_after.unwrap_or(f.at),
            covers: None,
            context: f.context.clone(),
        }
    }
}

/// Applies the misfire policy to a fire starting at store time `now`.
pub(crate) fn plan_start(
    job: &Job,
    fire: &DueFire,
    now: Timestamp,
    default_threshold: Duration,
) -> StartPlan {
    let threshold = job.misfire_threshold().unwrap_or(default_threshold);
    let fire_at = fire.fire_at();
    let late = now.duration_since(fire_at);
    let mut attempt = Attempt::as_claimed(fire);
    if fire.fire.trigger != TriggerKind::Schedule || late <= threshold {
        return StartPlan::Run(attempt);
    }
    attempt.trigger = TriggerKind::Misfire;
    let schedule = job.schedule();
    let missed = span(schedule, fire_at, now);
    match job.misfire() {
        MisfirePolicy::FireOnce => {
            attempt.base = now;
            attempt.covers = Some(missed);
            StartPlan::Run(attempt)
        }
        MisfirePolicy::Skip => {
            attempt.base = now;
            attempt.covers = Some(missed);
            StartPlan::Skip {
                next: schedule.next_after(now),
                message: format!(
                    "started {late:?} late (threshold {threshold:?}); {} fire(s) skipped",
                    missed.fires
                ),
                attempt,
            }
        }
        MisfirePolicy::CatchUp { max } => {
            let max = u64::from(max);
            if missed.fires <= max {
                attempt.covers = Some(span(schedule, fire_at, fire_at));
                return StartPlan::Run(attempt);
            }
            // Skip the oldest: the record stands for them, the last `max` run in order.
            let skipped = missed.fires - max;
            let last_skipped = schedule.nth_after(fire_at, skipped - 1).unwrap_or(fire_at);
            attempt.base = last_skipped;
            attempt.covers = Some(FireSpan {
                fires: skipped,
                first: fire_at,
                through: last_skipped,
            });
            StartPlan::Skip {
                next: schedule.next_after(last_skipped),
                message: format!("{skipped} missed fires skipped; catching up the last {max}"),
                attempt,
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
    /// The job's next fire; `None` when nothing is left to fire.
    pub(crate) next: Option<FireState>,
    pub(crate) alarms: Vec<AlarmKind>,
}

impl FinishPlan {
    /// What a run records when planning its finish panicked: failed with the panic
    /// message, no retry, and the job's next scheduled fire after `now` when that can
    /// be computed (none otherwise: the job then waits for an operator).
    pub(crate) fn after_panic(job: &Job, now: Timestamp, message: &str) -> Self {
        let next = std::panic::catch_unwind(|| next_scheduled(job.schedule(), now)).unwrap_or(None);
        FinishPlan {
            status: RunStatus::Failed,
            error: Some(format!(
                "the engine panicked planning this run's end: {message}"
            )),
            will_retry: false,
            next,
            alarms: Vec::new(),
        }
    }
}

fn next_scheduled(schedule: &Schedule, after: Timestamp) -> Option<FireState> {
    schedule.next_after(after).map(FireState::scheduled)
}

/// How a run ended, as its finish records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ended {
    pub(crate) status: RunStatus,
    /// The message (a handler error's whole chain).
    pub(crate) error: Option<String>,
    /// What the handler asked for the next attempt.
    pub(crate) retry: RetryAdvice,
    /// An operator killed it: `cancelled`, no retry, no failure alarm.
    pub(crate) killed: bool,
}

impl Ended {
    /// An end with no advice from a handler.
    pub(crate) fn new(status: RunStatus, error: Option<String>) -> Self {
        Ended {
            status,
            error,
            retry: RetryAdvice::Policy,
            killed: false,
        }
    }

    /// A run an operator killed.
    pub(crate) fn killed(message: String) -> Self {
        Ended {
            status: RunStatus::Cancelled,
            error: Some(message),
            retry: RetryAdvice::Never,
            killed: true,
        }
    }

    /// Maps an executor's outcome.
    pub(crate) fn of(outcome: &Outcome) -> Self {
        match outcome {
            Outcome::Succeeded => Ended::new(RunStatus::Succeeded, None),
            Outcome::Failed(e) if e.is_killed() => Ended::killed(e.chain().to_string()),
            Outcome::Failed(e) => Ended {
                status: RunStatus::Failed,
                error: Some(e.chain().to_string()),
                retry: e.retry(),
                killed: false,
            },
            Outcome::TimedOut => Ended::new(RunStatus::TimedOut, Some("timed out".into())),
            Outcome::Cancelled => Ended::new(RunStatus::Cancelled, Some("cancelled".into())),
            Outcome::Panicked(p) => {
                Ended::new(RunStatus::Failed, Some(format!("handler panicked: {p}")))
            }
        }
    }
}

/// The children of `job` a fire that ended `status` for good does not release
/// because they run only on other ends (a success, for a failure).
pub(crate) fn blocked_children(job: &Job, status: RunStatus) -> Vec<crate::job::JobId> {
    job.children()
        .iter()
        .filter(|c| !c.on.matches(status, false))
        .map(|c| c.job.clone())
        .collect()
}

/// Whether a misfire record of `a` raises an alarm under the job's policy.
fn misfire_alarm(job: &Job, a: &Attempt) -> Option<AlarmKind> {
    let fires = a.covers.map(|c| c.fires)?;
    (a.trigger == TriggerKind::Misfire && job.alarm().wants_misfire(fires))
        .then_some(AlarmKind::Misfire)
}

/// What a `misfired` record writes: no retry, the schedule continues at `next`.
pub(crate) fn plan_skip(
    job: &Job,
    a: &Attempt,
    next: Option<Timestamp>,
    message: String,
) -> FinishPlan {
    FinishPlan {
        status: RunStatus::Misfired,
        error: Some(message),
        will_retry: false,
        next: next.map(FireState::scheduled),
        alarms: misfire_alarm(job, a).into_iter().collect(),
    }
}

/// What a started fire given back unexecuted writes: a `returned` record, and the
/// job due again at the same fire with the same attempt count, trigger and resume
/// point, exactly as it was before the start.
pub(crate) fn plan_return(fire: &DueFire, waited: Duration, node: &str) -> FinishPlan {
    FinishPlan {
        status: RunStatus::Returned,
        error: Some(format!(
            "not executed: waited {waited:?} for an executor slot on node {node}; given back to run on any node"
        )),
        will_retry: false,
        next: Some(fire.fire.clone()),
        alarms: Vec::new(),
    }
}

/// Applies the retry policy to a run's final status.
///
/// `unit` is a random number in `[0, 1)` for jitter.
pub(crate) fn plan_finish(
    job: &Job,
    a: &Attempt,
    ended: Ended,
    now: Timestamp,
    unit: f64,
) -> FinishPlan {
    let Ended {
        status,
        error,
        retry: advice,
        killed,
    } = ended;
    let policy = job.alarm();
    let mut alarms: Vec<AlarmKind> = misfire_alarm(job, a).into_iter().collect();
    if killed {
        // Stopped on purpose: the schedule goes on, nothing is retried, and only a
        // policy that asks for it hears of it.
        if policy.wants(AlarmKind::Killed) {
            alarms.push(AlarmKind::Killed);
        }
        return FinishPlan {
            status,
            error,
            will_retry: false,
            next: next_scheduled(job.schedule(), a.base),
            alarms,
        };
    }
    if !status.is_failure() {
        if status == RunStatus::Succeeded && a.attempt > 1 && policy.wants(AlarmKind::Recovery) {
            alarms.push(AlarmKind::Recovery);
        }
        return FinishPlan {
            status,
            error,
            will_retry: false,
            next: next_scheduled(job.schedule(), a.base),
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
    if advice != RetryAdvice::Never && retry.should_retry(a.attempt) {
        // An interrupted run (its node died, its lease was lost, shutdown cancelled
        // it) did not fail on its own: the same fire runs again at once, keeping its
        // instant. A failure of the handler waits out the backoff. Either way the
        // schedule resumes after the fire's base once the retries end, so fires that
        // came due meanwhile follow under the misfire policy.
        // A handler's `retry_after` replaces the backoff once.
        let at = match advice {
            _ if matches!(status, RunStatus::Lost | RunStatus::Cancelled) => a.fire_at,
            RetryAdvice::After(d) => now.saturating_add(d),
            _ => now + retry.delay_jittered(a.attempt, unit),
        };
        FinishPlan {
            status,
            error,
            will_retry: true,
            next: Some(FireState {
                at,
                trigger: TriggerKind::Retry,
                attempt: a.attempt,
                resume_after: Some(a.base),
                context: a.context.clone(),
            }),
            alarms,
        }
    } else {
        if policy.wants(AlarmKind::FinalFailure) {
            alarms.push(AlarmKind::FinalFailure);
        }
        if policy.wants(AlarmKind::Blocked) && !blocked_children(job, status).is_empty() {
            alarms.push(AlarmKind::Blocked);
        }
        FinishPlan {
            status,
            error,
            will_retry: false,
            next: next_scheduled(job.schedule(), a.base),
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

/// Who recorded a run, and when, for its alarm events.
pub(crate) struct Recorder<'a> {
    pub(crate) node: &'a str,
    pub(crate) run_id: RunId,
    pub(crate) duration: Option<Duration>,
    pub(crate) now: Timestamp,
}

/// Builds the alarm events of a finish.
pub(crate) fn events(
    job: &Job,
    fire: &DueFire,
    a: &Attempt,
    by: &Recorder<'_>,
    plan: &FinishPlan,
) -> Vec<AlarmEvent> {
    plan.alarms
        .iter()
        .map(|kind| AlarmEvent {
            kind: *kind,
            job_id: fire.job_id.clone(),
            handler: job.handler().to_string(),
            run_id: Some(by.run_id),
            fire_at: fire.fire_at(),
            zone: zone_of(job),
            attempt: a.attempt,
            max_attempts: job.retry().max_attempts(),
            node: by.node.to_string(),
            duration_ms: by.duration.map(|d| d.as_millis() as u64),
            error: plan.error.clone(),
            will_retry: plan.will_retry,
            next_fire_at: plan.next.as_ref().map(|n| n.at),
            recipients: job.alarm().recipients.clone(),
            occurred_at: by.now,
            suppressed: 0,
            covers: (*kind == AlarmKind::Misfire).then_some(a.covers).flatten(),
            blocked: if *kind == AlarmKind::Blocked {
                blocked_children(job, plan.status)
            } else {
                Vec::new()
            },
            waiting_for: Vec::new(),
        })
        .collect()
}

#[cfg(test)]
mod tests;
