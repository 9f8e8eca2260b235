//! Run ids by day (every SQL dialect): a run id carries the UTC day its run started
//! on, `day * 2^33 + (a sequence's next value mod 2^33)` ([`run_id_for`]), so a query
//! by start time is also a range of ids ([`id_bounds`]), and on PostgreSQL and
//! MariaDB the run log is partitioned by that range (`partitions.rs`).

/// Ids per day: a day's runs are ids `day * ID_STEP ..< (day + 1) * ID_STEP`.
pub(crate) const ID_STEP: i64 = 1 << 33;
/// A UTC day in milliseconds.
pub(crate) const DAY_MS: i64 = 86_400_000;
/// Every id of the `legacy` partition is below this (day 10,000 is in 1997, before
/// any day partition; a table numbered 86 trillion runs before it would be past it),
/// and every day partition's id above it.
pub(crate) const LEGACY_BELOW: i64 = 10_000 * ID_STEP;

/// Conditions on the run id equivalent to `started_at >= since` and `started_at <
/// until` (an id carries its run's start day), which let the database read only the
/// partitions of those days (and `legacy`).
pub(crate) fn id_bounds(since: Option<i64>, until: Option<i64>) -> Vec<(&'static str, Vec<i64>)> {
    let mut out = Vec::new();
    if let Some(s) = since {
        out.push((
            " AND (id >= ? OR id < ?)",
            vec![s.div_euclid(DAY_MS) * ID_STEP, LEGACY_BELOW],
        ));
    }
    if let Some(u) = until {
        // started_at < until: started on the day of `until - 1 ms` at the latest.
        out.push((
            " AND id < ?",
            vec![((u - 1).div_euclid(DAY_MS) + 1) * ID_STEP],
        ));
    }
    out
}

/// The id expression of a run starting at `now_ms`, given the SQL of the sequence's
/// next value: a day's first id plus that value modulo [`ID_STEP`] (`div` is the
/// dialect's integer division).
pub(crate) fn run_id_for(now_ms: &str, next_value: &str, div: &str) -> String {
    format!("({now_ms}) {div} {DAY_MS} * {ID_STEP} + MOD({next_value}, {ID_STEP})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_by_start_time_are_ranges_of_ids() {
        let day = 20_428;
        // Bounds for runs started on the 6th from 10:00 up to the 7th's midnight.
        let ms = day * DAY_MS;
        assert_eq!(
            id_bounds(Some(ms + 36_000_000), Some(ms + DAY_MS)),
            vec![
                (
                    " AND (id >= ? OR id < ?)",
                    vec![day * ID_STEP, LEGACY_BELOW]
                ),
                (" AND id < ?", vec![(day + 1) * ID_STEP]),
            ]
        );
        // Until one ms past midnight: the 7th's first millisecond counts.
        assert_eq!(
            id_bounds(None, Some(ms + DAY_MS + 1))[0].1,
            vec![(day + 2) * ID_STEP]
        );
    }
}
