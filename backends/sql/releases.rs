//! Releases queued per job (see [`dependency`](crate::dependency)): written in a
//! finish's transaction, taken into a job's next fire under
//! [`rules::takes_release`], listed for the API.

use super::decode::SqlRow;
use super::{Dialect, Sql, SqlStore, marks, now_in};
use crate::dependency::{QueuedRelease, Release};
use crate::error::Result;
use crate::job::JobId;
use crate::record::{FireContext, RunId, TriggerKind};
use crate::store::rules::{self, JobState};
use crate::time::Timestamp;
use std::collections::{HashMap, HashSet};

/// Queues `releases` in `tx` at `now`: those whose job exists, each unless its key
/// is queued.
pub(crate) async fn queue_in<D: Dialect>(
    d: &D,
    tx: &mut D::Tx,
    op: &'static str,
    releases: &[&Release],
    now: i64,
) -> Result<()> {
    if releases.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = releases.iter().map(|r| r.job.as_str()).collect();
    let mut q = Sql::new(format!(
        "SELECT id FROM {} WHERE id IN ({})",
        d.t("jobs"),
        marks(ids.len())
    ));
    q.args.extend(ids.iter().map(|id| (*id).into()));
    let mut exist = HashSet::new();
    for row in d.fetch_in(tx, op, q).await? {
        exist.insert(row.text("id").map_err(|e| d.err(op, e))?);
    }
    let kept: Vec<&&Release> = releases
        .iter()
        .filter(|r| exist.contains(r.job.as_str()))
        .collect();
    if kept.is_empty() {
        return Ok(());
    }
    let mut q = Sql::new(format!(
        "{} {} (job_id, source, fire_at, context, released_at) VALUES {}{}",
        D::INSERT_IGNORE,
        d.t("releases"),
        vec!["(?, ?, ?, ?, ?)"; kept.len()].join(", "),
        D::ON_CONFLICT_IGNORE
    ));
    for r in kept {
        q = q
            .bind(r.job.as_str())
            .bind(r.from.job.as_str())
            .bind(r.from.fire_at.as_millis())
            .bind(r.context.clone())
            .bind(now);
    }
    d.exec_in(tx, op, q).await.map(drop)
}

/// Lets each job of `ids` take its oldest queued release in `tx` when
/// [`rules::takes_release`] allows at `now`; how many did.
pub(crate) async fn take_in<D: Dialect>(
    d: &D,
    tx: &mut D::Tx,
    op: &'static str,
    ids: &[&str],
    now: i64,
) -> Result<u64> {
    if ids.is_empty() {
        return Ok(0);
    }
    let e = |err| d.err(op, err);
    let mut q = Sql::new(format!(
        "SELECT id, enabled, version, running_run, next_fire_at, next_trigger, last_token FROM {} WHERE id IN ({}) ORDER BY id{}",
        d.t("jobs"),
        marks(ids.len()),
        D::FOR_UPDATE
    ));
    q.args.extend(ids.iter().map(|id| (*id).into()));
    let at = Timestamp::from_millis(now);
    let mut able = Vec::new();
    for r in d.fetch_in(tx, op, q).await? {
        let state = JobState {
            enabled: r.flag("enabled").map_err(e)?,
            version: r.int("version").map_err(e)? as u64,
            next_fire_at: r
                .opt_int("next_fire_at")
                .map_err(e)?
                .map(Timestamp::from_millis),
            running: r.opt_int("running_run").map_err(e)?.map(RunId),
            last_token: r.int("last_token").map_err(e)? as u64,
        };
        let trigger = TriggerKind::parse(&r.text("next_trigger").map_err(e)?).unwrap_or_default();
        if rules::takes_release(Some(&state), trigger, at) {
            able.push(r.text("id").map_err(e)?);
        }
    }
    if able.is_empty() {
        return Ok(0);
    }
    let mut q = Sql::new(format!(
        "SELECT job_id, source, fire_at, context FROM {} WHERE job_id IN ({}) ORDER BY job_id, released_at, source, fire_at{}",
        d.t("releases"),
        marks(able.len()),
        D::FOR_UPDATE
    ));
    q.args.extend(able.iter().map(|id| id.as_str().into()));
    let mut oldest: HashMap<String, (String, i64, String)> = HashMap::new();
    for r in d.fetch_in(tx, op, q).await? {
        let job = r.text("job_id").map_err(e)?;
        if let std::collections::hash_map::Entry::Vacant(slot) = oldest.entry(job) {
            slot.insert((
                r.text("source").map_err(e)?,
                r.int("fire_at").map_err(e)?,
                r.text("context").map_err(e)?,
            ));
        }
    }
    let mut taken = 0;
    for (job, (source, fire_at, context)) in oldest {
        // The context is written as the store keeps a fire's: JSON the next read
        // decodes leniently.
        let update = Sql::new(format!(
            "UPDATE {} SET next_fire_at = ?, next_trigger = ?, attempt = 0, resume_after = NULL, next_context = ? WHERE id = ?",
            d.t("jobs")
        ))
        .bind(now)
        .bind(TriggerKind::Upstream.as_str())
        .bind(context)
        .bind(job.as_str());
        d.exec_in(tx, op, update).await?;
        let delete = Sql::new(format!(
            "DELETE FROM {} WHERE job_id = ? AND source = ? AND fire_at = ?",
            d.t("releases")
        ))
        .bind(job.as_str())
        .bind(source)
        .bind(fire_at);
        d.exec_in(tx, op, delete).await?;
        taken += 1;
    }
    Ok(taken)
}

/// Of the jobs `ids`, those with a release queued.
pub(crate) async fn queued_in<D: Dialect>(
    d: &D,
    tx: &mut D::Tx,
    op: &'static str,
    ids: &[&str],
) -> Result<Vec<String>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut q = Sql::new(format!(
        "SELECT DISTINCT job_id FROM {} WHERE job_id IN ({})",
        d.t("releases"),
        marks(ids.len())
    ));
    q.args.extend(ids.iter().map(|id| (*id).into()));
    d.fetch_in(tx, op, q)
        .await?
        .iter()
        .map(|r| r.text("job_id").map_err(|e| d.err(op, e)))
        .collect()
}

impl<D: Dialect> SqlStore<D> {
    /// [`Jobs::releases`](crate::store::Jobs::releases).
    pub(crate) async fn queued_releases(
        &self,
        job: Option<&JobId>,
        limit: usize,
    ) -> Result<Vec<QueuedRelease>> {
        let op = "releases";
        let d = &self.d;
        let mut q = Sql::new(format!(
            "SELECT job_id, context, released_at FROM {}",
            d.t("releases")
        ));
        if let Some(j) = job {
            q.push(" WHERE job_id = ?", [j.as_str().into()]);
        }
        q.push(
            " ORDER BY released_at, source, fire_at LIMIT ?",
            [(limit.min(i64::MAX as usize) as i64).into()],
        );
        let e = |err| d.err(op, err);
        let mut out = Vec::new();
        for r in d.fetch(op, q).await? {
            let ctx = FireContext::from_stored(r.opt_text("context").map_err(e)?.as_deref());
            let (Ok(job), Some(from)) = (
                JobId::new(r.text("job_id").map_err(e)?),
                ctx.ok().and_then(|c| c.upstream.into_iter().next()),
            ) else {
                continue;
            };
            out.push(QueuedRelease {
                job,
                from,
                released_at: Timestamp::from_millis(r.int("released_at").map_err(e)?),
            });
        }
        Ok(out)
    }

    /// [`Jobs::take_releases`](crate::store::Jobs::take_releases): the jobs that
    /// can take one, found by the rule's own conditions, in one transaction.
    pub(crate) async fn take_queued(&self, limit: usize) -> Result<u64> {
        super::retrying(|| async {
            let op = "take_releases";
            let d = &self.d;
            let mut tx = d.begin(op).await?;
            let now = now_in(d, &mut tx, op).await?;
            let q = Sql::new(format!(
                "SELECT DISTINCT r.job_id FROM {} r JOIN {} j ON j.id = r.job_id
                 WHERE j.enabled = ? AND j.running_run IS NULL
                   AND (j.next_fire_at IS NULL OR (j.next_trigger = ? AND j.next_fire_at > ?))
                 ORDER BY r.job_id LIMIT ?",
                d.t("releases"),
                d.t("jobs"),
            ))
            .bind(true)
            .bind(TriggerKind::Schedule.as_str())
            .bind(now)
            .bind(limit.min(i64::MAX as usize) as i64);
            let ids: Vec<String> = d
                .fetch_in(&mut tx, op, q)
                .await?
                .iter()
                .map(|r| r.text("job_id").map_err(|e| d.err(op, e)))
                .collect::<Result<_>>()?;
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            let taken = take_in(d, &mut tx, op, &ids, now).await?;
            d.commit(tx, op).await?;
            Ok(taken)
        })
        .await
    }
}
