//! Sharding broadcast: one fire becomes one run per live instance of the group that
//! serves the job's handler, each told its shard (index in address order, and the
//! total), so a job's work is split over the group.
//!
//! The shards are dispatched at once and awaited together, inside the fire's one run
//! on the scheduler node: the run holds the job's lease and one slot while they
//! execute, every shard carries the run's fencing token, and their outcome reaches
//! the store once, through the run's fenced finish. A shard that fails is retried
//! on its own under the job's retry policy (the other shards are not run again), on
//! the next live instance in address order, with a later attempt; the fire
//! succeeds when every shard has, and fails — without another attempt of the whole
//! fire, since each shard had its retries — when a shard runs out of them.

use super::dispatch::Dispatch;
use super::group::RemoteGroup;
use crate::handler::{JobContext, JobError, JobResult, RetryAdvice};
use crate::placement::{BlockStrategy, Shard};

impl RemoteGroup {
    /// Runs the fire as one shard per live instance serving its handler.
    pub(super) async fn broadcast(&self, ctx: &JobContext, block: BlockStrategy) -> JobResult {
        let list = self.live_for(ctx.job.handler()).await?;
        let total = u32::try_from(list.len()).unwrap_or(u32::MAX);
        let shards = (0..total).map(|index| self.shard(ctx, block, &list, Shard { index, total }));
        let failed: Vec<String> = futures::future::join_all(shards)
            .await
            .into_iter()
            .filter_map(Result::err)
            .collect();
        if failed.is_empty() {
            return Ok(());
        }
        Err(JobError::msg(format!(
            "{} of {total} shards failed: {}",
            failed.len(),
            failed.join("; ")
        ))
        .permanent())
    }

    /// Runs one shard until it succeeds or runs out of attempts; the error names the
    /// shard, its last instance and attempt.
    async fn shard(
        &self,
        ctx: &JobContext,
        block: BlockStrategy,
        list: &[String],
        shard: Shard,
    ) -> Result<(), String> {
        let policy = ctx.job.retry();
        let mut instance = list[shard.index as usize].clone();
        let mut attempt = ctx.attempt;
        let mut moved = 0;
        loop {
            let d = Dispatch {
                block,
                shard: Some(shard),
                attempt,
            };
            let e = match self.dispatch(ctx, &instance, d).await {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if e.is_permanent() || !policy.should_retry(attempt) {
                return Err(format!(
                    "shard {} on {instance} (attempt {attempt}): {}",
                    shard.index,
                    e.chain()
                ));
            }
            let delay = match e.retry() {
                RetryAdvice::After(d) => d,
                _ => policy.delay(attempt),
            };
            tracing::info!(shard = shard.index, %instance, attempt, ?delay, error = e.chain(), "shard failed; retrying it");
            tokio::time::sleep(delay).await;
            attempt += 1;
            moved += 1;
            // The next live instance after the shard's own, so a dead or failing
            // instance is routed around; the same one when it is the only one.
            if let Ok(live) = self.live_for(ctx.job.handler()).await {
                instance = live[(shard.index as usize + moved) % live.len()].clone();
            }
        }
    }
}
