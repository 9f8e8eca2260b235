//! A user-written alarm beside the e-mail alarm: `FileAlarm` appends every alarm event
//! as one JSON line to a file, and an `EmailAlarm` mails it through a local relay.
//!
//! `cargo run --example custom_alarm --features email`
//!
//! The e-mail goes to `JOBWHEEL_SMTP` (`host:port`, plain SMTP, default
//! `127.0.0.1:2525`, for example `python3 -m aiosmtpd -n -l 127.0.0.1:2525`); with no
//! server there, its delivery fails and is retried by the outbox while the file alarm
//! still gets every event: each alarm is delivered on its own.

use jobwheel::alarm::email::{EmailAlarm, SmtpSecurity};
use jobwheel::{
    AlarmError, AlarmEvent, AlarmKind, AlarmPolicy, Job, JobAlarm, JobContext, JobResult,
    RetryPolicy, Schedule, Scheduler, SchedulerConfig, Throttled,
};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// Appends each event to a file as one JSON line.
#[derive(Debug)]
struct FileAlarm {
    path: PathBuf,
}

#[async_trait::async_trait]
impl JobAlarm for FileAlarm {
    fn name(&self) -> &str {
        "file"
    }

    async fn alarm(&self, event: &AlarmEvent) -> Result<(), AlarmError> {
        let line = serde_json::to_string(event).map_err(AlarmError::permanent)?;
        let path = self.path.clone();
        // File I/O off the async threads; a full disk is worth retrying later.
        tokio::task::spawn_blocking(move || {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?;
            writeln!(f, "{line}")
        })
        .await
        .map_err(AlarmError::permanent)?
        .map_err(AlarmError::retryable)
    }
}

/// The flaky job's payload.
#[derive(serde::Deserialize)]
struct Flaky {
    /// The service it pretends to call.
    upstream: String,
}

/// A call to a service that is down.
fn call_upstream(upstream: &str, attempt: u32) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        format!("{upstream} refused attempt {attempt}"),
    ))
}

/// Always fails: the I/O error goes up with `?` and into the run log and alarms.
async fn flaky(ctx: JobContext, p: Flaky) -> JobResult {
    call_upstream(&p.upstream, ctx.attempt)?;
    Ok(())
}

#[tokio::main]
async fn main() -> jobwheel::Result<()> {
    let smtp = std::env::var("JOBWHEEL_SMTP").unwrap_or_else(|_| "127.0.0.1:2525".into());
    let (host, port) = smtp.split_once(':').unwrap_or((&smtp, "25"));
    let email = EmailAlarm::builder(host)
        .port(port.parse().unwrap_or(25))
        .security(SmtpSecurity::Plain)
        .from("jobwheel <jobs@example.com>")
        .to("oncall@example.com")
        .timeout(Duration::from_secs(2))
        .build()?;
    let path = std::env::temp_dir().join("jobwheel-alarms.jsonl");
    let scheduler = Scheduler::builder()
        .backend(jobwheel::connect("memory:").await?)
        .handler("flaky", flaky)
        .alarm(FileAlarm { path: path.clone() })
        // At most one e-mail per job and kind per minute; the rest are counted.
        .alarm(Throttled::new(email, Duration::from_secs(60)))
        .config(SchedulerConfig::default().alarm_retry_base(Duration::from_secs(1)))
        .build()?;
    let running = scheduler.start().await?;
    let job = Job::builder(
        "example.flaky",
        "flaky",
        Schedule::every(Duration::from_secs(2))?,
    )
    .payload(serde_json::json!({ "upstream": "billing.internal:443" }))
    .retry(RetryPolicy::new(
        2,
        Duration::from_millis(500),
        Duration::from_secs(1),
    )?)
    .alarm(AlarmPolicy {
        events: vec![AlarmKind::Failure, AlarmKind::FinalFailure],
        recipients: vec!["owner@example.com".into()],
        ..AlarmPolicy::default()
    })
    .build()?;
    scheduler.upsert(job).await?;
    tokio::time::sleep(Duration::from_secs(6)).await;
    running.shutdown().await;
    println!("alarm events appended to {}:", path.display());
    for line in std::fs::read_to_string(&path)
        .unwrap_or_default()
        .lines()
        .rev()
        .take(4)
    {
        println!("  {line}");
    }
    for a in scheduler.alarms(&jobwheel::AlarmQuery::new(6)).await? {
        println!(
            "  outbox #{} {} {} attempts={} {:?}",
            a.id.0,
            a.event.kind.as_str(),
            a.status.as_str(),
            a.attempts,
            a.last_error
        );
    }
    Ok(())
}
