//! Micro-benchmarks: cron `next_after` for typical and worst-case expressions, and
//! the backoff computation.
//!
//! `cargo bench --bench micro`

use criterion::{Criterion, criterion_group, criterion_main};
use jobwheel::schedule::CronSchedule;
use jobwheel::{RetryPolicy, Timestamp};
use std::hint::black_box;

fn cron(c: &mut Criterion) {
    let start = Timestamp::from_millis(1_767_225_600_000); // 2026-01-01T00:00:00Z
    let cases = [
        ("every second, UTC", "* * * * * ?", "UTC"),
        ("every 5 min, Berlin", "0 */5 * * * ?", "Europe/Berlin"),
        (
            "weekdays 09:30, New York",
            "0 30 9 ? * MON-FRI",
            "America/New_York",
        ),
        (
            "last Friday 18:00, Sydney",
            "0 0 18 ? * 6L",
            "Australia/Sydney",
        ),
        (
            "nearest weekday to the 15th",
            "0 0 12 15W * ?",
            "Asia/Shanghai",
        ),
        ("Feb 29 (leap days only)", "0 0 0 29 2 ?", "UTC"),
        (
            "fifth Monday of February (next in 2044)",
            "0 0 0 ? 2 MON#5",
            "UTC",
        ),
        (
            "in the NY fall-back hour",
            "0 */10 * * * ?",
            "America/New_York",
        ),
    ];
    let mut group = c.benchmark_group("cron_next_after");
    for (name, expr, zone) in cases {
        let s = CronSchedule::new(expr, zone).unwrap();
        let from = if name.contains("fall-back") {
            Timestamp::from_millis(1_793_512_800_000) // 2026-11-01T05:00:00Z, 01:00 EDT
        } else {
            start
        };
        group.bench_function(name, |b| b.iter(|| s.next_after(black_box(from))));
    }
    group.finish();
}

fn backoff(c: &mut Criterion) {
    let p = RetryPolicy::default().with_jitter(0.2).unwrap();
    c.bench_function("retry_delay_jittered", |b| {
        b.iter(|| p.delay_jittered(black_box(5), black_box(0.37)))
    });
}

criterion_group!(benches, cron, backoff);
criterion_main!(benches);
