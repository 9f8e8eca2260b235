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
//! fall-back transition lies within a day of `t`, the first second-occurrence
//! instant after `t`.

use super::cron::{CronExpr, MIN_YEAR};
use crate::time::Timestamp;
use chrono::offset::LocalResult;
use chrono::{DateTime, NaiveDateTime, Offset, TimeDelta, TimeZone, Timelike};
use chrono_tz::Tz;

/// Widest window in which a transition can change the meaning of a wall time: the
/// longest repeated period of the tz database is seven hours (Antarctica/Vostok,
/// 1994), the longest gap a day (Pacific/Apia, 2011).
const WINDOW_SECS: i64 = 25 * 3600;

fn offset_secs(tz: Tz, utc: &NaiveDateTime) -> i64 {
    i64::from(tz.offset_from_utc_datetime(utc).fix().local_minus_utc())
}

fn naive_utc(t: Timestamp) -> NaiveDateTime {
    t.to_datetime().naive_utc()
}

fn ts(dt: &DateTime<Tz>) -> Timestamp {
    Timestamp::from_datetime(dt)
}

/// `t + secs`, or `None` past chrono's range.
fn plus(t: NaiveDateTime, secs: i64) -> Option<NaiveDateTime> {
    t.checked_add_signed(TimeDelta::try_seconds(secs)?)
}

fn instant(t: NaiveDateTime) -> Timestamp {
    Timestamp::from_millis(t.and_utc().timestamp_millis())
}

/// The first instant (whole second) at which the zone's offset differs from its
/// offset at `lo`, searching `(lo, hi]`, assuming at most one transition there.
///
/// Transitions fall on whole minutes in practice, so the search runs over minutes
/// first (about a third fewer zone lookups) and then confirms the second, falling
/// back to a search over seconds within the minute when a transition is not on it.
fn transition_in(tz: Tz, lo: NaiveDateTime, hi: NaiveDateTime) -> NaiveDateTime {
    let base = offset_secs(tz, &lo);
    let differs = |t: &NaiveDateTime| offset_secs(tz, t) != base;
    // Transitions are on whole seconds: so is the search.
    let whole = |t: NaiveDateTime| t.with_nanosecond(0).unwrap_or(t);
    let (mut lo, mut hi) = (whole(lo), whole(hi));
    // Minutes, from the first whole minute after `lo`.
    let into_minute = lo.and_utc().timestamp().rem_euclid(60);
    let first_minute = lo + TimeDelta::seconds(60 - into_minute);
    if first_minute < hi {
        if differs(&first_minute) {
            hi = first_minute;
        } else {
            lo = first_minute;
            while (hi - lo).num_seconds() > 60 {
                let minutes = (hi - lo).num_seconds() / 60;
                // At least one minute on, or a span of 61-119 s would never shrink.
                let mid = lo + TimeDelta::seconds((minutes / 2).max(1) * 60);
                if differs(&mid) {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
        }
    }
    // The transition is in (lo, hi]; one lookup usually confirms it is on `hi`.
    let before = hi - TimeDelta::seconds(1);
    if before <= lo || !differs(&before) {
        return hi;
    }
    hi = before;
    while (hi - lo).num_seconds() > 1 {
        let mid = lo + TimeDelta::seconds((hi - lo).num_seconds() / 2);
        if differs(&mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// The spring-forward gap that contains wall time `wall`: its first instant after
/// the gap, and the first wall time after it (that instant's wall time).
fn gap_end(tz: Tz, wall: NaiveDateTime) -> Option<(Timestamp, NaiveDateTime)> {
    let lo = plus(wall, -26 * 3600)?;
    let hi = plus(wall, 26 * 3600)?;
    let t = transition_in(tz, lo, hi);
    Some((instant(t), plus(t, offset_secs(tz, &t))?))
}

/// The next fire of `expr` in `tz` strictly after `t`, exact to the second; `None`
/// when there is none within chrono's range and the expression's years.
///
/// Constant work per call, also inside a repeated or skipped local hour (or day):
/// wall times whose instants are not after `t`, and wall times in a gap, are skipped
/// as a block rather than one by one.
pub(crate) fn next_after(expr: &CronExpr, tz: Tz, t: Timestamp) -> Option<Timestamp> {
    // No fire is earlier than the first wall time of `MIN_YEAR` in any offset, so an
    // earlier start answers as that floor does (and chrono's first instant, whose
    // wall time in a zone west of UTC is out of chrono's range, has an answer).
    let t = t.max(floor());
    let t_utc = naive_utc(t);
    let wall_t = plus(t_utc, offset_secs(tz, &t_utc))?;
    let fixed = expr.has_fixed_hour();

    let mut first = None;
    let mut cursor = wall_t;
    // Each turn finds the fire, or moves the cursor past a block: the wall times of
    // one offset whose instants are not after `t`, or one gap. Near `t` that is at
    // most a few turns; it ends at the expression's last year in any case.
    while let Some(wall) = expr.next_local(cursor) {
        // For a repeated wall time, both of its instants.
        let mut repeated = None;
        let primary = match tz.from_local_datetime(&wall) {
            LocalResult::Single(dt) => ts(&dt),
            LocalResult::Ambiguous(a, b) => {
                let (first, second) = (
                    a.naive_utc().min(b.naive_utc()),
                    a.naive_utc().max(b.naive_utc()),
                );
                repeated = Some((first, second));
                instant(first)
            }
            LocalResult::None => {
                let (end, end_wall) = gap_end(tz, wall)?;
                if fixed && end > t {
                    first = Some(end);
                    break;
                }
                // Nothing else in the gap fires: continue at its end.
                cursor = plus(end_wall, -1)?.max(wall);
                continue;
            }
        };
        if primary > t {
            first = Some(primary);
            break;
        }
        // Every later wall time of this offset up to `t`'s wall time in it has its
        // instant at or before `t` too: skip them together. Inside the second pass of
        // a repeated period that wall time lies past the period, where wall times
        // belong to the new offset and may still be ahead: stop at the period's end.
        let offset = (wall - naive_utc(primary)).num_seconds();
        let mut skip_to = plus(t_utc, offset)?;
        if let Some((first, second)) = repeated {
            // The period's last wall time is one second before the transition's
            // instant read in the old offset.
            let last = plus(transition_in(tz, first, second), offset - 1)?;
            skip_to = skip_to.min(last);
        }
        cursor = skip_to.max(wall);
    }
    if fixed {
        return first;
    }
    second_occurrence_after(expr, tz, t).map_or(first, |s| Some(first.map_or(s, |f| f.min(s))))
}

/// One day before the first wall time any expression can match ([`MIN_YEAR`]-01-01
/// 00:00 in every zone lies after it: offsets are well under a day).
fn floor() -> Timestamp {
    const DAY_MS: i64 = 86_400_000;
    let first = chrono::NaiveDate::from_ymd_opt(MIN_YEAR, 1, 1)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map_or(0, |d| d.and_utc().timestamp_millis());
    Timestamp::from_millis(first - DAY_MS)
}

/// For real-time expressions: the first second-occurrence instant after `t` of a
/// repeated wall time, when a fall-back transition lies near `t`.
fn second_occurrence_after(expr: &CronExpr, tz: Tz, t: Timestamp) -> Option<Timestamp> {
    let t_utc = naive_utc(t);
    let now = offset_secs(tz, &t_utc);
    // A fall-back before `t` matters while its repeated period (as long as the shift)
    // still holds `t`: it lies in the last `shift` seconds before `t`.
    let shift = offset_secs(tz, &plus(t_utc, -WINDOW_SECS)?) - now;
    let before = (shift > 0)
        .then(|| plus(t_utc, -shift))
        .flatten()
        .filter(|from| offset_secs(tz, from) > now)
        .and_then(|from| second_occurrence_near(expr, tz, t_utc, from, t_utc));
    // A fall-back after `t` matters for the wall times whose first occurrence is past:
    // it lies in the next `shift` seconds.
    let shift = now - offset_secs(tz, &plus(t_utc, WINDOW_SECS)?);
    let after = (shift > 0)
        .then(|| plus(t_utc, shift))
        .flatten()
        .filter(|to| offset_secs(tz, to) < now)
        .and_then(|to| second_occurrence_near(expr, tz, t_utc, t_utc, to));
    before.into_iter().chain(after).min()
}
/// The first second-occurrence instant after `t_utc` of the fall-back in `(lo, hi]`
/// (the offset falls there).
fn second_occurrence_near(
    expr: &CronExpr,
    tz: Tz,
    t_utc: NaiveDateTime,
    lo: NaiveDateTime,
    hi: NaiveDateTime,
) -> Option<Timestamp> {
    let trans = transition_in(tz, lo, hi);
    let (before, after) = (offset_secs(tz, &plus(trans, -1)?), offset_secs(tz, &trans));
    if after >= before {
        return None;
    }
    let end = plus(trans, before - after)?;
    if t_utc >= end {
        return None;
    }
    // Second occurrences are the instants [trans, end); their wall times use `after`.
    let start = if t_utc >= trans {
        t_utc
    } else {
        plus(trans, -1)?
    };
    let wall = expr.next_local(plus(start, after)?)?;
    let at = plus(wall, -after)?;
    (at < end && at > t_utc).then(|| instant(at))
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_search_ends_when_a_minute_and_a_half_remain() {
        let tz: Tz = "America/New_York".parse().unwrap();
        let at = |s: &str| NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").unwrap();
        // 2026-03-08 07:00:00 UTC is the spring-forward instant.
        let t = transition_in(tz, at("2026-03-08 06:57:30"), at("2026-03-08 07:00:30"));
        assert_eq!(t, at("2026-03-08 07:00:00"));
    }
}
