//! The web console in headless Chromium: Debian's `chromium` driven by Playwright
//! (`playwright-core`, `tests/browser/`) against a served instance with an executor
//! instance registered through it. `./scripts/test` installs both; without them the
//! test is reported skipped (a failure under `CI=true`).
//!
//! `JOBWHEEL_SCREENSHOTS=docs/screenshots` writes one PNG per page (the pictures in
//! docs/book/src/console.md).

use crate::support;

use jobwheel::CronSchedule;
use jobwheel::prelude::*;
use std::path::Path;
use std::time::Duration;
use support::admin::*;
use support::remote::{Seen, instance_builder};

/// The schedule of the jobs the test triggers itself: nothing fires on its own.
const EXPR: &str = "0 0 12 1 1 ? 2030-2034";
const ZONE: &str = "Asia/Shanghai";
/// How long after the test starts the job made in the form first fires: time for
/// the browser to start, log in and fill the form, which sees every fire ahead.
const FIRST_FIRE_IN: Duration = Duration::from_secs(40);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_in_headless_chromium() {
    let browser_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    if !Path::new("/usr/bin/chromium").exists() {
        support::skip("/usr/bin/chromium is not installed (scripts/test installs it)");
        return;
    }
    if !browser_dir.join("node_modules/playwright-core").exists() {
        support::skip("tests/browser has no node_modules (scripts/test runs npm ci)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("jobwheel-console-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.join("jobs.db").display());
    let (config, _) = config(&url, None, false, None);
    let server = serve(config).await;
    let base = format!("http://{}", server.local_addr());
    let xss = "<script>window.__xss=1</script><img src=x onerror=\"window.__xss=2\">";
    let instance = instance_builder("i-1", &Seen::default())
        .handler("xss", move |_ctx: JobContext| async move {
            Err(JobError::msg(xss).permanent())
        })
        .register_at(&base)
        .beat_every(Duration::from_millis(200))
        .bind("127.0.0.1:0")
        .await
        .unwrap();

    // A node embedded in another process on the same store runs a local job whose
    // handler logs three lines: the console shows them from the store.
    let embedded = Scheduler::builder()
        .backend(jobwheel::BackendConfig::new(&url).connect().await.unwrap())
        .handler("chatty", |_ctx: JobContext| async {
            for i in 0..3 {
                tracing::info!("local step <{i}>");
            }
            Ok(())
        })
        .config(SchedulerConfig::default().node_id("embedded-1"))
        .build()
        .unwrap();
    let embedded_node = embedded.start().await.unwrap();
    embedded
        .upsert(
            Job::builder(
                "local.chatty",
                "chatty",
                Schedule::cron(EXPR, ZONE).unwrap(),
            )
            .build()
            .unwrap(),
        )
        .await
        .unwrap();
    embedded.trigger_now("local.chatty").await.unwrap();

    // The job made in the form fires at one wall-clock instant of the zone, first
    // FIRST_FIRE_IN from now and then yearly: its next five fires are the same
    // whenever the form asks, until the first. What the preview must show is the
    // engine's own fires, on the zone's clock.
    let now = Timestamp::now();
    let first = (now + FIRST_FIRE_IN)
        .to_datetime()
        .with_timezone(&ZONE.parse::<chrono_tz::Tz>().unwrap());
    use chrono::{Datelike, Timelike};
    let soon = format!(
        "{} {} {} {} {} ? {}-{}",
        first.second(),
        first.minute(),
        first.hour(),
        first.day(),
        first.month(),
        first.year(),
        first.year() + 12
    );
    let schedule = CronSchedule::new(&soon, ZONE).unwrap();
    let mut fires = Vec::new();
    let mut t = now;
    while let Some(next) = schedule.next_after(t).filter(|_| fires.len() < 5) {
        fires.push(
            next.to_datetime()
                .with_timezone(&schedule.zone())
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        );
        t = next;
    }
    assert_eq!(fires.len(), 5, "{soon}: {fires:?}");

    let (admin, viewer) = (ACCOUNTS[0], ACCOUNTS[2]);
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg("console.mjs")
        .current_dir(&browser_dir)
        .env("JW_BASE", &base)
        .env("JW_ADMIN", format!("{}:{}", admin.0, admin.1))
        .env("JW_VIEWER", format!("{}:{}", viewer.0, viewer.1))
        .env("JW_EXPR", EXPR)
        .env("JW_SOON_EXPR", &soon)
        .env("JW_ZONE", ZONE)
        .env("JW_FIRES", serde_json::to_string(&fires).unwrap())
        .kill_on_drop(true);
    if let Ok(dir) = std::env::var("JOBWHEEL_SCREENSHOTS") {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        std::fs::create_dir_all(&dir).unwrap();
        cmd.env("JW_SCREENSHOTS", dir);
    }
    let out = tokio::time::timeout(Duration::from_secs(240), cmd.output())
        .await
        .expect("the browser test ends within 4 minutes")
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "the browser test failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("every step passed"), "{stdout}");
    instance.shutdown().await;
    embedded_node.shutdown().await;
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
