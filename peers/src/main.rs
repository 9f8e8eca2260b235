//! Side-by-side drain and enqueue benchmark: jobwheel beside graphile_worker, apalis
//! and awa on one PostgreSQL, same workload, round-robin.
//!
//! ```sh
//! cd peers && cargo run --release -- [--jobs 20000] [--rounds 3] [--only jobwheel,awa]
//! ```
//!
//! Workload, the same for every system: `--jobs` one-shot no-op jobs due now, stored
//! with the system's fastest documented bulk enqueue, then drained by 2 workers in
//! this one process, each with its own pool of 20 connections. **Enqueue** is the
//! time of the bulk insert; **drain** runs from the workers' start until the system
//! itself says every job is done: the harness waits, without querying the server,
//! until every handler has run, then asks the system's own signal (jobwheel's run
//! log, graphile_worker's emptied jobs table, awa's queue counts, apalis's job
//! states) every 2 ms, so a completion still buffered in memory does not count and
//! no system pays for polling while it drains. Every run gets a fresh database
//! (`peers_run`, created and dropped around it). Every setting runs once per round,
//! settings in the same order each round, so the systems share the machine's good
//! and bad moments; the table shows each figure's median over the rounds and its
//! range. `pgbench -N -c 8 -j 2 -T 10` runs once first, for the database's own
//! single-row write rate in the same run. The SQL-only ceiling (`ceiling.rs`: the
//! same 20,000 fires drained by a batched fire cycle in SQL with no scheduler code,
//! pgbench with 2 clients) runs in every round as one more setting, and every
//! figure is printed as a share of its median. `DATABASE_URL` names the server
//! (default `postgres://postgres@127.0.0.1:5432/test`).

mod apalis_peer;
mod awa_peer;
mod ceiling;
mod graphile_peer;
mod jobwheel_peer;
mod support;

use std::time::Duration;
use support::Figures;

/// One system at one setting.
#[derive(Clone, Copy, Debug)]
pub enum Setting {
    /// jobwheel with `concurrency` handlers per worker, the rest default.
    Jobwheel { concurrency: Option<usize> },
    /// jobwheel hand-tuned for a drain: concurrency 2048, claim batch 2000, claim
    /// window 4000, write batch 1000 per worker.
    JobwheelTuned,
    /// graphile_worker with `concurrency` and a LocalQueue of `local_queue` jobs.
    Graphile {
        concurrency: usize,
        local_queue: usize,
    },
    /// awa with `max_workers` per worker, and its zero-deadline short path when
    /// `no_deadline`.
    Awa { max_workers: u32, no_deadline: bool },
    /// apalis (postgres) with a concurrency limit.
    Apalis { concurrency: usize },
    /// The SQL-only ceiling: the batched fire cycle in SQL, no scheduler code.
    Ceiling,
}

impl Setting {
    fn system(&self) -> &'static str {
        match self {
            Setting::Jobwheel { .. } | Setting::JobwheelTuned => "jobwheel",
            Setting::Graphile { .. } => "graphile_worker 0.14",
            Setting::Awa { .. } => "awa 0.6",
            Setting::Apalis { .. } => "apalis 1.0 (postgres)",
            Setting::Ceiling => "SQL only (no scheduler)",
        }
    }

    fn label(&self) -> String {
        match *self {
            Setting::Jobwheel { concurrency: None } => "defaults".into(),
            Setting::Jobwheel {
                concurrency: Some(c),
            } => format!("concurrency {c}"),
            Setting::JobwheelTuned => {
                "concurrency 2048, claim 2000, window 4000, write 1000".into()
            }
            Setting::Graphile {
                concurrency,
                local_queue,
            } => format!("concurrency {concurrency}, LocalQueue {local_queue}"),
            Setting::Awa {
                max_workers,
                no_deadline,
            } => format!(
                "max_workers {max_workers}{}",
                if no_deadline { ", deadline 0" } else { "" }
            ),
            Setting::Apalis { concurrency } => format!("concurrency {concurrency}"),
            Setting::Ceiling => "4-write cycle of 500, pgbench 2 clients".into(),
        }
    }

    fn key(&self) -> &'static str {
        match self {
            Setting::Jobwheel { .. } | Setting::JobwheelTuned => "jobwheel",
            Setting::Graphile { .. } => "graphile",
            Setting::Awa { .. } => "awa",
            Setting::Apalis { .. } => "apalis",
            Setting::Ceiling => "ceiling",
        }
    }

    async fn run(&self, url: &str, jobs: usize) -> anyhow::Result<Figures> {
        match *self {
            Setting::Jobwheel { concurrency } => {
                jobwheel_peer::run(url, jobs, jobwheel_peer::Tuning::Defaults(concurrency)).await
            }
            Setting::JobwheelTuned => {
                jobwheel_peer::run(url, jobs, jobwheel_peer::Tuning::Drain).await
            }
            Setting::Graphile {
                concurrency,
                local_queue,
            } => graphile_peer::run(url, jobs, concurrency, local_queue).await,
            Setting::Awa {
                max_workers,
                no_deadline,
            } => awa_peer::run(url, jobs, max_workers, no_deadline).await,
            Setting::Apalis { concurrency } => apalis_peer::run(url, jobs, concurrency).await,
            Setting::Ceiling => ceiling::run(url, jobs).await,
        }
    }
}

/// The settings, in the order each round runs them: the peers' settings (2 workers ×
/// concurrency 10) first, then each system at its best documented setting and
/// jobwheel at its defaults.
fn settings() -> Vec<(&'static str, Setting)> {
    vec![
        (
            "concurrency 10",
            Setting::Graphile {
                concurrency: 10,
                local_queue: 100,
            },
        ),
        (
            "concurrency 10",
            Setting::Awa {
                max_workers: 10,
                no_deadline: false,
            },
        ),
        ("concurrency 10", Setting::Apalis { concurrency: 10 }),
        (
            "concurrency 10",
            Setting::Jobwheel {
                concurrency: Some(10),
            },
        ),
        (
            "best",
            Setting::Graphile {
                concurrency: 100,
                local_queue: 1000,
            },
        ),
        (
            "best",
            Setting::Awa {
                max_workers: 200,
                no_deadline: true,
            },
        ),
        ("best", Setting::Apalis { concurrency: 100 }),
        ("best", Setting::Jobwheel { concurrency: None }),
        ("tuned", Setting::JobwheelTuned),
        ("ceiling", Setting::Ceiling),
    ]
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn main() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(bench())
}

async fn bench() -> anyhow::Result<()> {
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let jobs: usize = arg("--jobs").map_or(Ok(20_000), |v| v.parse())?;
    let rounds: usize = arg("--rounds").map_or(Ok(3), |v| v.parse())?;
    let only = arg("--only");
    let settings: Vec<_> = settings()
        .into_iter()
        .filter(|(_, s)| {
            only.as_deref()
                .is_none_or(|o| o.split(',').any(|k| k == s.key()))
        })
        .collect();
    let tps = if std::env::args().any(|a| a == "--no-pgbench") {
        None
    } else {
        Some(support::pgbench(&url).await?)
    };
    if let Some(tps) = tps {
        println!("pgbench -N -c 8 -j 2 -T 10: {tps:.0} tps");
    }
    let mut results: Vec<Vec<Figures>> = vec![Vec::new(); settings.len()];
    for round in 1..=rounds {
        for (i, (_, s)) in settings.iter().enumerate() {
            let db = support::fresh_database(&url).await?;
            let f = s.run(&db, jobs).await;
            support::drop_database(&url).await?;
            let f = f?;
            println!(
                "round {round} | {} | {} | enqueue {:.2} s | drain {:.2} s | {:.0} jobs/s",
                s.system(),
                s.label(),
                f.enqueue.as_secs_f64(),
                f.drain.as_secs_f64(),
                jobs as f64 / f.drain.as_secs_f64()
            );
            results[i].push(f);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    println!();
    println!(
        "{jobs} one-shot no-op jobs, 2 workers × pool 20, medians of {rounds} rounds{}",
        tps.map(|t| format!(", pgbench -N -c 8: {t:.0} tps"))
            .unwrap_or_default()
    );
    println!();
    let rate = |d: Duration| jobs as f64 / d.as_secs_f64();
    let median = |i: usize| rate(support::spread(results[i].iter().map(|f| f.drain)).0);
    let ceiling = settings
        .iter()
        .position(|(_, s)| matches!(s, Setting::Ceiling))
        .map(median);
    println!(
        "| group | system | setting | enqueue {jobs} (range) | drain jobs/s (range) | of the ceiling |"
    );
    println!("|---|---|---|---|---|---|");
    for (i, ((group, s), figures)) in settings.iter().zip(&results).enumerate() {
        let (e, e_lo, e_hi) = support::spread(figures.iter().map(|f| f.enqueue));
        // The longest drain is the lowest rate.
        let (d, d_fast, d_slow) = support::spread(figures.iter().map(|f| f.drain));
        println!(
            "| {group} | {} | {} | {:.2} s ({:.2}-{:.2}) | {:.0} ({:.0}-{:.0}) | {} |",
            s.system(),
            s.label(),
            e.as_secs_f64(),
            e_lo.as_secs_f64(),
            e_hi.as_secs_f64(),
            rate(d),
            rate(d_slow),
            rate(d_fast),
            ceiling.map_or("-".into(), |c| format!("{:.0} %", median(i) / c * 100.0))
        );
    }
    // The ratios the targets name, from the medians above.
    let find = |f: &dyn Fn(&Setting) -> bool, group: &str| {
        settings
            .iter()
            .position(|(g, s)| *g == group && f(s))
            .map(median)
    };
    let jobwheel = |s: &Setting| matches!(s, Setting::Jobwheel { .. });
    let peer = |s: &Setting| {
        !matches!(
            s,
            Setting::Jobwheel { .. } | Setting::JobwheelTuned | Setting::Ceiling
        )
    };
    let best_peer = settings
        .iter()
        .enumerate()
        .filter(|(_, (g, s))| *g == "best" && peer(s))
        .map(|(i, (_, s))| (median(i), s.system()))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    let graphile10 = find(&|s| matches!(s, Setting::Graphile { .. }), "concurrency 10");
    println!();
    if let (Some(j), Some((b, who))) = (find(&jobwheel, "best"), best_peer) {
        println!(
            "jobwheel at its defaults: {:.2}x the best peer at its best setting ({who})",
            j / b
        );
    }
    if let (Some(j), Some(g)) = (find(&jobwheel, "concurrency 10"), graphile10) {
        println!(
            "jobwheel at concurrency 10: {:.2}x graphile_worker at concurrency 10",
            j / g
        );
    }
    if let (Some(j), Some(t)) = (
        find(&jobwheel, "best"),
        find(&|s| matches!(s, Setting::JobwheelTuned), "tuned"),
    ) {
        println!(
            "jobwheel at its defaults: {:.0} % of its hand-tuned setting",
            j / t * 100.0
        );
    }
    if let (Some(j), Some(c)) = (find(&jobwheel, "best"), ceiling) {
        println!(
            "jobwheel at its defaults: {:.0} % of the SQL-only ceiling",
            j / c * 100.0
        );
    }
    Ok(())
}
