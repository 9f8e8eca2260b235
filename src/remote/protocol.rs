//! The executor protocol, version 1: JSON over HTTP, every request and answer signed
//! (see [`auth`](super::auth)). `docs/executor-protocol.json` is the OpenAPI 3.1
//! description a service in any language implements.
//!
//! | path | the scheduler asks | the instance answers |
//! |---|---|---|
//! | `POST /v1/beat` | are you alive? | [`Beat`]: handlers, capacity, runs in progress, its clock |
//! | `POST /v1/idle-beat` | [`IdleBeatRequest`]: are you running this job? | [`IdleBeat`] |
//! | `POST /v1/run` | [`RunRequest`]: run this (and wait a while for its end) | [`RunState`], or a refusal |
//! | `POST /v1/result` | [`ResultRequest`]: how did it end? (long poll) | [`RunState`] |
//! | `POST /v1/kill` | [`KillRequest`]: cancel it | [`KillReply`] |
//! | `POST /v1/log` | [`LogRequest`]: its log from an offset | [`LogChunk`] |
//!
//! An instance that does not write to the schedulers' store itself registers at a
//! scheduler's registration endpoint, the other way round:
//!
//! | path | the instance asks | the endpoint answers |
//! |---|---|---|
//! | `POST /v1/registry/beat` | [`ExecutorInfo`](crate::record::ExecutorInfo): I am here | [`Registered`] |
//! | `POST /v1/registry/leave` | [`LeaveRequest`]: I stop | [`Left`] |
//!
//! A refusal is an HTTP status with an [`ErrorBody`]: 400 `bad_request`, 401
//! (`unsigned`, `bad_signature`, `skewed_timestamp`, `replayed`), 404 `unknown_run`,
//! 409 `discarded` (block strategy), 413 `too_large`, 422 `unknown_handler`, 429
//! `busy` (no free slot), 503 `overloaded`.
//!
//! A run dispatched as one shard of a sharding broadcast carries its
//! [`Shard`] (`RunRequest::shard`), and every later request
//! about it names the shard's index: an instance keys runs by `(run_id, shard)`.
//!
//! A run's log lines travel back the same way: a run or result request that names
//! a `log_offset` gets the lines from there with its answer, and the scheduler node
//! stores them with the run, as it stores a local run's lines (so a run's log
//! outlives the instance that ran it and is purged with the run). An instance's own
//! buffer is only where the lines wait to be asked for.
//!
//! Results are pulled, not pushed: the scheduler node that dispatched a run asks for
//! its result with a long poll and the instance keeps a finished run's result for
//! the retention period, so an executor needs no route to the schedulers and a
//! result lost in transit is asked for again. The result is written to the store by the node that holds the run's
//! lease, fenced by the run's token, exactly as for a local run: a node that lost
//! the lease has its write refused, and a run taken over is never applied twice.

use crate::placement::{BlockStrategy, Shard};
use serde::{Deserialize, Serialize};

/// The protocol version in every path.
pub const VERSION: &str = "v1";
/// Liveness.
pub const BEAT: &str = "/v1/beat";
/// Whether a job is running on the instance.
pub const IDLE_BEAT: &str = "/v1/idle-beat";
/// Start a run.
pub const RUN: &str = "/v1/run";
/// A run's state or result (long poll).
pub const RESULT: &str = "/v1/result";
/// Cancel a run.
pub const KILL: &str = "/v1/kill";
/// A run's log lines.
pub const LOG: &str = "/v1/log";

/// Registers an instance, or beats for it, at a scheduler's registration endpoint
/// ([`RegistryServer`](crate::remote::RegistryServer)); the body is an
/// [`ExecutorInfo`](crate::record::ExecutorInfo), the answer [`Registered`]. Signed
/// with the secret of the group the body names.
pub const REGISTER: &str = "/v1/registry/beat";
/// Removes an instance's registration ([`LeaveRequest`] → [`Left`]).
pub const LEAVE: &str = "/v1/registry/leave";

/// A registration endpoint's answer to a beat.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Registered {
    /// The beat's time on the store's clock (unix ms): liveness is judged on it.
    pub at: i64,
}

/// Removes an instance from its group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LeaveRequest {
    /// The group.
    pub group: String,
    /// The address it registered.
    pub address: String,
}

/// Whether a leave found the registration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Left {
    /// It was registered, and is no longer.
    pub removed: bool,
}

/// An instance's answer to a beat.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Beat {
    /// The instance's name (unique in its group).
    pub instance: String,
    /// The executor's software version.
    pub version: String,
    /// The handlers it serves, sorted.
    pub handlers: Vec<String>,
    /// Runs it executes at once, at most.
    pub capacity: usize,
    /// Runs executing now.
    pub running: usize,
    /// Runs waiting behind a running run of the same job (serial block strategy).
    pub queued: usize,
}

/// Asks whether a job is running on the instance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IdleBeatRequest {
    /// The job.
    pub job_id: String,
}

/// Whether the instance is idle for a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IdleBeat {
    /// No run of the job is running or queued there, and a slot is free.
    pub idle: bool,
}

/// One run to execute.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunRequest {
    /// The run's id in the scheduler's store.
    pub run_id: i64,
    /// The run's fencing token; every later request about the run names it.
    pub token: u64,
    /// The job's definition as stored (`id`, `handler` and `payload` are what an
    /// executor needs; other fields may be ignored).
    pub job: serde_json::Value,
    /// The fire's instant, unix ms.
    pub fire_at: i64,
    /// 1-based attempt.
    pub attempt: u32,
    /// Why it runs: `schedule`, `retry`, `manual` or `misfire`.
    pub trigger: String,
    /// The scheduler node that dispatched it.
    pub node: String,
    /// Cancel the run after this long, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// What to do when a run of the same job is in progress on the instance.
    #[serde(default)]
    pub block: BlockStrategy,
    /// How long to wait for the run to end before answering, ms (at most 30,000;
    /// default 0: answer at once). A fast run's result then comes back in the same
    /// round trip; a slower one's is asked for with [`RESULT`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub wait_ms: u64,
    /// For a sharding broadcast: the shard this instance runs. The instance keeps
    /// each shard of a run apart (every later request about it names the index),
    /// and the block strategy applies per job and shard. A shard retried on the
    /// same instance comes again with a later `attempt`, and runs again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// The W3C `traceparent` of the scheduler's span for this run, when it belongs
    /// to an OpenTelemetry trace: the instance's span for the run is its child, so
    /// the handler's spans join the run's trace. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// For a fire released by upstream jobs: the upstream runs that released it
    /// (their job, fire instant, run id and status). Absent otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upstream: Vec<crate::dependency::UpstreamRun>,
    /// Asks for the run's log lines from this offset with the answer
    /// ([`RunState::log`]). A scheduler asks from 0; an instance that ignores it
    /// has its lines read with [`LOG`] once the run ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_offset: Option<u64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Asks for a run's state, waiting up to `wait_ms` for it to end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ResultRequest {
    /// The run.
    pub run_id: i64,
    /// Its token.
    pub token: u64,
    /// How long to wait for the end, ms (at most 30,000).
    #[serde(default)]
    pub wait_ms: u64,
    /// The shard's index, for a run dispatched as a shard ([`RunRequest::shard`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<u32>,
    /// Asks for the run's log lines from this offset with the answer
    /// ([`RunState::log`]): the scheduler asks from where the last answer's
    /// `next_offset` left it, so a run's lines reach the scheduler's store with each
    /// long poll while it runs and with its result. An instance answers such a poll
    /// before `wait_ms` once lines past the offset are there, batching them (the
    /// Rust and Python executors answer one second after the request at the
    /// soonest): a chatty run's lines arrive about once a second, a quiet run's
    /// poll waits for its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_offset: Option<u64>,
}

/// Where a run stands on the instance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Waiting behind a run of the same job.
    Queued,
    /// Executing.
    Running,
    /// Ended; `outcome` says how.
    Done,
}

/// A run's state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunState {
    /// The run.
    pub run_id: i64,
    /// Where it stands.
    pub phase: Phase,
    /// How it ended, once `done`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<RemoteOutcome>,
    /// The run's log lines from the request's `log_offset` (at most 1,000), when it
    /// asked for them. Once `phase` is `done` every line is written: a chunk that
    /// does not reach the end (`next_offset` short of it, 1,000 lines) is followed
    /// by [`LOG`] requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<LogChunk>,
}

/// How a run ended on the instance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RemoteOutcome {
    /// `succeeded`, `failed`, `timed_out`, `cancelled` or `panicked`.
    pub status: String,
    /// The error's chain of messages, for `failed` and `panicked`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// For `failed`: `policy` (the job's retry policy decides), `never`, or
    /// `after:<ms>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<String>,
}

/// Cancels a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct KillRequest {
    /// The run.
    pub run_id: i64,
    /// Its token.
    pub token: u64,
    /// The shard's index, for a run dispatched as a shard ([`RunRequest::shard`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<u32>,
}

/// Whether a kill found the run queued or running.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct KillReply {
    /// The run was cancelled by this request.
    pub killed: bool,
}

/// Asks for a run's log lines from `offset`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LogRequest {
    /// The run.
    pub run_id: i64,
    /// Its token.
    pub token: u64,
    /// The first line wanted (0-based, counted from the run's first line).
    #[serde(default)]
    pub offset: u64,
    /// At most this many lines (at most 1,000).
    #[serde(default = "default_log_limit")]
    pub limit: usize,
    /// The shard's index, for a run dispatched as a shard ([`RunRequest::shard`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<u32>,
}

fn default_log_limit() -> usize {
    200
}

/// A stretch of a run's log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LogChunk {
    /// The lines from `offset`.
    pub lines: Vec<String>,
    /// The offset to ask from next.
    pub next_offset: u64,
    /// Lines before this offset were dropped (the log keeps its last lines only).
    pub first_offset: u64,
    /// The run has ended: no line will follow the run's last.
    pub done: bool,
    /// Lines from `next_offset` on are there already: this chunk was cut by its
    /// line limit or by its size bound ([`MAX_CHUNK_BYTES`]); ask again from
    /// `next_offset` for them.
    #[serde(default)]
    pub more: bool,
}

/// Largest total of line bytes in one [`LogChunk`] an instance sends (256 KiB, well
/// inside an answer's default 1 MiB bound); a chunk holds at least one line.
pub const MAX_CHUNK_BYTES: usize = 256 * 1024;

/// A refusal's body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorBody {
    /// The refusal's code (see the module documentation).
    pub error: String,
    /// What to do about it, for people.
    pub message: String,
}
