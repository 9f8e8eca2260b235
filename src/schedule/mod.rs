//! Schedules: when a job fires.
//!
//! A [`Schedule`] is a cron expression in an IANA zone ([`CronSchedule`]), a fixed
//! interval, or a one-shot instant. All of them answer [`Schedule::next_after`]:
//! the first fire strictly after an instant, exact to the second (to the
//! millisecond for intervals and one-shots).
//!
//! # Cron syntax
//!
//! | form | fields | day-of-week numbering |
//! |---|---|---|
//! | Quartz / XXL-JOB | `sec min hour dom month dow [year]` | `1-7` = `SUN-SAT` |
//! | Unix | `min hour dom month dow` | `0-7`, `0` and `7` = Sunday, `1` = Monday |
//!
//! Both forms accept `*`, lists `a,b`, ranges `a-b` (a range whose start is after its
//! end wraps: `FRI-MON`, `22-2`), steps `*/s`, `a/s`, `a-b/s`, month names `JAN-DEC`
//! and day names `SUN-SAT` (any case), and the Quartz extras: `?` (no specific
//! value, day fields only), `L` (last day of month; alone in day-of-week: Saturday),
//! `L-n` (n days before the last), `nW` (weekday nearest day n, never leaving the
//! month), `LW` (last weekday), `xL` (last weekday x of the month), `x#n` (n-th
//! weekday x). Years run 1970-2199. Macros: `@yearly`, `@annually`, `@monthly`,
//! `@weekly`, `@daily`, `@midnight`, `@hourly`.
//!
//! Day rules: in the Quartz form at most one of day-of-month and day-of-week may be
//! restricted (write `?` in the other), as Quartz requires. In the Unix form, when
//! both are restricted a day matches if *either* matches, as Vixie cron does.
//!
//! # Daylight saving time
//!
//! As Vixie cron: an expression whose hour field lists only single values is
//! *fixed-hour*. Its times inside a spring-forward gap fire once, at the first
//! instant after the gap; its times in a repeated fall-back hour fire once, at
//! their first occurrence. Any other expression follows real time: wall times that
//! do not exist do not fire, and repeated wall times fire at both occurrences.

mod cron;
mod zone;

pub use self::cron::{CronExpr, CronForm, MAX_YEAR, MIN_YEAR};

use crate::error::{Error, Result};
use crate::time::{Timestamp, duration_ms};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// A cron expression evaluated in an IANA time zone.
#[derive(Clone, PartialEq, Eq)]
pub struct CronSchedule {
    expr: CronExpr,
    zone: Tz,
}

impl fmt::Debug for CronSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CronSchedule({:?} in {})",
            self.expr.as_str(),
            self.zone.name()
        )
    }
}

impl CronSchedule {
    /// Parses `expr` (see the [module docs](self)) for the zone named `zone`
    /// (`"Europe/Berlin"`, `"UTC"`, …).
    ///
    /// Errors: [`Error::Invalid`] on `schedule.cron` or `schedule.zone`.
    pub fn new(expr: &str, zone: &str) -> Result<Self> {
        let expr = CronExpr::parse(expr)?;
        let zone = parse_zone(zone)?;
        Ok(CronSchedule { expr, zone })
    }

    /// The same expression in UTC.
    pub fn utc(expr: &str) -> Result<Self> {
        Ok(CronSchedule {
            expr: CronExpr::parse(expr)?,
            zone: Tz::UTC,
        })
    }

    /// The parsed expression.
    pub fn expr(&self) -> &CronExpr {
        &self.expr
    }

    /// The zone.
    pub fn zone(&self) -> Tz {
        self.zone
    }

    /// The first fire strictly after `t`, or `None` when there is none before the
    /// end of [`MAX_YEAR`].
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        zone::next_after(&self.expr, self.zone, t)
    }
}

/// Parses an IANA zone name.
pub fn parse_zone(name: &str) -> Result<Tz> {
    name.parse::<Tz>()
        .map_err(|_| Error::invalid("schedule.zone", name, "not an IANA time zone name"))
}

/// When a job fires.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(try_from = "ScheduleRepr", into = "ScheduleRepr")]
#[non_exhaustive]
pub enum Schedule {
    /// A cron expression in a zone.
    Cron(CronSchedule),
    /// Every `every`, at `anchor + k × every` for whole k (so fires never drift).
    Interval {
        /// Period, at least one millisecond.
        every: Duration,
        /// Any instant on the grid; the Unix epoch aligns fires to whole periods.
        anchor: Timestamp,
    },
    /// Once, at `at`.
    Once {
        /// The instant.
        at: Timestamp,
    },
    /// Never by itself: the job fires only when it is triggered (by an operator,
    /// through the API, the command line or `Scheduler::trigger`). XXL-JOB calls it
    /// schedule type NONE.
    Never,
}

impl Schedule {
    /// A cron schedule; see [`CronSchedule::new`].
    pub fn cron(expr: &str, zone: &str) -> Result<Self> {
        CronSchedule::new(expr, zone).map(Schedule::Cron)
    }

    /// Every `every`, aligned to the Unix epoch. Errors when `every` is under 1 ms.
    pub fn every(every: Duration) -> Result<Self> {
        Schedule::interval(every, Timestamp::EPOCH)
    }

    /// Every `every`, aligned to `anchor`. Errors when `every` is under 1 ms.
    pub fn interval(every: Duration, anchor: Timestamp) -> Result<Self> {
        if every < Duration::from_millis(1) {
            return Err(Error::invalid(
                "schedule.every",
                format!("{every:?}"),
                "must be at least 1ms",
            ));
        }
        Ok(Schedule::Interval { every, anchor })
    }

    /// Once, at `at`.
    pub fn once(at: Timestamp) -> Self {
        Schedule::Once { at }
    }

    /// No fire of its own: the job runs only when triggered.
    pub fn never() -> Self {
        Schedule::Never
    }

    /// Checks the schedule's ranges: an interval of at most
    /// [`MAX_SPAN`](crate::limits::MAX_SPAN), instants within
    /// [`Timestamp::MIN`]..=[`Timestamp::MAX`]. Errors: [`Error::Invalid`] naming
    /// `schedule.every`, `schedule.anchor` or `schedule.at`.
    pub fn check(&self) -> Result<()> {
        match self {
            Schedule::Cron(_) => Ok(()),
            Schedule::Interval { every, anchor } => {
                crate::limits::duration("schedule.every", *every, crate::limits::MAX_SPAN)?;
                crate::limits::instant("schedule.anchor", *anchor)
            }
            Schedule::Once { at } => crate::limits::instant("schedule.at", *at),
            Schedule::Never => Ok(()),
        }
    }

    /// The first fire strictly after `t`.
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        match self {
            Schedule::Cron(c) => c.next_after(t),
            Schedule::Interval { every, anchor } => {
                // In i128: no instant and anchor overflow; `None` past the range.
                let p = i128::from(duration_ms(*every).max(1));
                let (t, anchor) = (i128::from(t.as_millis()), i128::from(anchor.as_millis()));
                let k = (t - anchor).div_euclid(p) + 1;
                i64::try_from(anchor + k * p)
                    .ok()
                    .map(Timestamp::from_millis)
            }
            Schedule::Once { at } => (*at > t).then_some(*at),
            Schedule::Never => None,
        }
    }

    /// The first fire of a job created or resumed at `now`: a one-shot's instant
    /// even when it has passed (it is then due at once), otherwise the first fire at
    /// or after `now`.
    pub fn first_fire(&self, now: Timestamp) -> Option<Timestamp> {
        match self {
            Schedule::Once { at } => Some(*at),
            Schedule::Never => None,
            _ => self.next_after(Timestamp::from_millis(now.as_millis().saturating_sub(1))),
        }
    }

    /// How many fires fall in `(after, through]`, counting at most `cap`. Exact
    /// arithmetic for intervals and one-shots; cron fires are walked one by one, which
    /// is why the count is capped.
    pub fn count_between(&self, after: Timestamp, through: Timestamp, cap: u64) -> u64 {
        if through <= after {
            return 0;
        }
        match self {
            Schedule::Interval { every, anchor } => {
                let p = i128::from(duration_ms(*every).max(1));
                let k = |t: Timestamp| {
                    (i128::from(t.as_millis()) - i128::from(anchor.as_millis())).div_euclid(p)
                };
                u64::try_from((k(through) - k(after)).max(0)).map_or(cap, |n| n.min(cap))
            }
            Schedule::Once { at } => u64::from(*at > after && *at <= through).min(cap),
            Schedule::Never => 0,
            Schedule::Cron(c) => {
                let mut n = 0;
                let mut t = after;
                while n < cap {
                    match c.next_after(t) {
                        Some(f) if f <= through => {
                            n += 1;
                            t = f;
                        }
                        _ => break,
                    }
                }
                n
            }
        }
    }

    /// The `n`-th fire after `after` (`n = 1` is [`next_after`](Self::next_after)),
    /// or `None` when the schedule has fewer. Arithmetic for intervals; cron fires are
    /// walked one by one.
    pub fn nth_after(&self, after: Timestamp, n: u64) -> Option<Timestamp> {
        if n == 0 {
            return Some(after);
        }
        match self {
            Schedule::Interval { every, anchor } => {
                let p = i128::from(duration_ms(*every).max(1));
                let anchor = i128::from(anchor.as_millis());
                let k = (i128::from(after.as_millis()) - anchor).div_euclid(p);
                let ms = (k + i128::from(n)).checked_mul(p)?.checked_add(anchor)?;
                i64::try_from(ms).ok().map(Timestamp::from_millis)
            }
            _ => {
                let mut t = after;
                for _ in 0..n {
                    t = self.next_after(t)?;
                }
                Some(t)
            }
        }
    }

    /// Fires in `(after, until]`, oldest first, at most `limit`.
    pub fn fires_between(
        &self,
        after: Timestamp,
        until: Timestamp,
        limit: usize,
    ) -> Vec<Timestamp> {
        let mut out = Vec::new();
        let mut t = after;
        while out.len() < limit {
            match self.next_after(t) {
                Some(n) if n <= until => {
                    out.push(n);
                    t = n;
                }
                _ => break,
            }
        }
        out
    }
}

#[derive(Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
enum ScheduleRepr {
    Cron {
        expr: String,
        #[serde(default = "utc_name")]
        zone: String,
    },
    Interval {
        #[serde(with = "humantime_serde")]
        #[cfg_attr(feature = "openapi", schemars(with = "String"))]
        every: Duration,
        #[serde(default)]
        anchor: Timestamp,
    },
    Once {
        at: Timestamp,
    },
    Never,
}

fn utc_name() -> String {
    "UTC".into()
}

impl TryFrom<ScheduleRepr> for Schedule {
    type Error = Error;
    fn try_from(r: ScheduleRepr) -> Result<Self> {
        match r {
            ScheduleRepr::Cron { expr, zone } => Schedule::cron(&expr, &zone),
            ScheduleRepr::Interval { every, anchor } => Schedule::interval(every, anchor),
            ScheduleRepr::Once { at } => Ok(Schedule::once(at)),
            ScheduleRepr::Never => Ok(Schedule::Never),
        }
    }
}

impl From<Schedule> for ScheduleRepr {
    fn from(s: Schedule) -> Self {
        match s {
            Schedule::Cron(c) => ScheduleRepr::Cron {
                expr: c.expr.as_str().to_string(),
                zone: c.zone.name().to_string(),
            },
            Schedule::Interval { every, anchor } => ScheduleRepr::Interval { every, anchor },
            Schedule::Once { at } => ScheduleRepr::Once { at },
            Schedule::Never => ScheduleRepr::Never,
        }
    }
}
