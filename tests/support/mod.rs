//! Shared test helpers: paused-clock backends, recording handlers, cron fire lists.
#![allow(dead_code, unreachable_pub)]

#[cfg(feature = "server")]
pub mod admin;
pub mod cluster;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "redis"))]
pub mod faults;
pub mod migrations;
pub mod openapi;
#[cfg(feature = "otel")]
pub mod otel;
#[cfg(feature = "conformance")]
pub mod raw_rows;
#[cfg(feature = "redis")]
pub mod redis_keys;
#[cfg(feature = "remote")]
pub mod remote;
pub mod servers;
pub mod strategies;
pub mod switch;

use jobwheel::memory::{LocalLocks, MemoryStore};
use jobwheel::{
    Clock, JobContext, JobError, JobHandler, JobStore, RunQuery, RunRecord, Scheduler,
    SchedulerConfig, SchedulerHandle, Timestamp, TokioClock, TriggerKind,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Sets `subscriber` as this thread's default for the guard's life, so that
/// spans and events made on this thread reach it whatever other test threads do.
///
/// `tracing-core` caches each callsite's interest. While exactly one `Dispatch`
/// exists in the process it computes that interest from the thread-local default
/// of whichever thread asks (tokio-rs/tracing#2874, #3611): a scoped subscriber's
/// own `Dispatch::new`, made before it is installed, or a callsite first reached
/// by another test's thread, caches "never", and the subscriber then sees nothing
/// (a test passed alone and failed beside a long one). A second `Dispatch` kept
/// alive for the whole binary makes every rebuild ask all registered dispatchers.
pub fn scoped_subscriber(
    subscriber: impl tracing::Subscriber + Send + Sync + 'static,
) -> tracing::subscriber::DefaultGuard {
    static KEEPER: std::sync::OnceLock<tracing::Dispatch> = std::sync::OnceLock::new();
    KEEPER.get_or_init(|| tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default()));
    let guard = tracing::subscriber::set_default(subscriber);
    tracing::callsite::rebuild_interest_cache();
    guard
}

/// The tables a SQL store's `migrate()` creates under its prefix.
pub const SQL_TABLES: [&str; 11] = [
    "jobs",
    "runs",
    "nodes",
    "executors",
    "alarms",
    "audit",
    "locks",
    "migrations",
    "credentials",
    "run_lines",
    "releases",
];

/// Drops the tables `migrate()` created under `prefix` in PostgreSQL's `public`
/// schema, once a test is done with them.
#[cfg(feature = "postgres")]
pub async fn drop_pg_tables(url: &str, prefix: &str) {
    let store = jobwheel::postgres::PgStore::builder(url)
        .prefix(prefix)
        .build()
        .await
        .unwrap();
    let tables: Vec<String> = SQL_TABLES
        .iter()
        .map(|t| format!("public.{prefix}{t}"))
        .collect();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP TABLE IF EXISTS {}",
        tables.join(", ")
    )))
    .execute(store.pool())
    .await
    .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP SEQUENCE IF EXISTS public.{prefix}run_ids"
    )))
    .execute(store.pool())
    .await
    .unwrap();
}

/// A server URL from `var`: `None` (with the test reported skipped) when it is unset
/// or empty, except under `CI=true`, where a missing server is a failure.
pub fn server_url(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            skip(&format!("{var} is not set"));
            None
        }
    }
}

/// Reports the calling test as skipped because of `why`: under `CI=true` that is a
/// failure; otherwise a line goes to the file `JOBWHEEL_SKIPS` names (which
/// `./scripts/test` prints after the summary) and to the test's output.
pub fn skip(why: &str) {
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("CI=true but {why}: this test must run");
    }
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|s| {
            s.rsplit_once('-')
                .map_or(s.clone(), |(name, _hash)| name.to_string())
        })
        .unwrap_or_default();
    let test = std::thread::current().name().unwrap_or("?").to_string();
    let line = format!("{binary}::{test}: {why}");
    println!("skipped: {line}");
    if let Ok(path) = std::env::var("JOBWHEEL_SKIPS") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

pub fn at(s: &str) -> Timestamp {
    Timestamp::from_datetime(&chrono::DateTime::parse_from_rfc3339(s).unwrap())
}

/// A store and locks whose clock follows tokio's paused clock from `base`.
pub fn backend(base: &str) -> (MemoryStore, LocalLocks, Arc<TokioClock>) {
    let clock = Arc::new(TokioClock::starting_at(at(base)));
    (
        MemoryStore::with_clock(clock.clone()),
        LocalLocks::with_clock(clock.clone()),
        clock,
    )
}

pub fn config(node: &str) -> SchedulerConfig {
    SchedulerConfig::default()
        .node_id(node.to_string())
        .shutdown_grace(Duration::from_secs(5))
}

/// One handler execution as the handler saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub job: String,
    pub fire_at: Timestamp,
    pub started: Timestamp,
    pub attempt: u32,
    pub trigger: TriggerKind,
    pub node: String,
}

/// Records every execution; cheap to clone.
#[derive(Clone, Default)]
pub struct Log(pub Arc<Mutex<Vec<Seen>>>);

impl Log {
    pub fn record(&self, ctx: &JobContext, clock: &dyn Clock) {
        self.0.lock().unwrap().push(Seen {
            job: ctx.job.id().to_string(),
            fire_at: ctx.fire_at,
            started: clock.now(),
            attempt: ctx.attempt,
            trigger: ctx.trigger,
            node: ctx.node_id.to_string(),
        });
    }
    pub fn all(&self) -> Vec<Seen> {
        self.0.lock().unwrap().clone()
    }
    pub fn of(&self, job: &str) -> Vec<Seen> {
        self.all().into_iter().filter(|s| s.job == job).collect()
    }
}

pub async fn advance(d: Duration) {
    tokio::time::sleep(d).await;
}

/// A handler that records its executions and succeeds.
pub fn recording(log: &Log, clock: &Arc<TokioClock>) -> impl JobHandler {
    let (log, clock) = (log.clone(), clock.clone());
    move |ctx: JobContext| {
        log.record(&ctx, &*clock);
        async { Ok::<(), JobError>(()) }
    }
}

/// A handler that records its executions and fails with "boom".
pub fn failing(log: &Log, clock: &Arc<TokioClock>) -> impl JobHandler {
    let (log, clock) = (log.clone(), clock.clone());
    move |ctx: JobContext| {
        log.record(&ctx, &*clock);
        async { Err(JobError::msg("boom")) }
    }
}

/// The runs of one job, oldest first.
pub async fn runs_of(store: &dyn JobStore, job: &str) -> Vec<RunRecord> {
    let mut runs = store
        .runs(
            &RunQuery::new()
                .job(jobwheel::JobId::new(job).unwrap())
                .limit(10_000),
        )
        .await
        .unwrap();
    runs.reverse();
    runs
}

/// A started scheduler "n1" on a paused-clock memory backend from `base`, with one
/// recording handler named "h".
pub async fn recording_scheduler(base: &str) -> (MemoryStore, Log, SchedulerHandle) {
    let (store, locks, clock) = backend(base);
    let (log, h) = start_recording(&store, locks, &clock).await;
    (store, log, h)
}

/// A started scheduler "n1" on this memory backend, with one recording handler
/// named "h", and what it records.
pub async fn start_recording(
    store: &MemoryStore,
    locks: LocalLocks,
    clock: &Arc<TokioClock>,
) -> (Log, SchedulerHandle) {
    let log = Log::default();
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("h", recording(&log, clock))
        .config(config("n1"))
        .build()
        .unwrap();
    (log, s.start().await.unwrap())
}

/// The next `n` fires of a cron expression after `from`, as UTC RFC 3339 strings
/// without millis.
pub fn fires(expr: &str, zone: &str, from: &str, n: usize) -> Vec<String> {
    let s = jobwheel::CronSchedule::new(expr, zone).unwrap();
    let mut t = at(from);
    let mut out = Vec::new();
    for _ in 0..n {
        t = s.next_after(t).expect("a next fire");
        out.push(t.to_datetime().format("%Y-%m-%dT%H:%M:%SZ").to_string());
    }
    out
}

/// Local wall times (in `zone`) of the next `n` fires.
pub fn local(expr: &str, zone: &str, from: &str, n: usize) -> Vec<String> {
    let tz: chrono_tz::Tz = zone.parse().unwrap();
    fires(expr, zone, from, n)
        .iter()
        .map(|f| {
            at(f)
                .to_datetime()
                .with_timezone(&tz)
                .format("%Y-%m-%d %a %H:%M:%S")
                .to_string()
        })
        .collect()
}

/// Debian's multi-threaded libfaketime, when installed.
pub fn libfaketime() -> Option<std::path::PathBuf> {
    [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib",
    ]
    .iter()
    .map(|d| std::path::Path::new(d).join("faketime/libfaketimeMT.so.1"))
    .find(|p| p.exists())
}

/// The start of job `id`'s first fire at `fire_at` (version 1, token 1, attempt 1,
/// node `n`, a scheduled trigger, no context), as a store test writes it by hand.
pub fn first_start(id: &str, fire_at: Timestamp) -> jobwheel::store::StartRun {
    jobwheel::store::StartRun {
        job_id: jobwheel::JobId::new(id).unwrap(),
        fire_at,
        version: 1,
        token: 1,
        node: "n".into(),
        attempt: 1,
        trigger: TriggerKind::Schedule,
        covers: None,
        context: jobwheel::FireContext::default(),
    }
}
