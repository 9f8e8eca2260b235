//! Cron syntax and day-of-week numbering.

use crate::support;

use jobwheel::Error;
use jobwheel::schedule::{CronExpr, CronForm, CronSchedule};
use support::{at, fires, local};

fn invalid(expr: &str) -> String {
    match CronExpr::parse(expr) {
        Err(Error::Invalid {
            field,
            reason,
            value,
        }) => {
            assert_eq!(field, "schedule.cron");
            assert_eq!(value, expr);
            reason
        }
        other => panic!("{expr:?} should be refused, got {other:?}"),
    }
}

#[test]
fn forms_are_detected_by_field_count() {
    assert_eq!(
        CronExpr::parse("0 0 12 * * ?").unwrap().form(),
        CronForm::Quartz
    );
    assert_eq!(
        CronExpr::parse("0 0 12 * * ? 2030").unwrap().form(),
        CronForm::Quartz
    );
    assert_eq!(
        CronExpr::parse("30 2 * * *").unwrap().form(),
        CronForm::Unix
    );
    assert!(invalid("* * * *").contains("found 4"));
    assert!(invalid("* * * * * * * *").contains("found 8"));
}

#[test]
fn wildcard_list_range_and_steps() {
    assert_eq!(
        fires("*/20 * * * * ?", "UTC", "2026-01-01T00:00:00Z", 4),
        [
            "2026-01-01T00:00:20Z",
            "2026-01-01T00:00:40Z",
            "2026-01-01T00:01:00Z",
            "2026-01-01T00:01:20Z"
        ]
    );
    assert_eq!(
        fires("0 5/20 * * * ?", "UTC", "2026-01-01T00:00:00Z", 4),
        [
            "2026-01-01T00:05:00Z",
            "2026-01-01T00:25:00Z",
            "2026-01-01T00:45:00Z",
            "2026-01-01T01:05:00Z"
        ]
    );
    assert_eq!(
        fires("0 0 9-17/4 * * ?", "UTC", "2026-01-01T00:00:00Z", 4),
        [
            "2026-01-01T09:00:00Z",
            "2026-01-01T13:00:00Z",
            "2026-01-01T17:00:00Z",
            "2026-01-02T09:00:00Z"
        ]
    );
    assert_eq!(
        fires("0 15,45 8,20 * * ?", "UTC", "2026-01-01T00:00:00Z", 5),
        [
            "2026-01-01T08:15:00Z",
            "2026-01-01T08:45:00Z",
            "2026-01-01T20:15:00Z",
            "2026-01-01T20:45:00Z",
            "2026-01-02T08:15:00Z"
        ]
    );
    // A range whose start is after its end wraps around.
    assert_eq!(
        fires("0 0 22-1 * * ?", "UTC", "2026-01-01T12:00:00Z", 4),
        [
            "2026-01-01T22:00:00Z",
            "2026-01-01T23:00:00Z",
            "2026-01-02T00:00:00Z",
            "2026-01-02T01:00:00Z"
        ]
    );
}

#[test]
fn month_and_day_names_any_case() {
    // 2026-01-01 is a Thursday.
    assert_eq!(
        local("0 0 6 ? jan,Mar mon-wed", "UTC", "2026-01-01T00:00:00Z", 4),
        [
            "2026-01-05 Mon 06:00:00",
            "2026-01-06 Tue 06:00:00",
            "2026-01-07 Wed 06:00:00",
            "2026-01-12 Mon 06:00:00"
        ]
    );
    assert_eq!(
        local("0 0 1 FEB,DEC *", "UTC", "2026-03-01T00:00:00Z", 2),
        ["2026-12-01 Tue 00:00:00", "2027-02-01 Mon 00:00:00"]
    );
    assert_eq!(
        local("0 0 * * FRI-MON", "UTC", "2026-01-01T12:00:00Z", 4)[..4],
        [
            "2026-01-02 Fri 00:00:00",
            "2026-01-03 Sat 00:00:00",
            "2026-01-04 Sun 00:00:00",
            "2026-01-05 Mon 00:00:00"
        ]
    );
}

#[test]
fn quartz_day_of_week_is_one_to_seven_from_sunday() {
    let names = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    for (n, name) in (1..=7).zip(names) {
        let got = local(&format!("0 0 0 ? * {n}"), "UTC", "2026-01-01T00:00:00Z", 3);
        assert!(
            got.iter().all(|d| d.contains(name)),
            "quartz {n} should be {name}: {got:?}"
        );
    }
    assert!(invalid("0 0 0 ? * 0").contains("out of range 1-7"));
    assert!(invalid("0 0 0 ? * 8").contains("out of range 1-7"));
}

#[test]
fn unix_day_of_week_is_zero_to_seven_with_two_sundays() {
    let names = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
    for (n, name) in (0..=7).zip(names) {
        let got = local(&format!("0 0 * * {n}"), "UTC", "2026-01-01T00:00:00Z", 3);
        assert!(
            got.iter().all(|d| d.contains(name)),
            "unix {n} should be {name}: {got:?}"
        );
    }
    assert_eq!(
        fires("0 0 * * 0", "UTC", "2026-01-01T00:00:00Z", 5),
        fires("0 0 * * 7", "UTC", "2026-01-01T00:00:00Z", 5)
    );
    assert!(invalid("0 0 * * 8").contains("out of range 0-7"));
}

#[test]
fn unix_dom_and_dow_both_restricted_is_either() {
    // Vixie cron: the 13th, or any Friday.
    assert_eq!(
        local("0 0 13 * 5", "UTC", "2026-02-01T00:00:00Z", 4),
        [
            "2026-02-06 Fri 00:00:00",
            "2026-02-13 Fri 00:00:00",
            "2026-02-20 Fri 00:00:00",
            "2026-02-27 Fri 00:00:00"
        ]
    );
    assert_eq!(
        local("0 0 13 * 5", "UTC", "2026-03-01T00:00:00Z", 3),
        [
            "2026-03-06 Fri 00:00:00",
            "2026-03-13 Fri 00:00:00",
            "2026-03-20 Fri 00:00:00"
        ]
    );
    assert_eq!(
        local("0 0 10 * 1", "UTC", "2026-03-01T00:00:00Z", 3),
        [
            "2026-03-02 Mon 00:00:00",
            "2026-03-09 Mon 00:00:00",
            "2026-03-10 Tue 00:00:00"
        ]
    );
}

#[test]
fn quartz_requires_question_mark_when_both_days_restricted() {
    assert!(invalid("0 0 0 13 * FRI").contains("write `?`"));
    assert!(invalid("0 0 0 ? * ?").contains("both be `?`"));
    assert!(invalid("? 0 0 * * *").contains("only allowed in day-of-month"));
    // `?` and `*` mean the same in the unrestricted day field.
    assert_eq!(
        fires("0 0 12 * * ?", "UTC", "2026-01-01T00:00:00Z", 5),
        fires("0 0 12 ? * *", "UTC", "2026-01-01T00:00:00Z", 5)
    );
}

#[test]
fn last_day_and_offsets() {
    assert_eq!(
        local("0 0 0 L * ?", "UTC", "2028-01-15T00:00:00Z", 3),
        [
            "2028-01-31 Mon 00:00:00",
            "2028-02-29 Tue 00:00:00",
            "2028-03-31 Fri 00:00:00"
        ]
    );
    assert_eq!(
        local("0 0 0 L-2 * ?", "UTC", "2026-01-15T00:00:00Z", 3),
        [
            "2026-01-29 Thu 00:00:00",
            "2026-02-26 Thu 00:00:00",
            "2026-03-29 Sun 00:00:00"
        ]
    );
    assert!(invalid("0 0 0 L-31 * ?").contains("offset must be 1-30"));
}

#[test]
fn nearest_weekday_and_last_weekday() {
    // 2026-08-15 is a Saturday -> Friday 14th; 2026-11-15 is a Sunday -> Monday 16th.
    assert_eq!(
        local("0 0 0 15W 8 ?", "UTC", "2026-01-01T00:00:00Z", 1),
        ["2026-08-14 Fri 00:00:00"]
    );
    assert_eq!(
        local("0 0 0 15W 11 ?", "UTC", "2026-01-01T00:00:00Z", 1),
        ["2026-11-16 Mon 00:00:00"]
    );
    // 1W never leaves the month: 2026-08-01 is a Saturday -> Monday 3rd.
    assert_eq!(
        local("0 0 0 1W 8 ?", "UTC", "2026-01-01T00:00:00Z", 1),
        ["2026-08-03 Mon 00:00:00"]
    );
    // 31W in a month whose 31st is a Sunday (2026-05-31) -> Friday 29th.
    assert_eq!(
        local("0 0 0 31W 5 ?", "UTC", "2026-01-01T00:00:00Z", 1),
        ["2026-05-29 Fri 00:00:00"]
    );
    // Last weekday: 2026-01-31 is a Saturday -> Friday 30th; 2026-05-31 is a Sunday -> 29th.
    assert_eq!(
        local("0 0 0 LW * ?", "UTC", "2026-01-01T00:00:00Z", 5),
        [
            "2026-01-30 Fri 00:00:00",
            "2026-02-27 Fri 00:00:00",
            "2026-03-31 Tue 00:00:00",
            "2026-04-30 Thu 00:00:00",
            "2026-05-29 Fri 00:00:00"
        ]
    );
}

#[test]
fn last_and_nth_weekday_of_month() {
    assert_eq!(
        local("0 0 0 ? * 6L", "UTC", "2026-01-01T00:00:00Z", 3),
        [
            "2026-01-30 Fri 00:00:00",
            "2026-02-27 Fri 00:00:00",
            "2026-03-27 Fri 00:00:00"
        ]
    );
    assert_eq!(
        local("0 0 0 ? * FRIL", "UTC", "2026-01-01T00:00:00Z", 1),
        ["2026-01-30 Fri 00:00:00"]
    );
    assert_eq!(
        local("0 0 0 ? * 6#3", "UTC", "2026-01-01T00:00:00Z", 3),
        [
            "2026-01-16 Fri 00:00:00",
            "2026-02-20 Fri 00:00:00",
            "2026-03-20 Fri 00:00:00"
        ]
    );
    // A fifth Monday only exists in some months.
    assert_eq!(
        local("0 0 0 ? * MON#5", "UTC", "2026-01-01T00:00:00Z", 3),
        [
            "2026-03-30 Mon 00:00:00",
            "2026-06-29 Mon 00:00:00",
            "2026-08-31 Mon 00:00:00"
        ]
    );
    // Unix numbering for # and L: 5 is Friday.
    assert_eq!(
        local("0 0 * * 5#1", "UTC", "2026-01-01T00:00:00Z", 1),
        ["2026-01-02 Fri 00:00:00"]
    );
    assert_eq!(
        local("0 0 * * 5L", "UTC", "2026-01-01T00:00:00Z", 1),
        ["2026-01-30 Fri 00:00:00"]
    );
    // `L` alone in Quartz day-of-week is Saturday.
    assert_eq!(
        local("0 0 0 ? * L", "UTC", "2026-01-01T00:00:00Z", 1),
        ["2026-01-03 Sat 00:00:00"]
    );
    assert!(invalid("0 0 0 ? * 6#6").contains("#1 to #5"));
}

#[test]
fn year_field_and_end_of_schedule() {
    assert_eq!(
        fires("0 0 0 1 1 ? 2028,2030", "UTC", "2026-06-01T00:00:00Z", 2),
        ["2028-01-01T00:00:00Z", "2030-01-01T00:00:00Z"]
    );
    let s = CronSchedule::utc("0 0 0 1 1 ? 2028").unwrap();
    assert_eq!(s.next_after(at("2028-01-01T00:00:00Z")), None);
    // February 30th never exists.
    assert_eq!(
        CronSchedule::utc("0 0 0 30 2 ?")
            .unwrap()
            .next_after(at("2026-01-01T00:00:00Z")),
        None
    );
    assert!(invalid("0 0 0 1 1 ? 1969").contains("out of range 1970-2199"));
}

#[test]
fn macros() {
    assert_eq!(
        fires("@hourly", "UTC", "2026-01-01T00:30:00Z", 1),
        ["2026-01-01T01:00:00Z"]
    );
    assert_eq!(
        fires("@daily", "UTC", "2026-01-01T00:30:00Z", 1),
        ["2026-01-02T00:00:00Z"]
    );
    assert_eq!(
        local("@weekly", "UTC", "2026-01-01T00:30:00Z", 1),
        ["2026-01-04 Sun 00:00:00"]
    );
    assert_eq!(
        fires("@monthly", "UTC", "2026-01-01T00:30:00Z", 1),
        ["2026-02-01T00:00:00Z"]
    );
    assert_eq!(
        fires("@yearly", "UTC", "2026-01-01T00:30:00Z", 1),
        ["2027-01-01T00:00:00Z"]
    );
}

#[test]
fn bad_values_name_the_field() {
    assert!(invalid("60 * * * * ?").starts_with("second field"));
    assert!(invalid("0 60 * * * ?").starts_with("minute field"));
    assert!(invalid("0 0 24 * * ?").starts_with("hour field"));
    assert!(invalid("0 0 0 32 * ?").starts_with("day-of-month field"));
    assert!(invalid("0 0 0 ? 13 *").starts_with("month field"));
    assert!(invalid("0 0 0 ? * FUNDAY").starts_with("day-of-week field"));
    assert!(invalid("0 */0 * * * ?").contains("step must be at least 1"));
    assert!(invalid("0 1,,2 * * * ?").contains("empty list item"));
    match CronSchedule::new("0 0 0 * * ?", "Mars/Olympus") {
        Err(Error::Invalid { field, value, .. }) => {
            assert_eq!(field, "schedule.zone");
            assert_eq!(value, "Mars/Olympus");
        }
        other => panic!("unknown zone accepted: {other:?}"),
    }
}

#[test]
fn next_after_is_strict_and_exact_to_the_second() {
    let s = CronSchedule::utc("30 30 9 * * ?").unwrap();
    assert_eq!(
        s.next_after(at("2026-01-01T09:30:29.999Z")),
        Some(at("2026-01-01T09:30:30Z"))
    );
    assert_eq!(
        s.next_after(at("2026-01-01T09:30:30Z")),
        Some(at("2026-01-02T09:30:30Z"))
    );
    assert_eq!(
        s.next_after(at("2026-01-01T09:30:30.001Z")),
        Some(at("2026-01-02T09:30:30Z"))
    );
}
