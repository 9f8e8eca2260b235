use super::conn::RedisConn;
use super::decode::{Fields, corrupt, encode, job_record, parse_int, run_record};
use super::prepared::{Call, Lua, Scripts, flag, ms, push_fire, push_run, triples};
use super::{NAME, redis_err};
use crate::error::{Error, Result};
use crate::job::{Job, JobId};
use crate::record::*;
use crate::store::{Applied, CorruptRow, DueQuery, JobChange, JobQuery, Jobs, Page};
use crate::time::{Timestamp, duration_ms};
use async_trait::async_trait;
use std::fmt;
use std::sync::Arc;

/// Schema version written by [`RedisStore::migrate`](super::RedisStore::migrate).
pub(super) const SCHEMA: i64 = 1;
/// Runs deleted per script call of a purge, so a large purge never blocks the server
/// for long.
pub(super) const PURGE_CHUNK: usize = 500;
/// Upsert scripts (500 jobs each) in flight at once in a bulk write.
const SCRIPTS_IN_FLIGHT: usize = 4;

/// One keyspace of the Redis store: every key under one prefix, every conditional
/// write one Lua script on it. On one server the store is one shard under the
/// configured prefix; sharded, each shard's prefix carries a hash tag of its own, so
/// each shard's keys are one slot of a Redis Cluster and every script of a shard
/// runs on one node. [`RedisStore`](super::RedisStore) routes each call to its
/// shard and merges what it reads from several.
///
/// Jobs are hashes with a sorted set as the due index; the key layout is in the
/// `scripts` module's docs.
#[derive(Clone)]
pub(super) struct Shard {
    pub(super) conn: RedisConn,
    pub(super) prefix: Arc<str>,
    pub(super) scripts: Arc<Scripts>,
}

impl fmt::Debug for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shard")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl Shard {
    pub(super) fn key(&self, rest: &str) -> String {
        format!("{}{rest}", self.prefix)
    }

    /// A call of `lua` with the prefix as `ARGV[1]`.
    pub(super) fn call<'a>(&self, lua: &'a Lua) -> Call<'a> {
        let mut call = Call {
            lua,
            args: Vec::new(),
        };
        call.arg(&*self.prefix);
        call
    }

    /// Runs `call` on the node serving this shard: its one declared key is the
    /// shard's `schema` key, which routes it on a cluster (every key a script touches
    /// is in that key's slot).
    pub(super) async fn invoke<T: redis::FromRedisValue>(
        &self,
        call: Call<'_>,
        operation: &'static str,
    ) -> Result<T> {
        super::conn::eval(
            &self.conn,
            &call.lua.script,
            &call.lua.code,
            &[self.key("schema")],
            &call.args,
        )
        .await
        .map_err(redis_err(operation))
    }

    /// `HGETALL` of each key in one pipeline, in order; a missing hash is empty.
    pub(super) async fn hashes(
        &self,
        keys: impl IntoIterator<Item = String>,
        operation: &'static str,
    ) -> Result<Vec<Fields>> {
        let mut pipe = redis::pipe();
        let mut n = 0;
        for k in keys {
            pipe.hgetall(k);
            n += 1;
        }
        if n == 0 {
            return Ok(Vec::new());
        }
        let all: Vec<Fields> = pipe
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_err(operation))?;
        Ok(all)
    }

    pub(super) async fn run_records(&self, ids: &[String]) -> Result<Vec<RunRecord>> {
        let keys = ids.iter().map(|id| self.key(&format!("run:{id}")));
        let hashes = self.hashes(keys, "read runs").await?;
        ids.iter()
            .zip(hashes)
            .filter(|(_, h)| !h.is_empty())
            .map(|(id, h)| run_record(id, &h))
            .collect()
    }
}

impl Shard {
    /// A call of `lua` with the prefix and the audit entry (empty fields
    /// for none) as `ARGV[1..6]`.
    pub(super) fn audited_call<'a>(&self, lua: &'a Lua, audit: Option<&AuditEntry>) -> Call<'a> {
        let mut call = self.call(lua);
        let json = |v: &Option<serde_json::Value>| {
            v.as_ref()
                .map_or_else(String::new, serde_json::Value::to_string)
        };
        match audit {
            Some(e) => call
                .arg(&e.actor)
                .arg(&e.action)
                .arg(&e.target)
                .arg(json(&e.before))
                .arg(json(&e.after)),
            None => call.arg("").arg("").arg("").arg("").arg(""),
        };
        call
    }

    /// `upsert_many`: the upsert script over batches of 500 jobs, unaudited, their
    /// first fires carrying no context.
    async fn upsert_jobs(&self, jobs: &[(Job, Option<Timestamp>)]) -> Result<Vec<UpsertOutcome>> {
        use futures::{StreamExt, TryStreamExt};
        // One script per 500 jobs (each atomic; the ids are distinct, so the scripts'
        // order does not matter), several in flight on the multiplexed connection:
        // encoding the next chunk and the round trips overlap the server's work.
        type Chunk<'a> = std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<Vec<UpsertOutcome>>> + Send + 'a>,
        >;
        let calls: Vec<Chunk<'_>> = jobs
            .chunks(500)
            .map(|chunk| Box::pin(self.store_chunk(chunk, None, false, None)) as Chunk<'_>)
            .collect();
        let outcomes: Vec<Vec<UpsertOutcome>> = futures::stream::iter(calls)
            .buffered(SCRIPTS_IN_FLIGHT)
            .try_collect()
            .await?;
        Ok(outcomes.concat())
    }

    /// One upsert script for up to 500 jobs, each first fire carrying `context`
    /// (stored form; `None`: empty).
    async fn store_chunk<J: std::borrow::Borrow<Job> + Sync>(
        &self,
        chunk: &[(J, Option<Timestamp>)],
        context: Option<String>,
        only_if_absent: bool,
        audit: Option<&AuditEntry>,
    ) -> Result<Vec<UpsertOutcome>> {
        let mut call = self.audited_call(&self.scripts.upsert, audit);
        call.arg(flag(only_if_absent));
        for (job, next) in chunk {
            let job = job.borrow();
            call.arg(job.id().as_str())
                .arg(encode(job)?)
                .arg(flag(job.enabled()))
                .arg(ms(*next))
                .arg(context.as_deref().unwrap_or(""));
        }
        let out: Vec<String> = self.invoke(call, "upsert").await?;
        Ok(out
            .iter()
            .map(|o| match o.as_str() {
                "created" => UpsertOutcome::Created,
                "updated" => UpsertOutcome::Updated,
                "kept" => UpsertOutcome::Kept,
                _ => UpsertOutcome::Unchanged,
            })
            .collect())
    }

    async fn store_job(
        &self,
        job: &Job,
        next_fire_at: Option<Timestamp>,
        context: &FireContext,
        only_if_absent: bool,
        audit: Option<&AuditEntry>,
    ) -> Result<UpsertOutcome> {
        let one = [(job, next_fire_at)];
        let out = self
            .store_chunk(&one, context.to_stored(), only_if_absent, audit)
            .await?;
        out.into_iter()
            .next()
            .ok_or_else(|| Error::backend(NAME, "upsert", false, "the script returned no outcome"))
    }

    async fn set_enabled_job(
        &self,
        id: &JobId,
        enabled: bool,
        next: Option<&FireState>,
        audit: Option<&AuditEntry>,
    ) -> Result<()> {
        // Optimistic: the definition is rewritten in Rust, and the script applies it
        // only if the version read is still current.
        loop {
            let Some(rec) = self.get(id).await? else {
                return Err(Error::not_found("job", id));
            };
            let mut call = self.audited_call(&self.scripts.set_enabled, audit);
            call.arg(id.as_str())
                .arg(flag(enabled))
                .arg(encode(&rec.job.with_enabled(enabled))?)
                .arg(rec.version);
            push_fire(&mut call, next);
            match self.invoke::<i64>(call, "set_enabled").await? {
                -1 => return Err(Error::not_found("job", id)),
                0 => continue,
                _ => return Ok(()),
            }
        }
    }
}

/// A finish with its releases split by where their jobs live: `local` on the
/// finishing job's shard (queued by the finish itself), `remote` with the index of
/// the shard of each job (kept in the shard's `fwd` hash by the finish, delivered
/// after it).
pub(super) struct Routed<'a> {
    pub(super) run: &'a FinishRun,
    pub(super) local: Vec<&'a crate::dependency::Release>,
    pub(super) remote: Vec<(usize, &'a crate::dependency::Release)>,
}

impl Shard {
    /// One finish script for `runs` (see [`Jobs::finish_runs`]).
    pub(super) async fn finish(&self, runs: &[Routed<'_>]) -> Result<Vec<FinishOutcome>> {
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        let mut call = self.call(&self.scripts.finish);
        call.arg(runs.len());
        for routed in runs {
            let f = routed.run;
            call.arg(f.run_id.0)
                .arg(f.job_id.as_str())
                .arg(f.token)
                .arg(flag(f.takeover))
                .arg(f.status.as_str())
                .arg(flag(f.error.is_some()))
                .arg(f.error.as_deref().unwrap_or(""))
                .arg(flag(f.will_retry))
                .arg(f.version);
            push_fire(&mut call, f.next.as_ref());
            match f.lease {
                LeaseEnd::Untouched => call.arg("0").arg(""),
                LeaseEnd::Release => call.arg("1").arg(""),
                LeaseEnd::Keep(ttl) => call.arg("2").arg(duration_ms(ttl).max(1)),
            };
            call.arg(f.executor.as_deref().unwrap_or(""));
            call.arg(f.alarms.len());
            for a in &f.alarms {
                call.arg(encode(a)?);
            }
            call.arg(routed.local.len());
            for r in &routed.local {
                call.arg(r.job.as_str())
                    .arg(super::release_scripts::member(r))
                    .arg(r.upstream.as_str());
            }
            call.arg(routed.remote.len());
            for (shard, r) in &routed.remote {
                call.arg(*shard)
                    .arg(r.job.as_str())
                    .arg(super::release_scripts::member(r))
                    .arg(r.upstream.as_str());
            }
        }
        let out: Vec<String> = self.invoke(call, "finish_runs").await?;
        let w = "decode finish";
        triples(out, runs.len(), w)?
            .into_iter()
            .map(|[code, a, b]| {
                Ok(match code.as_str() {
                    "ok" => FinishOutcome::Finished {
                        rescheduled: a == "1",
                        ended_at: Timestamp::from_millis(parse_int(&b, w)?),
                    },
                    "not_found" => FinishOutcome::Refused(FinishRefusal::NotFound),
                    "not_running" => FinishOutcome::Refused(FinishRefusal::NotRunning),
                    "fenced" => FinishOutcome::Refused(FinishRefusal::Fenced {
                        current: parse_int(&a, w)? as u64,
                    }),
                    other => return Err(corrupt(w, format!("unknown outcome {other:?}"))),
                })
            })
            .collect()
    }
}

#[async_trait]
impl Jobs for Shard {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn schema(&self) -> Result<Option<crate::store::SchemaVersion>> {
        let found: Option<i64> = redis::cmd("GET")
            .arg(format!("{}schema", self.prefix))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_err("schema"))?;
        Ok(Some(crate::store::SchemaVersion {
            found,
            known: SCHEMA,
        }))
    }

    async fn now(&self) -> Result<Timestamp> {
        let (secs, micros): (i64, i64) = redis::cmd("TIME")
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_err("now"))?;
        Ok(Timestamp::from_millis(secs * 1000 + micros / 1000))
    }

    async fn apply(&self, change: &JobChange, audit: Option<&AuditEntry>) -> Result<Applied> {
        match change {
            JobChange::Upsert { job, next, context } => self
                .store_job(job, *next, context, false, audit)
                .await
                .map(Applied::Upsert),
            JobChange::Create { job, next, context } => self
                .store_job(job, *next, context, true, audit)
                .await
                .map(Applied::Upsert),
            JobChange::Remove { id } => {
                let mut call = self.audited_call(&self.scripts.remove, audit);
                call.arg(id.as_str());
                let n: i64 = self.invoke(call, "remove").await?;
                Ok(Applied::Removed(n > 0))
            }
            JobChange::Pause { id } => self
                .set_enabled_job(id, false, None, audit)
                .await
                .map(|()| Applied::Done),
            JobChange::Resume { id, next } => self
                .set_enabled_job(id, true, next.as_ref(), audit)
                .await
                .map(|()| Applied::Done),
            JobChange::Trigger { id, fire } => {
                let mut call = self.audited_call(&self.scripts.trigger, audit);
                call.arg(id.as_str());
                push_fire(&mut call, Some(fire));
                match self.invoke::<i64>(call, "trigger").await? {
                    0 => Err(Error::not_found("job", id)),
                    _ => Ok(Applied::Done),
                }
            }
        }
    }

    async fn upsert_many(&self, jobs: &[(Job, Option<Timestamp>)]) -> Result<Vec<UpsertOutcome>> {
        self.upsert_jobs(jobs).await
    }

    async fn get(&self, id: &JobId) -> Result<Option<JobRecord>> {
        let h: Fields = redis::cmd("HGETALL")
            .arg(self.key(&format!("job:{id}")))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_err("get"))?;
        if h.is_empty() {
            return Ok(None);
        }
        job_record(id.as_str(), &h).map(Some)
    }

    async fn list(&self, query: &JobQuery) -> Result<Page<JobRecord>> {
        let min = query
            .after
            .as_ref()
            .map_or_else(|| "-".to_string(), |a| format!("({a}"));
        let ids: Vec<String> = redis::cmd("ZRANGEBYLEX")
            .arg(self.key("jobs"))
            .arg(min)
            .arg("+")
            .arg("LIMIT")
            .arg(0)
            .arg(query.effective_limit())
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_err("list"))?;
        let keys = ids.iter().map(|id| self.key(&format!("job:{id}")));
        let hashes = self.hashes(keys, "list").await?;
        let mut page = Page::default();
        for (id, h) in ids.iter().zip(hashes) {
            if h.is_empty() {
                continue;
            }
            match job_record(id, &h) {
                Ok(r) => page.items.push(r),
                Err(Error::Corrupt { id, reason, .. }) => page.corrupt.push(CorruptRow {
                    kind: "job",
                    id,
                    due_key: None,
                    reason,
                }),
                Err(e) => return Err(e),
            }
        }
        Ok(page)
    }

    async fn due(&self, query: &DueQuery) -> Result<Page<DueFire>> {
        if query.limit == 0 {
            return Ok(Page::default());
        }
        let mut call = self.call(&self.scripts.due);
        call.arg(query.until.as_millis())
            .arg(crate::limits::page(query.limit));
        if let Some(k) = &query.after {
            call.arg(k.fire_at.as_millis()).arg(k.job_id.as_str());
        }
        let out: Vec<String> = self.invoke(call, "due").await?;
        let w = "decode due";
        let mut page = Page::default();
        for f in out.chunks_exact(8) {
            let fire_at = Timestamp::from_millis(parse_int(&f[1], w)?);
            let resume_after = match f[6].as_str() {
                "" => None,
                s => Some(Timestamp::from_millis(parse_int(s, w)?)),
            };
            let job = Job::from_stored(&f[2]).and_then(|job| {
                let context = FireContext::from_stored(Some(&f[7]))?;
                Ok((job, context))
            });
            match (job, JobId::new(&f[0])) {
                (Ok((job, context)), Ok(job_id)) => page.items.push(DueFire {
                    job_id,
                    job: Arc::new(job),
                    version: parse_int(&f[3], w)? as u64,
                    fire: FireState {
                        at: fire_at,
                        trigger: TriggerKind::parse(&f[4]).unwrap_or_default(),
                        attempt: parse_int(&f[5], w)?.max(0) as u32,
                        resume_after,
                        context,
                    },
                }),
                (Err(e), id) => page.corrupt.push(CorruptRow {
                    kind: "job",
                    id: f[0].clone(),
                    due_key: id.ok().map(|job_id| DueKey { fire_at, job_id }),
                    reason: e.to_string(),
                }),
                (_, Err(e)) => page.corrupt.push(CorruptRow {
                    kind: "job",
                    id: f[0].clone(),
                    due_key: None,
                    reason: e.to_string(),
                }),
            }
        }
        Ok(page)
    }

    async fn start_runs(&self, runs: &[StartRun]) -> Result<Vec<StartOutcome>> {
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        let mut call = self.call(&self.scripts.start);
        call.arg(runs.len());
        for r in runs {
            call.arg(r.job_id.as_str())
                .arg(r.fire_at.as_millis())
                .arg(r.version)
                .arg(r.token);
            push_run(
                &mut call, &r.node, r.attempt, r.trigger, r.covers, &r.context,
            );
        }
        let out: Vec<String> = self.invoke(call, "start_runs").await?;
        let w = "decode start";
        triples(out, runs.len(), w)?
            .into_iter()
            .map(|[code, a, b]| {
                Ok(match code.as_str() {
                    "ok" => StartOutcome::Started {
                        run_id: RunId(parse_int(&a, w)?),
                        started_at: Timestamp::from_millis(parse_int(&b, w)?),
                    },
                    "not_found" => StartOutcome::Refused(StartRefusal::NotFound),
                    "disabled" => StartOutcome::Refused(StartRefusal::Disabled),
                    "changed" => StartOutcome::Refused(StartRefusal::Changed),
                    "running" => StartOutcome::Refused(StartRefusal::Running),
                    "not_due" => StartOutcome::Refused(StartRefusal::NotDue),
                    "fenced" => StartOutcome::Refused(StartRefusal::Fenced {
                        current: parse_int(&a, w)? as u64,
                    }),
                    other => return Err(corrupt(w, format!("unknown outcome {other:?}"))),
                })
            })
            .collect()
    }

    async fn finish_runs(&self, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>> {
        let routed: Vec<Routed<'_>> = runs
            .iter()
            .map(|run| Routed {
                run,
                local: run.releases.iter().collect(),
                remote: Vec::new(),
            })
            .collect();
        self.finish(&routed).await
    }

    async fn releases(
        &self,
        job: Option<&JobId>,
        limit: usize,
    ) -> Result<Vec<crate::dependency::QueuedRelease>> {
        self.queued_releases(job, limit).await
    }

    async fn queue_releases(
        &self,
        releases: &[crate::dependency::Release],
        audit: Option<&AuditEntry>,
    ) -> Result<()> {
        self.queue_released(releases, audit).await
    }

    async fn drop_releases(
        &self,
        job: &JobId,
        fire_at: Timestamp,
        audit: Option<&AuditEntry>,
    ) -> Result<u64> {
        self.drop_released(job, fire_at, audit).await
    }

    async fn take_releases(&self, limit: usize) -> Result<u64> {
        self.take_queued(limit).await
    }

    async fn alarm_waiting(&self, job: &JobId, at: Timestamp, e: &AlarmEvent) -> Result<bool> {
        self.alarm_queued(job, at, e).await
    }
}
