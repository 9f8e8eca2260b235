//! Cron in time zones: DST transitions in several zones, whole-year sweeps, the
//! `cron` crate as an oracle, and schedule serde.

use crate::support;

use jobwheel::Timestamp;
use jobwheel::schedule::{CronSchedule, Schedule};
use std::str::FromStr;
use support::{at, fires, local};

#[test]
fn zones_without_dst() {
    assert_eq!(
        fires("0 0 9 * * ?", "Asia/Shanghai", "2026-01-01T00:00:00Z", 2),
        ["2026-01-01T01:00:00Z", "2026-01-02T01:00:00Z"]
    );
    assert_eq!(
        fires("0 0 9 * * ?", "Asia/Kolkata", "2026-07-01T00:00:00Z", 1),
        ["2026-07-01T03:30:00Z"]
    );
}

// ----- DST: America/New_York, 2026-03-08 02:00 EST -> 03:00 EDT, 2026-11-01 02:00 EDT -> 01:00 EST.

#[test]
fn new_york_spring_gap_fixed_hour_fires_at_gap_end() {
    assert_eq!(
        fires(
            "0 30 2 * * ?",
            "America/New_York",
            "2026-03-07T00:00:00Z",
            3
        ),
        // 02:30 EST on the 7th, 03:00 EDT (end of the gap) on the 8th, 02:30 EDT on the 9th.
        [
            "2026-03-07T07:30:00Z",
            "2026-03-08T07:00:00Z",
            "2026-03-09T06:30:00Z"
        ]
    );
    // Every minute of the missing hour coalesces into one fire at the gap's end.
    assert_eq!(
        fires("0 * 2 * * ?", "America/New_York", "2026-03-08T06:59:00Z", 2),
        ["2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z"]
    );
    // A fixed list with the hour after the gap fires once there.
    assert_eq!(
        fires(
            "0 0 2,3 * * ?",
            "America/New_York",
            "2026-03-08T06:00:00Z",
            2
        ),
        ["2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z"]
    );
}

#[test]
fn new_york_spring_gap_stepped_hours_follow_real_time() {
    assert_eq!(
        local(
            "0 0/30 * * * ?",
            "America/New_York",
            "2026-03-08T05:45:00Z",
            5
        ),
        [
            "2026-03-08 Sun 01:00:00",
            "2026-03-08 Sun 01:30:00",
            "2026-03-08 Sun 03:00:00",
            "2026-03-08 Sun 03:30:00",
            "2026-03-08 Sun 04:00:00"
        ]
    );
    // In UTC the fires are 30 minutes apart except across the gap, where the real
    // time from 01:30 EST to 03:00 EDT is 30 minutes too.
    assert_eq!(
        fires(
            "0 0/30 * * * ?",
            "America/New_York",
            "2026-03-08T06:15:00Z",
            3
        ),
        [
            "2026-03-08T06:30:00Z",
            "2026-03-08T07:00:00Z",
            "2026-03-08T07:30:00Z"
        ]
    );
    // A range of hours across the gap skips the nonexistent hour.
    assert_eq!(
        fires(
            "0 0 1-4 * * ?",
            "America/New_York",
            "2026-03-08T05:00:00Z",
            3
        ),
        [
            "2026-03-08T06:00:00Z",
            "2026-03-08T07:00:00Z",
            "2026-03-08T08:00:00Z"
        ]
    );
}

#[test]
fn new_york_fall_back_fixed_hour_fires_once_at_first_occurrence() {
    assert_eq!(
        fires(
            "0 30 1 * * ?",
            "America/New_York",
            "2026-10-31T00:00:00Z",
            3
        ),
        // 01:30 EDT on 10-31, 01:30 EDT (first of two) on 11-01, 01:30 EST on 11-02.
        [
            "2026-10-31T05:30:00Z",
            "2026-11-01T05:30:00Z",
            "2026-11-02T06:30:00Z"
        ]
    );
    // Asked from inside the second occurrence of 01:xx, the next fire is tomorrow.
    assert_eq!(
        fires(
            "0 45 1 * * ?",
            "America/New_York",
            "2026-11-01T06:10:00Z",
            1
        ),
        ["2026-11-02T06:45:00Z"]
    );
}

#[test]
fn new_york_fall_back_stepped_hours_fire_in_both_occurrences() {
    assert_eq!(
        fires(
            "0 0/30 * * * ?",
            "America/New_York",
            "2026-11-01T04:15:00Z",
            6
        ),
        [
            "2026-11-01T04:30:00Z", // 00:30 EDT
            "2026-11-01T05:00:00Z", // 01:00 EDT
            "2026-11-01T05:30:00Z", // 01:30 EDT
            "2026-11-01T06:00:00Z", // 01:00 EST
            "2026-11-01T06:30:00Z", // 01:30 EST
            "2026-11-01T07:00:00Z", // 02:00 EST
        ]
    );
    // From inside the first occurrence, the second occurrence comes next.
    assert_eq!(
        fires("0 0 * * * ?", "America/New_York", "2026-11-01T05:10:00Z", 2),
        ["2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z"]
    );
}

// ----- Europe/Berlin: 2026-03-29 02:00 CET -> 03:00 CEST, 2026-10-25 03:00 CEST -> 02:00 CET.

#[test]
fn berlin_both_transitions() {
    assert_eq!(
        fires("0 30 2 * * ?", "Europe/Berlin", "2026-03-28T00:00:00Z", 3),
        [
            "2026-03-28T01:30:00Z",
            "2026-03-29T01:00:00Z",
            "2026-03-30T00:30:00Z"
        ]
    );
    assert_eq!(
        fires("0 30 2 * * ?", "Europe/Berlin", "2026-10-24T12:00:00Z", 3),
        [
            "2026-10-25T00:30:00Z",
            "2026-10-26T01:30:00Z",
            "2026-10-27T01:30:00Z"
        ]
    );
    assert_eq!(
        fires("0 */20 2 * * ?", "Europe/Berlin", "2026-10-25T00:00:00Z", 4),
        // Fixed hour 2 with stepped minutes: only the first occurrence of 02:xx.
        [
            "2026-10-25T00:20:00Z",
            "2026-10-25T00:40:00Z",
            "2026-10-26T01:00:00Z",
            "2026-10-26T01:20:00Z"
        ]
    );
    assert_eq!(
        fires("0 0 * * * ?", "Europe/Berlin", "2026-10-24T23:30:00Z", 4),
        [
            "2026-10-25T00:00:00Z",
            "2026-10-25T01:00:00Z",
            "2026-10-25T02:00:00Z",
            "2026-10-25T03:00:00Z"
        ]
    );
}

// ----- Australia/Sydney (southern hemisphere): 2026-04-05 03:00 AEDT -> 02:00 AEST,
//       2026-10-04 02:00 AEST -> 03:00 AEDT.

#[test]
fn sydney_both_transitions() {
    assert_eq!(
        local(
            "0 30 2 * * ?",
            "Australia/Sydney",
            "2026-10-02T12:00:00Z",
            3
        ),
        [
            "2026-10-03 Sat 02:30:00",
            "2026-10-04 Sun 03:00:00",
            "2026-10-05 Mon 02:30:00"
        ]
    );
    assert_eq!(
        fires(
            "0 30 2 * * ?",
            "Australia/Sydney",
            "2026-04-04T00:00:00Z",
            2
        ),
        // 02:30 AEDT (first occurrence) = 15:30Z on the 4th.
        ["2026-04-04T15:30:00Z", "2026-04-05T16:30:00Z"]
    );
    assert_eq!(
        fires("0 0 * * * ?", "Australia/Sydney", "2026-04-04T14:30:00Z", 4),
        [
            "2026-04-04T15:00:00Z",
            "2026-04-04T16:00:00Z",
            "2026-04-04T17:00:00Z",
            "2026-04-04T18:00:00Z"
        ]
    );
}

// ----- Australia/Lord_Howe shifts by 30 minutes: 2026-10-04 02:00 -> 02:30.

#[test]
fn lord_howe_half_hour_gap() {
    assert_eq!(
        local(
            "0 15 2 * * ?",
            "Australia/Lord_Howe",
            "2026-10-02T12:00:00Z",
            3
        ),
        [
            "2026-10-03 Sat 02:15:00",
            "2026-10-04 Sun 02:30:00",
            "2026-10-05 Mon 02:15:00"
        ]
    );
}

/// A search that starts in the second pass of a repeated period must not pass over
/// the wall times just after the period (they exist only in the new offset).
#[test]
fn a_fixed_hour_search_from_the_second_pass_finds_the_wall_time_after_the_period() {
    let cases = [
        // (expression, zone, after, next fire)
        (
            "0 0,30 2,3 * * ?",
            "Europe/Berlin",
            "2026-10-25T01:00:00Z",
            "2026-10-25T02:00:00Z",
        ),
        (
            "0 0,50 1,2 * * ?",
            "America/New_York",
            "2026-11-01T06:40:00Z",
            "2026-11-01T07:00:00Z",
        ),
        (
            "0 45 2,3 * * ?",
            "Antarctica/Troll",
            "2026-10-25T02:30:00Z",
            "2026-10-25T03:45:00Z",
        ),
        (
            "0 0,50 3 * * ?",
            "Pacific/Chatham",
            "2026-04-04T14:05:00Z",
            "2026-04-04T15:05:00Z",
        ),
        (
            "0 0,50 1,2 * * ?",
            "Australia/Lord_Howe",
            "2026-04-04T15:10:00Z",
            "2026-04-04T15:30:00Z",
        ),
    ];
    for (expr, zone, after, want) in cases {
        assert_eq!(
            fires(expr, zone, after, 1),
            [want],
            "{expr} in {zone} after {after}"
        );
        // One second earlier (in the first pass or at the change) agrees.
        let earlier = Timestamp::from_millis(at(after).as_millis() - 1000);
        let s = CronSchedule::new(expr, zone).unwrap();
        assert!(
            s.next_after(earlier).unwrap() <= at(want),
            "{expr} in {zone}"
        );
    }
}

/// A real-time expression fires in the second pass of a repeated period seven hours
/// long (Antarctica/Vostok fell back from +07 to +00 on 1994-01-31 at 17:00Z).
#[test]
fn a_seven_hour_repeated_period_fires_in_its_second_pass() {
    assert_eq!(
        fires(
            "0 0 */2 * * ?",
            "Antarctica/Vostok",
            "1994-01-31T20:00:00Z",
            3
        ),
        [
            "1994-01-31T22:00:00Z",
            "1994-02-01T00:00:00Z",
            "1994-02-01T02:00:00Z"
        ]
    );
}

/// From chrono's first instant, or any instant before the first year a cron
/// expression can match, the answer is the first fire of that year, in every zone.
#[test]
fn the_first_fire_is_found_from_the_earliest_instants_in_every_zone() {
    for (zone, want) in [
        ("UTC", "1970-01-01T00:00:00Z"),
        ("Asia/Tokyo", "1969-12-31T15:00:00Z"),
        ("America/New_York", "1970-01-01T05:00:00Z"),
        ("Europe/London", "1969-12-31T23:00:00Z"),
        ("America/Santiago", "1970-01-01T03:00:00Z"),
        ("Etc/GMT+12", "1970-01-01T12:00:00Z"),
    ] {
        let s = CronSchedule::new("0 0 0 * * ?", zone).unwrap();
        let earliest =
            Timestamp::from_millis(chrono::DateTime::<chrono::Utc>::MIN_UTC.timestamp_millis());
        for t in [
            Timestamp::from_millis(i64::MIN),
            earliest,
            Timestamp::MIN,
            at("1969-06-01T00:00:00Z"),
        ] {
            assert_eq!(s.next_after(t), Some(at(want)), "{zone} after {t:?}");
        }
    }
}

#[test]
fn a_whole_year_of_an_every_30_minutes_job_has_no_gap_in_real_time() {
    for zone in [
        "America/New_York",
        "Europe/Berlin",
        "Australia/Sydney",
        "Australia/Lord_Howe",
    ] {
        let s = CronSchedule::new("0 0/30 * * * ?", zone).unwrap();
        let mut t = at("2026-01-01T00:00:00Z");
        let end = at("2027-01-01T00:00:00Z");
        let mut n = 0;
        while let Some(next) = s.next_after(t).filter(|n| *n < end) {
            assert_eq!(
                next.as_millis() - t.as_millis(),
                1_800_000,
                "{zone} after {t}"
            );
            t = next;
            n += 1;
        }
        assert_eq!(n, 365 * 48 - 1, "{zone}");
    }
}

#[test]
fn a_whole_year_of_a_daily_fixed_job_fires_every_day_once() {
    for zone in [
        "America/New_York",
        "Europe/Berlin",
        "Australia/Sydney",
        "Australia/Lord_Howe",
    ] {
        for expr in ["0 30 2 * * ?", "0 30 1 * * ?"] {
            let s = CronSchedule::new(expr, zone).unwrap();
            let tz: chrono_tz::Tz = zone.parse().unwrap();
            let mut t = at("2026-01-01T00:00:00Z");
            let mut days = std::collections::BTreeSet::new();
            for _ in 0..365 {
                t = s.next_after(t).unwrap();
                assert!(
                    days.insert(t.to_datetime().with_timezone(&tz).date_naive()),
                    "{zone} {expr} twice on one day: {t}"
                );
            }
            assert_eq!(days.len(), 365);
        }
    }
}

/// The `cron` crate as an independent oracle, for the syntax both accept.
#[test]
fn agrees_with_the_cron_crate_on_common_syntax() {
    let exprs = [
        "0 * * * * *",
        "*/7 * * * * *",
        "0 0/15 * * * *",
        "0 30 9,12,15 1,15 May-Aug *",
        "0 0 0 * * Mon,Wed,Fri",
        "15 10 3-6 * * *",
        "0 0 12 1 Jan,Jul *",
        "0 0 0 29 Feb *",
        "0 5 4 * * Sun",
        "30 59 23 31 * *",
    ];
    for (zone, tz) in [
        ("UTC", chrono_tz::UTC),
        ("Asia/Tokyo", chrono_tz::Asia::Tokyo),
    ] {
        for expr in exprs {
            let ours = CronSchedule::new(expr, zone).unwrap();
            let theirs = cron::Schedule::from_str(expr).unwrap();
            let start = at("2025-11-30T22:13:07Z");
            let mut t = start;
            for (i, want) in theirs
                .after(&start.to_datetime().with_timezone(&tz))
                .take(200)
                .enumerate()
            {
                let got = ours.next_after(t).unwrap();
                assert_eq!(
                    got,
                    Timestamp::from_datetime(&want),
                    "{expr} in {zone}, fire {i}"
                );
                t = got;
            }
        }
    }
}

#[test]
fn schedule_serde_round_trip() {
    for s in [
        Schedule::cron("0 30 9 ? * MON-FRI", "Europe/Berlin").unwrap(),
        Schedule::every(std::time::Duration::from_secs(90)).unwrap(),
        Schedule::once(at("2026-12-24T18:00:00Z")),
    ] {
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(
            serde_json::from_str::<Schedule>(&json).unwrap(),
            s,
            "{json}"
        );
    }
    let j = r#"{"kind":"interval","every":"30s"}"#;
    assert_eq!(
        serde_json::from_str::<Schedule>(j).unwrap(),
        Schedule::every(std::time::Duration::from_secs(30)).unwrap()
    );
    let bad =
        serde_json::from_str::<Schedule>(r#"{"kind":"cron","expr":"0 0 25 * * ?","zone":"UTC"}"#);
    assert!(bad.unwrap_err().to_string().contains("hour field"));
    let bad = serde_json::from_str::<Schedule>(r#"{"kind":"interval","every":"0s"}"#);
    assert!(bad.unwrap_err().to_string().contains("schedule.every"));
}

#[test]
fn interval_and_once() {
    let s = Schedule::interval(
        std::time::Duration::from_millis(1500),
        at("2026-01-01T00:00:00Z"),
    )
    .unwrap();
    assert_eq!(
        s.next_after(at("2026-01-01T00:00:00Z")),
        Some(at("2026-01-01T00:00:01.500Z"))
    );
    assert_eq!(
        s.next_after(at("2025-12-31T23:59:58Z")),
        Some(at("2025-12-31T23:59:58.500Z"))
    );
    assert_eq!(
        s.next_after(at("2025-12-31T23:59:59Z")),
        Some(at("2026-01-01T00:00:00Z"))
    );
    assert_eq!(
        s.first_fire(at("2026-01-01T00:00:03Z")),
        Some(at("2026-01-01T00:00:03Z"))
    );
    let once = Schedule::once(at("2026-01-01T00:00:00Z"));
    assert_eq!(
        once.first_fire(at("2026-06-01T00:00:00Z")),
        Some(at("2026-01-01T00:00:00Z"))
    );
    assert_eq!(once.next_after(at("2026-01-01T00:00:00Z")), None);
    assert_eq!(
        s.fires_between(at("2026-01-01T00:00:00Z"), at("2026-01-01T00:00:06Z"), 10)
            .len(),
        4
    );
    assert_eq!(
        s.fires_between(at("2026-01-01T00:00:00Z"), at("2026-01-01T00:01:00Z"), 3)
            .len(),
        3
    );
}
