//! The e-mail and webhook alarms against real servers on loopback: aiosmtpd for SMTP
//! (installed by `./scripts/test`), a small HTTP server for webhooks. Failure paths
//! run inside a scheduler, and fire times of other jobs are checked while alarms fail.
#![cfg(all(feature = "email", feature = "webhook"))]

use crate::support;

use hmac::{KeyInit, Mac};
use jobwheel::alarm::email::{EmailAlarm, SmtpSecurity};
use jobwheel::alarm::webhook::{WebhookAlarm, WebhookFormat};
use jobwheel::memory::{LocalLocks, MemoryStore};
use jobwheel::store::AlarmOutbox;
use jobwheel::{
    AlarmEvent, AlarmKind, AlarmPolicy, AlarmStatus, Job, JobAlarm, JobContext, JobError, JobId,
    RetryPolicy, RunId, Schedule, Scheduler, SchedulerConfig, Timestamp,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::servers::{Answer, HttpServer, SmtpServer};

fn event() -> AlarmEvent {
    AlarmEvent {
        kind: AlarmKind::FinalFailure,
        job_id: JobId::new("reports.daily").unwrap(),
        handler: "report".into(),
        run_id: Some(RunId(42)),
        fire_at: support::at("2026-12-07T08:30:00Z"),
        zone: "Europe/Berlin".into(),
        attempt: 3,
        max_attempts: 3,
        node: "web-1".into(),
        duration_ms: Some(1250),
        error: Some("db <timeout> & retry".into()),
        will_retry: false,
        next_fire_at: Some(support::at("2026-12-08T08:30:00Z")),
        recipients: vec!["owner@example.com".into(), "not an address".into()],
        occurred_at: support::at("2026-12-07T08:30:01.250Z"),
        suppressed: 2,
        covers: None,
        blocked: Vec::new(),
        waiting_for: Vec::new(),
    }
}

#[tokio::test]
async fn webhook_posts_a_signed_versioned_body_a_receiver_can_verify() {
    let server = HttpServer::start(Answer::Status(204)).await;
    let alarm = WebhookAlarm::builder(&server.url)
        .secret("s3cret-key")
        .header("Authorization", "Bearer top-secret-token")
        .build()
        .unwrap();
    let debug = format!("{alarm:?}");
    assert!(
        !debug.contains("s3cret") && !debug.contains("top-secret"),
        "secrets leak into Debug: {debug}"
    );
    alarm.alarm(&event()).await.unwrap();
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/hook"));
    assert_eq!(r.headers["content-type"], "application/json");
    assert_eq!(r.headers["authorization"], "Bearer top-secret-token");
    // Verify as a receiver would: HMAC-SHA256 over "<timestamp>.<raw body>".
    let ts: i64 = r.headers["x-jobwheel-timestamp"].parse().unwrap();
    assert!((chrono::Utc::now().timestamp() - ts).abs() < 60);
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(b"s3cret-key").unwrap();
    mac.update(format!("{ts}.").as_bytes());
    mac.update(&r.body);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(r.headers["x-jobwheel-signature"], format!("v1={hex}"));
    assert!(jobwheel::alarm::webhook::verify_signature(
        b"s3cret-key",
        ts,
        &r.body,
        &r.headers["x-jobwheel-signature"],
        ts + 10,
        Duration::from_secs(300)
    ));
    assert!(!jobwheel::alarm::webhook::verify_signature(
        b"other-key",
        ts,
        &r.body,
        &r.headers["x-jobwheel-signature"],
        ts,
        Duration::from_secs(300)
    ));
    let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(body["version"], 1);
    assert_eq!(body["type"], "jobwheel.alarm");
    assert_eq!(body["event"]["kind"], "final_failure");
    assert_eq!(body["event"]["job_id"], "reports.daily");
    assert_eq!(body["event"]["attempt"], 3);
    assert_eq!(body["event"]["suppressed"], 2);
    assert_eq!(body["fire_at_utc"], "2026-12-07T08:30:00.000Z");
    assert_eq!(body["fire_at_local"], "2026-12-07 09:30:00 CET (+01:00)");
    let back: AlarmEvent = serde_json::from_value(body["event"].clone()).unwrap();
    assert_eq!(back, event(), "the event round-trips from the body");
}

#[tokio::test]
async fn webhook_chat_formats_and_bad_settings() {
    let server = HttpServer::start(Answer::Status(200)).await;
    for (format, path) in [
        (WebhookFormat::Slack, "/text"),
        (WebhookFormat::DingTalk, "/text/content"),
        (WebhookFormat::Feishu, "/content/text"),
    ] {
        let alarm = WebhookAlarm::builder(&server.url)
            .format(format)
            .build()
            .unwrap();
        alarm.alarm(&event()).await.unwrap();
        let body: serde_json::Value =
            serde_json::from_slice(&server.requests().last().unwrap().body).unwrap();
        let text = body
            .pointer(path)
            .and_then(|t| t.as_str())
            .unwrap_or_default();
        assert!(
            text.contains("reports.daily") && text.contains("09:30:00 CET"),
            "{format:?}: {body}"
        );
    }
    let e = WebhookAlarm::builder("ftp://x/y").build().unwrap_err();
    assert_eq!(e.field(), Some("webhook.url"));
    let e = WebhookAlarm::builder("http://x/")
        .timeout(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(e.field(), Some("webhook.timeout"));
    let e = WebhookAlarm::builder("http://x/")
        .header("bad header", "v")
        .build()
        .unwrap_err();
    assert_eq!(e.field(), Some("webhook.header"));
}

#[tokio::test]
async fn webhook_failures_say_whether_a_retry_may_help() {
    let five = HttpServer::start(Answer::Status(500)).await;
    let four = HttpServer::start(Answer::Status(400)).await;
    let hang = HttpServer::start(Answer::Hang).await;
    let call = |url: &str| {
        let a = WebhookAlarm::builder(url)
            .timeout(Duration::from_millis(300))
            .build()
            .unwrap();
        async move { a.alarm(&event()).await.unwrap_err() }
    };
    let e = call(&five.url).await;
    assert!(e.retryable && e.message.contains("HTTP 500"), "{e:?}");
    let e = call(&four.url).await;
    assert!(!e.retryable && e.message.contains("HTTP 400"), "{e:?}");
    let started = std::time::Instant::now();
    let e = call(&hang.url).await;
    assert!(e.retryable && e.message.contains("timed out"), "{e:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the timeout bounds a hanging receiver"
    );
}

#[tokio::test]
async fn email_reaches_a_real_smtp_server_with_every_fact() {
    let Some(smtp) = SmtpServer::start().await else {
        return;
    };
    let builder = EmailAlarm::builder("127.0.0.1")
        .port(smtp.port)
        .security(SmtpSecurity::Plain)
        .from("jobwheel <jobs@example.com>")
        .to("oncall@example.com");
    let with_password = builder.clone().credentials("user", "hunter2-password");
    assert!(!format!("{with_password:?}").contains("hunter2"));
    assert!(!format!("{:?}", with_password.build().unwrap()).contains("hunter2"));
    // aiosmtpd offers no AUTH, so the delivery runs without credentials.
    let alarm = builder.build().unwrap();
    alarm.alarm(&event()).await.unwrap();
    let msgs = smtp.messages(1).await;
    let m = &msgs[0];
    // Undo quoted-printable soft line breaks and `=` escapes (the HTML part's lines
    // are long); the other escapes do not occur in these facts.
    let unfolded = m
        .replace("\r\n", "\n")
        .replace("=\n", "")
        .replace("=3D", "=");
    let header = |name: &str| {
        unfolded
            .lines()
            .find(|l| {
                l.to_ascii_lowercase()
                    .starts_with(&format!("{}:", name.to_ascii_lowercase()))
            })
            .map(|l| l.split_once(':').unwrap().1.trim().to_string())
            .unwrap_or_default()
    };
    assert_eq!(
        header("Subject"),
        "[jobwheel] final_failure reports.daily (attempt 3/3)"
    );
    let to = header("To");
    assert!(
        to.contains("oncall@example.com") && to.contains("owner@example.com"),
        "{to}"
    );
    assert!(!to.contains("not an address"));
    assert!(header("From").contains("jobs@example.com"));
    assert!(unfolded.contains("text/plain") && unfolded.contains("text/html"));
    for fact in [
        "reports.daily",
        "report",
        "2026-12-07 09:30:00 CET (+01:00)",
        "2026-12-07T08:30:00.000Z",
        "3 of 3",
        "web-1",
        "1250 ms",
        "Will retry",
        "2026-12-08 09:30:00 CET",
        "2 similar alarms",
    ] {
        assert!(
            unfolded.contains(fact),
            "the message lacks {fact:?}:\n{unfolded}"
        );
    }
    assert!(
        unfolded.contains("db <timeout> & retry"),
        "plain part keeps the error as is"
    );
    assert!(
        unfolded.contains("db &lt;timeout&gt; &amp; retry"),
        "HTML part escapes it"
    );
    let e = EmailAlarm::builder("127.0.0.1").build().unwrap_err();
    assert_eq!(e.field(), Some("email.from"));
    let e = EmailAlarm::builder("127.0.0.1")
        .from("x@y")
        .to("nope")
        .build()
        .unwrap_err();
    assert_eq!(e.field(), Some("email.to"));
}

/// Fire instants and handler start times of one job, in arrival order.
type Starts = Arc<Mutex<Vec<(Timestamp, Timestamp)>>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_alarms_are_retried_and_never_delay_other_fires() {
    let five = HttpServer::start(Answer::Status(500)).await;
    let hang = HttpServer::start(Answer::Hang).await;
    // A port with nothing listening: the SMTP server is down.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let starts: Starts = Arc::default();
    let s = starts.clone();
    let scheduler = Scheduler::builder()
        .backend(jobwheel::connect("memory:").await.unwrap())
        .handler("tick", move |ctx: JobContext| {
            s.lock().unwrap().push((ctx.fire_at, Timestamp::now()));
            async { Ok::<(), JobError>(()) }
        })
        .handler("fail", |_ctx: JobContext| async {
            Err(JobError::msg("boom"))
        })
        .alarm(
            WebhookAlarm::builder(&five.url)
                .name("five")
                .build()
                .unwrap(),
        )
        .alarm(
            WebhookAlarm::builder(&hang.url)
                .name("hang")
                .timeout(Duration::from_millis(400))
                .build()
                .unwrap(),
        )
        .alarm(
            EmailAlarm::builder("127.0.0.1")
                .port(closed)
                .security(SmtpSecurity::Plain)
                .from("jobs@example.com")
                .to("oncall@example.com")
                .build()
                .unwrap(),
        )
        .config(
            SchedulerConfig::default()
                .alarm_retry_base(Duration::from_millis(200))
                .poll_interval(Duration::from_millis(100)),
        )
        .build()
        .unwrap();
    let running = scheduler.start().await.unwrap();
    let now = Timestamp::now();
    running
        .scheduler()
        .upsert(
            Job::builder(
                "tick",
                "tick",
                Schedule::every(Duration::from_millis(250)).unwrap(),
            )
            .build()
            .unwrap(),
        )
        .await
        .unwrap();
    for i in 0..5 {
        running
            .scheduler()
            .upsert(
                Job::builder(format!("fail-{i}"), "fail", Schedule::once(now))
                    .retry(
                        RetryPolicy::new(1, Duration::from_secs(1), Duration::from_secs(1))
                            .unwrap(),
                    )
                    .build()
                    .unwrap(),
            )
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    running.shutdown().await;
    let alarms = scheduler
        .alarms(&jobwheel::AlarmQuery::new(100))
        .await
        .unwrap();
    assert_eq!(alarms.len(), 5, "one final-failure event per failing job");
    for a in &alarms {
        assert_eq!(a.status, AlarmStatus::Failed, "{a:?}");
        assert!(a.attempts >= 2, "a failed delivery is retried: {a:?}");
        assert!(a.next_attempt_at.is_some(), "and will be retried again");
        let err = a.last_error.as_deref().unwrap_or_default();
        assert!(
            err.contains("five: POST") && err.contains("HTTP 500"),
            "{err}"
        );
        assert!(
            err.contains("hang: POST") && err.contains("timed out"),
            "{err}"
        );
        assert!(err.contains("email: SMTP"), "{err}");
    }
    let starts = starts.lock().unwrap().clone();
    assert!(
        starts.len() >= 10,
        "the tick job kept firing: {} fires",
        starts.len()
    );
    let late: Vec<_> = starts
        .iter()
        .filter(|(fire, start)| start.duration_since(*fire) > Duration::from_millis(100))
        .collect();
    assert!(
        late.is_empty(),
        "fires started late while alarms failed: {late:?}"
    );
    for w in starts.windows(2) {
        assert_eq!(
            w[1].0.duration_since(w[0].0),
            Duration::from_millis(250),
            "no fire was skipped"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_schedulers_on_one_store_deliver_each_alarm_exactly_once() {
    let server = HttpServer::start(Answer::Status(200)).await;
    let store = MemoryStore::new();
    let locks = LocalLocks::new();
    let mut nodes = Vec::new();
    for n in ["a", "b"] {
        let s = Scheduler::builder()
            .store(store.clone())
            .locks(locks.clone())
            .handler("fail", |_ctx: JobContext| async {
                Err(JobError::msg("boom"))
            })
            .alarm(WebhookAlarm::builder(&server.url).build().unwrap())
            .config(
                SchedulerConfig::default()
                    .node_id(n)
                    .poll_interval(Duration::from_millis(100)),
            )
            .build()
            .unwrap();
        nodes.push(s.start().await.unwrap());
    }
    let now = Timestamp::now();
    for i in 0..40 {
        nodes[i % 2]
            .scheduler()
            .upsert(
                Job::builder(format!("f-{i}"), "fail", Schedule::once(now))
                    .retry(
                        RetryPolicy::new(1, Duration::from_secs(1), Duration::from_secs(1))
                            .unwrap(),
                    )
                    .alarm(AlarmPolicy {
                        events: vec![AlarmKind::FinalFailure],
                        recipients: vec![],
                        ..AlarmPolicy::default()
                    })
                    .build()
                    .unwrap(),
            )
            .await
            .unwrap();
    }
    for _ in 0..100 {
        if server.requests().len() >= 40
            && store
                .alarms(&jobwheel::AlarmQuery::new(100).status(Some(AlarmStatus::Sent)))
                .await
                .map(|a| a.len())
                .unwrap_or(0)
                == 40
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for n in nodes {
        n.shutdown().await;
    }
    let mut per_job: HashMap<String, u32> = HashMap::new();
    for r in server.requests() {
        let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        *per_job
            .entry(body["event"]["job_id"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    assert_eq!(per_job.len(), 40, "every event was delivered");
    assert!(
        per_job.values().all(|&n| n == 1),
        "an event was delivered twice: {per_job:?}"
    );
    let sent = store
        .alarms(&jobwheel::AlarmQuery::new(100).status(Some(AlarmStatus::Sent)))
        .await
        .unwrap();
    assert_eq!(sent.len(), 40);
}
