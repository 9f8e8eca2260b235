//! Remote executors: jobs that run on the instances of an executor group instead of
//! in the scheduler's process (feature `remote`).
//!
//! * [`RemoteGroup`] — the scheduler's side: registered on a scheduler with
//!   [`SchedulerBuilder::remote`](crate::engine::SchedulerBuilder::remote), it
//!   dispatches each fire of a job that names the group
//!   ([`Job::remote`](crate::Job::remote)) to an instance chosen by the job's
//!   [`Routing`](crate::placement::Routing), waits for the result and reports it to
//!   the engine like a local handler's;
//! * [`ExecutorServer`] — the instance's side, embedded in a Rust service: it runs
//!   the handlers it serves under the job's
//!   [`BlockStrategy`](crate::placement::BlockStrategy), honours deadlines and
//!   kills, and keeps each run's log;
//! * [`protocol`] and [`auth`] — the versioned HTTP/JSON protocol between them and
//!   its signatures, which a service in any language can implement
//!   (`docs/executor-protocol.json`).

pub mod auth;
mod client;
mod dispatch;
mod group;
mod members;
mod openapi;
pub mod protocol;
mod registry;
pub mod routing;
mod server;
mod shards;
mod signed;
mod tls;

pub use group::{RemoteGroup, RemoteGroupConfig};
pub use openapi::openapi;
pub use registry::{RegistryServer, RegistryServerBuilder};
pub use server::{ExecutorServer, ExecutorServerBuilder, MAX_RESULT_WAIT, RUN_SPAN};
