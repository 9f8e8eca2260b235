//! The ranges of every value a user, a configuration file or a stored row can give
//! jobwheel. A value outside its range is refused with [`Error::Invalid`] naming the
//! field and the value, never carried into the engine where it could overflow.
//!
//! | value | range |
//! |---|---|
//! | an instant a schedule names (`once`, an interval's anchor) | [`Timestamp::MIN`] to [`Timestamp::MAX`] (years 1 to 9999) |
//! | a job's timeout, misfire threshold, retry delays, an interval | at most [`MAX_SPAN`] (100 years) |
//! | a payload's nesting | at most [`MAX_PAYLOAD_DEPTH`] levels |
//! | a list, query or claim limit | at most [`MAX_PAGE`] rows (larger limits are lowered to it) |
//! | scheduler configuration | per field: see [`SchedulerConfig::validate`](crate::SchedulerConfig::validate) |

use crate::error::{Error, Result};
use crate::time::Timestamp;
use std::time::Duration;

/// The longest duration a job may hold (timeout, misfire threshold, retry delays,
/// interval): 100 years of 365 days.
pub const MAX_SPAN: Duration = Duration::from_secs(100 * 365 * 86_400);

/// The deepest payload accepted: arrays and objects nested at most this many levels
/// (well inside what every store reads back).
pub const MAX_PAYLOAD_DEPTH: usize = 64;

/// The most rows one store call returns (a list, a query, due fires, claimed alarm
/// events, orphaned runs); a larger limit is lowered to it.
pub const MAX_PAGE: usize = 100_000;

/// `limit` lowered to [`MAX_PAGE`].
#[cfg(any(
    feature = "sqlite",
    feature = "postgres",
    feature = "mysql",
    feature = "redis"
))]
pub(crate) fn page(limit: usize) -> usize {
    limit.min(MAX_PAGE)
}

/// `d` is positive and at most `max`. Errors name `field`.
pub(crate) fn duration(field: &'static str, d: Duration, max: Duration) -> Result<()> {
    if d.is_zero() {
        return Err(Error::invalid(field, "0s", "must be positive"));
    }
    at_most(field, d, max)
}

/// `d` is at most `max` (zero allowed). Errors name `field`.
pub(crate) fn at_most(field: &'static str, d: Duration, max: Duration) -> Result<()> {
    if d > max {
        return Err(Error::invalid(
            field,
            format!("{d:?}"),
            format!(
                "must be at most {}",
                humantime_serde::re::humantime::format_duration(max)
            ),
        ));
    }
    Ok(())
}

/// `n` is in `min..=max`. Errors name `field`.
pub(crate) fn count<T>(field: &'static str, n: T, min: T, max: T) -> Result<()>
where
    T: PartialOrd + std::fmt::Display + Copy,
{
    if n < min || n > max {
        return Err(Error::invalid(
            field,
            n,
            format!("must be between {min} and {max}"),
        ));
    }
    Ok(())
}

/// `t` is between [`Timestamp::MIN`] and [`Timestamp::MAX`]. Errors name `field`.
pub(crate) fn instant(field: &'static str, t: Timestamp) -> Result<()> {
    if t < Timestamp::MIN || t > Timestamp::MAX {
        return Err(Error::invalid(
            field,
            format!("{} ms since the epoch", t.as_millis()),
            "must be within the years 1 to 9999",
        ));
    }
    Ok(())
}

/// The nesting depth of `v` (a scalar is 0), counted without recursion so that no
/// payload can overflow the stack; stops counting past `limit`.
pub(crate) fn depth(v: &serde_json::Value, limit: usize) -> usize {
    use serde_json::Value;
    let mut deepest = 0;
    let mut stack: Vec<(&Value, usize)> = vec![(v, 0)];
    while let Some((v, d)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(a) => Box::new(a.iter()),
            Value::Object(o) => Box::new(o.values()),
            _ => continue,
        };
        deepest = deepest.max(d + 1);
        if deepest > limit {
            return deepest;
        }
        stack.extend(children.map(|c| (c, d + 1)));
    }
    deepest
}

/// Drops `v` without recursion: a value nested deeper than the stack allows would
/// overflow it in serde_json's recursive `Drop`.
pub(crate) fn drop_flat(v: serde_json::Value) {
    use serde_json::Value;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(a) => stack.extend(a),
            Value::Object(o) => stack.extend(o.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn nested(n: usize) -> Value {
        let mut v = json!(1);
        for _ in 0..n {
            v = Value::Array(vec![v]);
        }
        v
    }

    #[test]
    fn depth_counts_levels_and_stops_past_the_limit() {
        assert_eq!(depth(&json!(1), 64), 0);
        assert_eq!(depth(&json!({"a": [1, {"b": 2}]}), 64), 3);
        assert_eq!(depth(&nested(64), 64), 64);
        assert_eq!(depth(&nested(65), 64), 65);
        let deep = nested(200_000);
        assert_eq!(depth(&deep, 64), 65, "stops early, no recursion");
        drop_flat(deep);
    }

    #[test]
    fn durations_and_counts_name_the_field() {
        let e = duration("job.timeout", Duration::MAX, MAX_SPAN).unwrap_err();
        assert_eq!(e.field(), Some("job.timeout"));
        assert!(duration("x", Duration::from_secs(1), MAX_SPAN).is_ok());
        assert_eq!(count("c", 0usize, 1, 10).unwrap_err().field(), Some("c"));
        assert!(instant("t", Timestamp::from_millis(i64::MIN)).is_err());
        assert!(instant("t", Timestamp::MAX).is_ok());
    }
}
