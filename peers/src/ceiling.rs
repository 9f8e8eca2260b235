//! The SQL-only ceiling: the same workload drained by a batched fire cycle written
//! in SQL, with no scheduler code (`ceiling/setup.sql`, `ceiling/cycle.pgb`): a
//! table of fires holding what a scheduler's job row holds, a run log with a
//! primary key and an index by fire; each cycle claims 500 due fires whose lease is
//! free with `FOR UPDATE SKIP LOCKED`, sets the lease in the row and inserts their
//! running runs, then clears the rows and marks the runs done (four row writes per
//! fire, two statements, each its own transaction), run by `pgbench` with 2 clients
//! until every fire is done. What the database can do on these cores for this
//! workload: every system's drain is printed as a share of it.

use crate::support::Figures;
use std::path::Path;
use std::time::{Duration, Instant};

/// Runs `psql`/`pgbench` with `args` on the database `url`; its standard output.
fn tool(name: &str, args: &[&str], url: &str) -> anyhow::Result<String> {
    let out = std::process::Command::new(name)
        .args(args)
        .arg(url)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "{name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A number from the line of pgbench's output that starts with `prefix`.
fn figure(out: &str, prefix: &str) -> anyhow::Result<f64> {
    out.lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix(prefix)
                .and_then(|r| r.split_whitespace().next())
                // `44/44` (processed of asked) reads as its first number.
                .and_then(|v| v.split('/').next())
                .and_then(|v| v.parse().ok())
        })
        .ok_or_else(|| anyhow::anyhow!("no {prefix:?} line in pgbench's output:\n{out}"))
}

/// One run in the fresh database `url`: the setup of `jobs` due fires (enqueue) and
/// the cycle until every fire is done (drain, pgbench's own time).
pub async fn run(url: &str, jobs: usize) -> anyhow::Result<Figures> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("ceiling");
    let setup = dir.join("setup.sql");
    let cycle = dir.join("cycle.pgb");
    let fires = format!("fires={jobs}");
    let t = Instant::now();
    tool(
        "psql",
        &[
            "-qX",
            "-v",
            "ON_ERROR_STOP=1",
            "-v",
            &fires,
            "-f",
            setup.to_str().unwrap_or_default(),
        ],
        url,
    )?;
    let enqueue = t.elapsed();
    // Enough batches for both clients to drain every fire; the last ones find
    // nothing left and cost a due-index probe each.
    let per_client = (jobs.div_ceil(500) / 2 + 2).to_string();
    let out = tool(
        "pgbench",
        &[
            "-n",
            "-c",
            "2",
            "-j",
            "2",
            "-t",
            &per_client,
            "-f",
            cycle.to_str().unwrap_or_default(),
        ],
        url,
    )?;
    let done = tool(
        "psql",
        &[
            "-qAtX",
            "-c",
            "SELECT count(*) FROM peers_ceiling.runs WHERE status = 'succeeded'",
        ],
        url,
    )?;
    let done: usize = done.trim().parse()?;
    anyhow::ensure!(done == jobs, "the cycle finished {done} of {jobs} fires");
    let tps = figure(&out, "tps = ")?;
    let transactions = figure(&out, "number of transactions actually processed:")?;
    Ok(Figures {
        enqueue,
        drain: Duration::from_secs_f64(transactions / tps),
    })
}
