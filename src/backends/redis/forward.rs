//! Releases across shards: a finish keeps the releases of jobs on other shards in
//! its own shard's `fwd` hash (atomically with the finish), and they are delivered
//! to each job's shard right after it, and by every maintenance pass until they
//! are. A delivery is remembered by the receiving shard (`fin:<source>`, a day), so
//! one delivered twice (the source's entry not yet removed when a second node
//! delivers it) is queued once.

use super::decode::Fields;
use super::redis_err;
use super::store::RedisStore;
use crate::error::Result;
use std::collections::BTreeMap;

/// One kept release: its id on the source shard, the job, its member and upstream
/// run.
type Forward = (String, String, String, String);

impl RedisStore {
    /// Delivers the releases shard `src` keeps for other shards, then removes them
    /// from `src`. An entry that cannot be read is logged and removed (it can never
    /// be delivered).
    pub(super) async fn deliver(&self, src: usize) -> Result<()> {
        let shard = &self.shards[src];
        let pending: Fields = redis::cmd("HGETALL")
            .arg(shard.key("fwd"))
            .query_async(&mut shard.conn.clone())
            .await
            .map_err(redis_err("deliver releases"))?;
        if pending.is_empty() {
            return Ok(());
        }
        let mut by_target: BTreeMap<usize, Vec<Forward>> = BTreeMap::new();
        let mut unreadable = Vec::new();
        for (id, value) in pending {
            match serde_json::from_str::<[String; 4]>(&value) {
                Ok([target, job, member, run]) => match target.parse::<usize>() {
                    Ok(t) if t < self.shards.len() => {
                        by_target.entry(t).or_default().push((id, job, member, run));
                    }
                    _ => unreadable.push((id, value)),
                },
                Err(_) => unreadable.push((id, value)),
            }
        }
        let mut done: Vec<String> = Vec::new();
        for (id, value) in unreadable {
            tracing::error!(
                shard = src,
                id,
                value,
                "a kept release cannot be read; removed"
            );
            done.push(id);
        }
        let calls = by_target.into_iter().map(|(target, forwards)| async move {
            let to = &self.shards[target];
            let mut call = to.call(&to.scripts.accept_forwards);
            call.arg(src).arg(forwards.len());
            for (id, job, member, run) in &forwards {
                call.arg(id).arg(job).arg(member).arg(run);
            }
            let _: i64 = to.invoke(call, "deliver releases").await?;
            self.replicated(to, "deliver releases").await;
            Ok::<_, crate::error::Error>(forwards.into_iter().map(|f| f.0).collect::<Vec<_>>())
        });
        // Each target's share is removed once delivered, whatever the others do.
        let mut failed = None;
        for r in futures::future::join_all(calls).await {
            match r {
                Ok(ids) => done.extend(ids),
                Err(e) => failed = Some(e),
            }
        }
        if !done.is_empty() {
            let _: i64 = redis::cmd("HDEL")
                .arg(shard.key("fwd"))
                .arg(&done)
                .query_async(&mut shard.conn.clone())
                .await
                .map_err(redis_err("deliver releases"))?;
        }
        failed.map_or(Ok(()), Err)
    }
}
