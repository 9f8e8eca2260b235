//! Where jobs, runs, nodes, alarm events, the audit log and runtime credentials live:
//! six small traits, and the [`JobStore`] every backend is.
//!
//! | part | what it keeps | the engine uses it to |
//! |---|---|---|
//! | [`Jobs`] | definitions and their scheduling state | read due fires, record starts and finishes (fenced) |
//! | [`RunLog`] | one record per run | answer queries, purge by retention |
//! | [`NodeRegistry`] | live nodes and executor instances, by heartbeat on the store's clock | find dead nodes and the runs they left; route remote runs to live instances |
//! | [`AlarmOutbox`] | alarm events with a claimable delivery status | deliver each event once, retry, purge |
//! | [`AuditLog`] | every change made through the admin API and the command line | show who changed what |
//! | [`Credentials`] | accounts and API tokens added at runtime, hashed | let every server of a cluster admit them |
//!
//! [`JobStore`] is all six: it has no methods of its own and is implemented for
//! every type that implements the parts, so a backend implements the parts and the
//! scheduler takes `impl JobStore`. Every part is forwarded by `Arc<T>` and `Box<T>`.
//!
//! # The contract every part keeps
//!
//! * **The store computes nothing.** The engine decides next fires, attempt counts and
//!   outcomes; the store writes them under the conditions of [`rules`], which is the
//!   one statement of them (stores that evaluate them in Rust call it; the PostgreSQL
//!   statement and the Redis scripts are held to it by a table-driven conformance
//!   check).
//! * **Store clock.** Every instant the store writes on its own (`started_at`,
//!   `ended_at`, `last_beat`, `created_at`, claim deadlines) and every "now" it
//!   compares against comes from [`Jobs::now`], the store's clock, never from the
//!   calling node.
//! * **Atomic per item.** Each item of a batched call is checked and written
//!   atomically: either everything it describes is written, or nothing is and its
//!   outcome says why. Items are independent; results are in request order.
//! * **No row stops the fleet.** A stored row is decoded leniently (unknown fields are
//!   ignored, limits are enforced only when a job is stored through the API); a row
//!   that still cannot be decoded is skipped and reported in the [`Page`] of the call
//!   that met it, never failing the call.
//! * **Errors.** A server or driver failure is [`Error::Backend`](crate::Error::Backend)
//!   (marked temporary when a retry may succeed); a refused condition is never an
//!   error but a `Refused` outcome.

mod audit;
mod credentials;
mod ext;
mod jobs;
mod leases;
mod log;
mod outbox;
mod page;
mod query;
mod registry;
pub mod rules;

pub use audit::AuditLog;
pub use credentials::Credentials;
pub use ext::{AlarmOutboxExt, JobsExt};
pub use jobs::{Applied, JobChange, Jobs, SchemaVersion};
pub use leases::JobLeases;
pub(crate) use leases::JobRowLocks;
pub use log::RunLog;

/// How many days ahead a store that keeps its run log in day partitions has them
/// ready ([`RunLog::prepare_log`]): today's and the next seven, made by every node's
/// hourly maintenance, so the partition a start needs is there a week ahead.
pub const DAYS_AHEAD: u32 = 7;
pub use outbox::{AlarmChange, AlarmOutbox};
pub use page::{CorruptRow, Page};
pub use query::{AlarmClaim, AlarmQuery, AuditQuery, DueQuery, JobQuery, RunQuery};
pub use registry::NodeRegistry;

/// The requests a store answers and the outcomes it reports: what a backend
/// implements against, not what an application embedding a scheduler uses.
pub use crate::record::{
    AlarmDelivery, ClaimOutcome, ClaimRun, DueFire, DueKey, FinishOutcome, FinishRefusal,
    FinishRun, LeaseEnd, StartOutcome, StartRefusal, StartRun,
};

/// A whole store: the six parts together. Implemented for every type that
/// implements them; the scheduler takes `impl JobStore` or `Arc<dyn JobStore>`.
pub trait JobStore: Jobs + RunLog + NodeRegistry + AlarmOutbox + AuditLog + Credentials {}

impl<T: Jobs + RunLog + NodeRegistry + AlarmOutbox + AuditLog + Credentials + ?Sized> JobStore
    for T
{
}

/// Implements the six parts for a wrapper type by delegating to one of its fields.
#[allow(unused_macros)]
macro_rules! delegate_store {
    ($ty:ty => $field:ident) => {
        #[async_trait::async_trait]
        impl $crate::store::Jobs for $ty {
            fn name(&self) -> &'static str {
                $crate::store::Jobs::name(&self.$field)
            }
            async fn now(&self) -> $crate::error::Result<$crate::time::Timestamp> {
                $crate::store::Jobs::now(&self.$field).await
            }
            async fn schema(&self) -> $crate::error::Result<Option<$crate::store::SchemaVersion>> {
                $crate::store::Jobs::schema(&self.$field).await
            }
            async fn apply(
                &self,
                change: &$crate::store::JobChange,
                audit: Option<&$crate::record::AuditEntry>,
            ) -> $crate::error::Result<$crate::store::Applied> {
                self.$field.apply(change, audit).await
            }
            async fn upsert_many(
                &self,
                jobs: &[($crate::job::Job, Option<$crate::time::Timestamp>)],
            ) -> $crate::error::Result<Vec<$crate::record::UpsertOutcome>> {
                self.$field.upsert_many(jobs).await
            }
            async fn get(
                &self,
                id: &$crate::job::JobId,
            ) -> $crate::error::Result<Option<$crate::record::JobRecord>> {
                self.$field.get(id).await
            }
            async fn list(
                &self,
                q: &$crate::store::JobQuery,
            ) -> $crate::error::Result<$crate::store::Page<$crate::record::JobRecord>> {
                self.$field.list(q).await
            }
            async fn due(
                &self,
                q: &$crate::store::DueQuery,
            ) -> $crate::error::Result<$crate::store::Page<$crate::store::DueFire>> {
                self.$field.due(q).await
            }
            async fn start_runs(
                &self,
                runs: &[$crate::store::StartRun],
            ) -> $crate::error::Result<Vec<$crate::store::StartOutcome>> {
                self.$field.start_runs(runs).await
            }
            async fn finish_runs(
                &self,
                runs: &[$crate::store::FinishRun],
            ) -> $crate::error::Result<Vec<$crate::store::FinishOutcome>> {
                self.$field.finish_runs(runs).await
            }
            async fn releases(
                &self,
                job: Option<&$crate::job::JobId>,
                limit: usize,
            ) -> $crate::error::Result<Vec<$crate::dependency::QueuedRelease>> {
                self.$field.releases(job, limit).await
            }
            async fn take_releases(&self, limit: usize) -> $crate::error::Result<u64> {
                self.$field.take_releases(limit).await
            }
            async fn queue_releases(
                &self,
                r: &[$crate::dependency::Release],
                a: Option<&$crate::record::AuditEntry>,
            ) -> $crate::error::Result<()> {
                self.$field.queue_releases(r, a).await
            }
            async fn drop_releases(
                &self,
                job: &$crate::job::JobId,
                at: $crate::time::Timestamp,
                a: Option<&$crate::record::AuditEntry>,
            ) -> $crate::error::Result<u64> {
                self.$field.drop_releases(job, at, a).await
            }
            async fn alarm_waiting(
                &self,
                job: &$crate::job::JobId,
                at: $crate::time::Timestamp,
                e: &$crate::record::AlarmEvent,
            ) -> $crate::error::Result<bool> {
                self.$field.alarm_waiting(job, at, e).await
            }
            fn job_leases(&self) -> Option<&dyn $crate::store::JobLeases> {
                self.$field.job_leases()
            }
        }
        #[async_trait::async_trait]
        impl $crate::store::RunLog for $ty {
            async fn runs(
                &self,
                q: &$crate::store::RunQuery,
            ) -> $crate::error::Result<Vec<$crate::record::RunRecord>> {
                self.$field.runs(q).await
            }
            async fn purge_runs(
                &self,
                before: $crate::time::Timestamp,
            ) -> $crate::error::Result<u64> {
                self.$field.purge_runs(before).await
            }
            async fn prepare_log(&self) -> $crate::error::Result<()> {
                self.$field.prepare_log().await
            }
            async fn append_lines(
                &self,
                chunks: &[$crate::record::LogLines],
            ) -> $crate::error::Result<()> {
                self.$field.append_lines(chunks).await
            }
            async fn lines(
                &self,
                run: $crate::record::RunId,
                offset: u64,
                limit: usize,
            ) -> $crate::error::Result<Vec<$crate::record::LogLine>> {
                self.$field.lines(run, offset, limit).await
            }
            async fn daily_stats(
                &self,
                from: chrono::NaiveDate,
                to: chrono::NaiveDate,
            ) -> $crate::error::Result<Vec<$crate::record::DailyStats>> {
                self.$field.daily_stats(from, to).await
            }
        }
        #[async_trait::async_trait]
        impl $crate::store::NodeRegistry for $ty {
            async fn heartbeat(
                &self,
                node: &$crate::record::NodeInfo,
            ) -> $crate::error::Result<$crate::time::Timestamp> {
                self.$field.heartbeat(node).await
            }
            async fn nodes(
                &self,
            ) -> $crate::error::Result<$crate::store::Page<$crate::record::NodeRecord>> {
                self.$field.nodes().await
            }
            async fn reap_nodes(
                &self,
                silent_for: std::time::Duration,
            ) -> $crate::error::Result<Vec<String>> {
                self.$field.reap_nodes(silent_for).await
            }
            async fn deregister(&self, node_id: &str) -> $crate::error::Result<bool> {
                self.$field.deregister(node_id).await
            }
            async fn orphaned_runs(
                &self,
                limit: usize,
            ) -> $crate::error::Result<Vec<$crate::record::RunRecord>> {
                self.$field.orphaned_runs(limit).await
            }
            async fn executor_beat(
                &self,
                instance: &$crate::record::ExecutorInfo,
            ) -> $crate::error::Result<$crate::time::Timestamp> {
                self.$field.executor_beat(instance).await
            }
            async fn executors(
                &self,
                group: Option<&str>,
            ) -> $crate::error::Result<$crate::store::Page<$crate::record::ExecutorRecord>> {
                self.$field.executors(group).await
            }
            async fn reap_executors(
                &self,
                silent_for: std::time::Duration,
            ) -> $crate::error::Result<Vec<(String, String)>> {
                self.$field.reap_executors(silent_for).await
            }
            async fn deregister_executor(
                &self,
                group: &str,
                address: &str,
            ) -> $crate::error::Result<bool> {
                self.$field.deregister_executor(group, address).await
            }
        }
        #[async_trait::async_trait]
        impl $crate::store::AlarmOutbox for $ty {
            async fn claim_alarms(
                &self,
                c: &$crate::store::AlarmClaim,
            ) -> $crate::error::Result<$crate::store::Page<$crate::record::AlarmRecord>> {
                self.$field.claim_alarms(c).await
            }
            async fn complete_alarm(
                &self,
                id: $crate::record::AlarmId,
                owner: &str,
                d: &$crate::store::AlarmDelivery,
            ) -> $crate::error::Result<bool> {
                self.$field.complete_alarm(id, owner, d).await
            }
            async fn alarms(
                &self,
                q: &$crate::store::AlarmQuery,
            ) -> $crate::error::Result<Vec<$crate::record::AlarmRecord>> {
                self.$field.alarms(q).await
            }
            async fn purge_alarms(
                &self,
                before: $crate::time::Timestamp,
            ) -> $crate::error::Result<u64> {
                self.$field.purge_alarms(before).await
            }
            async fn apply_alarm(
                &self,
                change: $crate::store::AlarmChange,
                audit: Option<&$crate::record::AuditEntry>,
            ) -> $crate::error::Result<bool> {
                self.$field.apply_alarm(change, audit).await
            }
        }
        #[async_trait::async_trait]
        impl $crate::store::AuditLog for $ty {
            async fn append_audit(
                &self,
                e: &$crate::record::AuditEntry,
            ) -> $crate::error::Result<()> {
                self.$field.append_audit(e).await
            }
            async fn audit(
                &self,
                q: &$crate::store::AuditQuery,
            ) -> $crate::error::Result<Vec<$crate::record::AuditRecord>> {
                self.$field.audit(q).await
            }
            async fn purge_audit(
                &self,
                before: $crate::time::Timestamp,
            ) -> $crate::error::Result<u64> {
                self.$field.purge_audit(before).await
            }
        }
        #[async_trait::async_trait]
        impl $crate::store::Credentials for $ty {
            async fn add_credential(
                &self,
                c: &$crate::record::Credential,
                a: &$crate::record::AuditEntry,
            ) -> $crate::error::Result<bool> {
                self.$field.add_credential(c, a).await
            }
            async fn remove_credential(
                &self,
                k: $crate::record::CredentialKind,
                n: &str,
                a: &$crate::record::AuditEntry,
            ) -> $crate::error::Result<bool> {
                self.$field.remove_credential(k, n, a).await
            }
            async fn credentials(
                &self,
            ) -> $crate::error::Result<Vec<$crate::record::CredentialRecord>> {
                self.$field.credentials().await
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use delegate_store;
