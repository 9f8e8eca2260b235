//! Dispatching a run to an instance of its group: the instance the job's routing
//! picks, the signed dispatch that waits a while for the run's end, the long-polled
//! result, and a kill when the engine drops the run before its end. Each fire of a
//! job that names the group comes here as the run of a handler, so the engine's
//! leases, fencing, timeouts, retries and alarms apply unchanged.

use super::client::CallError;
use super::group::{Inner, RemoteGroup};
use super::protocol::{self, Phase, RemoteOutcome, RunRequest, RunState};
use crate::handler::{JobContext, JobError, JobHandler, JobResult};
use crate::placement::Routing;
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Kills a dispatched run when its dispatcher is dropped (the engine cancelled it:
/// timeout, lost lease, shutdown) before its result came back.
struct KillOnDrop {
    inner: Option<Arc<Inner>>,
    instance: String,
    run_id: i64,
    token: u64,
    shard: Option<u32>,
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            let (instance, q) = (
                std::mem::take(&mut self.instance),
                protocol::KillRequest {
                    run_id: self.run_id,
                    token: self.token,
                    shard: self.shard,
                },
            );
            rt.spawn(async move {
                let r: std::result::Result<protocol::KillReply, _> =
                    inner.client.call(&instance, protocol::KILL, &q, None).await;
                tracing::debug!(run = q.run_id, %instance, ok = r.is_ok(), "kill sent");
            });
        }
    }
}

impl RemoteGroup {
    /// The instance that runs this fire of `job` (served by `handler`), by the job's
    /// routing strategy.
    async fn pick(
        &self,
        routing: Routing,
        job: &str,
        handler: &str,
    ) -> std::result::Result<String, JobError> {
        let inner = &self.inner;
        let list = &self.live_for(handler).await?;
        let candidates = inner.router.candidates(routing, job, list);
        match routing {
            Routing::Failover => {
                for &i in &candidates {
                    if self.beat(&list[i]).await.is_ok() {
                        return Ok(list[i].clone());
                    }
                }
                Err(JobError::msg(format!(
                    "no instance of group {:?} answers its beat",
                    inner.name
                )))
            }
            Routing::BusyOver => {
                for &i in &candidates {
                    let q = protocol::IdleBeatRequest {
                        job_id: job.to_string(),
                    };
                    let idle: std::result::Result<protocol::IdleBeat, _> = inner
                        .client
                        .call(&list[i], protocol::IDLE_BEAT, &q, None)
                        .await;
                    if idle.is_ok_and(|b| b.idle) {
                        return Ok(list[i].clone());
                    }
                }
                Err(JobError::msg(format!(
                    "every instance of group {:?} is busy with this job or does not answer",
                    inner.name
                )))
            }
            _ => Ok(list[candidates[0]].clone()),
        }
    }
}

#[async_trait]
impl JobHandler for RemoteGroup {
    async fn run(&self, ctx: JobContext) -> JobResult {
        let Some(target) = ctx.job.remote() else {
            return Err(JobError::msg("the job names no executor group").permanent());
        };
        if target.routing_strategy() == Routing::ShardingBroadcast {
            return self.broadcast(&ctx, target.block_strategy()).await;
        }
        let instance = self
            .pick(
                target.routing_strategy(),
                ctx.job.id().as_str(),
                ctx.job.handler(),
            )
            .await?;
        let one = Dispatch {
            block: target.block_strategy(),
            shard: None,
            attempt: ctx.attempt,
        };
        self.dispatch(&ctx, &instance, one).await
    }
}

/// What one dispatch of a run carries besides the run itself.
#[derive(Clone, Copy, Debug)]
pub(super) struct Dispatch {
    /// The job's block strategy.
    pub(super) block: crate::placement::BlockStrategy,
    /// The shard, for a sharding broadcast.
    pub(super) shard: Option<crate::placement::Shard>,
    /// The attempt: the run's, or a shard's retry's.
    pub(super) attempt: u32,
}

impl RemoteGroup {
    /// The live instances that serve `handler`, in address order; an error when
    /// there are none.
    pub(super) async fn live_for(
        &self,
        handler: &str,
    ) -> std::result::Result<Vec<String>, JobError> {
        let name = &self.inner.name;
        let list = self
            .serving(Some(handler))
            .await
            .map_err(|e| JobError::msg(format!("group {name:?}: {e}")))?;
        if list.is_empty() {
            return Err(JobError::msg(format!(
                "no live instance of group {name:?} serves handler {handler:?}"
            )));
        }
        Ok(list)
    }

    /// Runs the fire (or one shard of it) on `instance` and waits for its outcome.
    pub(super) async fn dispatch(
        &self,
        ctx: &JobContext,
        instance: &str,
        d: Dispatch,
    ) -> JobResult {
        let inner = &self.inner;
        let instance = instance.to_string();
        let req = RunRequest {
            run_id: ctx.run_id.0,
            token: ctx.token,
            job: serde_json::to_value(&*ctx.job).map_err(JobError::new)?,
            fire_at: ctx.fire_at.as_millis(),
            attempt: d.attempt,
            trigger: if d.attempt > ctx.attempt {
                crate::record::TriggerKind::Retry.as_str().to_string()
            } else {
                ctx.trigger.as_str().to_string()
            },
            node: ctx.node_id.to_string(),
            timeout_ms: ctx
                .deadline
                .map(|d| d.saturating_duration_since(Instant::now()).as_millis() as u64),
            block: d.block,
            wait_ms: inner.config.result_wait.as_millis() as u64,
            shard: d.shard,
            traceparent: ctx.trace.clone(),
            upstream: ctx.upstream.clone(),
            log_offset: Some(0),
        };
        let shard = d.shard.map(|s| s.index);
        let mut tail = LogTail::new(ctx, &instance, d.shard);
        let poll_timeout = inner.config.result_wait + inner.config.request_timeout;
        // Armed before the dispatch: the engine may drop this future (timeout, lost
        // lease, shutdown) while the dispatch waits for the run's end.
        let mut guard = KillOnDrop {
            inner: Some(inner.clone()),
            instance: instance.clone(),
            run_id: req.run_id,
            token: req.token,
            shard,
        };
        let asked = Instant::now();
        let admitted: std::result::Result<RunState, _> = inner
            .client
            .call(&instance, protocol::RUN, &req, Some(poll_timeout))
            .await;
        let group = inner.name.as_str();
        match &admitted {
            Ok(_) => crate::engine::instruments::dispatched(group, asked.elapsed()),
            Err(CallError::Refused { code, .. }) => {
                crate::engine::instruments::dispatch_refused(group, code)
            }
            Err(CallError::Unauthentic(_)) => {
                crate::engine::instruments::dispatch_refused(group, "unauthentic")
            }
            Err(CallError::Unreachable(_)) => {
                crate::engine::instruments::dispatch_refused(group, "unreachable")
            }
        }
        // The answer to the dispatch, which waited a while for the run's end; none
        // when the answer was lost (the run may have been admitted: ask for it).
        let mut first = match admitted {
            Ok(state) => Some(state),
            Err(CallError::Refused {
                status,
                code,
                message,
            }) => {
                let e = JobError::msg(format!(
                    "{instance} refused the run ({status} {code}): {message}"
                ));
                // A discarded run, an unknown handler or a bad request does not get
                // better by retrying; a busy instance may have room later.
                guard.inner = None;
                return Err(if status == 429 { e } else { e.permanent() });
            }
            Err(e @ CallError::Unauthentic(_)) => {
                guard.inner = None;
                return Err(JobError::msg(format!("dispatch to {instance} failed: {e}")));
            }
            Err(CallError::Unreachable(_)) => None,
        };
        // Admitted (or its answer lost): the run's log says where it went, before the
        // lines that come back from there; its record, which instance ran it.
        ctx.executed_on.add(&instance);
        tail.logger.line(format!(
            "{}[jobwheel] dispatched to {instance} (group {}, attempt {})",
            tail.prefix, inner.name, d.attempt
        ));
        let mut poll = protocol::ResultRequest {
            run_id: req.run_id,
            token: req.token,
            wait_ms: inner.config.result_wait.as_millis() as u64,
            shard,
            log_offset: None,
        };
        let mut failures = 0;
        loop {
            poll.log_offset = Some(tail.next);
            let mut state: std::result::Result<RunState, _> = match first.take() {
                Some(answer) => Ok(answer),
                None => {
                    inner
                        .client
                        .call(&instance, protocol::RESULT, &poll, Some(poll_timeout))
                        .await
                }
            };
            let complete = match state.as_mut().ok().and_then(|s| s.log.take()) {
                Some(chunk) => tail.take(chunk),
                None => false,
            };
            match state {
                Ok(RunState {
                    phase: Phase::Done,
                    outcome: Some(o),
                    ..
                }) => {
                    guard.inner = None;
                    if !complete {
                        self.read_rest(&mut tail, &poll).await;
                    }
                    if o.status == "timed_out" && ctx.deadline.is_some() {
                        // The instance enforced the deadline it was sent; the local
                        // executor's own timeout, due now, records the run timed out.
                        std::future::pending::<()>().await;
                    }
                    return outcome_result(&instance, o);
                }
                Ok(_) => failures = 0,
                Err(CallError::Refused { status: 404, .. }) => {
                    guard.inner = None;
                    return Err(JobError::msg(format!(
                        "{instance} no longer knows the run (restarted, or the result expired)"
                    )));
                }
                Err(e) => {
                    failures += 1;
                    if failures >= inner.config.lost_after {
                        return Err(JobError::msg(format!(
                            "lost contact with {instance} after {failures} result requests: {e}"
                        )));
                    }
                    tokio::time::sleep(Duration::from_millis(100 * u64::from(failures))).await;
                }
            }
        }
    }
}

/// A remote run's log as it comes back from its instance, written to the run's log
/// on this node (and so to the store, as a local run's lines are).
struct LogTail {
    logger: crate::RunLogger,
    /// The instance's offset of the next line wanted.
    next: u64,
    /// Put before each line: the shard, for one shard of a broadcast.
    prefix: String,
    instance: String,
}

/// Lines asked for at once.
const LOG_PAGE: usize = 1_000;
/// Pages read after a run's end, at most (an instance keeps a bounded tail).
const MAX_PAGES: usize = 100;

impl LogTail {
    fn new(ctx: &JobContext, instance: &str, shard: Option<crate::placement::Shard>) -> LogTail {
        LogTail {
            logger: ctx.log.clone(),
            next: 0,
            prefix: shard.map_or_else(String::new, |s| format!("[shard {}/{}] ", s.index, s.total)),
            instance: instance.to_string(),
        }
    }

    /// Writes a chunk's lines; says whether it holds the run's last line.
    fn take(&mut self, chunk: protocol::LogChunk) -> bool {
        if chunk.first_offset > self.next {
            self.logger.line(format!(
                "[jobwheel] {} earlier lines were dropped by {} before they were read",
                chunk.first_offset - self.next,
                self.instance
            ));
        }
        // An instance that does not say `more` cut the chunk at the page's lines.
        let complete = chunk.done && !chunk.more && chunk.lines.len() < LOG_PAGE;
        self.next = chunk.next_offset.max(self.next);
        let prefix = &self.prefix;
        self.logger
            .lines(chunk.lines.into_iter().map(|l| format!("{prefix}{l}")));
        complete
    }
}

impl RemoteGroup {
    /// Reads an ended run's lines that its last answer did not bring (an instance
    /// that does not send lines with its answers, or a log longer than a page).
    async fn read_rest(&self, tail: &mut LogTail, poll: &protocol::ResultRequest) {
        for _ in 0..MAX_PAGES {
            let q = protocol::LogRequest {
                run_id: poll.run_id,
                token: poll.token,
                offset: tail.next,
                limit: LOG_PAGE,
                shard: poll.shard,
            };
            let chunk: std::result::Result<protocol::LogChunk, _> = self
                .inner
                .client
                .call(&tail.instance, protocol::LOG, &q, None)
                .await;
            match chunk {
                Ok(chunk) => {
                    let more = !chunk.lines.is_empty() && !tail.take(chunk);
                    if !more {
                        return;
                    }
                }
                Err(e) => {
                    let instance = tail.instance.clone();
                    tail.logger.line(format!(
                        "[jobwheel] the rest of the run's log could not be read from {instance}: {e}"
                    ));
                    return;
                }
            }
        }
    }
}

/// A remote outcome as the engine sees a handler's.
fn outcome_result(instance: &str, o: RemoteOutcome) -> JobResult {
    let error = o.error.unwrap_or_default();
    match o.status.as_str() {
        "succeeded" => Ok(()),
        "failed" => {
            let e = JobError::msg(error);
            Err(match o.retry.as_deref() {
                Some("never") => e.permanent(),
                Some(r) => match r.strip_prefix("after:").and_then(|ms| ms.parse().ok()) {
                    Some(ms) => e.retry_after(Duration::from_millis(ms)),
                    None => e,
                },
                None => e,
            })
        }
        "timed_out" => Err(JobError::msg(format!("timed out on {instance}"))),
        // Killed there, or covered by a later run of the job: not retried, recorded
        // cancelled.
        "cancelled" => Err(JobError::killed(format!("killed on {instance}"))),
        "panicked" => Err(JobError::msg(format!("panicked on {instance}: {error}"))),
        other => Err(JobError::msg(format!(
            "{instance} answered an unknown status {other:?}"
        ))),
    }
}
