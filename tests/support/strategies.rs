//! Proptest strategies for what a user supplies: durations, instants, schedules,
//! payloads and whole jobs, probing every edge (zero, the limits, past them, huge).

use jobwheel::limits::MAX_SPAN;
use jobwheel::{Error, Job, MisfirePolicy, RetryPolicy, Schedule, Timestamp};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::time::Duration;

/// Durations that probe every edge: zero, tiny, ordinary, the limit, past it, huge.
pub fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        1 => Just(Duration::ZERO),
        2 => Just(Duration::from_millis(1)),
        12 => (1u64..10_000).prop_map(Duration::from_millis),
        6 => (1u64..1_000_000).prop_map(Duration::from_secs),
        1 => Just(MAX_SPAN),
        1 => Just(MAX_SPAN + Duration::from_secs(1)),
        1 => Just(Duration::from_secs(u64::MAX / 2)),
        1 => Just(Duration::MAX),
    ]
}

/// Instants across the whole `i64` range, dense near now.
pub fn instant(now: i64) -> impl Strategy<Value = Timestamp> {
    prop_oneof![
        12 => (now - 5_000..now + 5_000).prop_map(Timestamp::from_millis),
        2 => any::<i64>().prop_map(Timestamp::from_millis),
        1 => Just(Timestamp::MIN),
        1 => Just(Timestamp::MAX),
        1 => Just(Timestamp::from_millis(i64::MIN)),
        1 => Just(Timestamp::from_millis(i64::MAX)),
    ]
}

pub fn schedule(now: i64) -> impl Strategy<Value = Result<Schedule, Error>> {
    let crons = prop_oneof![
        4 => Just("* * * * * ?"),
        4 => Just("*/2 * * * * ?"),
        1 => Just("0 0 0 30 2 ?"),
        1 => Just("0 0 0 1 1 ? 2020"),
        2 => Just("0 30 2 * * ?"),
        2 => Just("@hourly"),
        1 => Just("-1 * * * * ?"),
        1 => Just("@reboot"),
    ];
    prop_oneof![
        (
            crons,
            prop_oneof![
                4 => Just("UTC"),
                4 => Just("America/New_York"),
                1 => Just("Nowhere/Else")
            ]
        )
            .prop_map(|(e, z)| Schedule::cron(e, z)),
        (duration(), instant(now)).prop_map(|(d, a)| Schedule::interval(d, a)),
        instant(now).prop_map(|t| Ok(Schedule::once(t))),
    ]
}

pub fn payload() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(null)),
        any::<i64>().prop_map(|n| json!({ "n": n })),
        ".{0,40}".prop_map(|s| json!({ "text": s })),
        (0usize..80).prop_map(|depth| {
            let mut v = json!(1);
            for _ in 0..depth {
                v = json!([v]);
            }
            v
        }),
    ]
}

/// A job as a user would build it, or the typed error the builder gave.
pub fn job(now: i64) -> impl Strategy<Value = Result<Job, Error>> {
    (
        schedule(now),
        (1u32..5, duration(), duration()),
        prop_oneof![
            Just(MisfirePolicy::FireOnce),
            Just(MisfirePolicy::Skip),
            (0u32..4).prop_map(|max| MisfirePolicy::CatchUp { max }),
        ],
        proptest::option::weighted(0.3, duration()),
        proptest::option::weighted(0.3, duration()),
        payload(),
        any::<bool>(),
    )
        .prop_map(
            |(schedule, (n, base, cap), misfire, threshold, timeout, payload, fail)| {
                // The cap is the base plus a random extra, so most policies are valid.
                let retry = RetryPolicy::new(n, base, base.saturating_add(cap))?;
                let mut b = Job::builder(
                    if fail { "failing" } else { "fine" },
                    if fail { "fail" } else { "ok" },
                    schedule?,
                )
                .retry(retry)
                .misfire(misfire)
                .payload(payload);
                if let Some(t) = threshold {
                    b = b.misfire_threshold(t);
                }
                if let Some(t) = timeout {
                    b = b.timeout(t);
                }
                b.build()
            },
        )
}
