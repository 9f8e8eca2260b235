//! Instants and clocks.
//!
//! Every instant jobwheel stores is a [`Timestamp`]: UTC milliseconds since the Unix
//! epoch. Due-ness and liveness are decided by the *store's* clock; the [`Clock`]
//! trait lets the memory backend (and tests) choose where that clock comes from.

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::ops::{Add, Sub};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A UTC instant with millisecond precision (milliseconds since the Unix epoch).
///
/// Serialized as an RFC 3339 string (`2026-12-02T17:08:53.123Z`), or as an integer
/// number of milliseconds outside the years 1 to 9999; deserialized from such a
/// string with any offset, or from an integer number of milliseconds.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The Unix epoch.
    pub const EPOCH: Timestamp = Timestamp(0);

    /// The earliest instant a schedule may name: `0001-01-01T00:00:00Z`.
    pub const MIN: Timestamp = Timestamp(-62_135_596_800_000);

    /// The latest instant a schedule may name: `9999-12-31T23:59:59.999Z`.
    pub const MAX: Timestamp = Timestamp(253_402_300_799_999);

    /// From milliseconds since the epoch.
    pub const fn from_millis(ms: i64) -> Self {
        Timestamp(ms)
    }

    /// Milliseconds since the epoch.
    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// The system clock, truncated to milliseconds.
    pub fn now() -> Self {
        let d = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp(d.as_millis() as i64)
    }

    /// From a chrono instant, truncated to milliseconds.
    pub fn from_datetime<Tz: TimeZone>(dt: &DateTime<Tz>) -> Self {
        Timestamp(dt.timestamp_millis())
    }

    /// As a chrono UTC instant, clamped to chrono's range.
    pub fn to_datetime(self) -> DateTime<Utc> {
        Utc.timestamp_millis_opt(self.0)
            .single()
            .unwrap_or(if self.0 < 0 {
                DateTime::<Utc>::MIN_UTC
            } else {
                DateTime::<Utc>::MAX_UTC
            })
    }

    /// `self + d`, saturating at the representable range.
    pub fn saturating_add(self, d: Duration) -> Self {
        Timestamp(self.0.saturating_add(duration_ms(d)))
    }

    /// `self - d`, saturating at the representable range.
    pub fn saturating_sub(self, d: Duration) -> Self {
        Timestamp(self.0.saturating_sub(duration_ms(d)))
    }

    /// Time from `earlier` to `self`, zero when `earlier` is later.
    pub fn duration_since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0).max(0) as u64)
    }
}

/// A duration in whole milliseconds, saturating at `i64::MAX`.
pub(crate) fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Add<Duration> for Timestamp {
    type Output = Timestamp;
    fn add(self, d: Duration) -> Timestamp {
        self.saturating_add(d)
    }
}

impl Sub<Duration> for Timestamp {
    type Output = Timestamp;
    fn sub(self, d: Duration) -> Timestamp {
        self.saturating_sub(d)
    }
}

impl fmt::Display for Timestamp {
    /// RFC 3339 in UTC with milliseconds; an instant outside the calendar's range
    /// (years 1 to 9999, see [`Timestamp::MIN`]) as its milliseconds instead.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self < Timestamp::MIN || *self > Timestamp::MAX {
            return write!(f, "{} ms since the epoch", self.0);
        }
        f.write_str(
            &self
                .to_datetime()
                .to_rfc3339_opts(SecondsFormat::Millis, true),
        )
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl<Tz: TimeZone> From<DateTime<Tz>> for Timestamp {
    fn from(dt: DateTime<Tz>) -> Self {
        Timestamp::from_datetime(&dt)
    }
}

impl From<Timestamp> for DateTime<Utc> {
    fn from(t: Timestamp) -> Self {
        t.to_datetime()
    }
}

/// An instant: RFC 3339 text in UTC with milliseconds (an integer of milliseconds
/// outside the years 1-9999); any offset, or an integer, when read.
#[cfg(feature = "openapi")]
impl schemars::JsonSchema for Timestamp {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Timestamp".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "An instant: RFC 3339 in UTC with milliseconds (`2026-12-02T17:08:53.123Z`), or milliseconds since the epoch outside the years 1-9999.",
            "type": ["string", "integer"],
            "format": "date-time",
        })
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if *self < Timestamp::MIN || *self > Timestamp::MAX {
            // Outside the calendar: the number of milliseconds, which reads back.
            return s.serialize_i64(self.0);
        }
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        /// Milliseconds or RFC 3339 text, read as they come (no trial of one form
        /// and then the other: a stored job's instants are read on every poll).
        struct Instant;
        impl serde::de::Visitor<'_> for Instant {
            type Value = Timestamp;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("milliseconds since the epoch or an RFC 3339 instant")
            }
            fn visit_i64<E: serde::de::Error>(self, ms: i64) -> Result<Timestamp, E> {
                Ok(Timestamp(ms))
            }
            fn visit_u64<E: serde::de::Error>(self, ms: u64) -> Result<Timestamp, E> {
                i64::try_from(ms)
                    .map(Timestamp)
                    .map_err(|_| E::custom(format!("instant {ms} ms is out of range")))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Timestamp, E> {
                DateTime::parse_from_rfc3339(s)
                    .map(|dt| Timestamp::from_datetime(&dt))
                    .map_err(|e| E::custom(format!("invalid instant {s:?}: {e}")))
            }
        }
        d.deserialize_any(Instant)
    }
}

/// A source of "now" for a store or lock provider.
///
/// Real backends read their server's clock; the memory backend reads one of these.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Timestamp {
        (**self).now()
    }
}

/// The operating system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that follows tokio's clock from a fixed starting instant, so that a test
/// on a paused runtime (`start_paused = true`, `tokio::time::advance`) moves the
/// store's time along with its timers.
///
/// Must be created inside a tokio runtime.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    base: Timestamp,
    start: tokio::time::Instant,
}

impl TokioClock {
    /// A clock reading `base` now and advancing with `tokio::time::Instant`.
    pub fn starting_at(base: Timestamp) -> Self {
        TokioClock {
            base,
            start: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        self.base + self.start.elapsed()
    }
}

/// A clock that only moves when told to; for tests.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    /// A clock reading `t`.
    pub fn new(t: Timestamp) -> Self {
        ManualClock(AtomicI64::new(t.as_millis()))
    }

    /// Sets the clock.
    pub fn set(&self, t: Timestamp) {
        self.0.store(t.as_millis(), Ordering::SeqCst);
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        self.0.fetch_add(duration_ms(d), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }
}
