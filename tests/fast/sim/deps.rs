//! The dependency simulation: one seed drives a small graph of dependent jobs with
//! random periods, handler times, failure rates, retries, pauses, 1-3 nodes and
//! (for half the seeds) a slow store that also loses 2 % of the start and finish
//! answers, played on tokio's paused clock; [`check`] then reads the run log and the
//! queues and asserts, without the engine's code:
//!
//! * every released run names upstream runs that exist, that are parents of its job
//!   by the graph, that ended as the link asks, and that ended before it started
//!   (a downstream never runs before all its upstreams);
//! * the join runs for an instant only with both its parents' releases of that
//!   instant;
//! * no release ran twice, and none was lost: every parent run that ended its fire as
//!   a link asks released its child once (a join's half waits in the queue until its
//!   other half comes), and nothing else is left queued or running.
//!
//! The graph (`r1`, `r2` roots; `r1` fires on whole seconds, `r2` half a second
//! later, so no two root fires share an instant):
//!
//! ```text
//! r1 ──► a ◄── r2        a: runs once per release, from either root
//! r1 ──► b (on always)
//! a, b ──► j (after a, b: the join of one instant)
//! j ──► k (on failure), j ──► l (on success)
//! ```

use super::workload::Latency;
use jobwheel::dependency::{ChildLink, ChildOn};
use jobwheel::store::Jobs;
use jobwheel::{
    Job, JobContext, JobError, JobId, MisfirePolicy, RetryPolicy, RunQuery, RunRecord, RunStatus,
    Schedule, Scheduler, Timestamp, TokioClock, TriggerKind,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// One job of the graph: its handler's time, failure rate and attempts.
#[derive(Debug, Clone)]
pub struct Step {
    pub id: &'static str,
    pub ms: u64,
    pub fail_pct: u64,
    pub attempts: u32,
}

/// A played graph.
#[derive(Debug, Clone)]
pub struct DepWorkload {
    pub seed: u64,
    pub base: Timestamp,
    pub nodes: Vec<usize>,
    pub latency: Option<Latency>,
    pub steps: Vec<Step>,
    /// The roots' periods (ms).
    pub periods: (u64, u64),
    /// How long the roots fire; then they are paused and the graph drains.
    pub length: Duration,
    /// When `a` is paused and resumed again (offsets), if it is.
    pub pause_a: Option<(Duration, Duration)>,
}

/// The links of the graph: (parent, child, on).
pub const LINKS: [(&str, &str, ChildOn); 7] = [
    ("r1", "a", ChildOn::Success),
    ("r2", "a", ChildOn::Success),
    ("r1", "b", ChildOn::Always),
    ("a", "j", ChildOn::Success),
    ("b", "j", ChildOn::Success),
    ("j", "k", ChildOn::Failure),
    ("j", "l", ChildOn::Success),
];

impl DepWorkload {
    /// The workload of `seed`.
    pub fn generate(seed: u64) -> DepWorkload {
        let mut rng = fastrand::Rng::with_seed(seed);
        let base = Timestamp::from_millis(1_767_225_600_000 + rng.i64(0..86_400) * 1000);
        let period = |rng: &mut fastrand::Rng| [1_000, 2_000, 3_000, 5_000][rng.usize(0..4)];
        let periods = (period(&mut rng), period(&mut rng));
        let steps = ["r1", "r2", "a", "b", "j", "k", "l"]
            .into_iter()
            .map(|id| Step {
                id,
                ms: match rng.u32(0..10) {
                    0..=6 => rng.u64(0..=50),
                    7..=8 => rng.u64(50..=1_500),
                    _ => rng.u64(1_500..=6_000),
                },
                fail_pct: [0, 0, 10, 30][rng.usize(0..4)],
                attempts: rng.u32(1..=3),
            })
            .collect();
        let length = Duration::from_secs(rng.u64(60..=240));
        let pause_a = (rng.u32(0..2) == 1).then(|| {
            let from = Duration::from_secs(rng.u64(5..=50));
            (from, from + Duration::from_secs(rng.u64(1..=30)))
        });
        let nodes = (0..rng.usize(1..=3))
            .map(|_| [1, 2, 8][rng.usize(0..3)])
            .collect();
        let latency = (rng.u32(0..2) == 1).then(|| Latency {
            per_call: Duration::from_millis([1, 5, 10][rng.usize(0..3)]),
            per_item: Duration::from_micros([0, 10][rng.usize(0..2)]),
            connections: [4, 16][rng.usize(0..2)],
        });
        DepWorkload {
            seed,
            base,
            nodes,
            latency,
            steps,
            periods,
            length,
            pause_a,
        }
    }

    fn step(&self, id: &str) -> &Step {
        self.steps
            .iter()
            .find(|s| s.id == id)
            .expect("a step of the graph")
    }

    fn job(&self, id: &str) -> Job {
        let s = self.step(id);
        let schedule = match id {
            "r1" => Schedule::interval(Duration::from_millis(self.periods.0), Timestamp::EPOCH),
            "r2" => Schedule::interval(
                Duration::from_millis(self.periods.1),
                Timestamp::from_millis(500),
            ),
            _ => Ok(Schedule::never()),
        }
        .unwrap();
        let children = LINKS
            .iter()
            .filter(|(p, _, _)| *p == id)
            .map(|(_, c, on)| ChildLink {
                job: JobId::new(c).unwrap(),
                on: *on,
            })
            .collect();
        let after = if id == "j" {
            vec![JobId::new("a").unwrap(), JobId::new("b").unwrap()]
        } else {
            Vec::new()
        };
        Job::builder(id, "h", schedule)
            .payload(serde_json::json!({ "ms": s.ms, "fail_pct": s.fail_pct }))
            // Every late fire runs on its own, keeping its instant.
            .misfire(MisfirePolicy::CatchUp { max: 100_000 })
            .retry(
                RetryPolicy::new(s.attempts, Duration::from_secs(1), Duration::from_secs(4))
                    .unwrap(),
            )
            .children(children)
            .after(after)
            .build()
            .unwrap()
    }
}

/// What a played graph left behind.
pub struct DepPlayed {
    pub runs: Vec<RunRecord>,
    pub queued: Vec<jobwheel::dependency::QueuedRelease>,
}

/// Plays `w` (with `lost_per_mille` of the starts and finishes answered with an
/// error after they were written, on a slow store).
pub async fn run(w: &DepWorkload, lost_per_mille: u32) -> DepPlayed {
    let clock = Arc::new(TokioClock::starting_at(w.base));
    let (store, locks) = super::backend(&clock, w.latency, lost_per_mille, w.seed, w.seed % 2 == 1);
    let mut handles = Vec::new();
    for (n, &slots) in w.nodes.iter().enumerate() {
        let handler = move |ctx: JobContext| {
            let ms = ctx.payload()["ms"].as_u64().unwrap_or(0);
            let fail_pct = ctx.payload()["fail_pct"].as_u64().unwrap_or(0);
            let key = ctx.upstream.first().map_or(ctx.fire_at, |u| u.fire_at);
            let fail = super::fails(ctx.job.id().as_str(), key, ctx.attempt, fail_pct);
            async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                if fail {
                    Err(JobError::msg("simulated failure"))
                } else {
                    Ok(())
                }
            }
        };
        let executor = jobwheel::LocalExecutor::new(
            jobwheel::LocalExecutorConfig::default().concurrency(slots),
        )
        .unwrap();
        let s = Scheduler::builder()
            .store(store.clone())
            .locks(locks.clone())
            .executor(executor)
            .handler("h", handler)
            .config(super::node_config(&format!("n{n}")))
            .build()
            .unwrap();
        handles.push(s.start().await.unwrap());
    }
    let s = handles[0].scheduler().clone();
    // The join and the leaves first, then the jobs that release them.
    for id in ["j", "k", "l", "a", "b", "r1", "r2"] {
        s.upsert(w.job(id)).await.unwrap();
    }
    let start = tokio::time::Instant::now();
    if let Some((from, to)) = w.pause_a {
        tokio::time::sleep_until(start + from).await;
        handles[handles.len() - 1]
            .scheduler()
            .pause("a")
            .await
            .unwrap();
        tokio::time::sleep_until(start + to).await;
        s.resume("a").await.unwrap();
    }
    tokio::time::sleep_until(start + w.length).await;
    s.pause("r1").await.unwrap();
    s.pause("r2").await.unwrap();
    // Long enough for every queue to drain: each step's every attempt and backoff.
    let per_release: u64 = w.steps.iter().map(|s| s.ms * 3 + 8_000).sum();
    let fires = w.length.as_millis() as u64 * 2 / w.periods.0.min(w.periods.1) + 2;
    tokio::time::sleep(Duration::from_millis(per_release * fires / 4 + 120_000)).await;
    futures::future::join_all(handles.into_iter().map(|h| h.shutdown())).await;
    let runs = jobwheel::store::RunLog::runs(&store, &RunQuery::new().limit(usize::MAX))
        .await
        .unwrap();
    let queued = store.releases(None, usize::MAX).await.unwrap();
    DepPlayed { runs, queued }
}

/// The fire-ending runs of a parent: the run that ended a fire (succeeded, or failed
/// with no retry), by id.
fn ended_fire(r: &RunRecord) -> bool {
    r.status == RunStatus::Succeeded || (r.status.is_failure() && !r.will_retry)
}

/// The checks of the module documentation; what is wrong, at most `limit` lines.
pub fn check(played: &DepPlayed, limit: usize) -> Vec<String> {
    let mut bad = Vec::new();
    let by_id: HashMap<i64, &RunRecord> = played.runs.iter().map(|r| (r.id.0, r)).collect();
    let link = |p: &str, c: &str| {
        LINKS
            .iter()
            .find(|(x, y, _)| *x == p && *y == c)
            .map(|l| l.2)
    };
    for r in &played.runs {
        if r.status == RunStatus::Running {
            bad.push(format!("run {} of {} is still running", r.id, r.job_id));
        }
    }
    // Released runs: their upstream exists, is a parent, ended as asked, before.
    let mut released: HashMap<(String, i64), Vec<i64>> = HashMap::new();
    for r in played
        .runs
        .iter()
        .filter(|r| r.trigger == TriggerKind::Upstream)
    {
        if r.status == RunStatus::Returned {
            continue;
        }
        if r.job_id.as_str() == "j" {
            let names: Vec<&str> = r.context.upstream.iter().map(|u| u.job.as_str()).collect();
            let one_instant = r
                .context
                .upstream
                .windows(2)
                .all(|w| w[0].fire_at == w[1].fire_at);
            if names != ["a", "b"] || !one_instant {
                bad.push(format!(
                    "join run {} released by {:?}",
                    r.id, r.context.upstream
                ));
            }
        } else if r.context.upstream.len() != 1 {
            bad.push(format!("run {} released by {:?}", r.id, r.context.upstream));
        }
        for u in &r.context.upstream {
            released
                .entry((r.job_id.to_string(), u.run.0))
                .or_default()
                .push(r.id.0);
            let Some(on) = link(u.job.as_str(), r.job_id.as_str()) else {
                bad.push(format!(
                    "run {} of {} released by non-parent {}",
                    r.id, r.job_id, u.job
                ));
                continue;
            };
            let Some(p) = by_id.get(&u.run.0) else {
                bad.push(format!("run {} names missing upstream run {}", r.id, u.run));
                continue;
            };
            if p.job_id != u.job || p.status != u.status || !on.matches(p.status, p.will_retry) {
                bad.push(format!("run {} released by {:?}, which is {p:?}", r.id, u));
            }
            match p.ended_at {
                Some(end) if end <= r.started_at => {}
                _ => bad.push(format!(
                    "run {} of {} started at {} before its upstream run {} ended ({:?})",
                    r.id, r.job_id, r.started_at, p.id, p.ended_at
                )),
            }
            // A released parent passes its own upstream's instant down.
            if let Some(pu) = p.context.upstream.first()
                && pu.fire_at != u.fire_at
            {
                bad.push(format!(
                    "run {} carries instant {} but its parent's is {}",
                    r.id, u.fire_at, pu.fire_at
                ));
            }
        }
    }
    for ((child, parent_run), runs) in &released {
        if runs.len() > 1 {
            bad.push(format!(
                "{child} ran {} times for upstream run {parent_run}: {runs:?}",
                runs.len()
            ));
        }
    }
    // None lost: every parent run that ended its fire as a link asks released it.
    let queued: Vec<(String, i64)> = played
        .queued
        .iter()
        .map(|q| (q.job.to_string(), q.from.run.0))
        .collect();
    for p in played.runs.iter().filter(|r| ended_fire(r)) {
        for (parent, child, on) in LINKS {
            if p.job_id.as_str() != parent || !on.matches(p.status, p.will_retry) {
                continue;
            }
            let ran = released.contains_key(&(child.to_string(), p.id.0));
            let waits = queued.contains(&(child.to_string(), p.id.0));
            if !ran && !waits {
                bad.push(format!(
                    "{parent} run {} ({:?}) never released {child}",
                    p.id, p.status
                ));
                if std::env::var("JOBWHEEL_SIM_DEBUG").is_ok() {
                    for r in played
                        .runs
                        .iter()
                        .filter(|r| r.job_id.as_str() == child || r.id.0.abs_diff(p.id.0) <= 3)
                    {
                        let up: Vec<_> = r
                            .context
                            .upstream
                            .iter()
                            .map(|u| (u.job.to_string(), u.fire_at, u.run.0))
                            .collect();
                        eprintln!(
                            "  {} {} fire {} {:?} att {} {:?} start {} end {:?} retry {} up {up:?}",
                            r.id,
                            r.job_id,
                            r.fire_at,
                            r.trigger,
                            r.attempt,
                            r.status,
                            r.started_at,
                            r.ended_at,
                            r.will_retry
                        );
                    }
                }
            }
            if waits && child != "j" {
                bad.push(format!(
                    "{child} still has the release of {parent} run {} queued",
                    p.id
                ));
            }
        }
    }
    // What stays queued is half a join: its other half never came.
    for q in &played.queued {
        let other = if q.from.job.as_str() == "a" { "b" } else { "a" };
        if q.job.as_str() != "j"
            || played
                .queued
                .iter()
                .any(|o| o.from.job.as_str() == other && o.from.fire_at == q.from.fire_at)
        {
            bad.push(format!("left queued: {q:?}"));
        }
    }
    bad.truncate(limit);
    bad
}
