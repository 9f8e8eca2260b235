//! The randomized scheduling simulation (see `sim/`): many seeds, each a workload of
//! recurring jobs (periods from 1 s to 1 h, interval and cron), one-shot streams and
//! bursts, slow and failing handlers, pauses and removals, on 1-3 nodes sharing the
//! memory store, played on tokio's paused clock; half the seeds give the store a
//! delay model (1-50 ms per call, up to 100 µs per item, 2-16 connections shared by
//! the nodes' store and lock calls). For every seed the checker asserts:
//! (a) every fire ran or is accounted for by its misfire policy in the run log
//! (unless every slot stayed busy from when it could start until the job stopped),
//! (b) no fire ran twice (no run record executed twice, and no attempt of a fire), (c) lag stays under the documented bound whenever a slot
//! was free (two poll intervals and 50 ms, plus eight store round trips with a
//! delay model), (d) no fire ran early, (e) a fire given back unexecuted (`returned`)
//! executed nothing before it was given back.
//! `simulation_with_lost_answers` plays the seeds with a delay model again with a
//! store that writes 2 % of the starts and finishes but loses their answers, under
//! the same checks (a start written without its node knowing may account for its
//! fire with a `lost` record, and its retry runs the fire; (b) is checked by run
//! record there, since that retry keeps its fire's instant and may share it and its
//! attempt number with a failure's retry, which is a fire at its retry instant).
//!
//! `JOBWHEEL_SIM_SEEDS=n` runs n seeds per test (default 8, four tests); a failure
//! prints its seed, and `JOBWHEEL_SIM_SEED=s` replays that seed alone;
//! `JOBWHEEL_SIM_DEBUG=1` adds the busy node's runs to each lag violation and
//! `JOBWHEEL_SIM_DUMP=from_ms,to_ms` prints every run record and handler execution
//! that started in that stretch after the workload's base (add `-- --nocapture`).

use crate::sim;

use sim::workload::Workload;

fn seeds(offset: u64) -> Vec<u64> {
    if let Ok(s) = std::env::var("JOBWHEEL_SIM_SEED") {
        return if offset == 0 {
            vec![s.parse().expect("JOBWHEEL_SIM_SEED is a number")]
        } else {
            Vec::new()
        };
    }
    let n: u64 = std::env::var("JOBWHEEL_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    (0..n).map(|i| 1 + offset + 4 * i).collect()
}

fn simulate(seed: u64) {
    play(Workload::generate(seed));
}

fn play(w: Workload) {
    let seed = w.seed;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let played = rt.block_on(sim::run(&w));
    let bad = sim::check::check(&w, &played, 20);
    let fires = played.execs.len();
    let misfires = played.runs.iter().filter(|r| r.covers.is_some()).count();
    let retries = played.runs.iter().filter(|r| r.attempt > 1).count();
    println!(
        "seed {seed}: {} nodes {:?}, store {:?}, {} leases, {} jobs, {} ops, {:?} simulated, {fires} executions, {} records ({misfires} misfire, {retries} retries)",
        w.nodes.len(),
        w.nodes,
        w.latency,
        if w.row_leases { "job-row" } else { "own" },
        w.lives.len(),
        w.ops.len(),
        w.length + w.tail,
        played.runs.len()
    );
    assert!(
        bad.is_empty(),
        "seed {seed} failed (replay: JOBWHEEL_SIM_SEED={seed} cargo test --test engine_sim -- --nocapture):\n{}",
        bad.join("\n")
    );
}

fn run_seeds(offset: u64) {
    for seed in seeds(offset) {
        simulate(seed);
    }
}

#[test]
fn simulation_seeds_a() {
    run_seeds(0);
}

#[test]
fn simulation_seeds_b() {
    run_seeds(1);
}

#[test]
fn simulation_seeds_c() {
    run_seeds(2);
}

#[test]
fn simulation_seeds_d() {
    run_seeds(3);
}

/// Seeds that once found a fault, replayed on every run: 3094 (a node that stored a
/// stream of one-shots due at one instant restarted its sweep on every store and
/// kept a slot free for 3 s beside a backlog; failed every time) and 873 (a stopping
/// node started a fire whose claim was in flight; a race decided by `select!`'s
/// random order, failed about one run in five, so it is played five times).
#[test]
fn simulation_regression_seeds() {
    if std::env::var("JOBWHEEL_SIM_SEED").is_ok() {
        return;
    }
    simulate(3094);
    for _ in 0..5 {
        simulate(873);
    }
}

/// The store writes 2 % of the starts and finishes and loses their answers (a
/// connection cut after the commit), on seeds with a delay model: every check above
/// still holds — a start written without its node knowing is recorded lost and run
/// again (its record accounts for the fire), a finish written twice is its node's
/// own, and no run is left running. `JOBWHEEL_SIM_SEEDS` seeds, as the others;
/// `JOBWHEEL_SIM_SEED=s` replays seed s here too (when it has a delay model).
#[test]
fn simulation_with_lost_answers() {
    let replay = std::env::var("JOBWHEEL_SIM_SEED").is_ok();
    let mut played = 0;
    for seed in seeds(0)
        .into_iter()
        .map(|s| if replay { s } else { s + 10_000 })
    {
        let mut w = Workload::generate(seed);
        if w.latency.is_none() {
            continue;
        }
        w.lost_per_mille = 20;
        play(w);
        played += 1;
    }
    assert!(replay || played > 0, "some seed has a delay model");
}

/// Dependent jobs (`sim/deps.rs`): a graph with a multi-parent child, a join, and
/// children on failure and success, under random handler times, failures, retries,
/// a pause, 1-3 nodes and, for half the seeds, a slow store — played again losing
/// 2 % of the start and finish answers. Every released run names existing upstream
/// runs that ended as the link asks and before it started, the join runs only with
/// both halves of one instant, and every fire's end released each child exactly
/// once (or waits, as half a join). `JOBWHEEL_SIM_SEEDS` seeds, as the others.
#[test]
fn simulation_with_dependencies() {
    let replay = std::env::var("JOBWHEEL_SIM_SEED").is_ok();
    for seed in seeds(0)
        .into_iter()
        .map(|s| if replay { s } else { s + 20_000 })
    {
        let w = sim::deps::DepWorkload::generate(seed);
        let losses: &[u32] = if w.latency.is_some() { &[0, 20] } else { &[0] };
        for &lost in losses {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .unwrap();
            let played = rt.block_on(sim::deps::run(&w, lost));
            let bad = sim::deps::check(&played, 20);
            let released = played
                .runs
                .iter()
                .filter(|r| r.trigger == jobwheel::TriggerKind::Upstream)
                .count();
            println!(
                "dependency seed {seed} (lost answers {lost}‰): {} nodes {:?}, store {:?}, roots every {:?} ms for {:?}, {} runs ({released} released), {} left queued",
                w.nodes.len(),
                w.nodes,
                w.latency,
                w.periods,
                w.length,
                played.runs.len(),
                played.queued.len()
            );
            assert!(
                bad.is_empty(),
                "dependency seed {seed} with {lost}‰ lost answers failed (replay: JOBWHEEL_SIM_SEED={seed}):\n{}",
                bad.join("\n")
            );
        }
    }
}
