//! Joins by window on the memory backend and a paused tokio clock: a report that
//! waits for two daily extracts at different hours and an hourly sync runs once per
//! Paris day, after all three released that day, and passes the day's start down;
//! a window taken more than a week ago is forgotten.

use crate::engine_dependencies::id;
use crate::support;

use jobwheel::dependency::{ChildLink, JoinWindow, Release, UpstreamRun, WindowUnit};
use jobwheel::store::Jobs;
use jobwheel::{Job, RunId, RunStatus, Schedule, Scheduler};
use std::time::Duration;
use support::*;

const H: Duration = Duration::from_secs(3600);

#[tokio::test(start_paused = true)]
async fn a_day_window_joins_parents_on_different_schedules_once_per_day() {
    // 2026-03-28 00:00 Paris is 2026-03-27T23:00Z; the clocks go forward on the 29th.
    let (store, locks, clock) = backend("2026-03-27T23:00:00Z");
    let log = Log::default();
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("h", recording(&log, &clock))
        .config(config("n1"))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    let sched = h.scheduler();
    let paris = |expr: &str| Schedule::cron(expr, "Europe/Paris").unwrap();
    let day = JoinWindow::new(WindowUnit::Day, "Europe/Paris").unwrap();
    sched
        .upsert(
            Job::builder("archive", "h", Schedule::never())
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    sched
        .upsert(
            Job::builder("report", "h", Schedule::never())
                .after(vec![id("orders"), id("invoices"), id("sync")])
                .join_window(day.clone())
                .child(id("archive"))
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    for (name, schedule) in [
        ("orders", paris("0 0 2 * * ?")),
        ("invoices", paris("0 30 3 * * ?")),
        ("sync", paris("0 15 * * * ?")),
    ] {
        sched
            .upsert(
                Job::builder(name, "h", schedule)
                    .children(vec![ChildLink::on_success(id("report"))])
                    .build()
                    .unwrap(),
            )
            .await
            .unwrap();
    }
    // Three Paris days (the 28th, the 29th with its short night, the 30th), to
    // 2026-03-31 00:30 Paris.
    advance(H * 71 + H / 2).await;
    let report = runs_of(&store, "report").await;
    assert_eq!(report.len(), 3, "one report per day: {report:?}");
    let days = [
        at("2026-03-27T23:00:00Z"),
        at("2026-03-28T23:00:00Z"),
        at("2026-03-29T22:00:00Z"),
    ];
    for (r, start) in report.iter().zip(days) {
        let ups = &r.context.upstream;
        let mut names: Vec<&str> = ups.iter().map(|u| u.job.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["invoices", "orders", "sync"], "{ups:?}");
        for u in ups {
            assert_eq!(u.window, Some(start), "keyed by the day's start: {u:?}");
            assert!(u.fire_at >= start && u.fire_at < start + H * 24, "{u:?}");
        }
        let latest = ups.iter().map(|u| u.fire_at).max().unwrap();
        assert!(r.started_at >= latest, "after every parent's release");
        // The first fire of each parent that day released it: invoices at 03:30.
        let inv = ups.iter().find(|u| u.job.as_str() == "invoices").unwrap();
        assert_eq!(day.start(inv.fire_at), start);
    }
    // Each day's later syncs were not queued as a second group: only the fourth
    // day's first sync (00:15) waits, for that day.
    let waiting: Vec<_> = store
        .releases(Some(&id("report")), 100)
        .await
        .unwrap()
        .into_iter()
        .map(|q| (q.from.job.to_string(), q.from.key()))
        .collect();
    assert_eq!(
        waiting,
        vec![("sync".to_string(), at("2026-03-30T22:00:00Z"))]
    );
    // The report's child is released with the day's start as its instant.
    let archive = runs_of(&store, "archive").await;
    assert_eq!(archive.len(), 3);
    for (a, start) in archive.iter().zip(days) {
        assert_eq!(a.context.upstream[0].fire_at, start);
    }

    // A week and a day later (the scheduler stopped; a maintenance pass's take),
    // the first day is forgotten: a release of it is queued as new.
    h.shutdown().await;
    advance(H * 24 * 8).await;
    store.take_releases(100).await.unwrap();
    let late = UpstreamRun {
        job: id("sync"),
        fire_at: days[0] + H * 5,
        run: RunId(0),
        status: RunStatus::Succeeded,
        depth: 1,
        released_by: Some("test".into()),
        window: Some(days[0]),
    };
    store
        .queue_releases(&[Release::new(id("report"), late)], None)
        .await
        .unwrap();
    assert_eq!(
        store.releases(Some(&id("report")), 10).await.unwrap().len(),
        2,
        "the mark of a window taken over a week ago was forgotten"
    );
}
