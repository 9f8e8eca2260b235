//! # jobwheel
//!
//! Distributed scheduled jobs for Rust services: every fire runs once across the
//! fleet, failures are retried with exponential backoff, every run is logged, and
//! alarms tell people when something goes wrong.
//!
//! The pieces are traits with interchangeable implementations:
//!
//! * [`JobStore`] — jobs, runs, nodes and the alarm outbox
//!   ([`memory::MemoryStore`] always; SQL and Redis stores behind features);
//! * [`LockProvider`] — exclusive leases with fencing tokens ([`memory::LocalLocks`]);
//! * [`Executor`] — where handlers run, with bounded concurrency;
//! * [`JobAlarm`] — observers that deliver alarm events (`alarm::email::EmailAlarm` and
//!   `alarm::webhook::WebhookAlarm` behind the `email` and `webhook` features; a `Vec`, an
//!   `Option`, [`Retrying`] and [`Throttled`] compose them);
//! * [`JobHandler`] — your code; async closures implement it.
//!
//! A [`Scheduler`] wires them together: it polls the store for due fires, claims
//! them with leases, starts each on a precise timer, runs it on the executor, writes
//! the outcome fenced by the lease's token, retries failures with backoff, applies
//! misfire policies and sends alarm events to every [`JobAlarm`]. The conformance
//! suites (`jobwheel::conformance`, feature `conformance`) are what every backend
//! must pass.
//!
//! Embedding it takes a backend feature, [`connect()`], a builder, handlers and
//! [`start`](Scheduler::start):
//!
//! ```no_run
//! use jobwheel::prelude::*;
//!
//! #[derive(serde::Deserialize)]
//! struct Report {
//!     format: String,
//! }
//!
//! /// A handler: the payload arrives typed, and `?` works on any error.
//! async fn report(ctx: JobContext, p: Report) -> JobResult {
//!     let template = std::fs::read_to_string(format!("templates/{}.txt", p.format))?;
//!     println!("report for {} from {} bytes", ctx.fire_at, template.len());
//!     Ok(())
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let backend = jobwheel::connect("postgres://app@localhost/app").await?; // migrated
//!     let scheduler = Scheduler::builder()
//!         .backend(backend)
//!         .handler("report", report)
//!         .build()?;
//!     let running = scheduler.start().await?;
//!     let daily = Schedule::cron("0 0 6 * * ?", "Europe/Paris")?;
//!     let job = Job::builder("daily", "report", daily).payload(serde_json::json!({ "format": "pdf" }));
//!     scheduler.upsert(job.build()?).await?;
//!     tokio::signal::ctrl_c().await?;
//!     running.shutdown().await;
//!     Ok(())
//! }
//! ```
//!
//! Schedules are computed in the job's zone:
//!
//! ```
//! use jobwheel::{Job, Schedule, Timestamp};
//!
//! let job = Job::builder("reports.daily", "report", Schedule::cron("0 30 9 ? * MON-FRI", "Europe/Berlin")?)
//!     .payload(serde_json::json!({ "format": "pdf" }))
//!     .build()?;
//! let monday = Timestamp::from_datetime(&chrono::DateTime::parse_from_rfc3339("2026-12-07T00:00:00Z").unwrap());
//! assert_eq!(job.schedule().next_after(monday).unwrap().to_string(), "2026-12-07T08:30:00.000Z");
//! # Ok::<(), jobwheel::Error>(())
//! ```
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
// On docs.rs (nightly rustdoc with `--cfg docsrs`): each item gated by a feature
// shows which one.
#![cfg_attr(docsrs, feature(doc_cfg))]

#[macro_use]
mod setters;

pub mod alarm;
mod capture;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod dependency;
pub mod engine;
pub mod error;
pub mod executor;
pub mod handler;
pub mod job;
mod job_id;
pub mod limits;
mod links;
pub mod local_executor;
pub mod lock;
/// The OpenAPI documents of the two HTTP APIs (the `openapi` feature alone only
/// derives the types' JSON Schemas).
#[cfg(feature = "remote")]
mod openapi;
pub mod ops;
pub mod placement;
pub mod policy;
mod record;
pub mod schedule;
pub mod store;
pub mod time;
mod trace;

mod backends;
pub use backends::memory;
#[cfg(feature = "mysql")]
pub use backends::mysql;
#[cfg(feature = "postgres")]
pub use backends::postgres;
#[cfg(feature = "redis")]
pub use backends::redis;
#[cfg(feature = "sqlite")]
pub use backends::sqlite;

#[cfg(feature = "server")]
pub mod admin;

#[cfg(feature = "remote")]
pub mod remote;

/// What an application embedding jobwheel needs in one `use jobwheel::prelude::*;`:
/// the scheduler, jobs and schedules, handler types, policies and [`connect()`].
pub mod prelude {
    pub use crate::backends::connect::{Backend, BackendConfig, connect};
    pub use crate::engine::{Scheduler, SchedulerConfig, SchedulerHandle};
    pub use crate::handler::{JobContext, JobError, JobResult};
    pub use crate::job::{Job, JobId};
    pub use crate::policy::{AlarmKind, AlarmPolicy, MisfirePolicy, RetryPolicy};
    pub use crate::record::{RunStatus, TriggerKind, UpsertOutcome};
    pub use crate::schedule::Schedule;
    pub use crate::store::{JobQuery, RunQuery};
    pub use crate::time::Timestamp;
}

/// Re-exported so custom stores, lock providers and alarms need no dependency of
/// their own: `#[jobwheel::async_trait]`.
pub use async_trait::async_trait;

pub use alarm::{AlarmError, JobAlarm, Retrying, Throttled};
pub use backends::connect::{Backend, BackendConfig, connect};
pub use capture::{MAX_LINE_BYTES, RunLogLayer, RunLogger, run_log_layer};
pub use engine::{
    Doctor, EngineMetrics, MisfireCounts, Scheduler, SchedulerBuilder, SchedulerConfig,
    SchedulerHandle, ShutdownReport,
};
pub use error::{Error, Result};
pub use executor::{Execution, Executor, ExecutorGroup, Outcome};
pub use handler::{ExecutedOn, JobContext, JobError, JobHandler, JobResult, RetryAdvice};
pub use job::{Job, JobBuilder, JobId};
pub use local_executor::{LocalExecutor, LocalExecutorConfig, SlowLaneConfig};
pub use lock::{Lease, LockProvider, LockRequest};
pub use policy::{AlarmKind, AlarmPolicy, MisfirePolicy, RetryPolicy};
pub use record::{
    AlarmEvent, AlarmId, AlarmRecord, AlarmStatus, AuditAction, AuditEntry, AuditRecord,
    Credential, CredentialKind, CredentialRecord, DailyStats, ExecutorInfo, ExecutorRecord,
    FireContext, FireSpan, FireState, JobRecord, LogLine, LogLines, NodeInfo, NodeRecord, RunId,
    RunRecord, RunStatus, TriggerKind, UpsertOutcome,
};
pub use schedule::{CronExpr, CronSchedule, Schedule};
pub use store::{AlarmQuery, AuditQuery, CorruptRow, JobQuery, JobStore, Page, RunQuery};
/// The README's code blocks, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The book's code blocks (`docs/book/`), compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../docs/book/src/getting-started.md")]
#[doc = include_str!("../docs/book/src/remote-executors.md")]
#[doc = include_str!("../docs/book/src/operations.md")]
#[doc = include_str!("../docs/book/src/architecture.md")]
pub struct BookDoctests;

pub use time::{Clock, ManualClock, SystemClock, Timestamp, TokioClock};
