//! The cron expression parser and its wall-clock matcher.
//!
//! jobwheel parses cron itself instead of using the `cron` crate: that crate has no
//! `?`, `L`, `W` or `#`, no Unix 5-field form (with its 0/7 = Sunday numbering) and
//! no time-zone-aware search with the DST rules DESIGN.md fixes. The `cron` crate is
//! still used in the test suite as an independent oracle for the syntax both accept.
//!
//! This module finds matching *wall-clock* times; [`super::zone`] maps them to
//! instants in the job's zone.

use crate::error::{Error, Result};
use chrono::{Datelike, NaiveDate, NaiveDateTime, Timelike, Weekday};
use std::fmt;

mod describe;
mod parse;

/// First year a cron expression can match.
pub const MIN_YEAR: i32 = 1970;
/// Last year a cron expression can match; after it `next_after` returns `None`.
pub const MAX_YEAR: i32 = 2199;

/// The two accepted forms of a cron expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CronForm {
    /// `sec min hour day-of-month month day-of-week [year]`, as Quartz and XXL-JOB
    /// write it. Day of week `1-7` = `SUN-SAT`.
    Quartz,
    /// `min hour day-of-month month day-of-week`, as Unix crontab writes it. Day of
    /// week `0-7`, where both `0` and `7` are Sunday.
    Unix,
}

/// How day-of-month and day-of-week combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DayRule {
    /// Both unrestricted: every day.
    Any,
    /// Only day-of-month restricts.
    Dom,
    /// Only day-of-week restricts.
    Dow,
    /// Unix: both restricted, a day matches when either matches (Vixie cron).
    Either,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct DomSpec {
    days: u32,
    /// `L-n` offsets from the last day (`L` is offset 0).
    last_minus: Vec<u8>,
    /// `nW`: nearest weekday to day n.
    nearest_weekday: Vec<u8>,
    /// `LW`: last weekday of the month.
    last_weekday: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct DowSpec {
    /// Bits 0..=6, 0 = Sunday.
    days: u8,
    /// `xL`: last weekday x of the month (bits as `days`).
    last_of: u8,
    /// `x#n`: n-th weekday x of the month.
    nth: Vec<(u8, u8)>,
}

/// A parsed cron expression.
///
/// Parse with [`CronExpr::parse`]. Equality compares the parsed fields and the
/// text as written, so a changed spelling is a changed job definition.
#[derive(Clone, PartialEq, Eq)]
pub struct CronExpr {
    source: String,
    form: CronForm,
    seconds: u64,
    minutes: u64,
    hours: u32,
    dom: DomSpec,
    months: u16,
    dow: DowSpec,
    years: Option<Box<[u64; 4]>>,
    day_rule: DayRule,
    fixed_hour: bool,
}

impl fmt::Debug for CronExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CronExpr({:?})", self.source)
    }
}

impl fmt::Display for CronExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl CronExpr {
    /// The expression as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Which form the expression was written in.
    pub fn form(&self) -> CronForm {
        self.form
    }

    /// True when the hour field lists only single values (`2`, `9,17`): such an
    /// expression fires at the end of a DST gap and only in the first occurrence of
    /// a repeated hour. With `*`, a range or a step it follows real time instead.
    pub fn has_fixed_hour(&self) -> bool {
        self.fixed_hour
    }

    fn year_ok(&self, y: i32) -> bool {
        match &self.years {
            None => (MIN_YEAR..=MAX_YEAR).contains(&y),
            Some(bits) => {
                let i = y - MIN_YEAR;
                (0..=(MAX_YEAR - MIN_YEAR)).contains(&i)
                    && bits[i as usize / 64] & (1 << (i as usize % 64)) != 0
            }
        }
    }

    /// Bitmask (bit d = day d) of the days of `year-month` that match.
    fn day_mask(&self, year: i32, month: u32) -> u32 {
        let n = days_in_month(year, month);
        let all = ((1u64 << (n + 1)) - 2) as u32;
        let dom = || self.dom_mask(year, month, n) & all;
        let dow = || self.dow_mask(year, month, n) & all;
        match self.day_rule {
            DayRule::Any => all,
            DayRule::Dom => dom(),
            DayRule::Dow => dow(),
            DayRule::Either => dom() | dow(),
        }
    }

    fn dom_mask(&self, year: i32, month: u32, n: u32) -> u32 {
        let spec = &self.dom;
        let mut mask = spec.days;
        for off in &spec.last_minus {
            if u32::from(*off) < n {
                mask |= 1 << (n - u32::from(*off));
            }
        }
        let weekday = |d: u32| weekday_of(year, month, d);
        if spec.last_weekday {
            let mut d = n;
            while weekday(d) == 0 || weekday(d) == 6 {
                d -= 1;
            }
            mask |= 1 << d;
        }
        for &target in &spec.nearest_weekday {
            let t = u32::from(target).min(n);
            let d = match weekday(t) {
                // Saturday: the Friday before, or Monday after when that leaves the month.
                6 => {
                    if t > 1 {
                        t - 1
                    } else {
                        t + 2
                    }
                }
                // Sunday: the Monday after, or the Friday before at the month's end.
                0 => {
                    if t < n {
                        t + 1
                    } else {
                        t - 2
                    }
                }
                _ => t,
            };
            if u32::from(target) <= n {
                mask |= 1 << d;
            }
        }
        mask
    }

    fn dow_mask(&self, year: i32, month: u32, n: u32) -> u32 {
        let spec = &self.dow;
        let first = weekday_of(year, month, 1);
        let mut mask = 0u32;
        for d in 1..=n {
            let wd = (first + d - 1) % 7;
            let bit = 1u8 << wd;
            if spec.days & bit != 0 || (spec.last_of & bit != 0 && d + 7 > n) {
                mask |= 1 << d;
            }
        }
        for &(wd, nth) in &spec.nth {
            let first_match = 1 + (u32::from(wd) + 7 - first) % 7;
            let d = first_match + 7 * (u32::from(nth) - 1);
            if d <= n {
                mask |= 1 << d;
            }
        }
        mask
    }

    /// The first matching wall-clock time strictly after `after` (whole seconds), or
    /// `None` when nothing matches up to [`MAX_YEAR`].
    pub fn next_local(&self, after: NaiveDateTime) -> Option<NaiveDateTime> {
        let after = after.with_nanosecond(0)?;
        let start = after.checked_add_signed(chrono::TimeDelta::seconds(1))?;
        let (mut y, mut mo, mut d) = (start.year(), start.month(), start.day());
        let (mut h, mut mi, mut s) = (start.hour(), start.minute(), start.second());
        loop {
            if y > MAX_YEAR {
                return None;
            }
            if !self.year_ok(y) {
                y = next_year(self, y)?;
                (mo, d, h, mi, s) = (1, 1, 0, 0, 0);
                continue;
            }
            match next_bit(u64::from(self.months), mo) {
                None => {
                    (y, mo, d, h, mi, s) = (y + 1, 1, 1, 0, 0, 0);
                    continue;
                }
                Some(m) if m != mo => (mo, d, h, mi, s) = (m, 1, 0, 0, 0),
                Some(_) => {}
            }
            match next_bit(u64::from(self.day_mask(y, mo)), d) {
                None => {
                    (mo, d, h, mi, s) = (mo + 1, 1, 0, 0, 0);
                    continue;
                }
                Some(x) if x != d => (d, h, mi, s) = (x, 0, 0, 0),
                Some(_) => {}
            }
            match next_bit(u64::from(self.hours), h) {
                None => {
                    (d, h, mi, s) = (d + 1, 0, 0, 0);
                    continue;
                }
                Some(x) if x != h => (h, mi, s) = (x, 0, 0),
                Some(_) => {}
            }
            match next_bit(self.minutes, mi) {
                None => {
                    (h, mi, s) = (h + 1, 0, 0);
                    continue;
                }
                Some(x) if x != mi => (mi, s) = (x, 0),
                Some(_) => {}
            }
            match next_bit(self.seconds, s) {
                None => {
                    (mi, s) = (mi + 1, 0);
                    continue;
                }
                Some(x) => s = x,
            }
            return NaiveDate::from_ymd_opt(y, mo, d)?.and_hms_opt(h, mi, s);
        }
    }
}

fn next_year(expr: &CronExpr, from: i32) -> Option<i32> {
    (from..=MAX_YEAR).find(|y| expr.year_ok(*y))
}

/// Smallest set bit of `mask` at or above `from`.
fn next_bit(mask: u64, from: u32) -> Option<u32> {
    if from >= 64 {
        return None;
    }
    let rest = mask >> from;
    (rest != 0).then(|| from + rest.trailing_zeros())
}

fn days_in_month(year: i32, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if NaiveDate::from_ymd_opt(year, 2, 29).is_some() => 29,
        _ => 28,
    }
}

/// Day of week of a date, 0 = Sunday.
fn weekday_of(year: i32, month: u32, day: u32) -> u32 {
    NaiveDate::from_ymd_opt(year, month, day)
        .map(|d| d.weekday().num_days_from_sunday())
        .unwrap_or(Weekday::Sun.num_days_from_sunday())
}
