use super::decode::{Fields, corrupt, encode, job_record, parse_int, run_record};
use super::prepared::Scripts;
use super::{NAME, redis_err};
use crate::error::{Error, Result};
use crate::job::{Job, JobId};
use crate::record::*;
use crate::store::{Applied, CorruptRow, DueQuery, JobChange, JobQuery, Jobs, Page};
use crate::time::Timestamp;
use async_trait::async_trait;
use redis::aio::ConnectionManager;
use redis::{Script, ScriptInvocation};
use std::fmt;
use std::sync::Arc;

/// Schema version written by [`RedisStore::migrate`].
const SCHEMA: i64 = 1;
/// Runs deleted per script call of a purge, so a large purge never blocks the server
/// for long.
pub(super) const PURGE_CHUNK: usize = 500;
/// Upsert scripts (500 jobs each) in flight at once in a bulk write.
const SCRIPTS_IN_FLIGHT: usize = 4;

/// A complete [`JobStore`](crate::JobStore) on one Redis server (feature `redis`).
///
/// Jobs are hashes with a sorted set as the due index; every conditional write
/// (upsert, start, finish, claim, purge, reap) is one Lua script, so each batch is one
/// round trip and atomic on the server. The store's clock is Redis `TIME`. The key
/// layout is in the `scripts` module's docs; every key is under the prefix.
///
/// Durability is Redis's: run it with AOF (`appendonly yes`) when the run log and the
/// schedule must survive a restart. Scripts derive keys from the prefix, so the store
/// needs one Redis node (Redis Cluster only with every key in one hash slot, for
/// example a prefix `{jobs}:`).
#[derive(Clone)]
pub struct RedisStore {
    pub(super) conn: ConnectionManager,
    pub(super) prefix: Arc<str>,
    pub(super) scripts: Arc<Scripts>,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Connects to `url` (`redis://127.0.0.1:6379/0`) with a reconnecting connection
    /// manager; keys go under `jobwheel:`.
    pub async fn connect(url: &str) -> Result<Self> {
        RedisStore::connect_with_prefix(url, "jobwheel:").await
    }

    /// Like [`connect`](Self::connect), with keys under `prefix`.
    pub async fn connect_with_prefix(url: &str, prefix: &str) -> Result<Self> {
        RedisStore::open(url, prefix, super::CONNECT_TIMEOUT).await
    }

    /// Like [`connect_with_prefix`](Self::connect_with_prefix), failing after
    /// `timeout` (what [`BackendConfig::connect_timeout`](crate::BackendConfig) sets).
    pub(crate) async fn open(
        url: &str,
        prefix: &str,
        timeout: std::time::Duration,
    ) -> Result<Self> {
        let conn = super::open(url, timeout).await?;
        RedisStore::new(conn, prefix)
    }

    /// On the application's existing connection manager, with keys under `prefix`
    /// (1-100 printable ASCII characters without spaces).
    pub fn new(conn: ConnectionManager, prefix: &str) -> Result<Self> {
        super::check_prefix(prefix)?;
        Ok(RedisStore {
            conn,
            prefix: prefix.into(),
            scripts: Arc::new(Scripts::new()),
        })
    }

    /// The connection manager, for sharing with [`RedisLocks`](super::RedisLocks).
    pub fn connection(&self) -> &ConnectionManager {
        &self.conn
    }

    /// Leases on this store's connection, with keys under its prefix.
    pub fn locks(&self) -> super::RedisLocks {
        super::RedisLocks::checked(self.conn.clone().into(), &self.prefix)
    }

    /// Writes the schema version under the prefix. Idempotent; refuses a keyspace
    /// written by a newer jobwheel.
    pub async fn migrate(&self) -> Result<()> {
        let key = format!("{}schema", self.prefix);
        let mut conn = self.conn.clone();
        let (found,): (i64,) = redis::pipe()
            .atomic()
            .cmd("SET")
            .arg(&key)
            .arg(SCHEMA)
            .arg("NX")
            .ignore()
            .get(&key)
            .query_async(&mut conn)
            .await
            .map_err(redis_err("migrate"))?;
        if found > SCHEMA {
            return Err(Error::backend(
                NAME,
                "migrate",
                false,
                format!("keyspace schema {found} is newer than this jobwheel's {SCHEMA}"),
            ));
        }
        Ok(())
    }

    pub(super) fn key(&self, rest: &str) -> String {
        format!("{}{rest}", self.prefix)
    }

    /// An invocation with the prefix as `ARGV[1]`.
    pub(super) fn call<'a>(&self, script: &'a Script) -> ScriptInvocation<'a> {
        let mut call = script.prepare_invoke();
        call.arg(&*self.prefix);
        call
    }

    pub(super) async fn invoke<T: redis::FromRedisValue>(
        &self,
        call: ScriptInvocation<'_>,
        operation: &'static str,
    ) -> Result<T> {
        call.invoke_async(&mut self.conn.clone())
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

/// An optional instant as a script argument (empty when absent).
pub(super) fn flag_ms(t: Option<Timestamp>) -> String {
    ms(t)
}

fn ms(t: Option<Timestamp>) -> String {
    t.map(|t| t.as_millis().to_string()).unwrap_or_default()
}

/// Reads the `(code, a, b)` triples that the start and finish scripts return.
pub(super) fn triples(out: Vec<String>, n: usize, what: &'static str) -> Result<Vec<[String; 3]>> {
    if out.len() != 3 * n {
        return Err(corrupt(what, format!("{} values for {n} items", out.len())));
    }
    let mut it = out.into_iter();
    Ok((0..n)
        .map(|_| {
            [
                it.next().unwrap_or_default(),
                it.next().unwrap_or_default(),
                it.next().unwrap_or_default(),
            ]
        })
        .collect())
}

fn flag(b: bool) -> &'static str {
    if b { "1" } else { "0" }
}

impl RedisStore {
    /// An invocation of `script` with the prefix and the audit entry (empty fields
    /// for none) as `ARGV[1..6]`.
    pub(super) fn audited_call<'a>(
        &self,
        script: &'a Script,
        audit: Option<&AuditEntry>,
    ) -> ScriptInvocation<'a> {
        let mut call = self.call(script);
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

/// The fields of a job's next fire as script arguments (`None`: nothing to fire):
/// at, trigger, attempt, resume, context.
fn push_fire(call: &mut ScriptInvocation<'_>, fire: Option<&FireState>) {
    match fire {
        Some(f) => call
            .arg(f.at.as_millis())
            .arg(f.trigger.as_str())
            .arg(f.attempt)
            .arg(ms(f.resume_after))
            .arg(f.context.to_stored().unwrap_or_default()),
        None => call.arg("").arg("schedule").arg(0).arg("").arg(""),
    };
}

#[async_trait]
impl Jobs for RedisStore {
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
                .arg(r.token)
                .arg(&r.node)
                .arg(r.attempt)
                .arg(r.trigger.as_str())
                .arg(r.covers.map_or(String::new(), |c| c.fires.to_string()))
                .arg(
                    r.covers
                        .map_or(String::new(), |c| c.through.as_millis().to_string()),
                )
                .arg(r.context.to_stored().unwrap_or_default());
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
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        let mut call = self.call(&self.scripts.finish);
        call.arg(runs.len());
        for f in runs {
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
            call.arg(f.alarms.len());
            for a in &f.alarms {
                call.arg(encode(a)?);
            }
            call.arg(f.releases.len());
            for r in &f.releases {
                call.arg(r.job.as_str())
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
