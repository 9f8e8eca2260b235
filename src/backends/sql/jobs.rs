//! [`Jobs`] for [`SqlStore`]: definitions, the due scan, starts and finishes.

use super::decode::SqlRow;
use super::decode::{self, due_fire, encode};
use super::{Dialect, Sql, SqlStore, now_in};
use crate::error::{Error, Result};
use crate::job::{Job, JobId};
use crate::record::*;
use crate::store::JobsExt as _;
use crate::store::{Applied, DueQuery, JobChange, JobQuery, Jobs, Page};
use crate::time::Timestamp;
use async_trait::async_trait;

impl<D: Dialect> SqlStore<D> {
    /// Creates or replaces a job in one transaction: insert unless the id exists,
    /// otherwise compare the stored definition and update when it differs.
    async fn upsert_job(
        &self,
        job: &Job,
        next: Option<Timestamp>,
        context: &FireContext,
        only_if_absent: bool,
        audit: Option<&AuditEntry>,
    ) -> Result<UpsertOutcome> {
        let op = "upsert";
        let stored_context = context.to_stored();
        let (d, jobs) = (&self.d, self.d.t("jobs"));
        let def = encode(D::NAME, job)?;
        let next = next.map(Timestamp::as_millis);
        let mut tx = d.begin(op).await?;
        let now = now_in(d, &mut tx, op).await?;
        let insert = Sql::new(format!(
            "{} {jobs} (id, definition, version, enabled, next_fire_at, next_trigger, attempt, resume_after,
             last_token, running_run, created_at, updated_at, next_context)
             VALUES (?, ?, 1, ?, ?, 'schedule', 0, NULL, 0, NULL, ?, ?, ?){}",
            D::INSERT_IGNORE,
            D::ON_CONFLICT_IGNORE
        ))
        .bind(job.id().as_str())
        .bind(def.as_str())
        .bind(job.enabled())
        .bind(next)
        .bind(now)
        .bind(now)
        .bind(stored_context.clone());
        let outcome = if d.exec_in(&mut tx, op, insert).await? == 1 {
            UpsertOutcome::Created
        } else if only_if_absent {
            UpsertOutcome::Kept
        } else {
            let read = Sql::new(format!(
                "SELECT definition FROM {jobs} WHERE id = ?{}",
                D::FOR_UPDATE
            ))
            .bind(job.id().as_str());
            let rows = d.fetch_in(&mut tx, op, read).await?;
            let stored = match rows.first() {
                Some(r) => Some(r.text("definition").map_err(|e| d.err(op, e))?),
                None => None,
            };
            if stored.as_deref() == Some(def.as_str()) {
                UpsertOutcome::Unchanged
            } else {
                let ids = [job.id().as_str()];
                let back = super::releases::requeue_in(d, &mut tx, op, &ids, now).await?;
                let update = self.replace_sql(job, &def, next, stored_context, now);
                d.exec_in(&mut tx, op, update).await?;
                if !back.is_empty() {
                    super::releases::take_in(d, &mut tx, op, &ids, now).await?;
                }
                UpsertOutcome::Updated
            }
        };
        if matches!(outcome, UpsertOutcome::Created | UpsertOutcome::Updated) {
            self.audit_in(&mut tx, op, audit).await?;
        }
        d.commit(tx, op).await?;
        Ok(outcome)
    }

    /// Appends `audit`, when given, in `tx`.
    async fn audit_in(
        &self,
        tx: &mut D::Tx,
        op: &'static str,
        audit: Option<&AuditEntry>,
    ) -> Result<()> {
        if let Some(entry) = audit {
            self.d.exec_in(tx, op, self.audit_insert(entry)).await?;
        }
        Ok(())
    }

    /// `remove` in one transaction with its audit entry.
    async fn remove_job(&self, id: &JobId, audit: Option<&AuditEntry>) -> Result<bool> {
        let op = "remove";
        let q =
            Sql::new(format!("DELETE FROM {} WHERE id = ?", self.d.t("jobs"))).bind(id.as_str());
        let mut tx = self.d.begin(op).await?;
        // A run in progress goes into the run log, where its finish records it (the
        // row locked first: a finish of that run waits for the removal, then finds
        // its run row).
        let lock = Sql::new(format!(
            "SELECT id FROM {} WHERE id = ?{}",
            self.d.t("jobs"),
            D::FOR_UPDATE
        ))
        .bind(id.as_str());
        self.d.fetch_in(&mut tx, op, lock).await?;
        super::running::move_out(&self.d, &mut tx, op, &[id.as_str()]).await?;
        let existed = self.d.exec_in(&mut tx, op, q).await? > 0;
        let drop_queue = Sql::new(format!(
            "DELETE FROM {} WHERE job_id = ?",
            self.d.t("releases")
        ))
        .bind(id.as_str());
        self.d.exec_in(&mut tx, op, drop_queue).await?;
        if existed {
            self.audit_in(&mut tx, op, audit).await?;
        }
        self.d.commit(tx, op).await?;
        Ok(existed)
    }

    /// Pause (`next` unused) or resume from `next`, with the audit entry.
    async fn set_enabled_job(
        &self,
        id: &JobId,
        enabled: bool,
        next: Option<&FireState>,
        audit: Option<&AuditEntry>,
    ) -> Result<()> {
        let op = "set_enabled";
        let d = &self.d;
        let mut tx = d.begin(op).await?;
        let now = now_in(d, &mut tx, op).await?;
        let job = Job::from_stored(&self.lock_job(&mut tx, op, id).await?).map_err(|e| {
            Error::Corrupt {
                what: "job",
                id: id.to_string(),
                reason: e.to_string(),
            }
        })?;
        if job.enabled() != enabled {
            let mut q = Sql::new(format!(
                "UPDATE {} SET definition = ?, enabled = ?, version = version + 1, updated_at = ?",
                d.t("jobs")
            ))
            .bind(encode(D::NAME, &job.with_enabled(enabled))?)
            .bind(enabled)
            .bind(now);
            let ids = [id.as_str()];
            let back = if enabled {
                q.push(", ", []);
                push_fire(&mut q, next);
                super::releases::requeue_in(d, &mut tx, op, &ids, now).await?;
                // A resumed job takes a release queued while it was paused at once.
                vec![id.to_string()]
            } else {
                // A paused job holds no taken release (see rules::returns_release).
                super::releases::requeue_in(d, &mut tx, op, &ids, now).await?;
                q.push(
                    ", next_fire_at = CASE WHEN next_trigger = ? THEN NULL ELSE next_fire_at END,
                     next_context = CASE WHEN next_trigger = ? THEN NULL ELSE next_context END,
                     next_trigger = CASE WHEN next_trigger = ? THEN 'schedule' ELSE next_trigger END",
                    [
                        TriggerKind::Upstream.as_str().into(),
                        TriggerKind::Upstream.as_str().into(),
                        TriggerKind::Upstream.as_str().into(),
                    ],
                );
                Vec::new()
            };
            q.push(" WHERE id = ?", [id.as_str().into()]);
            d.exec_in(&mut tx, op, q).await?;
            if !back.is_empty() {
                super::releases::take_in(d, &mut tx, op, &ids, now).await?;
            }
        }
        self.audit_in(&mut tx, op, audit).await?;
        d.commit(tx, op).await
    }

    /// `trigger`: the job's next fire becomes `fire`, with the audit entry.
    async fn trigger_job(
        &self,
        id: &JobId,
        fire: &FireState,
        audit: Option<&AuditEntry>,
    ) -> Result<()> {
        let op = "trigger";
        let d = &self.d;
        let mut tx = d.begin(op).await?;
        self.lock_job(&mut tx, op, id).await?;
        let now = now_in(d, &mut tx, op).await?;
        super::releases::requeue_in(d, &mut tx, op, &[id.as_str()], now).await?;
        let mut q = Sql::new(format!("UPDATE {} SET ", d.t("jobs")));
        push_fire(&mut q, Some(fire));
        q.push(" WHERE id = ?", [id.as_str().into()]);
        d.exec_in(&mut tx, op, q).await?;
        self.audit_in(&mut tx, op, audit).await?;
        d.commit(tx, op).await
    }

    /// The update that replaces a stored job's definition (`def`, encoded) and resets
    /// its scheduling state: version bumped, next fire `next` carrying `context`
    /// (stored form), trigger `schedule`.
    fn replace_sql(
        &self,
        job: &Job,
        def: &str,
        next: Option<i64>,
        context: Option<String>,
        now: i64,
    ) -> Sql {
        Sql::new(format!(
            "UPDATE {} SET definition = ?, enabled = ?, version = version + 1, next_fire_at = ?,
             next_trigger = 'schedule', attempt = 0, resume_after = NULL, next_context = ?,
             updated_at = ? WHERE id = ?",
            self.d.t("jobs")
        ))
        .bind(def)
        .bind(job.enabled())
        .bind(next)
        .bind(context)
        .bind(now)
        .bind(job.id().as_str())
    }

    /// Upserts a batch of distinct jobs in one transaction: one `SELECT … FOR UPDATE`
    /// of the ids, one multi-row insert of the new ones, one update per changed one.
    /// `Ok(None)` when a concurrent writer inserted one of the new ids meanwhile (the
    /// transaction is rolled back; the caller falls back to one upsert per job).
    async fn upsert_batch(
        &self,
        jobs: &[(Job, Option<Timestamp>)],
    ) -> Result<Option<Vec<UpsertOutcome>>> {
        let op = "upsert_many";
        let (d, table) = (&self.d, self.d.t("jobs"));
        let defs = jobs
            .iter()
            .map(|(job, _)| encode(D::NAME, job))
            .collect::<Result<Vec<_>>>()?;
        let mut tx = d.begin(op).await?;
        let now = now_in(d, &mut tx, op).await?;
        let mut read = Sql::new(format!(
            "SELECT id, definition FROM {table} WHERE id IN ({}){}",
            super::marks(jobs.len()),
            D::FOR_UPDATE
        ));
        for (job, _) in jobs {
            read = read.bind(job.id().as_str());
        }
        let mut stored = std::collections::HashMap::new();
        for r in d.fetch_in(&mut tx, op, read).await? {
            let id = r.text("id").map_err(|e| d.err(op, e))?;
            let def = r.text("definition").map_err(|e| d.err(op, e))?;
            stored.insert(id, def);
        }
        let mut outcomes = Vec::with_capacity(jobs.len());
        let mut fresh = Vec::new();
        for (i, (job, next)) in jobs.iter().enumerate() {
            let next = next.map(Timestamp::as_millis);
            match stored.get(job.id().as_str()) {
                None => {
                    fresh.push((job, next, &defs[i]));
                    outcomes.push(UpsertOutcome::Created);
                }
                Some(def) if *def == defs[i] => outcomes.push(UpsertOutcome::Unchanged),
                Some(_) => {
                    let ids = [job.id().as_str()];
                    let back = super::releases::requeue_in(d, &mut tx, op, &ids, now).await?;
                    let update = self.replace_sql(job, &defs[i], next, None, now);
                    d.exec_in(&mut tx, op, update).await?;
                    if !back.is_empty() {
                        super::releases::take_in(d, &mut tx, op, &ids, now).await?;
                    }
                    outcomes.push(UpsertOutcome::Updated);
                }
            }
        }
        if !fresh.is_empty() {
            let mut insert = Sql::new(format!(
                "{} {table} (id, definition, version, enabled, next_fire_at, next_trigger, attempt,
                 last_token, created_at, updated_at) VALUES {}{}",
                D::INSERT_IGNORE,
                super::value_rows(10, fresh.len()),
                D::ON_CONFLICT_IGNORE
            ));
            for (job, next, def) in &fresh {
                insert = insert
                    .bind(job.id().as_str())
                    .bind(def.as_str())
                    .bind(1i64)
                    .bind(job.enabled())
                    .bind(*next)
                    .bind("schedule")
                    .bind(0i64)
                    .bind(0i64)
                    .bind(now)
                    .bind(now);
            }
            if d.exec_in(&mut tx, op, insert).await? != fresh.len() as u64 {
                return Ok(None);
            }
        }
        d.commit(tx, op).await?;
        Ok(Some(outcomes))
    }

    /// One chunk of [`upsert_many`](Jobs::upsert_many): one transaction, or one per
    /// job when it raced with another writer.
    async fn upsert_chunk(&self, chunk: &[(Job, Option<Timestamp>)]) -> Result<Vec<UpsertOutcome>> {
        if let Some(outcomes) = super::retrying(|| self.upsert_batch(chunk)).await? {
            return Ok(outcomes);
        }
        let mut out = Vec::with_capacity(chunk.len());
        for (job, next) in chunk {
            out.push(self.upsert(job, *next).await?);
        }
        Ok(out)
    }

    /// Locks a job's row for the rest of `tx` and returns its definition, or
    /// `NotFound`.
    async fn lock_job(&self, tx: &mut D::Tx, op: &'static str, id: &JobId) -> Result<String> {
        let read = Sql::new(format!(
            "SELECT definition FROM {} WHERE id = ?{}",
            self.d.t("jobs"),
            D::FOR_UPDATE
        ))
        .bind(id.as_str());
        let rows = self.d.fetch_in(tx, op, read).await?;
        let row = rows.first().ok_or_else(|| Error::not_found("job", id))?;
        row.text("definition").map_err(|e| self.d.err(op, e))
    }
}

/// Jobs per statement of a dialect's one-statement insert of absent jobs; parts run
/// `BULK_WRITERS` at a time.
const ABSENT_PART: usize = 2_500;

#[async_trait]
impl<D: Dialect> Jobs for SqlStore<D> {
    fn name(&self) -> &'static str {
        D::NAME
    }

    async fn now(&self) -> Result<Timestamp> {
        self.now_ms().await.map(Timestamp::from_millis)
    }

    async fn schema(&self) -> Result<Option<crate::store::SchemaVersion>> {
        let q = Sql::new(format!(
            "SELECT MAX(version) AS v FROM {} WHERE success",
            self.d.t("migrations")
        ));
        let known = D::MIGRATIONS.iter().map(|m| m.0).max().unwrap_or(0);
        let rows = match self.d.fetch("schema", q).await {
            Ok(rows) => rows,
            // Never migrated: the migrations table is not there yet.
            Err(e) if missing_table(&e) => {
                return Ok(Some(crate::store::SchemaVersion { found: None, known }));
            }
            Err(e) => return Err(e),
        };
        let found = match rows.first() {
            Some(r) => decode::col(D::NAME, "schema", r.opt_int("v"))?,
            None => None,
        };
        Ok(Some(crate::store::SchemaVersion { found, known }))
    }

    async fn apply(&self, change: &JobChange, audit: Option<&AuditEntry>) -> Result<Applied> {
        match change {
            JobChange::Upsert { job, next, context } => {
                super::retrying(|| self.upsert_job(job, *next, context, false, audit))
                    .await
                    .map(Applied::Upsert)
            }
            JobChange::Create { job, next, context } => {
                super::retrying(|| self.upsert_job(job, *next, context, true, audit))
                    .await
                    .map(Applied::Upsert)
            }
            JobChange::Remove { id } => self.remove_job(id, audit).await.map(Applied::Removed),
            JobChange::Pause { id } => self
                .set_enabled_job(id, false, None, audit)
                .await
                .map(|()| Applied::Done),
            JobChange::Resume { id, next } => self
                .set_enabled_job(id, true, next.as_ref(), audit)
                .await
                .map(|()| Applied::Done),
            JobChange::Trigger { id, fire } => self
                .trigger_job(id, fire, audit)
                .await
                .map(|()| Applied::Done),
        }
    }

    async fn upsert_many(&self, jobs: &[(Job, Option<Timestamp>)]) -> Result<Vec<UpsertOutcome>> {
        use futures::{StreamExt, TryStreamExt};
        // 500 rows of 10 columns per statement: well under every server's limit of
        // bound parameters, and short transactions (2,000 measured no faster). The
        // chunks' ids are distinct, so their transactions run side by side without
        // waiting for each other's row locks; `buffered` keeps the outcomes in order.
        type Chunk<'a> = std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<Vec<UpsertOutcome>>> + Send + 'a>,
        >;
        // Where the dialect inserts absent jobs in one statement, the batch goes in
        // through it (parts side by side) and only the jobs already stored go
        // through the chunks (compared, and replaced when changed).
        let parts: Vec<_> = jobs
            .chunks(ABSENT_PART)
            .enumerate()
            .map(|(k, part)| async move {
                let defs = part
                    .iter()
                    .map(|(job, _)| encode(D::NAME, job))
                    .collect::<Result<Vec<_>>>()?;
                let ids = super::retrying(|| self.d.insert_absent(part, &defs)).await?;
                Ok::<_, Error>(ids.map(|ids| {
                    ids.into_iter()
                        .map(|i| i + k * ABSENT_PART)
                        .collect::<Vec<_>>()
                }))
            })
            .collect();
        let inserted: Vec<Option<Vec<usize>>> = if D::INSERTS_ABSENT {
            futures::stream::iter(parts)
                .buffered(D::BULK_WRITERS)
                .try_collect()
                .await?
        } else {
            vec![None]
        };
        let new_rows: usize = inserted.iter().flatten().map(Vec::len).sum();
        if new_rows > 0 {
            // A failure here costs only the plan of the next due scans.
            if let Err(e) = self.d.after_bulk_insert(new_rows).await {
                tracing::debug!(error = %e, "the job table's statistics were not refreshed");
            }
        }
        let mut created = vec![false; jobs.len()];
        let stored: std::borrow::Cow<'_, [(Job, Option<Timestamp>)]> =
            if inserted.iter().all(Option::is_some) {
                for i in inserted.into_iter().flatten().flatten() {
                    created[i] = true;
                }
                jobs.iter()
                    .zip(&created)
                    .filter(|(_, new)| !**new)
                    .map(|(j, _)| j.clone())
                    .collect::<Vec<_>>()
                    .into()
            } else {
                jobs.into()
            };
        let chunks: Vec<Chunk<'_>> = stored
            .chunks(500)
            .map(|chunk| Box::pin(self.upsert_chunk(chunk)) as Chunk<'_>)
            .collect();
        let outcomes: Vec<Vec<UpsertOutcome>> = futures::stream::iter(chunks)
            .buffered(D::BULK_WRITERS)
            .try_collect()
            .await?;
        let mut rest = outcomes.concat().into_iter();
        created
            .into_iter()
            .map(|new| match new {
                true => Ok(UpsertOutcome::Created),
                false => rest.next().ok_or_else(|| {
                    Error::backend(D::NAME, "upsert_many", false, "an outcome is missing")
                }),
            })
            .collect()
    }

    async fn get(&self, id: &JobId) -> Result<Option<JobRecord>> {
        let q =
            Sql::new(format!("SELECT * FROM {} WHERE id = ?", self.d.t("jobs"))).bind(id.as_str());
        let rows = self.d.fetch("get", q).await?;
        rows.first()
            .map(|r| decode::job_record(D::NAME, r))
            .transpose()
    }

    async fn list(&self, query: &JobQuery) -> Result<Page<JobRecord>> {
        let q = Sql::new(format!(
            "SELECT * FROM {} WHERE id > ? ORDER BY id LIMIT ?",
            self.d.t("jobs")
        ))
        .bind(query.after.as_ref().map_or("", JobId::as_str))
        .bind(query.effective_limit() as i64);
        let rows = self.d.fetch("list", q).await?;
        decode::job_page(D::NAME, &rows)
    }

    async fn due(&self, query: &DueQuery) -> Result<Page<DueFire>> {
        // A job whose lease another holder has in its row is not claimable.
        let mut q = Sql::new(format!(
            "SELECT * FROM {} WHERE {} AND next_fire_at <= ? AND lease_until <= {}",
            self.d.t("jobs"),
            D::DUE,
            D::NOW_MS
        ))
        .bind(query.until.as_millis());
        if let Some(k) = &query.after {
            self.d.keyset(&mut q, k);
        }
        q.push(
            " ORDER BY next_fire_at, id LIMIT ?",
            [(crate::limits::page(query.limit) as i64).into()],
        );
        let rows = self.d.fetch("due", q).await?;
        let page = decode::job_page(D::NAME, &rows)?;
        Ok(Page {
            items: page.items.into_iter().filter_map(due_fire).collect(),
            corrupt: page.corrupt,
        })
    }

    async fn start_runs(&self, runs: &[StartRun]) -> Result<Vec<StartOutcome>> {
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        self.d.start_runs(runs).await
    }

    async fn finish_runs(&self, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>> {
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        self.d.finish_runs(runs).await
    }

    async fn releases(
        &self,
        job: Option<&JobId>,
        limit: usize,
    ) -> Result<Vec<crate::dependency::QueuedRelease>> {
        self.queued_releases(job, limit).await
    }

    async fn take_releases(&self, limit: usize) -> Result<u64> {
        self.take_queued(limit).await
    }

    async fn alarm_waiting(
        &self,
        job: &JobId,
        fire_at: Timestamp,
        event: &crate::record::AlarmEvent,
    ) -> Result<bool> {
        self.alarm_queued(job, fire_at, event).await
    }

    fn job_leases(&self) -> Option<&dyn crate::store::JobLeases> {
        Some(self)
    }

    async fn queue_releases(
        &self,
        releases: &[crate::dependency::Release],
        audit: Option<&AuditEntry>,
    ) -> Result<()> {
        super::retrying(|| async {
            let op = "queue_releases";
            let d = &self.d;
            let mut tx = d.begin(op).await?;
            let now = super::now_in(d, &mut tx, op).await?;
            let all: Vec<&crate::dependency::Release> = releases.iter().collect();
            super::releases::queue_in(d, &mut tx, op, &all, now).await?;
            let mut ids: Vec<&str> = releases.iter().map(|r| r.job.as_str()).collect();
            ids.sort_unstable();
            ids.dedup();
            super::releases::take_in(d, &mut tx, op, &ids, now).await?;
            self.audit_in(&mut tx, op, audit).await?;
            d.commit(tx, op).await
        })
        .await
    }

    async fn drop_releases(
        &self,
        job: &JobId,
        fire_at: Timestamp,
        audit: Option<&AuditEntry>,
    ) -> Result<u64> {
        let op = "drop_releases";
        let d = &self.d;
        let mut tx = d.begin(op).await?;
        let q = Sql::new(format!(
            "DELETE FROM {} WHERE job_id = ? AND fire_at = ? AND taken_at IS NULL",
            d.t("releases")
        ))
        .bind(job.as_str())
        .bind(fire_at.as_millis());
        let n = d.exec_in(&mut tx, op, q).await?;
        if n > 0 {
            self.audit_in(&mut tx, op, audit).await?;
        }
        d.commit(tx, op).await?;
        Ok(n)
    }
}

/// Appends the columns of a job's next fire (`None`: nothing to fire) to an
/// `UPDATE … SET`: instant, trigger, attempt, resume point and context.
pub(super) fn push_fire(q: &mut Sql, fire: Option<&FireState>) {
    q.push(
        "next_fire_at = ?, next_trigger = ?, attempt = ?, resume_after = ?, next_context = ?",
        decode::fire_args(fire),
    );
}

/// Whether `e` is the database saying a table does not exist (PostgreSQL's
/// `42P01`, MySQL's `42S02`, SQLite's "no such table").
fn missing_table(e: &Error) -> bool {
    let Error::Backend { source, .. } = e else {
        return false;
    };
    let Some(sqlx::Error::Database(d)) = source.downcast_ref::<sqlx::Error>() else {
        return false;
    };
    matches!(d.code().as_deref(), Some("42P01" | "42S02"))
        || d.message().starts_with("no such table")
}
