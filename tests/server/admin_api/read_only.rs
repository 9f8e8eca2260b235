//! Read-only mode refuses every change; alarm events are retried and discarded.

use super::support::admin::*;
use super::{cron_job, last_audit, until};
use jobwheel::prelude::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_mode_refuses_every_change_and_alarms_are_retried_and_discarded() {
    let dir = std::env::temp_dir().join(format!("jobwheel-api-ro-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.join("jobs.db").display());
    // A node of the application with a local handler that fails, and an alarm
    // that cannot deliver: its events stay failed in the outbox.
    struct Down;
    #[async_trait::async_trait]
    impl jobwheel::JobAlarm for Down {
        fn name(&self) -> &str {
            "down"
        }
        async fn alarm(&self, _: &jobwheel::AlarmEvent) -> Result<(), jobwheel::alarm::AlarmError> {
            Err(jobwheel::alarm::AlarmError::permanent("smtp down"))
        }
    }
    let app = Scheduler::builder()
        .backend(connect(&url).await.unwrap())
        .handler("fail", |_ctx: JobContext| async {
            Err(JobError::msg("boom").permanent())
        })
        .alarm(Down)
        .build()
        .unwrap();
    let job = Job::builder("fails", "fail", Schedule::once(Timestamp::now()))
        .build()
        .unwrap();
    app.upsert(job).await.unwrap();
    let app = app.start().await.unwrap();

    let (mut config, tokens) = config(&url, None, false, None);
    config.groups.clear();
    let writable = serve(config.clone()).await;
    config.read_only = true;
    let read_only = serve(config).await;
    let (rw, ro) = (Api::new(&writable), Api::new(&read_only));
    let admin = Who::Token(tokens.admin.clone());
    let failed = until("the alarm to fail", || async {
        let a = rw
            .call(
                &admin,
                "GET",
                "/api/v1/alarms",
                "/api/v1/alarms?status=failed",
                None,
            )
            .await;
        a.body["items"].as_array().unwrap().first().cloned()
    })
    .await;
    let aid = failed["id"].as_i64().unwrap();
    assert_eq!(failed["last_error"], "down: smtp down");

    // Read-only: reads answer, every change is refused, for every role.
    let a = ro
        .call(
            &admin,
            "GET",
            "/api/v1/jobs/{id}",
            "/api/v1/jobs/fails",
            None,
        )
        .await;
    assert_eq!(a.status, 200);
    let me = ro
        .call(&admin, "GET", "/api/v1/session", "/api/v1/session", None)
        .await;
    assert_eq!(me.body["read_only"], true);
    let ada = ro.login("ada", "ada-password-1").await;
    for (method, path) in [
        ("POST", "/api/v1/jobs/fails/pause"),
        ("POST", "/api/v1/jobs/fails/trigger"),
        ("DELETE", "/api/v1/jobs/fails"),
        ("POST", &*format!("/api/v1/alarms/{aid}/retry")),
    ] {
        for who in [&admin, &ada] {
            let a = ro.call(who, method, path, path, None).await;
            assert_eq!(
                (a.status, a.body["error"].as_str()),
                (403, Some("read_only")),
                "{method} {path}"
            );
        }
    }
    let a = ro
        .send(
            &admin,
            "POST",
            "/api/v1/jobs",
            "/api/v1/jobs",
            cron_job("x", "0 0 1 * * ?", "echo"),
        )
        .await;
    assert_eq!(
        (a.status, a.body["error"].as_str()),
        (403, Some("read_only"))
    );

    // Retry and discard through the writable server.
    let a = rw
        .call(
            &admin,
            "POST",
            "/api/v1/alarms/{id}/retry",
            &format!("/api/v1/alarms/{aid}/retry"),
            None,
        )
        .await;
    assert_eq!(
        (a.status, a.body["status"].as_str()),
        (200, Some("pending")),
        "{}",
        a.body
    );
    let e = last_audit(&rw, &admin, &aid.to_string()).await;
    assert_eq!(
        (e["action"].as_str(), e["before"]["status"].as_str()),
        (Some("alarm.retry"), Some("failed"))
    );
    let again = until("the retried alarm to fail again", || async {
        let a = rw
            .call(
                &admin,
                "GET",
                "/api/v1/alarms",
                "/api/v1/alarms?status=failed",
                None,
            )
            .await;
        a.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["id"] == aid && x["attempts"].as_u64() > failed["attempts"].as_u64())
            .cloned()
    })
    .await;
    assert_eq!(
        again["status"], "failed",
        "the retry was delivered (and failed) again"
    );
    let a = rw
        .call(
            &admin,
            "POST",
            "/api/v1/alarms/{id}/discard",
            &format!("/api/v1/alarms/{aid}/discard"),
            None,
        )
        .await;
    assert_eq!((a.status, a.body["status"].as_str()), (200, Some("failed")));
    let e = last_audit(&rw, &admin, &aid.to_string()).await;
    assert_eq!(e["action"], "alarm.discard");
    let list = rw
        .call(&admin, "GET", "/api/v1/alarms", "/api/v1/alarms", None)
        .await;
    let discarded = list.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == aid)
        .unwrap()
        .clone();
    assert!(
        discarded["next_attempt_at"].is_null(),
        "a discarded event has no retry left"
    );

    app.shutdown().await;
    writable.shutdown().await;
    read_only.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
