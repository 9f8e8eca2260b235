//! The job model, its validation and its policies.

use jobwheel::{
    AlarmKind, AlarmPolicy, Error, Job, JobId, MisfirePolicy, RetryPolicy, Schedule, Timestamp,
};
use serde_json::json;
use std::time::Duration;

fn every_minute() -> Schedule {
    Schedule::every(Duration::from_secs(60)).unwrap()
}

fn refused<T: std::fmt::Debug>(r: Result<T, Error>) -> (&'static str, String) {
    match r {
        Err(Error::Invalid { field, value, .. }) => (field, value),
        other => panic!("expected an Invalid error, got {other:?}"),
    }
}

#[test]
fn job_ids_are_validated() {
    for ok in [
        "a",
        "reports.daily",
        "tenant-7:sync_users",
        &"x".repeat(200),
        ".hidden",
        "a..b",
    ] {
        assert_eq!(JobId::new(ok).unwrap().as_str(), ok);
    }
    assert_eq!(refused(JobId::new("")), ("job.id", String::new()));
    assert_eq!(refused(JobId::new("x".repeat(201))).0, "job.id");
    // `.` and `..` are URL dot-segments: no API path could address them.
    for bad in [
        "has space",
        "slash/y",
        "ünïcode",
        "semi;colon",
        "new\nline",
        ".",
        "..",
        "...",
    ] {
        assert_eq!(
            refused(JobId::new(bad)),
            ("job.id", bad.to_string()),
            "{bad:?}"
        );
    }
    let e = JobId::new("a b").unwrap_err().to_string();
    assert!(e.contains("' '") && e.contains("[A-Za-z0-9._:-]"), "{e}");
}

#[test]
fn builder_refuses_bad_fields_by_name() {
    let b = || Job::builder("j", "h", every_minute());
    assert_eq!(
        refused(Job::builder("bad id", "h", every_minute()).build()).0,
        "job.id"
    );
    assert_eq!(
        refused(Job::builder("j", "  ", every_minute()).build()).0,
        "job.handler"
    );
    assert_eq!(
        refused(b().timeout(Duration::ZERO).build()),
        ("job.timeout", "0s".into())
    );
    assert_eq!(
        refused(b().misfire_threshold(Duration::ZERO).build()).0,
        "job.misfire_threshold"
    );
    assert_eq!(
        refused(b().misfire(MisfirePolicy::CatchUp { max: 0 }).build()),
        ("misfire.max", "0".into())
    );
    let big = json!({ "blob": "x".repeat(64 * 1024) });
    let (field, value) = refused(b().payload(big.clone()).build());
    assert_eq!(field, "job.payload");
    assert!(value.starts_with("65547 bytes"), "{value}");
    assert!(
        b().payload(big.clone())
            .max_payload_bytes(100_000)
            .build()
            .is_ok(),
        "the limit can be raised"
    );
    assert_eq!(
        refused(b().payload(json!([1, 2, 3])).max_payload_bytes(4).build()).0,
        "job.payload"
    );
    assert_eq!(refused(Schedule::every(Duration::ZERO)).0, "schedule.every");
}

#[test]
fn retry_policy_validation() {
    let s = Duration::from_secs;
    assert_eq!(
        refused(RetryPolicy::new(0, s(60), s(3600))),
        ("retry.max_attempts", "0".into())
    );
    assert_eq!(
        refused(RetryPolicy::new(3, Duration::ZERO, s(3600))).0,
        "retry.base"
    );
    assert_eq!(
        refused(RetryPolicy::new(3, s(60), s(30))).0,
        "retry.max_delay"
    );
    assert_eq!(
        refused(RetryPolicy::default().with_jitter(1.5)).0,
        "retry.jitter"
    );
    assert_eq!(
        refused(RetryPolicy::default().with_jitter(-0.1)).0,
        "retry.jitter"
    );
    let from_json = serde_json::from_str::<RetryPolicy>(r#"{"max_attempts":0}"#).unwrap_err();
    assert!(
        from_json.to_string().contains("retry.max_attempts"),
        "{from_json}"
    );
}

#[test]
fn retry_delay_follows_the_seed_formula() {
    let p = RetryPolicy::default();
    assert_eq!(
        (p.max_attempts(), p.base(), p.max_delay()),
        (3, Duration::from_secs(60), Duration::from_secs(3600))
    );
    let want = [60, 120, 240, 480, 960, 1920, 3600, 3600];
    for (n, w) in (1..).zip(want) {
        assert_eq!(p.delay(n), Duration::from_secs(w), "attempt {n}");
    }
    // The exponent stops at 12: base × 4096 at most, then the cap.
    let p = RetryPolicy::new(
        100,
        Duration::from_millis(10),
        Duration::from_secs(1_000_000),
    )
    .unwrap();
    assert_eq!(p.delay(13), Duration::from_millis(10 * 4096));
    assert_eq!(p.delay(50), Duration::from_millis(10 * 4096));
    assert_eq!(p.delay(u32::MAX), Duration::from_millis(10 * 4096));
    assert!(p.should_retry(99) && !p.should_retry(100));
    assert!(!RetryPolicy::none().should_retry(1));
    let j = RetryPolicy::default().with_jitter(0.5).unwrap();
    assert_eq!(j.delay_jittered(1, 0.0), Duration::from_secs(60));
    assert_eq!(j.delay_jittered(1, 0.5), Duration::from_secs(45));
    assert_eq!(j.delay_jittered(2, 1.0), Duration::from_secs(60));
}

#[test]
fn job_serde_round_trip_covers_every_field() {
    let job = Job::builder(
        "reports.daily",
        "report",
        Schedule::cron("0 30 9 ? * MON-FRI", "Europe/Berlin").unwrap(),
    )
    .payload(json!({"format": "pdf", "to": ["a@example.com"]}))
    .retry(
        RetryPolicy::new(5, Duration::from_secs(10), Duration::from_secs(600))
            .unwrap()
            .with_jitter(0.2)
            .unwrap(),
    )
    .misfire(MisfirePolicy::CatchUp { max: 4 })
    .misfire_threshold(Duration::from_secs(30))
    .timeout(Duration::from_secs(90))
    .alarm(AlarmPolicy {
        events: vec![AlarmKind::Failure, AlarmKind::Recovery],
        misfire_min_fires: 5,
        recipients: vec!["ops@example.com".into()],
    })
    .enabled(false)
    .build()
    .unwrap();
    let text = serde_json::to_string_pretty(&job).unwrap();
    let back: Job = serde_json::from_str(&text).unwrap();
    assert_eq!(back, job, "{text}");
    assert!(
        text.contains("\"timeout\": \"1m 30s\""),
        "durations are humane: {text}"
    );
    assert!(text.contains("\"zone\": \"Europe/Berlin\""));

    let minimal: Job = serde_json::from_str(
        r#"{"id":"j","handler":"h","schedule":{"kind":"cron","expr":"0 0 * * *"}}"#,
    )
    .unwrap();
    assert_eq!(minimal.retry(), &RetryPolicy::default());
    assert_eq!(minimal.misfire(), MisfirePolicy::FireOnce);
    assert!(minimal.enabled() && minimal.timeout().is_none());
    assert_eq!(minimal.alarm(), &AlarmPolicy::default());

    let manual: Job =
        serde_json::from_str(r#"{"id":"j","handler":"h","schedule":{"kind":"never"}}"#).unwrap();
    assert_eq!(manual.schedule(), &Schedule::never());
    assert_eq!(
        serde_json::to_value(manual.schedule()).unwrap(),
        serde_json::json!({"kind": "never"})
    );
    assert_eq!(Schedule::never().first_fire(Timestamp::EPOCH), None);
    let bad = serde_json::from_str::<Job>(
        r#"{"id":"no spaces","handler":"h","schedule":{"kind":"once","at":0}}"#,
    );
    assert!(bad.unwrap_err().to_string().contains("job.id"));
    let unknown = serde_json::from_str::<Job>(
        r#"{"id":"j","handler":"h","schedule":{"kind":"once","at":0},"colour":1}"#,
    );
    assert!(
        unknown.unwrap_err().to_string().contains("colour"),
        "unknown fields are refused"
    );
}

#[test]
fn timestamps_serialize_as_rfc3339_with_millis() {
    let t = Timestamp::from_millis(1_764_694_133_123);
    assert_eq!(
        serde_json::to_string(&t).unwrap(),
        "\"2025-12-02T16:48:53.123Z\""
    );
    assert_eq!(
        serde_json::from_str::<Timestamp>("\"2025-12-02T17:48:53.123+01:00\"").unwrap(),
        t
    );
    assert_eq!(
        serde_json::from_str::<Timestamp>("1764694133123").unwrap(),
        t
    );
    assert!(serde_json::from_str::<Timestamp>("\"yesterday\"").is_err());
}
