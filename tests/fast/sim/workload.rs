//! A simulated workload, generated from one seed.

use jobwheel::{Job, MisfirePolicy, RetryPolicy, Schedule, Timestamp};
use std::time::Duration;

/// How a recurring job fires, in a form the checker evaluates on its own.
#[derive(Debug, Clone)]
pub enum Sched {
    /// Every `n` ms, aligned to the Unix epoch.
    Every(u64),
    /// A 6-field cron expression in UTC (seconds first), evaluated by the `cron` crate.
    Cron(&'static str),
    /// Once, at the instant.
    Once(Timestamp),
}

/// One job as the checker sees it.
#[derive(Debug, Clone)]
pub struct Spec {
    pub id: String,
    pub sched: Sched,
    pub misfire: MisfirePolicy,
    pub attempts: u32,
    pub retry_base: Duration,
    pub ms: u64,
    pub fail_pct: u64,
}

impl Spec {
    /// The longest a job can stay busy with one fire: every attempt's handler and
    /// every backoff in between (the retry delay doubles, capped at 30 s).
    pub fn busy_bound(&self) -> Duration {
        let mut d = Duration::from_millis(self.ms) * self.attempts;
        for n in 1..self.attempts {
            d += (self.retry_base * 2u32.pow(n - 1)).min(Duration::from_secs(30));
        }
        d
    }

    fn job(&self) -> Job {
        let schedule = match &self.sched {
            Sched::Every(ms) => Schedule::every(Duration::from_millis(*ms)).unwrap(),
            Sched::Cron(expr) => Schedule::cron(expr, "UTC").unwrap(),
            Sched::Once(at) => Schedule::once(*at),
        };
        Job::builder(&self.id, "h", schedule)
            .payload(serde_json::json!({ "ms": self.ms, "fail_pct": self.fail_pct }))
            .misfire(self.misfire)
            .retry(
                RetryPolicy::new(self.attempts, self.retry_base, Duration::from_secs(30)).unwrap(),
            )
            .build()
            .unwrap()
    }
}

/// Something the driver does at an offset from the start, through node `node`.
#[derive(Debug, Clone)]
pub enum Op {
    Upsert { node: usize, job: Box<Job> },
    Pause { node: usize, id: String },
    Resume { node: usize, id: String },
    Remove { node: usize, id: String },
}

impl Op {
    pub fn node(&self) -> usize {
        match self {
            Op::Upsert { node, .. }
            | Op::Pause { node, .. }
            | Op::Resume { node, .. }
            | Op::Remove { node, .. } => *node,
        }
    }
}

/// A job's life: the specs, and when it was active.
#[derive(Debug, Clone)]
pub struct Life {
    pub spec: Spec,
    /// Intervals `[from, to)` (offsets) during which it was stored and enabled; the
    /// last one ends when the nodes stop.
    pub active: Vec<(Duration, Duration)>,
}

/// A whole workload.
#[derive(Debug, Clone)]
pub struct Workload {
    pub seed: u64,
    /// The store's clock at the start.
    pub base: Timestamp,
    /// Operations happen within `length`; the nodes run `tail` longer, then stop.
    pub length: Duration,
    pub tail: Duration,
    /// Executor slots per node.
    pub nodes: Vec<usize>,
    /// Sorted by offset.
    pub ops: Vec<(Duration, Op)>,
    pub lives: Vec<Life>,
    /// How slowly the store and the locks answer (`None`: at once).
    pub latency: Option<Latency>,
    /// Starts and finishes in a thousand the store writes but answers with an
    /// error (0 in generated workloads; the lost-answer simulation sets it).
    pub lost_per_mille: u32,
    /// Whether the nodes keep each job's lease in the store's job rows (the store's
    /// own locks: a due fire claimed and started in one call) rather than in a lock
    /// provider of their own: odd seeds.
    pub row_leases: bool,
}

/// The store's delay model of a workload: each call costs `per_call` plus `per_item`
/// per item, with at most `connections` calls served at once.
#[derive(Debug, Clone, Copy)]
pub struct Latency {
    pub per_call: Duration,
    pub per_item: Duration,
    pub connections: usize,
}

/// The engine's defaults the lag bound is stated in: the poll interval and the most
/// items one store call names (the default `write_batch`; the default `claim_batch`
/// is larger, but a claim names only what a node has room for, fewer in these
/// workloads, so the bound is checked against the smaller call).
const POLL: Duration = Duration::from_secs(1);
const MAX_BATCH: u32 = 1_000;

impl Workload {
    /// The longest a store call takes once it has a connection: its fixed cost and a
    /// full batch's items (zero without a delay model).
    pub fn round_trip(&self) -> Duration {
        self.latency
            .map_or(Duration::ZERO, |l| l.per_call + l.per_item * MAX_BATCH)
    }

    /// The documented lag bound for a due fire while a slot is free: two poll
    /// intervals (a fire armed on a node that filled up goes back after half of one;
    /// another node claims it at its next poll) plus 50 ms for the start itself, plus
    /// eight store round trips (the poll's clock read, due scan and grant; the start;
    /// and each waiting for a call of its kind already in flight) when the store keeps
    /// up with the load.
    pub fn lag_bound(&self) -> Duration {
        2 * POLL + Duration::from_millis(50) + 8 * self.round_trip()
    }
}

/// Half the seeds get a slow store: 1-10 ms per call, 0-50 µs per item, 4-16
/// connections shared by every node (its own generator, so the workload of a seed
/// is the same with or without it). Slow enough that a fire's store calls take as
/// long as a quick handler, within what keeps up with the workloads' streams and
/// bursts (a store that cannot is outside the lag bound's condition).
fn latency(seed: u64) -> Option<Latency> {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x1a7e_0c7e);
    (rng.u32(0..2) == 1).then(|| Latency {
        per_call: Duration::from_millis([1, 2, 5, 10][rng.usize(0..4)]),
        per_item: Duration::from_micros([0, 10, 50][rng.usize(0..3)]),
        connections: [4, 8, 16][rng.usize(0..3)],
    })
}

const PERIODS_MS: [u64; 12] = [
    1_000, 1_000, 2_000, 3_000, 5_000, 10_000, 15_000, 30_000, 60_000, 300_000, 900_000, 3_600_000,
];
const CRONS: [&str; 5] = [
    "*/7 * * * * *",
    "0 * * * * *",
    "0 0/15 * * * *",
    "30 */2 * * * *",
    "10 0 * * * *",
];

/// How long the nodes run after the last operation.
const TAIL: Duration = Duration::from_secs(30);

fn secs(rng: &mut fastrand::Rng, lo: u64, hi: u64) -> Duration {
    Duration::from_millis(rng.u64(lo * 1000..=hi * 1000))
}

/// Handler time: mostly quick, sometimes slow (longer than short periods).
fn handler_ms(rng: &mut fastrand::Rng) -> u64 {
    match rng.u32(0..100) {
        0..=69 => rng.u64(0..=50),
        70..=89 => rng.u64(50..=500),
        _ => rng.u64(1_000..=15_000),
    }
}

fn policy(rng: &mut fastrand::Rng) -> MisfirePolicy {
    match rng.u32(0..3) {
        0 => MisfirePolicy::FireOnce,
        1 => MisfirePolicy::Skip,
        _ => MisfirePolicy::CatchUp {
            max: rng.u32(1..=5),
        },
    }
}

impl Workload {
    /// The workload of `seed`.
    pub fn generate(seed: u64) -> Workload {
        let mut rng = fastrand::Rng::with_seed(seed);
        let base = Timestamp::from_millis(
            1_767_225_600_000 + rng.i64(0..86_400_000), // 2026-01-01 plus up to a day
        );
        let length = secs(&mut rng, 600, 2_400);
        let nodes: Vec<usize> = (0..rng.usize(1..=3))
            .map(|_| [4, 8, 16, 64][rng.usize(0..4)])
            .collect();
        let node = |rng: &mut fastrand::Rng| rng.usize(0..3);
        let mut ops: Vec<(Duration, Op)> = Vec::new();
        let mut lives = Vec::new();
        for j in 0..rng.usize(2..=12) {
            let sched = if rng.u32(0..4) == 0 {
                Sched::Cron(CRONS[rng.usize(0..CRONS.len())])
            } else {
                Sched::Every(PERIODS_MS[rng.usize(0..PERIODS_MS.len())])
            };
            let spec = Spec {
                id: format!("r{j:02}"),
                sched,
                misfire: policy(&mut rng),
                attempts: rng.u32(1..=3),
                retry_base: secs(&mut rng, 1, 5),
                ms: handler_ms(&mut rng),
                fail_pct: [0, 0, 10, 50][rng.usize(0..4)],
            };
            let created = secs(&mut rng, 0, 60);
            ops.push((
                created,
                Op::Upsert {
                    node: node(&mut rng),
                    job: Box::new(spec.job()),
                },
            ));
            let mut active = Vec::new();
            let mut from = created;
            // Up to two pauses, maybe a removal.
            let mut t = created;
            let mut removed = false;
            for _ in 0..rng.usize(0..=2) {
                let pause = t + secs(&mut rng, 30, 600);
                let resume = pause + secs(&mut rng, 5, 300);
                if resume >= length {
                    break;
                }
                ops.push((
                    pause,
                    Op::Pause {
                        node: node(&mut rng),
                        id: spec.id.clone(),
                    },
                ));
                ops.push((
                    resume,
                    Op::Resume {
                        node: node(&mut rng),
                        id: spec.id.clone(),
                    },
                ));
                active.push((from, pause));
                from = resume;
                t = resume;
            }
            if rng.u32(0..5) == 0 {
                let at = t + secs(&mut rng, 30, 600);
                if at < length {
                    ops.push((
                        at,
                        Op::Remove {
                            node: node(&mut rng),
                            id: spec.id.clone(),
                        },
                    ));
                    active.push((from, at));
                    removed = true;
                }
            }
            if !removed {
                active.push((from, length + TAIL));
            }
            lives.push(Life { spec, active });
        }
        // One-shot streams and bursts.
        let mut k = 0;
        let mut one_shot = |rng: &mut fastrand::Rng, created: Duration, lead: Duration| {
            k += 1;
            let spec = Spec {
                id: format!("o{k:05}"),
                sched: Sched::Once(base + created + lead),
                misfire: MisfirePolicy::FireOnce,
                attempts: rng.u32(1..=2),
                retry_base: Duration::from_secs(1),
                ms: rng.u64(0..=200),
                fail_pct: [0, 0, 0, 20][rng.usize(0..4)],
            };
            let op = Op::Upsert {
                node: rng.usize(0..3),
                job: Box::new(spec.job()),
            };
            (
                (created, op),
                Life {
                    spec,
                    active: vec![(created, length + TAIL)],
                },
            )
        };
        for _ in 0..rng.usize(0..=3) {
            let start = secs(&mut rng, 0, length.as_secs().saturating_sub(60));
            let span = secs(&mut rng, 10, 180);
            let per_sec = rng.u64(1..=40);
            let lead = secs(&mut rng, 0, 5);
            let gap = Duration::from_millis(1000 / per_sec);
            let mut t = start;
            while t < start + span && t < length {
                let (op, life) = one_shot(&mut rng, t, lead);
                ops.push(op);
                lives.push(life);
                t += gap;
            }
        }
        for _ in 0..rng.usize(0..=3) {
            let at = secs(&mut rng, 0, length.as_secs().saturating_sub(30));
            let lead = secs(&mut rng, 0, 4);
            for _ in 0..rng.usize(50..=400) {
                let (op, life) = one_shot(&mut rng, at, lead);
                ops.push(op);
                lives.push(life);
            }
        }
        ops.sort_by_key(|(t, _)| *t);
        Workload {
            seed,
            base,
            length,
            tail: TAIL,
            nodes,
            ops,
            lives,
            latency: latency(seed),
            lost_per_mille: 0,
            row_leases: seed % 2 == 1,
        }
    }
}
