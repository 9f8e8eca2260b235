//! The checker: derives every job's fires from its schedule (interval arithmetic,
//! the `cron` crate, the one-shot's instant) and holds the run log and the handler
//! executions against them.

use super::workload::{Life, Sched, Workload};
use super::{Exec, Played};
use jobwheel::{RunRecord, RunStatus, Timestamp, TriggerKind};
use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

/// The fires of `sched` in `[from, to)`.
pub fn fires(sched: &Sched, from: Timestamp, to: Timestamp) -> Vec<Timestamp> {
    match sched {
        Sched::Every(p) => {
            let p = *p as i64;
            let mut k = from.as_millis().div_euclid(p);
            if k * p < from.as_millis() {
                k += 1;
            }
            let mut out = Vec::new();
            while k * p < to.as_millis() {
                out.push(Timestamp::from_millis(k * p));
                k += 1;
            }
            out
        }
        Sched::Cron(expr) => {
            let s = cron::Schedule::from_str(expr).unwrap();
            let start = Timestamp::from_millis(from.as_millis() - 1).to_datetime();
            s.after(&start)
                .map(|t| Timestamp::from_datetime(&t))
                .take_while(|t| *t < to)
                .collect()
        }
        Sched::Once(at) => {
            if *at >= from && *at < to {
                vec![*at]
            } else {
                Vec::new()
            }
        }
    }
}

/// Prints the run records and handler executions that started within `window`
/// (`"from_ms,to_ms"`, milliseconds after the workload's base), in start order: what
/// each node ran, under which token, when, to trace a failing seed.
fn dump(w: &Workload, played: &Played, window: &str) {
    let ms = |t: Timestamp| t.as_millis() - w.base.as_millis();
    let (from, to) = window
        .split_once(',')
        .and_then(|(a, b)| Some((a.parse::<i64>().ok()?, b.parse::<i64>().ok()?)))
        .expect("JOBWHEEL_SIM_DUMP is from_ms,to_ms");
    let inside = |t: Timestamp| (from..=to).contains(&ms(t));
    let mut runs: Vec<&RunRecord> = played
        .runs
        .iter()
        .filter(|r| inside(r.started_at))
        .collect();
    runs.sort_by_key(|r| r.started_at);
    for r in runs {
        eprintln!(
            "run {} {} fire {} node {} attempt {} token {} {:?} {}..{:?}",
            r.id,
            r.job_id,
            ms(r.fire_at),
            r.node,
            r.attempt,
            r.token,
            r.status,
            ms(r.started_at),
            r.ended_at.map(ms)
        );
    }
    let mut execs: Vec<&Exec> = played.execs.iter().filter(|e| inside(e.start)).collect();
    execs.sort_by_key(|e| e.start);
    for e in execs {
        eprintln!(
            "exec {} fire {} node {} {}..{}",
            e.job,
            ms(e.fire_at),
            e.node,
            ms(e.start),
            ms(e.end)
        );
    }
}

/// Every violation found, at most `limit` of them.
pub fn check(w: &Workload, played: &Played, limit: usize) -> Vec<String> {
    let mut bad = Vec::new();
    let base = w.base;
    if played.stuck > 0 {
        bad.push(format!(
            "{} runs still running after shutdown",
            played.stuck
        ));
    }
    if let Ok(window) = std::env::var("JOBWHEEL_SIM_DUMP") {
        dump(w, played, &window);
    }
    let mut runs_of: HashMap<&str, Vec<&RunRecord>> = HashMap::new();
    for r in &played.runs {
        runs_of.entry(r.job_id.as_str()).or_default().push(r);
    }
    for runs in runs_of.values_mut() {
        runs.sort_by_key(|r| r.id);
    }
    let mut exec_of: HashMap<(&str, Timestamp, u32), &Exec> = HashMap::new();
    let mut exec_of_run: HashMap<jobwheel::RunId, &Exec> = HashMap::new();
    for e in &played.execs {
        // (d) never early.
        if e.start < e.fire_at {
            bad.push(format!(
                "{} fire {} started early at {}",
                e.job, e.fire_at, e.start
            ));
        }
        if (e.attempt > 1) != (e.trigger == TriggerKind::Retry) {
            bad.push(format!(
                "{} fire {}: attempt {} ran as {:?}",
                e.job, e.fire_at, e.attempt, e.trigger
            ));
        }
        // (b) no run executed twice.
        if let Some(other) = exec_of_run.insert(e.run, e) {
            bad.push(format!(
                "{} run {:?} executed twice: on {} at {} and on {} at {}",
                e.job, e.run, other.node, other.start, e.node, e.start
            ));
        }
        // (b) no attempt ran twice. With lost answers a run recorded `lost` is run
        // again at its own instant as the next attempt, and a failure's retry is a
        // fire at its retry instant: the two can share an instant and an attempt
        // number (both retries, of different fires), so there (b) is the check by
        // run above.
        if let Some(other) = exec_of.insert((e.job.as_str(), e.fire_at, e.attempt), e)
            && w.lost_per_mille == 0
        {
            bad.push(format!(
                "{} fire {} attempt {} ran twice: on {} at {} and on {} at {}",
                e.job, e.fire_at, e.attempt, other.node, other.start, e.node, e.start
            ));
        }
    }
    let counted: u64 = played.metrics.iter().map(|m| m.misfired.total()).sum();
    let recorded: u64 = played
        .runs
        .iter()
        .filter_map(|r| r.covers.map(|c| c.fires))
        .sum();
    if counted != recorded {
        bad.push(format!(
            "metrics count {counted} misfired fires, the run log {recorded}"
        ));
    }
    let busy = Busy::new(w, played);
    for life in &w.lives {
        let runs = runs_of.remove(life.spec.id.as_str()).unwrap_or_default();
        let id = life.spec.id.as_str();
        let spans: Vec<Span> = life
            .active
            .iter()
            .map(|(from, to)| Span {
                from: played.window(id, *from),
                to: played.window(id, *to),
            })
            .collect();
        let job = Job {
            life,
            spans: &spans,
            runs: &runs,
            lost_answers: w.lost_per_mille > 0,
        };
        check_job(base, w.lag_bound(), &job, &exec_of, &busy, &mut bad);
        if bad.len() >= limit {
            break;
        }
    }
    bad.truncate(limit);
    if !bad.is_empty() {
        bad.insert(
            0,
            format!("seed {}: {} violations (first {limit}):", w.seed, bad.len()),
        );
    }
    bad
}

/// A stretch in which a job was active: each end is the window in which the
/// operation that made it took effect (earliest, latest).
struct Span {
    from: (Duration, Duration),
    to: (Duration, Duration),
}

/// Prints a job's active stretches (`JOBWHEEL_SIM_DEBUG`).
fn print_spans(base: Timestamp, id: &str, spans: &[Span]) {
    for span in spans {
        eprintln!(
            "  {id} active {}..{} to {}..{}",
            base + span.from.0,
            base + span.from.1,
            base + span.to.0,
            base + span.to.1
        );
    }
}

/// One job as the checks read it: its life, when it was active, its records.
struct Job<'a> {
    life: &'a Life,
    spans: &'a [Span],
    runs: &'a [&'a RunRecord],
    /// Whether the store lost answers ([`Workload::lost_per_mille`]): only then may
    /// a first attempt's record be a start written without its node knowing.
    lost_answers: bool,
}

fn check_job(
    base: Timestamp,
    bound: Duration,
    job: &Job<'_>,
    exec_of: &HashMap<(&str, Timestamp, u32), &Exec>,
    busy: &Busy,
    bad: &mut Vec<String>,
) {
    let (life, runs) = (job.life, job.runs);
    let spec = &life.spec;
    let id = spec.id.as_str();
    // How far behind its schedule a job can legitimately be when it stops: one busy
    // fire (every attempt and backoff), or under `CatchUp { max }` up to `max` more
    // fires queued behind it.
    let queued = match spec.misfire {
        jobwheel::MisfirePolicy::CatchUp { max } => max + 1,
        _ => 1,
    };
    let grace = (spec.busy_bound() + bound * (spec.attempts + 1)) * queued + Duration::from_secs(2);
    let mut expected: Vec<Timestamp> = Vec::new();
    // Fires the job had time to run, with the end of the stretch they belong to.
    let mut owed: Vec<(Timestamp, Timestamp)> = Vec::new();
    for span in job.spans {
        // A fire while the operation that starts or ends the stretch is under way
        // (at the very instant of a pause or removal, or anywhere in its window when
        // the store is slow) races that operation: running it and not running it
        // are both right. It may be seen, never owed.
        let (from, to) = (base + span.from.0, base + span.to.1);
        let at_end = Timestamp::from_millis(to.as_millis() + 1);
        let (owed_from, owed_to) = (base + span.from.1, base + span.to.0);
        for f in fires(&spec.sched, from, at_end) {
            expected.push(f);
            if f >= owed_from && f + grace < owed_to {
                owed.push((f, owed_to));
            }
        }
    }
    // Which fire each record accounts for.
    let mut seen: HashMap<Timestamp, u32> = HashMap::new();
    for r in runs {
        if r.started_at < r.fire_at {
            bad.push(format!("{id}: record {:?} started before its fire", r.id));
        }
        if r.status == RunStatus::Returned {
            // (e) a fire given back executed nothing: its attempt's execution (by a
            // later record) began after it was given back.
            let ended = r.ended_at.unwrap_or(r.started_at);
            if let Some(e) = exec_of.get(&(id, r.fire_at, r.attempt))
                && e.start < ended
            {
                bad.push(format!(
                    "{id}: record {:?} was given back at {ended} but its fire {} attempt {} executed at {} on {}",
                    r.id, r.fire_at, r.attempt, e.start, e.node
                ));
            }
            continue;
        }
        let first_attempt = r.attempt == 1 && r.trigger != TriggerKind::Retry;
        if !first_attempt {
            continue;
        }
        let covered: Vec<Timestamp> = match r.covers {
            Some(c) => {
                if c.first != r.fire_at {
                    bad.push(format!(
                        "{id}: span of {:?} does not start at its fire",
                        r.id
                    ));
                }
                let end = Timestamp::from_millis(c.through.as_millis() + 1);
                let inside: Vec<Timestamp> = expected
                    .iter()
                    .copied()
                    .filter(|f| *f >= c.first && *f < end)
                    .collect();
                // The engine's count against the checker's own.
                let all = fires(&spec.sched, c.first, end);
                if all.len() as u64 != c.fires {
                    bad.push(format!(
                        "{id}: record {:?} says it covers {} fires, the schedule has {} in [{}, {}]",
                        r.id,
                        c.fires,
                        all.len(),
                        c.first,
                        c.through
                    ));
                }
                inside
            }
            None if r.trigger == TriggerKind::Schedule => vec![r.fire_at],
            None => {
                bad.push(format!(
                    "{id}: record {:?} ({:?}) has no span",
                    r.id, r.trigger
                ));
                Vec::new()
            }
        };
        for f in covered {
            *seen.entry(f).or_default() += 1;
        }
        check_lag(base, bound, job, r, exec_of, busy, bad);
    }
    // (b) no fire accounted for twice.
    for (f, n) in &seen {
        if *n > 1 {
            bad.push(format!("{id}: fire {f} accounted for {n} times"));
        }
    }
    // (a) every owed fire ran or is accounted for by its misfire policy, unless every
    // slot stayed busy from when it could start (its instant, after the job's
    // previous run) until the job stopped: fires start in fire order, so a fire
    // queued behind a backlog that outlasts the job is never reached, which is the
    // bound (c) states too ("whenever a slot was free").
    let could_run = |f: Timestamp, to: Timestamp| {
        let ready = runs
            .iter()
            .filter(|r| r.started_at < to)
            .filter_map(|r| r.ended_at)
            .fold(f, Timestamp::max);
        ready < to && busy.idle_slot(ready, to, bound).is_some()
    };
    let missing: Vec<&Timestamp> = owed
        .iter()
        .filter(|(f, to)| !seen.contains_key(f) && could_run(*f, *to))
        .map(|(f, _)| f)
        .collect();
    if !missing.is_empty() && std::env::var("JOBWHEEL_SIM_DEBUG").is_ok() {
        let first = *missing[0];
        for r in runs {
            if r.fire_at + Duration::from_secs(120) >= first
                && r.fire_at <= first + Duration::from_secs(120)
            {
                eprintln!(
                    "  {id} run {:?} fire {} {:?} attempt {} {:?} started {} ended {:?} covers {:?} node {}",
                    r.id,
                    r.fire_at,
                    r.trigger,
                    r.attempt,
                    r.status,
                    r.started_at,
                    r.ended_at,
                    r.covers,
                    r.node
                );
            }
        }
        print_spans(base, id, job.spans);
        eprintln!("  missing {missing:?}");
    }
    if !missing.is_empty() {
        bad.push(format!(
            "{id} ({:?}, {:?}): {} of {} owed fires neither ran nor were recorded, first {}",
            spec.sched,
            spec.misfire,
            missing.len(),
            owed.len(),
            missing[0]
        ));
    }
    // Nothing outside the schedule.
    for f in seen.keys() {
        if !expected.contains(f) {
            if std::env::var("JOBWHEEL_SIM_DEBUG").is_ok() {
                print_spans(base, id, job.spans);
            }
            bad.push(format!("{id}: fire {f} is not a fire of its schedule"));
        }
    }
}

/// (c): a first attempt starts within the lag bound ([`Workload::lag_bound`]) of
/// when it could start (its
/// instant, the end of the job's previous run, the job's activation) whenever a slot
/// is free: a fire that waited longer must not have waited while some node kept a
/// slot free for longer than the bound. (A burst that fills every slot makes its
/// last fires late; a node idling beside due work is what this catches.)
fn check_lag(
    base: Timestamp,
    bound: Duration,
    job: &Job<'_>,
    r: &RunRecord,
    exec_of: &HashMap<(&str, Timestamp, u32), &Exec>,
    busy: &Busy,
    bad: &mut Vec<String>,
) {
    let (id, runs) = (job.life.spec.id.as_str(), job.runs);
    let start = match exec_of.get(&(id, r.fire_at, 1)) {
        Some(e) => e.start,
        None if r.status == RunStatus::Misfired => r.started_at,
        // A start the store wrote while its node heard an error: no handler ran, the
        // node that settled it recorded it lost and the fire's retry ran it. Its
        // record was written when the node started it.
        None if job.lost_answers
            && r.status == RunStatus::Lost
            && r.error
                .as_deref()
                .is_some_and(|e| e.contains("answer was lost")) =>
        {
            r.started_at
        }
        None => {
            bad.push(format!("{id}: record {:?} ran no handler", r.id));
            return;
        }
    };
    let mut ready = r.fire_at;
    for span in job.spans {
        // Active from somewhere in the window of the operation: no later than the
        // run's start, which came after it.
        let (early, late) = (base + span.from.0, base + span.from.1);
        if early <= start {
            ready = ready.max(late.min(start));
        }
    }
    // A record given back is not a run the fire waited for: the time it cost counts
    // as lag.
    for p in runs
        .iter()
        .filter(|p| p.id < r.id && p.status != RunStatus::Returned)
    {
        if let Some(end) = p.ended_at {
            ready = ready.max(end);
        }
    }
    let lag = start.duration_since(ready);
    if lag <= bound {
        return;
    }
    if let Some((node, from, to)) = busy.idle_slot(ready, start, bound) {
        if std::env::var("JOBWHEEL_SIM_DEBUG").is_ok() {
            for &(s, e) in &busy.runs[node] {
                if e >= ready && s <= start {
                    eprintln!("  node {node}: run {s} .. {e}");
                }
            }
        }
        bad.push(format!(
            "{id}: fire {} started {lag:?} after it could ({ready}), while node {node} kept a slot free from {from} to {to}",
            r.fire_at
        ));
    }
}

/// Handler executions per node, to tell whether a node had a free slot.
struct Busy {
    slots: Vec<usize>,
    /// Per node, `(start, end)` of every execution.
    runs: Vec<Vec<(Timestamp, Timestamp)>>,
}

impl Busy {
    fn new(w: &Workload, played: &Played) -> Busy {
        let mut runs = vec![Vec::new(); w.nodes.len()];
        for e in &played.execs {
            let n: usize = e.node.trim_start_matches('n').parse().unwrap();
            runs[n].push((e.start, e.end));
        }
        Busy {
            slots: w.nodes.clone(),
            runs,
        }
    }

    /// A node that kept a slot free for longer than `longer_than` within
    /// `[from, to]`, and that stretch.
    fn idle_slot(
        &self,
        from: Timestamp,
        to: Timestamp,
        longer_than: Duration,
    ) -> Option<(usize, Timestamp, Timestamp)> {
        (0..self.slots.len()).find_map(|n| {
            let mut edges: Vec<(Timestamp, i32)> = Vec::new();
            let mut running = 0i32;
            for &(s, e) in &self.runs[n] {
                if e <= from || s > to || e == s {
                    continue;
                }
                if s <= from {
                    running += 1;
                } else {
                    edges.push((s, 1));
                }
                if e <= to {
                    edges.push((e, -1));
                }
            }
            // Starts before ends at one instant: a slot handed straight on is not free.
            edges.sort_by_key(|&(t, d)| (t, -d));
            let slots = self.slots[n] as i32;
            let mut free_since = (running < slots).then_some(from);
            for (t, d) in edges {
                running += d;
                match (free_since, running < slots) {
                    (Some(since), false) => {
                        if t.duration_since(since) > longer_than {
                            return Some((n, since, t));
                        }
                        free_since = None;
                    }
                    (None, true) => free_since = Some(t),
                    _ => {}
                }
            }
            free_since
                .filter(|since| to.duration_since(*since) > longer_than)
                .map(|since| (n, since, to))
        })
    }
}
