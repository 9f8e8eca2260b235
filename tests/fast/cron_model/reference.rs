//! A deliberately naive reference for cron fires in a zone, written apart from the
//! production code: its own parser and matcher, and an enumeration of instants one
//! step (a minute, or a second where the zone's offsets are not whole minutes) at a
//! time, applying the documented DST rule directly.
//!
//! The rule (docs/book/src/architecture.md, "Schedules"): an expression whose hour field lists
//! only single values ("fixed hour") fires at the *first* occurrence of a repeated
//! wall time, and once at the first instant after a spring-forward gap that
//! swallowed a matching wall time; any other expression fires at every instant whose
//! wall time matches, so twice in a repeated hour and never in a gap.
//!
//! It reads nothing of jobwheel but the expression text.

use chrono::{Datelike, NaiveDate, NaiveDateTime, Offset, TimeDelta, TimeZone, Timelike};
use chrono_tz::Tz;
use std::collections::HashSet;

/// One cron expression as the reference understands it.
#[derive(Debug, Clone)]
pub struct Spec {
    seconds: Vec<bool>,
    minutes: Vec<bool>,
    hours: Vec<bool>,
    months: Vec<bool>,
    days: Days,
    /// Every item of the hour field is a single number.
    pub fixed_hour: bool,
}

#[derive(Debug, Clone)]
enum Days {
    Any,
    Dom(Vec<DomItem>),
    Dow(Vec<DowItem>),
    /// Unix: both restricted, either may match.
    Either(Vec<DomItem>, Vec<DowItem>),
}

#[derive(Debug, Clone)]
enum DomItem {
    Day(u32),
    /// `L` (0) or `L-n`.
    LastMinus(u32),
    /// `nW`.
    Nearest(u32),
    /// `LW`.
    LastWeekday,
}

#[derive(Debug, Clone)]
enum DowItem {
    /// 0 = Sunday.
    Day(u32),
    /// `xL`.
    LastOf(u32),
    /// `x#n`.
    Nth(u32, u32),
}

/// Values selected by a list of `*`, `a`, `a-b` (wrapping when a > b), with `/step`.
fn values(text: &str, lo: u32, hi: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for item in text.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => (r, s.parse::<usize>().unwrap()),
            None => (item, 1),
        };
        let (a, b) = if range == "*" || range == "?" {
            (lo, hi)
        } else if let Some((a, b)) = range.split_once('-') {
            (a.parse().unwrap(), b.parse().unwrap())
        } else {
            let a: u32 = range.parse().unwrap();
            (a, if item.contains('/') { hi } else { a })
        };
        let mut seq = Vec::new();
        let mut v = a;
        loop {
            seq.push(v);
            if v == b {
                break;
            }
            v = if v == hi { lo } else { v + 1 };
        }
        out.extend(seq.into_iter().step_by(step));
    }
    out
}

fn mask(text: &str, lo: u32, hi: u32, len: usize) -> Vec<bool> {
    let mut m = vec![false; len];
    for v in values(text, lo, hi) {
        m[v as usize] = true;
    }
    m
}

impl Spec {
    /// Parses the numeric forms the model check uses: Quartz (6 fields, seconds
    /// first, day of week 1-7 = Sunday-Saturday) and Unix (5 fields, 0-7, 0 and 7 =
    /// Sunday). Names and the year field are not needed here.
    pub fn parse(expr: &str) -> Spec {
        let f: Vec<&str> = expr.split_whitespace().collect();
        let (quartz, [sec, min, hour, dom, month, dow]) = match f.len() {
            6 => (true, [f[0], f[1], f[2], f[3], f[4], f[5]]),
            5 => (false, ["0", f[0], f[1], f[2], f[3], f[4]]),
            n => panic!("{n} fields"),
        };
        let dow_of = |v: u32| if quartz { v - 1 } else { v % 7 };
        let star = |t: &str| t == "*" || t == "?";
        let dom_items = || {
            dom.split(',')
                .flat_map(|i| match i {
                    "L" => vec![DomItem::LastMinus(0)],
                    "LW" => vec![DomItem::LastWeekday],
                    _ if i.starts_with("L-") => vec![DomItem::LastMinus(i[2..].parse().unwrap())],
                    _ if i.ends_with('W') => {
                        vec![DomItem::Nearest(i[..i.len() - 1].parse().unwrap())]
                    }
                    _ => values(i, 1, 31).into_iter().map(DomItem::Day).collect(),
                })
                .collect::<Vec<_>>()
        };
        let dow_items = || {
            let (lo, hi) = if quartz { (1, 7) } else { (0, 7) };
            dow.split(',')
                .flat_map(|i| {
                    if i == "L" {
                        vec![DowItem::Day(6)]
                    } else if let Some((d, n)) = i.split_once('#') {
                        vec![DowItem::Nth(dow_of(d.parse().unwrap()), n.parse().unwrap())]
                    } else if let Some(d) = i.strip_suffix('L') {
                        vec![DowItem::LastOf(dow_of(d.parse().unwrap()))]
                    } else {
                        values(i, lo, hi)
                            .into_iter()
                            .map(|v| DowItem::Day(dow_of(v)))
                            .collect()
                    }
                })
                .collect::<Vec<_>>()
        };
        let days = match (star(dom), star(dow)) {
            (true, true) => Days::Any,
            (false, true) => Days::Dom(dom_items()),
            (true, false) => Days::Dow(dow_items()),
            (false, false) => {
                assert!(!quartz, "Quartz needs ? in one day field");
                Days::Either(dom_items(), dow_items())
            }
        };
        Spec {
            seconds: mask(sec, 0, 59, 60),
            minutes: mask(min, 0, 59, 60),
            hours: mask(hour, 0, 23, 24),
            months: mask(month, 1, 12, 13),
            days,
            fixed_hour: hour
                .split(',')
                .all(|i| i.chars().all(|c| c.is_ascii_digit())),
        }
    }

    /// Whether the wall date matches the month and day fields.
    pub fn date_matches(&self, d: NaiveDate) -> bool {
        if !self.months[d.month() as usize] {
            return false;
        }
        let len = month_len(d);
        let wd = |day: u32| {
            NaiveDate::from_ymd_opt(d.year(), d.month(), day)
                .unwrap()
                .weekday()
                .num_days_from_sunday()
        };
        let is_weekday = |day: u32| (1..=5).contains(&wd(day));
        let dom = |items: &[DomItem]| {
            items.iter().any(|i| match *i {
                DomItem::Day(n) => d.day() == n,
                DomItem::LastMinus(k) => k < len && d.day() == len - k,
                DomItem::Nearest(n) => {
                    n <= len
                        && (1..=len)
                            .filter(|x| is_weekday(*x))
                            .min_by_key(|x| x.abs_diff(n))
                            == Some(d.day())
                }
                DomItem::LastWeekday => (1..=len).rev().find(|x| is_weekday(*x)) == Some(d.day()),
            })
        };
        let dow = |items: &[DowItem]| {
            let w = d.weekday().num_days_from_sunday();
            items.iter().any(|i| match *i {
                DowItem::Day(x) => w == x,
                DowItem::LastOf(x) => w == x && d.day() + 7 > len,
                DowItem::Nth(x, n) => w == x && (d.day() - 1) / 7 + 1 == n,
            })
        };
        match &self.days {
            Days::Any => true,
            Days::Dom(i) => dom(i),
            Days::Dow(i) => dow(i),
            Days::Either(a, b) => dom(a) || dow(b),
        }
    }

    /// Whether a wall time's date, hour and minute match (any second).
    pub fn minute_matches(&self, w: NaiveDateTime) -> bool {
        self.hours[w.hour() as usize]
            && self.minutes[w.minute() as usize]
            && self.date_matches(w.date())
    }

    /// Whether a wall time matches the whole expression.
    pub fn matches(&self, w: NaiveDateTime) -> bool {
        self.seconds[w.second() as usize] && self.minute_matches(w)
    }
}

fn month_len(d: NaiveDate) -> u32 {
    (28..=31)
        .rev()
        .find(|n| NaiveDate::from_ymd_opt(d.year(), d.month(), *n).is_some())
        .unwrap()
}

/// The zone's offset at instant `s` (seconds since the epoch).
pub fn offset(tz: Tz, s: i64) -> i64 {
    let utc = chrono::DateTime::from_timestamp(s, 0).unwrap().naive_utc();
    i64::from(tz.offset_from_utc_datetime(&utc).fix().local_minus_utc())
}

fn wall(s: i64, off: i64) -> NaiveDateTime {
    chrono::DateTime::from_timestamp(s + off, 0)
        .unwrap()
        .naive_utc()
}

/// The fires (seconds since the epoch, ascending) of `spec` in `tz` in
/// `[from, ...)`, up to and including the first one after `until`; the list ends
/// early at `cap`. Walls seen from `from` on count as seen, so `from` must lie well
/// before the first instant whose fire is asked for.
pub fn fires(spec: &Spec, tz: Tz, from: i64, until: i64, cap: i64) -> Vec<i64> {
    enumerate(spec, tz, from, until, cap, 60).unwrap_or_else(|| {
        enumerate(spec, tz, from, until, cap, 1).expect("a one-second step always fits")
    })
}

/// The enumeration with a step of `step` seconds; `None` when the zone's offsets in
/// the range are not whole multiples of the step, or change inside one.
fn enumerate(spec: &Spec, tz: Tz, from: i64, until: i64, cap: i64, step: i64) -> Option<Vec<i64>> {
    let mut out: Vec<i64> = Vec::new();
    let mut seen: HashSet<NaiveDateTime> = HashSet::new();
    let mut expected: Option<NaiveDateTime> = None;
    let mut u = from.div_euclid(step) * step;
    while u <= cap {
        let off = offset(tz, u);
        if off % step != 0 || offset(tz, u + step - 1) != off {
            return None;
        }
        let w = wall(u, off);
        if let Some(exp) = expected.filter(|exp| w > *exp && spec.fixed_hour) {
            // A gap swallowed the walls [exp, w): one fire at the first instant
            // after it when any of them matches.
            let mut g = exp;
            while g < w {
                if spec.matches(g) {
                    out.push(u);
                    break;
                }
                g += TimeDelta::seconds(1);
            }
        }
        let first = seen.insert(w);
        // Within one step the wall time moves with the instant: the date, hour and
        // minute are checked once, then each second.
        if (first || !spec.fixed_hour) && spec.minute_matches(w) {
            for k in 0..step {
                let ws = w + TimeDelta::seconds(k);
                if spec.matches(ws) && (first || !spec.fixed_hour) {
                    out.push(u + k);
                }
            }
        }
        expected = Some(w + TimeDelta::seconds(step));
        if out.last().is_some_and(|f| *f > until) {
            break;
        }
        // A day that cannot match is passed over up to its 21:00 when the offset is
        // the same at every hour on the way (no transition is jumped).
        let mut next = u + step;
        if !spec.date_matches(w.date()) && w.hour() < 21 {
            let to_21 = (21 * 3600 - i64::from(w.num_seconds_from_midnight())) / step * step;
            let same = (0..=to_21 / 3600).all(|h| offset(tz, u + h * 3600) == off)
                && offset(tz, u + to_21) == off;
            if same && to_21 > step {
                next = u + to_21;
                expected = Some(w + TimeDelta::seconds(to_21));
            }
        }
        u = next;
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}
