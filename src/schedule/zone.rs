//! Mapping matched wall-clock times to instants in an IANA zone, with the DST rules
//! of DESIGN.md ("Time"):
//!
//! * Every matching wall time has a **primary** instant: its only instant, the
//!   first of two in a repeated (fall-back) hour, or — for fixed-hour expressions
//!   only — the first instant after a spring-forward gap it falls into. Primary
//!   instants never decrease as wall time increases.
//! * Expressions whose hour follows real time (`*`, a range, a step) also fire at the
//!   **second** occurrence of each repeated wall time, and nowhere in a gap.
//!
//! `next_after(t)` is the least of the first primary instant after `t` and, when a
//! fall-back transition lies within three hours of `t`, the first second-occurrence
//! instant after `t`.

use super::cron::CronExpr;
use crate::time::Timestamp;
use chrono::offset::LocalResult;
use chrono::{DateTime, NaiveDateTime, Offset, TimeDelta, TimeZone};
use chrono_tz::Tz;

/// Widest window in which a transition can change the meaning of a wall time
/// (real zones shift by at most two hours).
const WINDOW_SECS: i64 = 3 * 3600;

fn offset_secs(tz: Tz, utc: &NaiveDateTime) -> i64 {
    i64::from(tz.offset_from_utc_datetime(utc).fix().local_minus_utc())
}

fn naive_utc(t: Timestamp) -> NaiveDateTime {
    t.to_datetime().naive_utc()
}

fn ts(dt: &DateTime<Tz>) -> Timestamp {
    Timestamp::from_datetime(dt)
}

/// The first instant (whole second) at which the zone's offset differs from its
/// offset at `lo`, searching `(lo, hi]`, assuming at most one transition there.
fn transition_in(tz: Tz, lo: NaiveDateTime, hi: NaiveDateTime) -> NaiveDateTime {
    let base = offset_secs(tz, &lo);
    let (mut lo, mut hi) = (lo, hi);
    while (hi - lo).num_seconds() > 1 {
        let mid = lo + TimeDelta::seconds((hi - lo).num_seconds() / 2);
        if offset_secs(tz, &mid) == base {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// The first instant after the spring-forward gap that contains wall time `wall`.
fn gap_end(tz: Tz, wall: NaiveDateTime) -> Timestamp {
    let lo = wall - TimeDelta::hours(26);
    let hi = wall + TimeDelta::hours(26);
    let t = transition_in(tz, lo, hi);
    Timestamp::from_millis(t.and_utc().timestamp_millis())
}

/// The primary instant of a matching wall time, if it has one.
fn primary(tz: Tz, wall: NaiveDateTime, fixed_hour: bool) -> Option<Timestamp> {
    match tz.from_local_datetime(&wall) {
        LocalResult::Single(dt) => Some(ts(&dt)),
        LocalResult::Ambiguous(a, b) => Some(ts(&a).min(ts(&b))),
        LocalResult::None => fixed_hour.then(|| gap_end(tz, wall)),
    }
}

/// The next fire of `expr` in `tz` strictly after `t`, exact to the second.
pub(crate) fn next_after(expr: &CronExpr, tz: Tz, t: Timestamp) -> Option<Timestamp> {
    let t_utc = naive_utc(t);
    let wall_t = t_utc + TimeDelta::seconds(offset_secs(tz, &t_utc));
    let fixed = expr.has_fixed_hour();

    let mut first = None;
    let mut cursor = wall_t;
    while let Some(wall) = expr.next_local(cursor) {
        if let Some(p) = primary(tz, wall, fixed).filter(|p| *p > t) {
            first = Some(p);
            break;
        }
        cursor = wall;
    }
    if fixed {
        return first;
    }
    second_occurrence_after(expr, tz, t).map_or(first, |s| Some(first.map_or(s, |f| f.min(s))))
}

/// For real-time expressions: the first second-occurrence instant after `t` of a
/// repeated wall time, when a fall-back transition lies near `t`.
fn second_occurrence_after(expr: &CronExpr, tz: Tz, t: Timestamp) -> Option<Timestamp> {
    let t_utc = naive_utc(t);
    let lo = t_utc - TimeDelta::seconds(WINDOW_SECS);
    let hi = t_utc + TimeDelta::seconds(WINDOW_SECS);
    let (before, after) = (offset_secs(tz, &lo), offset_secs(tz, &hi));
    if after >= before {
        return None;
    }
    let trans = transition_in(tz, lo, hi);
    let end = trans + TimeDelta::seconds(before - after);
    if t_utc >= end {
        return None;
    }
    // Second occurrences are the instants [trans, end); their wall times use `after`.
    let start = if t_utc >= trans {
        t_utc
    } else {
        trans - TimeDelta::seconds(1)
    };
    let wall = expr.next_local(start + TimeDelta::seconds(after))?;
    let instant = wall - TimeDelta::seconds(after);
    (instant < end)
        .then(|| Timestamp::from_millis(instant.and_utc().timestamp_millis()))
        .filter(|i| *i > t)
}
