//! The start and finish rules: when a store writes a run's start or finish. This is
//! the one statement of them; stores that decide in Rust call these functions, and the
//! stores that decide inside the database (the PostgreSQL statement, the Redis
//! scripts) are held to them by [`conformance::start_rules_agree`](crate::conformance::start_rules_agree)
//! and [`finish_rules_agree`](crate::conformance::finish_rules_agree),
//! which drives every combination of state through the store and compares.
//!
//! Refusals are checked in the order the functions list them, so a store reports the
//! same reason for the same state.

use crate::job::JobId;
use crate::record::{
    ClaimRun, FinishRefusal, FinishRun, FireContext, FireState, JobRecord, RunId, RunRecord,
    RunStatus, StartRefusal, StartRun, TriggerKind,
};
use crate::time::Timestamp;

/// The part of a stored job the rules read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobState {
    /// Not paused.
    pub enabled: bool,
    /// Bumped on every change of definition.
    pub version: u64,
    /// When the job is next due.
    pub next_fire_at: Option<Timestamp>,
    /// The run in progress.
    pub running: Option<RunId>,
    /// The newest fencing token the store accepted for the job.
    pub last_token: u64,
}

impl From<&JobRecord> for JobState {
    fn from(r: &JobRecord) -> Self {
        JobState {
            enabled: r.job.enabled(),
            version: r.version,
            next_fire_at: r.next_fire_at(),
            running: r.running,
            last_token: r.last_token,
        }
    }
}

/// The part of a stored run the finish rule reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunState {
    /// Its job.
    pub job_id: JobId,
    /// Whether it is still `Running`.
    pub running: bool,
    /// The token it started under.
    pub token: u64,
    /// The fire it belongs to.
    pub fire_at: Timestamp,
    /// Its attempt at the fire.
    pub attempt: u32,
}

impl From<&RunRecord> for RunState {
    fn from(r: &RunRecord) -> Self {
        RunState {
            job_id: r.job_id.clone(),
            running: r.status == RunStatus::Running,
            token: r.token,
            fire_at: r.fire_at,
            attempt: r.attempt,
        }
    }
}

/// What a start the rules allow does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Record a new run.
    Record,
    /// The request already recorded the job's running run (a repeated start whose
    /// first answer was lost, say to a connection cut after the commit): answer with
    /// that run, write nothing.
    Recorded,
}

/// Whether the run `running` is the one `req` records: it is still running, of
/// the request's job, fire and attempt, under the request's token (a token is one
/// grant of one node's lease, so no other start carries it).
pub fn recorded_by(running: &RunState, req: &StartRun) -> bool {
    running.running
        && running.job_id == req.job_id
        && running.token == req.token
        && running.fire_at == req.fire_at
        && running.attempt == req.attempt
}

/// Whether `req` may start, given the job's state (`None`: no such job) and its
/// running run's (`running`, read when the job has one; a store may pass `None`
/// when the job's `last_token` is not the request's, since the run cannot then be
/// the request's).
///
/// In order: the job exists; its running run, if [`recorded_by`] the request, is
/// answered again ([`Admit::Recorded`]: starts are idempotent, so a store or an
/// engine may repeat one whose answer it lost); it is enabled, has the request's
/// `version`, has no run in progress, is due at the request's `fire_at`, and its
/// last token is not newer than the request's. On [`Admit::Record`] the store sets
/// `last_token = req.token` and makes the new run the job's running run.
pub fn start(
    job: Option<&JobState>,
    running: Option<&RunState>,
    req: &StartRun,
) -> Result<Admit, StartRefusal> {
    let Some(j) = job else {
        return Err(StartRefusal::NotFound);
    };
    if j.running.is_some() && running.is_some_and(|r| recorded_by(r, req)) {
        return Ok(Admit::Recorded);
    }
    if !j.enabled {
        Err(StartRefusal::Disabled)
    } else if j.version != req.version {
        Err(StartRefusal::Changed)
    } else if j.running.is_some() {
        Err(StartRefusal::Running)
    } else if j.next_fire_at != Some(req.fire_at) {
        Err(StartRefusal::NotDue)
    } else if j.last_token > req.token {
        Err(StartRefusal::Fenced {
            current: j.last_token,
        })
    } else {
        Ok(Admit::Record)
    }
}

/// Whether a claim ([`JobLeases::claim_runs`](super::JobLeases::claim_runs)) may
/// take the job and start its run, given the job's state (`None`: no such job) and
/// whether its lease is free at the store's clock (nobody's, or expired).
///
/// In order: the job exists, is enabled, has the claim's `version`, has no run in
/// progress, is due at the claim's `fire_at`, and its lease is free. On `Ok` the
/// store grants the lease under a new token (greater than `last_token`, which it
/// becomes) and records the start as [`start`] records one. A claim is never a
/// repeat: its token is new.
pub fn claim(job: Option<&JobState>, lease_free: bool, req: &ClaimRun) -> Result<(), StartRefusal> {
    let Some(j) = job else {
        return Err(StartRefusal::NotFound);
    };
    if !j.enabled {
        Err(StartRefusal::Disabled)
    } else if j.version != req.version {
        Err(StartRefusal::Changed)
    } else if j.running.is_some() {
        Err(StartRefusal::Running)
    } else if j.next_fire_at != Some(req.fire_at) {
        Err(StartRefusal::NotDue)
    } else if !lease_free {
        Err(StartRefusal::Held)
    } else {
        Ok(())
    }
}

/// The token a grant of a job's lease carries: one more than the job's last token,
/// or the store's clock in µs when that is larger (so tokens stay comparable with
/// every lock provider's).
pub fn grant_token(last_token: u64, now_us: u64) -> u64 {
    last_token.saturating_add(1).max(now_us)
}

/// Whether `req` may finish its run, given the run's and the job's state (`None`: no
/// such run / the job was removed). `Ok(rescheduled)`: the finish is written, and
/// `req.next` goes into the job when `rescheduled`.
///
/// In order: the run exists and is `Running`; its token is acceptable — normally the
/// request's token is the run's own and still the job's last token; for a takeover
/// (recording a lost run) it is at least both — and the run belongs to the request's
/// job. The next state is applied only when the job still has the request's
/// `version` and is still due at the run's fire (an upsert, pause or trigger during
/// the run wins).
pub fn finish(
    run: Option<&RunState>,
    job: Option<&JobState>,
    req: &FinishRun,
) -> Result<bool, FinishRefusal> {
    let Some(run) = run else {
        return Err(FinishRefusal::NotFound);
    };
    if !run.running {
        return Err(FinishRefusal::NotRunning);
    }
    let current = job.map_or(run.token, |j| j.last_token);
    let token_ok = if req.takeover {
        req.token >= current && req.token >= run.token
    } else {
        req.token == run.token && req.token >= current
    };
    if !token_ok || run.job_id != req.job_id {
        return Err(FinishRefusal::Fenced { current });
    }
    Ok(job.is_some_and(|j| j.version == req.version && j.next_fire_at == Some(run.fire_at)))
}

/// Whether a job takes the oldest release queued for it (see
/// [`dependency`](crate::dependency)) at the store's instant `now`, given its state
/// (`None`: no such job) and why its next fire happens.
///
/// It does when it exists, is enabled, runs nothing, and has either no next fire or
/// a *scheduled* one later than `now`. A due fire, a retry, a manual fire or a
/// release already taken goes first, and a paused job takes nothing: the release
/// stays queued and is taken by a later write that leaves the job able to (its
/// finish, a resume, an upsert, a pass of [`Jobs::take_releases`]).
///
/// Taking one writes [`released_fire`] as the job's next fire and removes the
/// release from the queue, in one atomic step; the job's version is unchanged.
///
/// [`Jobs::take_releases`]: super::Jobs::take_releases
pub fn takes_release(job: Option<&JobState>, next_trigger: TriggerKind, now: Timestamp) -> bool {
    job.is_some_and(|j| {
        j.enabled
            && j.running.is_none()
            && j.next_fire_at
                .is_none_or(|at| next_trigger == TriggerKind::Schedule && at > now)
    })
}

/// Whether a change that replaces a job's next fire (an upsert that changes its
/// definition, a pause, a resume, a trigger) first puts the releases that fire was
/// made of back in the queue: when the fire is a taken release (`next_trigger` is
/// `Upstream`) that has not started (the job runs nothing). So no release is lost to
/// a change; the job takes it again when it can (at once after an upsert, when the
/// rule allows; a resumed job takes one at once too). A fire that started is its run's, and goes with it.
///
/// A pause also clears a next fire that is a taken release (started or not), so a
/// paused job never holds one: the run of a started one ends without writing the
/// job's next fire (the pause changed its version), and a released fire left as the
/// next fire would otherwise be taken for one that never ran.
pub fn returns_release(running: bool, next_trigger: TriggerKind) -> bool {
    !running && next_trigger == TriggerKind::Upstream
}

/// How long a store keeps the releases a job that joins by a window
/// ([`JoinWindow`](crate::dependency::JoinWindow)) took, marked taken: while kept,
/// a release of the same key (job, parent, window) is not queued again, so a parent
/// that fires again in a window already joined does not start a second group that
/// would wait for the others for ever. A release of a window taken longer ago than
/// this is queued as new. Each store forgets older marks on a pass of
/// [`Jobs::take_releases`](super::Jobs::take_releases); a change that puts a taken
/// release back in the queue ([`returns_release`]) removes its mark.
pub const WINDOW_KEPT: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);

/// A queued release as [`pick_release`] reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueuedKey<'a> {
    /// The upstream job that released it.
    pub source: &'a str,
    /// The upstream fire's instant.
    pub fire_at: Timestamp,
    /// When it was queued (store clock).
    pub released_at: Timestamp,
}

/// Which of a job's queued releases it takes together, given the parents it waits
/// for (`after`, its definition's [`after`](crate::Job::after)): indexes into
/// `queued`, or `None` when none can be taken yet.
///
/// A release from a parent not in `after` is taken alone. Releases from the
/// parents in `after` are taken as one group per instant (`fire_at`), once the
/// group holds one from every parent in `after`. Of these candidates the one
/// complete first is taken: a lone release at its `released_at`, a group at its
/// latest release's; ties by instant, then upstream job (a group's after every
/// lone release's). A group's indexes follow the order of `after`.
pub fn pick_release<'a>(after: &[&str], queued: &[QueuedKey<'a>]) -> Option<Vec<usize>> {
    type Key<'k> = (Timestamp, Timestamp, bool, &'k str);
    let mut best: Option<(Key<'a>, Vec<usize>)> = None;
    let mut consider = |key: Key<'a>, picked: Vec<usize>| {
        if best.as_ref().is_none_or(|(k, _)| key < *k) {
            best = Some((key, picked));
        }
    };
    for (i, q) in queued.iter().enumerate() {
        if !after.contains(&q.source) {
            consider((q.released_at, q.fire_at, false, q.source), vec![i]);
        }
    }
    let mut instants: Vec<Timestamp> = queued
        .iter()
        .filter(|q| after.contains(&q.source))
        .map(|q| q.fire_at)
        .collect();
    instants.sort_unstable();
    instants.dedup();
    for at in instants {
        let group: Option<Vec<usize>> = after
            .iter()
            .map(|a| {
                queued
                    .iter()
                    .position(|q| q.source == *a && q.fire_at == at)
            })
            .collect();
        if let Some(group) = group {
            let done = group.iter().map(|&i| queued[i].released_at).max();
            consider((done.unwrap_or(at), at, true, ""), group);
        }
    }
    best.map(|(_, picked)| picked)
}

/// The next fire a taken release becomes: due at `now`, trigger `Upstream`, a fresh
/// attempt, carrying the release's context (which names the upstream run).
pub fn released_fire(context: FireContext, now: Timestamp) -> FireState {
    FireState::fresh(now, TriggerKind::Upstream, context)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    fn job() -> JobState {
        JobState {
            enabled: true,
            version: 2,
            next_fire_at: Some(t(100)),
            running: None,
            last_token: 5,
        }
    }

    fn start_req(version: u64, fire: i64, token: u64) -> StartRun {
        StartRun {
            job_id: JobId::new("j").unwrap(),
            fire_at: t(fire),
            version,
            token,
            node: "n".into(),
            attempt: 1,
            trigger: TriggerKind::Schedule,
            covers: None,
            context: Default::default(),
        }
    }

    fn finish_req(token: u64, takeover: bool, version: u64) -> FinishRun {
        FinishRun {
            run_id: RunId(1),
            job_id: JobId::new("j").unwrap(),
            token,
            takeover,
            status: RunStatus::Succeeded,
            error: None,
            will_retry: false,
            executor: None,
            version,
            next: None,
            alarms: Vec::new(),
            releases: Vec::new(),
            lease: crate::record::LeaseEnd::Untouched,
        }
    }

    #[test]
    fn a_release_is_taken_by_an_idle_job_without_an_earlier_fire() {
        let now = t(100);
        let idle = JobState {
            next_fire_at: None,
            ..job()
        };
        assert!(takes_release(Some(&idle), TriggerKind::Schedule, now));
        assert!(!takes_release(None, TriggerKind::Schedule, now));
        let later = JobState {
            next_fire_at: Some(t(101)),
            ..job()
        };
        assert!(takes_release(Some(&later), TriggerKind::Schedule, now));
        for (tr, at) in [
            (TriggerKind::Schedule, 100),
            (TriggerKind::Retry, 500),
            (TriggerKind::Manual, 500),
            (TriggerKind::Upstream, 500),
        ] {
            let j = JobState {
                next_fire_at: Some(t(at)),
                ..job()
            };
            assert!(!takes_release(Some(&j), tr, now), "{tr:?} at {at}");
        }
        let busy = JobState {
            running: Some(RunId(1)),
            ..idle.clone()
        };
        let paused = JobState {
            enabled: false,
            ..idle
        };
        assert!(!takes_release(Some(&busy), TriggerKind::Schedule, now));
        assert!(!takes_release(Some(&paused), TriggerKind::Schedule, now));
    }

    #[test]
    fn a_fan_in_waits_for_every_parent_of_one_instant() {
        let q = |source, fire, released| QueuedKey {
            source,
            fire_at: t(fire),
            released_at: t(released),
        };
        let after = ["b", "c"];
        // b for instants 1 and 2, c for 2 only: the group of instant 2 is whole.
        let queued = [q("b", 1, 10), q("b", 2, 11), q("c", 2, 12)];
        assert_eq!(pick_release(&after, &queued), Some(vec![1, 2]));
        assert_eq!(pick_release(&after, &queued[..2]), None, "c is missing");
        // A release by a parent not waited for goes alone, in release order.
        let queued = [q("b", 1, 10), q("x", 5, 11), q("c", 1, 12)];
        assert_eq!(pick_release(&after, &queued), Some(vec![1]));
        assert_eq!(
            pick_release(&after, &[queued[0], queued[2]]),
            Some(vec![0, 1])
        );
        // Without `after`, each release alone, oldest first; ties by instant.
        let queued = [q("b", 9, 10), q("c", 1, 10), q("b", 0, 11)];
        assert_eq!(pick_release(&[], &queued), Some(vec![1]));
        assert_eq!(pick_release(&[], &[]), None);
    }

    #[test]
    fn start_checks_in_order() {
        let j = job();
        assert_eq!(
            start(None, None, &start_req(2, 100, 5)),
            Err(StartRefusal::NotFound)
        );
        let off = JobState {
            enabled: false,
            ..j.clone()
        };
        // Disabled wins over every later condition.
        assert_eq!(
            start(Some(&off), None, &start_req(1, 1, 1)),
            Err(StartRefusal::Disabled)
        );
        assert_eq!(
            start(Some(&j), None, &start_req(1, 1, 1)),
            Err(StartRefusal::Changed)
        );
        let busy = JobState {
            running: Some(RunId(9)),
            ..j.clone()
        };
        assert_eq!(
            start(Some(&busy), None, &start_req(2, 1, 1)),
            Err(StartRefusal::Running)
        );
        assert_eq!(
            start(Some(&j), None, &start_req(2, 1, 1)),
            Err(StartRefusal::NotDue)
        );
        assert_eq!(
            start(Some(&j), None, &start_req(2, 100, 4)),
            Err(StartRefusal::Fenced { current: 5 })
        );
        assert_eq!(
            start(Some(&j), None, &start_req(2, 100, 5)),
            Ok(Admit::Record),
            "an equal token starts"
        );
        assert_eq!(
            start(Some(&j), None, &start_req(2, 100, 6)),
            Ok(Admit::Record)
        );
    }

    #[test]
    fn a_repeated_start_is_answered_with_its_run() {
        // The job's running run was recorded by `start_req(2, 100, 5)`; the job has
        // been paused and changed since: the same request still gets its run.
        let j = JobState {
            enabled: false,
            version: 3,
            running: Some(RunId(9)),
            ..job()
        };
        let mine = RunState {
            job_id: JobId::new("j").unwrap(),
            running: true,
            token: 5,
            fire_at: t(100),
            attempt: 1,
        };
        let req = start_req(2, 100, 5);
        assert_eq!(start(Some(&j), Some(&mine), &req), Ok(Admit::Recorded));
        assert_eq!(
            start(None, Some(&mine), &req),
            Err(StartRefusal::NotFound),
            "a removed job starts nothing"
        );
        // Another token, fire or attempt is another start; a finished run is none.
        let busy = JobState {
            enabled: true,
            version: 2,
            ..j.clone()
        };
        for other in [
            start_req(2, 100, 6),
            start_req(2, 200, 5),
            StartRun {
                attempt: 2,
                ..req.clone()
            },
        ] {
            assert_eq!(
                start(Some(&busy), Some(&mine), &other),
                Err(StartRefusal::Running),
                "{other:?}"
            );
        }
        let ended = RunState {
            running: false,
            ..mine.clone()
        };
        assert_eq!(
            start(Some(&busy), Some(&ended), &req),
            Err(StartRefusal::Running)
        );
    }

    #[test]
    fn finish_checks_tokens_and_reschedules_only_unchanged_jobs() {
        let run = RunState {
            job_id: JobId::new("j").unwrap(),
            running: true,
            token: 5,
            fire_at: t(100),
            attempt: 1,
        };
        let j = job();
        assert_eq!(
            finish(None, Some(&j), &finish_req(5, false, 2)),
            Err(FinishRefusal::NotFound)
        );
        let done = RunState {
            running: false,
            ..run.clone()
        };
        assert_eq!(
            finish(Some(&done), Some(&j), &finish_req(5, false, 2)),
            Err(FinishRefusal::NotRunning)
        );
        assert_eq!(
            finish(Some(&run), Some(&j), &finish_req(5, false, 2)),
            Ok(true)
        );
        assert_eq!(
            finish(Some(&run), Some(&j), &finish_req(5, false, 3)),
            Ok(false),
            "changed since"
        );
        let moved = JobState {
            next_fire_at: Some(t(200)),
            ..j.clone()
        };
        assert_eq!(
            finish(Some(&run), Some(&moved), &finish_req(5, false, 2)),
            Ok(false),
            "triggered since"
        );
        assert_eq!(
            finish(Some(&run), None, &finish_req(5, false, 2)),
            Ok(false),
            "removed since"
        );
        assert_eq!(
            finish(Some(&run), Some(&j), &finish_req(6, false, 2)),
            Err(FinishRefusal::Fenced { current: 5 }),
            "not the run's own token"
        );
        let newer = JobState {
            last_token: 7,
            ..j.clone()
        };
        assert_eq!(
            finish(Some(&run), Some(&newer), &finish_req(5, false, 2)),
            Err(FinishRefusal::Fenced { current: 7 }),
            "a newer lease holder fenced it out"
        );
        assert_eq!(
            finish(Some(&run), Some(&newer), &finish_req(7, true, 2)),
            Ok(true),
            "takeover"
        );
        assert_eq!(
            finish(Some(&run), Some(&newer), &finish_req(6, true, 2)),
            Err(FinishRefusal::Fenced { current: 7 }),
            "a takeover older than the last token"
        );
        let other = RunState {
            job_id: JobId::new("k").unwrap(),
            ..run.clone()
        };
        assert_eq!(
            finish(Some(&other), Some(&j), &finish_req(5, false, 2)),
            Err(FinishRefusal::Fenced { current: 5 }),
            "a run of another job"
        );
    }
}
