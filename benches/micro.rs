//! Micro-benchmarks: cron `next_after` for typical and worst-case expressions, the
//! backoff computation, and the memory store's claim path (due scan, lock grant, start,
//! finish, release) for a batch of 100 fires.
//!
//! `cargo bench --bench micro`

use criterion::{Criterion, criterion_group, criterion_main};
use jobwheel::schedule::CronSchedule;
use jobwheel::store::JobsExt as _;
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
        // The worst cases: every second inside a repeated hour (the second pass),
        // right after a gap of a fixed-hour expression, and into Apia's skipped day.
        (
            "every second, NY repeated hour, second pass",
            "* * * * * ?",
            "America/New_York",
        ),
        (
            "every second of hour 2, NY, after the spring gap",
            "* * 2 * * ?",
            "America/New_York",
        ),
        (
            "fixed hours 2,3 from the second pass, Berlin",
            "0 0,30 2,3 * * ?",
            "Europe/Berlin",
        ),
        (
            "every second, Apia, into the skipped day",
            "* * * * * ?",
            "Pacific/Apia",
        ),
    ];
    let mut group = c.benchmark_group("cron_next_after");
    for (name, expr, zone) in cases {
        let s = CronSchedule::new(expr, zone).unwrap();
        let from = match name {
            n if n.contains("fall-back") => Timestamp::from_millis(1_793_512_800_000), // 2026-11-01T06:00:00Z, 01:00 EST (second pass)
            n if n.contains("second pass") => Timestamp::from_millis(1_793_514_600_000), // 2026-11-01T06:30:00Z, 01:30 EST
            n if n.contains("spring gap") => Timestamp::from_millis(1_772_953_200_000), // 2026-03-08T07:00:00Z, 03:00 EDT
            n if n.contains("fixed hours 2,3") => Timestamp::from_millis(1_792_890_000_000), // 2026-10-25T01:00:00Z, 02:00 CET (second pass)
            n if n.contains("Apia") => Timestamp::from_millis(1_325_239_199_000), // 2011-12-30T09:59:59Z, 23:59:59 on the 29th
            _ => start,
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

/// One full claim path through the memory backend for 100 due jobs: `due`, `acquire`,
/// `start_runs`, `finish_runs` (rescheduling each job to the same instant, so every
/// iteration finds them due again) and `release`.
fn memory_claim_path(c: &mut Criterion) {
    use jobwheel::FireState;
    use jobwheel::memory::{LocalLocks, MemoryStore};
    use jobwheel::store::{FinishOutcome, FinishRun, Jobs, StartOutcome, StartRun};
    use jobwheel::{Job, LockProvider, LockRequest, RunStatus, Schedule, TriggerKind};
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (store, locks) = (MemoryStore::new(), LocalLocks::new());
    let at = Timestamp::from_millis(1_000);
    rt.block_on(async {
        for i in 0..100 {
            let job = Job::builder(format!("j{i}"), "h", Schedule::once(at))
                .build()
                .unwrap();
            store.upsert(&job, Some(at)).await.unwrap();
        }
    });
    c.bench_function("memory_claim_path_100_fires", |b| {
        b.iter(|| {
            rt.block_on(async {
                let due = store
                    .due(&jobwheel::store::DueQuery::new(at, 100))
                    .await
                    .unwrap()
                    .items;
                let reqs: Vec<LockRequest> = due
                    .iter()
                    .map(|f| LockRequest {
                        key: f.job_id.to_string(),
                        ttl: std::time::Duration::from_secs(30),
                    })
                    .collect();
                let leases: Vec<_> = locks
                    .acquire("n", &reqs)
                    .await
                    .unwrap()
                    .into_iter()
                    .flatten()
                    .collect();
                let starts: Vec<StartRun> = due
                    .iter()
                    .zip(&leases)
                    .map(|(f, l)| StartRun {
                        job_id: f.job_id.clone(),
                        fire_at: f.fire_at(),
                        version: f.version,
                        token: l.token,
                        node: "n".into(),
                        attempt: 1,
                        trigger: TriggerKind::Schedule,
                        covers: None,
                        context: Default::default(),
                    })
                    .collect();
                let started = store.start_runs(&starts).await.unwrap();
                let finishes: Vec<FinishRun> = starts
                    .iter()
                    .zip(started)
                    .filter_map(|(s, o)| match o {
                        StartOutcome::Started { run_id, .. } => Some(FinishRun {
                            run_id,
                            job_id: s.job_id.clone(),
                            token: s.token,
                            takeover: false,
                            status: RunStatus::Succeeded,
                            error: None,
                            will_retry: false,
                            executor: None,
                            version: s.version,
                            next: Some(FireState::scheduled(at)),
                            alarms: Vec::new(),
                            releases: Vec::new(),
                            lease: jobwheel::store::LeaseEnd::Untouched,
                        }),
                        StartOutcome::Refused(_) => None,
                    })
                    .collect();
                let done = store.finish_runs(&finishes).await.unwrap();
                assert!(
                    done.iter()
                        .all(|o| matches!(o, FinishOutcome::Finished { .. }))
                );
                locks.release(&leases).await.unwrap();
                black_box(done.len())
            })
        })
    });
}

criterion_group!(benches, cron, backoff, memory_claim_path);
criterion_main!(benches);
