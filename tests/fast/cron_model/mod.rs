//! The schedule against a model: `CronSchedule::next_after` compared with a naive
//! reference (reference.rs, which shares no code with the crate) around offset
//! changes of the tz database, for fixed-hour expressions (inside and after
//! repeated and skipped periods), real-time ones (`*`, ranges, steps), `L`, `W`
//! and `#`, from a start at every minute of each transition's window (and half a
//! minute later).
//!
//! The test command runs a subset: every zone of the tz database (one name per
//! distinct history) at one offset change with a rotating part of the
//! expressions, and a set of zones with unusual changes at every change of a
//! year with every expression. `JOBWHEEL_CRON_MODEL=full` runs the whole sweep:
//! every distinct zone, every offset change from 1970 to 2037, every expression
//! (best in release: `cargo test --release --all-features --test fast cron_model --
//! --nocapture`).

mod reference;

use chrono_tz::{TZ_VARIANTS, Tz};
use jobwheel::{CronSchedule, Timestamp};
use reference::{Spec, offset};
use std::collections::HashMap;

/// The expressions of the model check: (text, why it is here).
const EXPRS: &[&str] = &[
    // Fixed hours: inside and after repeated and skipped periods.
    "0 30 2 * * ?",
    "0 0,30 2,3 * * ?",
    "0 0,50 1,2 * * ?",
    "0 45 2,3 * * ?",
    "0 0,50 3 * * ?",
    "0 * 1 * * ?",
    "0 15 0,1,2,3,4 * * ?",
    "0 0 0 * * ?",
    "30 59 23 * * ?",
    "0 0 12 * * ?",
    "30 2 * * *",
    // Real time: `*`, ranges, steps.
    "0 */15 * * * ?",
    "0 0,30 1-3 * * ?",
    "0 0 */2 * * ?",
    "*/20 50-59 * * * ?",
    "*/10 1-3 * * *",
    // Day rules: L, W, #, and Unix's either-day rule.
    "0 0 2 L * ?",
    "0 30 1 LW * ?",
    "0 0 3 ? * 1#1",
    "0 0 2 ? * 1L",
    "0 30 2 15W * ?",
    "0 2 1 * 0",
    "0 0 1-4 ? * 1",
];

/// Zones with unusual changes: the reproductions of lost fires, a whole skipped
/// day, half-hour and two-hour shifts, midnight changes, changes by 45 minutes, a
/// change by seconds (Monrovia) and a seven-hour repeated period (Vostok).
const SPECIAL: &[(&str, i32)] = &[
    ("Europe/Berlin", 2026),
    ("America/New_York", 2026),
    ("Antarctica/Troll", 2026),
    ("Pacific/Chatham", 2026),
    ("Australia/Lord_Howe", 2026),
    ("Pacific/Apia", 2011),
    ("America/Santiago", 2026),
    ("America/Havana", 2026),
    ("Africa/Casablanca", 2026),
    ("Asia/Tehran", 2021),
    ("Africa/Monrovia", 1972),
    ("Antarctica/Vostok", 1994),
];

/// One offset change: the instant (seconds) and the offsets before and after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Change {
    at: i64,
    before: i64,
    after: i64,
}

fn year_start(y: i32) -> i64 {
    chrono::NaiveDate::from_ymd_opt(y, 1, 1)
        .unwrap()
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc()
        .timestamp()
}

/// The zone's offset changes in `[from, to)`, found by sampling every three hours
/// and bisecting to the second.
fn changes(tz: Tz, from: i64, to: i64) -> Vec<Change> {
    let step = 3 * 3600;
    let mut out = Vec::new();
    let mut t = from;
    let mut off = offset(tz, t);
    while t < to {
        let next = t + step;
        let o = offset(tz, next);
        if o != off {
            let (mut lo, mut hi) = (t, next);
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if offset(tz, mid) == off {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            out.push(Change {
                at: hi,
                before: off,
                after: offset(tz, hi),
            });
            off = offset(tz, hi);
            t = hi;
            continue;
        }
        t = next;
    }
    out
}

#[derive(Default)]
struct Tally {
    cases: u64,
    checks: u64,
    failures: Vec<String>,
}

/// Compares `next_after` with the reference from every start in the change's
/// window (three hours either side), for one expression.
fn check(zone: &str, tz: Tz, c: Change, expr: &str, tally: &mut Tally) {
    let spec = Spec::parse(expr);
    let sched = CronSchedule::new(expr, zone).unwrap();
    let shift = (c.after - c.before).abs();
    let first = c.at - 3 * 3600;
    let last = c.at + 3 * 3600;
    // Walls seen from well before the window: a repeated period lasts `shift`.
    let from = first - shift - 3600;
    let cap = last + 800 * 86_400;
    let fires = reference::fires(&spec, tz, from, last, cap);
    tally.cases += 1;
    let mut start = first;
    while start <= last {
        for ms in [start * 1000, start * 1000 + 29_500] {
            tally.checks += 1;
            let got = sched.next_after(Timestamp::from_millis(ms));
            let want = fires
                .iter()
                .find(|f| **f * 1000 > ms)
                .map(|f| Timestamp::from_millis(f * 1000));
            let agree = match want {
                Some(w) => got == Some(w),
                None => got.is_none_or(|g| g.as_millis() > cap * 1000),
            };
            if !agree && tally.failures.len() < 40 {
                tally.failures.push(format!(
                    "{expr:?} in {zone} after {}: next_after {got:?}, model {want:?} \
                     (change at {} from {:+} s to {:+} s)",
                    Timestamp::from_millis(ms),
                    Timestamp::from_millis(c.at * 1000),
                    c.before,
                    c.after
                ));
            }
        }
        start += 60;
    }
}

/// One name per distinct history of offset changes in `[from, to)`.
fn distinct_zones(from: i64, to: i64) -> Vec<(&'static str, Tz, Vec<Change>)> {
    let mut by_history: HashMap<Vec<Change>, (&'static str, Tz)> = HashMap::new();
    for tz in TZ_VARIANTS {
        let history = changes(tz, from, to);
        by_history.entry(history).or_insert((tz.name(), tz));
    }
    let mut zones: Vec<_> = by_history
        .into_iter()
        .map(|(h, (name, tz))| (name, tz, h))
        .collect();
    zones.sort_by_key(|z| z.0);
    zones
}

fn report(what: &str, tally: &Tally, started: std::time::Instant) {
    println!(
        "cron model ({what}): {} cases, {} starts compared, {} disagreements, {:.1} s",
        tally.cases,
        tally.checks,
        tally.failures.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        tally.failures.is_empty(),
        "next_after disagrees with the model:\n{}",
        tally.failures.join("\n")
    );
}

#[test]
fn agrees_with_the_model_in_zones_with_unusual_changes() {
    let started = std::time::Instant::now();
    let mut tally = Tally::default();
    for (zone, year) in SPECIAL {
        let tz: Tz = zone.parse().unwrap();
        let cs = changes(tz, year_start(*year), year_start(year + 1));
        assert!(!cs.is_empty(), "{zone} changes its offset in {year}");
        for c in cs {
            for expr in EXPRS {
                check(zone, tz, c, expr, &mut tally);
            }
        }
    }
    report("unusual zones", &tally, started);
}

#[test]
fn agrees_with_the_model_in_every_zone() {
    let full = std::env::var("JOBWHEEL_CRON_MODEL").as_deref() == Ok("full");
    let started = std::time::Instant::now();
    let (from, to) = if full {
        (year_start(1970), year_start(2038))
    } else {
        (year_start(2025), year_start(2027))
    };
    let zones = distinct_zones(from, to);
    // The zones are split over the machine's cores; each thread keeps a tally.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let tallies: Vec<Tally> = std::thread::scope(|scope| {
        let zones = &zones;
        let workers: Vec<_> = (0..threads)
            .map(|w| {
                scope.spawn(move || {
                    let mut tally = Tally::default();
                    for (i, (zone, tz, history)) in
                        zones.iter().enumerate().skip(w).step_by(threads)
                    {
                        if full {
                            for c in history {
                                for expr in EXPRS {
                                    check(zone, *tz, *c, expr, &mut tally);
                                }
                            }
                        } else if let Some(c) = history.last() {
                            // One change per zone, three expressions turning with the zone.
                            for k in 0..3 {
                                check(zone, *tz, *c, EXPRS[(i * 3 + k) % EXPRS.len()], &mut tally);
                            }
                        }
                    }
                    tally
                })
            })
            .collect();
        workers.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut tally = Tally::default();
    for t in tallies {
        tally.cases += t.cases;
        tally.checks += t.checks;
        tally.failures.extend(t.failures);
    }
    println!(
        "cron model: {} distinct zone histories of {} names",
        zones.len(),
        TZ_VARIANTS.len()
    );
    report(
        if full {
            "full sweep 1970-2037"
        } else {
            "every zone, 2025-2026"
        },
        &tally,
        started,
    );
}

#[test]
fn the_reference_sees_the_documented_rules() {
    // The model itself, on cases the docs spell out (New York, 2026): a fixed hour
    // in the gap fires at its end; in the repeated hour, first occurrence only; a
    // real-time expression fires in both passes.
    let tz: Tz = "America/New_York".parse().unwrap();
    let at = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap().timestamp();
    let spring = reference::fires(
        &Spec::parse("0 30 2 * * ?"),
        tz,
        at("2026-03-08T00:00:00Z"),
        at("2026-03-08T07:00:00Z"),
        at("2026-03-10T00:00:00Z"),
    );
    assert_eq!(spring[0], at("2026-03-08T07:00:00Z"));
    let fall = Spec::parse("0 30 1 * * ?");
    let f = reference::fires(
        &fall,
        tz,
        at("2026-11-01T00:00:00Z"),
        at("2026-11-01T07:00:00Z"),
        at("2026-11-03T00:00:00Z"),
    );
    assert_eq!(
        &f[..2],
        [at("2026-11-01T05:30:00Z"), at("2026-11-02T06:30:00Z")]
    );
    let real = Spec::parse("0 30 1-2 * * ?");
    let r = reference::fires(
        &real,
        tz,
        at("2026-11-01T00:00:00Z"),
        at("2026-11-01T07:00:00Z"),
        at("2026-11-03T00:00:00Z"),
    );
    assert_eq!(
        &r[..3],
        [
            at("2026-11-01T05:30:00Z"),
            at("2026-11-01T06:30:00Z"),
            at("2026-11-01T07:30:00Z")
        ]
    );
}
