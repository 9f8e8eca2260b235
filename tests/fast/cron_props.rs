//! Properties of `next_after` over random instants: across the whole `i64` range it
//! never panics and never answers at or before its input; near DST transitions of
//! real zones it agrees with a brute-force search, second by second, that applies
//! the DST rules directly (a fixed-hour expression fires at the first occurrence of
//! a repeated wall time and at the end of a gap that swallowed one; any other
//! expression fires at every instant whose wall time matches, and never in a gap).

use chrono::offset::LocalResult;
use chrono::{NaiveDateTime, Offset, TimeDelta, TimeZone};
use chrono_tz::Tz;
use jobwheel::schedule::{CronExpr, CronSchedule};
use jobwheel::{Schedule, Timestamp};
use proptest::prelude::*;
use std::time::Duration;

const EXPRS: &[&str] = &[
    "* * * * * ?",
    "*/7 * * * * ?",
    "0 * * * * ?",
    "30 */5 * * * ?",
    "0 0/20 * * * ?",
    "0 30 * * * ?",
    "0 0 * * * ?",
    "10 15 1-3 * * ?",
    "* * 2 * * ?",
    "0 30 2 * * ?",
    "0 0 1 * * ?",
    "0 45 0-5/2 * * ?",
    // Fixed hours that match just after a repeated period as well as inside it.
    "0 0,30 2,3 * * ?",
    "0 0,50 1,2 * * ?",
    "0 45 2,3 * * ?",
    "0 0,50 3 * * ?",
];

const ZONES: &[&str] = &[
    "America/New_York",
    "Europe/Berlin",
    "Australia/Lord_Howe",
    "Australia/Sydney",
    "Pacific/Apia",
    "America/Santiago",
    "Asia/Kolkata",
    "Antarctica/Troll",
    "Pacific/Chatham",
    "UTC",
];

/// Seconds searched by the oracle after the input.
const HORIZON: i64 = 3 * 3600;

fn offset(tz: Tz, s: i64) -> i64 {
    let utc = chrono::DateTime::from_timestamp(s, 0).unwrap().naive_utc();
    i64::from(tz.offset_from_utc_datetime(&utc).fix().local_minus_utc())
}

fn wall(s: i64, off: i64) -> NaiveDateTime {
    chrono::DateTime::from_timestamp(s + off, 0)
        .unwrap()
        .naive_utc()
}

fn matches(expr: &CronExpr, w: NaiveDateTime) -> bool {
    expr.next_local(w - TimeDelta::seconds(1)) == Some(w)
}

/// Whether instant `s` (whole seconds) is a fire of `expr` in `tz`.
fn fires_at(expr: &CronExpr, tz: Tz, s: i64) -> bool {
    let off = offset(tz, s);
    let w = wall(s, off);
    if !expr.has_fixed_hour() {
        return matches(expr, w);
    }
    let first = match tz.from_local_datetime(&w) {
        LocalResult::Single(dt) => dt.timestamp() == s,
        LocalResult::Ambiguous(a, b) => a.timestamp().min(b.timestamp()) == s,
        LocalResult::None => false,
    };
    if first && matches(expr, w) {
        return true;
    }
    // The end of a gap: walls [s + off_before, s + off) were skipped.
    let before = offset(tz, s - 1);
    if before < off {
        let gap_first = wall(s, before);
        let hit = expr.next_local(gap_first - TimeDelta::seconds(1));
        return hit.is_some_and(|h| h < w);
    }
    false
}

/// The brute-force next fire after `t` within the horizon.
fn oracle(expr: &CronExpr, tz: Tz, t: Timestamp) -> Option<Timestamp> {
    let from = t.as_millis().div_euclid(1000) + 1;
    (from..from + HORIZON)
        .find(|s| fires_at(expr, tz, *s))
        .map(|s| Timestamp::from_millis(s * 1000))
}

/// An instant of the year's first offset change in `tz` after `start`, if any.
fn transition_after(tz: Tz, start: i64) -> Option<i64> {
    let base = offset(tz, start);
    let day = 86_400;
    let mut lo = start;
    let hi = (1..=370)
        .map(|d| start + d * day)
        .find(|s| offset(tz, *s) != base)?;
    let mut hi = hi;
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if offset(tz, mid) == base {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(hi)
}

/// `next_after` from `t` equals the brute-force search (or, when that finds nothing
/// within its horizon, answers later than the horizon or not at all).
fn agrees(e: usize, z: usize, t: Timestamp) -> Result<(), TestCaseError> {
    let tz: Tz = ZONES[z].parse().unwrap();
    let expr = CronExpr::parse(EXPRS[e]).unwrap();
    let got = CronSchedule::new(EXPRS[e], ZONES[z]).unwrap().next_after(t);
    match oracle(&expr, tz, t) {
        Some(want) => prop_assert_eq!(got, Some(want), "{} in {} after {}", EXPRS[e], ZONES[z], t),
        None => prop_assert!(
            got.is_none_or(|g| g.as_millis() >= t.as_millis() + HORIZON * 1000),
            "{} in {} after {}: {:?} but nothing within the horizon",
            EXPRS[e],
            ZONES[z],
            t,
            got
        ),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 192,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn agrees_with_brute_force_near_transitions(
        e in 0..EXPRS.len(),
        z in 0..ZONES.len(),
        year in 1995i64..2045,
        day in 0i64..365,
        around_ms in -4 * 3_600_000i64..4 * 3_600_000,
    ) {
        let tz: Tz = ZONES[z].parse().unwrap();
        let start = chrono::NaiveDate::from_ymd_opt(year as i32, 1, 1).unwrap()
            .and_hms_opt(0, 0, 0).unwrap().and_utc().timestamp() + day * 86_400;
        let near = transition_after(tz, start).unwrap_or(start);
        let t = Timestamp::from_millis(near * 1000 + around_ms);
        agrees(e, z, t)?;
    }

    #[test]
    fn agrees_with_brute_force_from_both_passes_of_a_repeated_period(
        e in 0..EXPRS.len(),
        z in 0..ZONES.len(),
        year in 1995i64..2045,
        second_pass in any::<bool>(),
        into in 0.0f64..1.0,
    ) {
        let tz: Tz = ZONES[z].parse().unwrap();
        let start = chrono::NaiveDate::from_ymd_opt(year as i32, 1, 1).unwrap()
            .and_hms_opt(0, 0, 0).unwrap().and_utc().timestamp();
        // The year's first fall-back change: the repeated period is the `shift`
        // seconds before it (first pass) and after it (second pass).
        let mut from = start;
        let fall = loop {
            let Some(c) = transition_after(tz, from) else { break None };
            if c > start + 370 * 86_400 { break None }
            if offset(tz, c) < offset(tz, c - 1) { break Some(c) }
            from = c;
        };
        let Some(c) = fall else { return Ok(()) };
        let shift = offset(tz, c - 1) - offset(tz, c);
        let inside = ((shift * 1000) as f64 * into) as i64;
        let ms = if second_pass { c * 1000 + inside } else { (c - shift) * 1000 + inside };
        let t = Timestamp::from_millis(ms);
        agrees(e, z, t)?;
    }

    #[test]
    fn never_panics_and_answers_after_its_input(
        e in 0..EXPRS.len(),
        z in 0..ZONES.len(),
        ms in any::<i64>(),
    ) {
        let sched = CronSchedule::new(EXPRS[e], ZONES[z]).unwrap();
        let t = Timestamp::from_millis(ms);
        if let Some(next) = sched.next_after(t) {
            prop_assert!(next > t, "{} after {}: {}", EXPRS[e], t, next);
        }
        for years in ["0 0 0 29 2 ? 2096", "0 0 0 1 1 ? 1970"] {
            let s = CronSchedule::new(years, ZONES[z]).unwrap();
            if let Some(next) = s.next_after(t) {
                prop_assert!(next > t);
            }
        }
    }

    #[test]
    fn intervals_never_panic_and_answer_after_their_input(
        every_ms in 1u64..u64::MAX / 4,
        anchor in any::<i64>(),
        ms in any::<i64>(),
    ) {
        let s = Schedule::interval(Duration::from_millis(every_ms), Timestamp::from_millis(anchor));
        let Ok(s) = s else { return Ok(()) };
        let t = Timestamp::from_millis(ms);
        if let Some(next) = s.next_after(t) {
            prop_assert!(next > t);
        }
        let _ = s.first_fire(t);
        let _ = s.count_between(t, Timestamp::from_millis(i64::MAX), 10);
        let _ = s.nth_after(t, 3);
    }
}
