//! Releases queued per job (see [`dependency`](crate::dependency)): written in a
//! finish's transaction, taken into a job's next fire under
//! [`rules::takes_release`], listed for the API.

use super::decode::SqlRow;
use super::{Dialect, Sql, SqlStore, marks, now_in};
use crate::dependency::{QueuedRelease, Release};
use crate::error::Result;
use crate::job::JobId;
use crate::record::TriggerKind;
use crate::store::rules;
use crate::time::Timestamp;
use std::collections::{HashMap, HashSet};

/// Queues `releases` in `tx` at `now`: those whose job exists, each unless its key
/// is queued (or kept taken: [`rules::WINDOW_KEPT`]), keyed by the upstream
/// instant or its window's start ([`UpstreamRun::key`](crate::dependency::UpstreamRun::key)). The released jobs' rows are locked first, so a removal of one (which
/// drops its queue) is either before (nothing queued) or after (dropped with it).
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
        "SELECT id FROM {} WHERE id IN ({}) ORDER BY id{}",
        d.t("jobs"),
        marks(ids.len()),
        D::FOR_UPDATE
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
        "{} {} (job_id, source, fire_at, upstream, released_at) VALUES {}{}",
        D::INSERT_IGNORE,
        d.t("releases"),
        vec!["(?, ?, ?, ?, ?)"; kept.len()].join(", "),
        D::ON_CONFLICT_IGNORE
    ));
    for r in kept {
        q = q
            .bind(r.job.as_str())
            .bind(r.from.job.as_str())
            .bind(r.from.key().as_millis())
            .bind(r.upstream.clone())
            .bind(now);
    }
    d.exec_in(tx, op, q).await.map(drop)
}

/// Lets each job of `ids` take the queued releases [`rules::pick_release`] picks, in
/// `tx`, when [`rules::takes_release`] allows at `now`; how many did.
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
        "SELECT id, definition, enabled, version, running_run, next_fire_at, next_trigger, last_token FROM {} WHERE id IN ({}) ORDER BY id{}",
        d.t("jobs"),
        marks(ids.len()),
        D::FOR_UPDATE
    ));
    q.args.extend(ids.iter().map(|id| (*id).into()));
    let at = Timestamp::from_millis(now);
    // The jobs that may take one, with the parents each waits for and whether it
    // joins by a window.
    let mut able: HashMap<String, (Vec<String>, bool)> = HashMap::new();
    for r in d.fetch_in(tx, op, q).await? {
        let state = super::decode::job_state(&r).map_err(e)?;
        let trigger = TriggerKind::parse(&r.text("next_trigger").map_err(e)?).unwrap_or_default();
        if rules::takes_release(Some(&state), trigger, at) {
            // A definition that cannot be read waits for no parent.
            let job = crate::job::Job::from_stored(&r.text("definition").map_err(e)?).ok();
            let after = job
                .as_ref()
                .map(|j| j.after().iter().map(ToString::to_string).collect())
                .unwrap_or_default();
            let windowed = job.is_some_and(|j| j.join_window().is_some());
            able.insert(r.text("id").map_err(e)?, (after, windowed));
        }
    }
    if able.is_empty() {
        return Ok(0);
    }
    let mut names: Vec<&str> = able.keys().map(String::as_str).collect();
    names.sort_unstable();
    let mut q = Sql::new(format!(
        "SELECT job_id, source, fire_at, upstream, released_at FROM {} WHERE job_id IN ({}) AND taken_at IS NULL ORDER BY job_id, released_at, source, fire_at{}",
        d.t("releases"),
        marks(names.len()),
        D::FOR_UPDATE
    ));
    q.args.extend(names.iter().map(|id| (*id).into()));
    // Per job: (source, fire_at, upstream JSON, released_at).
    let mut queued: HashMap<String, Vec<(String, i64, String, i64)>> = HashMap::new();
    for r in d.fetch_in(tx, op, q).await? {
        queued
            .entry(r.text("job_id").map_err(e)?)
            .or_default()
            .push((
                r.text("source").map_err(e)?,
                r.int("fire_at").map_err(e)?,
                r.text("upstream").map_err(e)?,
                r.int("released_at").map_err(e)?,
            ));
    }
    let mut taken = 0;
    for (job, rows) in queued {
        let (after, windowed) = &able[&job];
        let after: Vec<&str> = after.iter().map(String::as_str).collect();
        let keys: Vec<rules::QueuedKey<'_>> = rows
            .iter()
            .map(|(source, fire_at, _, released_at)| rules::QueuedKey {
                source,
                fire_at: Timestamp::from_millis(*fire_at),
                released_at: Timestamp::from_millis(*released_at),
            })
            .collect();
        let Some(picked) = rules::pick_release(&after, &keys) else {
            continue;
        };
        let upstream: Vec<&str> = picked.iter().map(|&i| rows[i].2.as_str()).collect();
        let update = Sql::new(format!(
            "UPDATE {} SET next_fire_at = ?, next_trigger = ?, attempt = 0, resume_after = NULL, next_context = ? WHERE id = ?",
            d.t("jobs")
        ))
        .bind(now)
        .bind(TriggerKind::Upstream.as_str())
        .bind(crate::dependency::context_of(&upstream))
        .bind(job.as_str());
        d.exec_in(tx, op, update).await?;
        for &i in &picked {
            // A job that joins by a window keeps what it took, marked, so a later
            // release of the window is not queued.
            let gone = if *windowed {
                Sql::new(format!(
                    "UPDATE {} SET taken_at = ? WHERE job_id = ? AND source = ? AND fire_at = ?",
                    d.t("releases")
                ))
                .bind(now)
            } else {
                Sql::new(format!(
                    "DELETE FROM {} WHERE job_id = ? AND source = ? AND fire_at = ?",
                    d.t("releases")
                ))
            };
            let gone = gone
                .bind(job.as_str())
                .bind(rows[i].0.as_str())
                .bind(rows[i].1);
            d.exec_in(tx, op, gone).await?;
        }
        taken += 1;
    }
    Ok(taken)
}

/// Puts back in the queue the releases of the jobs of `ids` whose next fire is a
/// taken release that has not started ([`rules::returns_release`]), before a change
/// replaces that fire; the rows are already locked by `tx`. Returns the jobs that
/// had one.
pub(crate) async fn requeue_in<D: Dialect>(
    d: &D,
    tx: &mut D::Tx,
    op: &'static str,
    ids: &[&str],
    now: i64,
) -> Result<Vec<String>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let e = |err| d.err(op, err);
    let mut q = Sql::new(format!(
        "SELECT id, running_run, next_trigger, next_context FROM {} WHERE id IN ({}) AND next_trigger = ?",
        d.t("jobs"),
        marks(ids.len())
    ));
    q.args.extend(ids.iter().map(|id| (*id).into()));
    q = q.bind(TriggerKind::Upstream.as_str());
    let mut releases = Vec::new();
    let mut had = Vec::new();
    for r in d.fetch_in(tx, op, q).await? {
        let trigger = TriggerKind::parse(&r.text("next_trigger").map_err(e)?).unwrap_or_default();
        if !rules::returns_release(r.opt_int("running_run").map_err(e)?.is_some(), trigger) {
            continue;
        }
        let id = r.text("id").map_err(e)?;
        let context = crate::record::FireContext::from_stored(
            r.opt_text("next_context").map_err(e)?.as_deref(),
        );
        let Ok(job) = JobId::new(&id) else { continue };
        for u in context.map(|c| c.upstream).unwrap_or_default() {
            releases.push(Release::new(job.clone(), u));
        }
        had.push(id);
    }
    // Their marks as taken go first, so they are queued again.
    for r in &releases {
        let unmark = Sql::new(format!(
            "DELETE FROM {} WHERE job_id = ? AND source = ? AND fire_at = ? AND taken_at IS NOT NULL",
            d.t("releases")
        ))
        .bind(r.job.as_str())
        .bind(r.from.job.as_str())
        .bind(r.from.key().as_millis());
        d.exec_in(tx, op, unmark).await?;
    }
    let all: Vec<&Release> = releases.iter().collect();
    queue_in(d, tx, op, &all, now).await?;
    Ok(had)
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
        // A release of an instant already alarmed is listed alarmed too.
        let t = d.t("releases");
        let mut q = Sql::new(format!(
            "SELECT r.job_id, r.upstream, r.released_at,
                    (SELECT MAX(a.alarmed_at) FROM {t} a WHERE a.job_id = r.job_id AND a.fire_at = r.fire_at AND a.taken_at IS NULL) AS alarmed_at
             FROM {t} r WHERE r.taken_at IS NULL"
        ));
        if let Some(j) = job {
            q.push(" AND r.job_id = ?", [j.as_str().into()]);
        }
        q.push(
            " ORDER BY r.released_at, r.source, r.fire_at LIMIT ?",
            [(limit.min(i64::MAX as usize) as i64).into()],
        );
        let e = |err| d.err(op, err);
        let mut out = Vec::new();
        for r in d.fetch(op, q).await? {
            let from = serde_json::from_str(&r.text("upstream").map_err(e)?);
            let (Ok(job), Ok(from)) = (JobId::new(r.text("job_id").map_err(e)?), from) else {
                continue;
            };
            out.push(QueuedRelease {
                job,
                from,
                released_at: Timestamp::from_millis(r.int("released_at").map_err(e)?),
                alarmed_at: r
                    .opt_int("alarmed_at")
                    .map_err(e)?
                    .map(Timestamp::from_millis),
            });
        }
        Ok(out)
    }

    /// [`Jobs::alarm_waiting`](crate::store::Jobs::alarm_waiting): the instant's
    /// rows locked, marked and the event queued in one transaction.
    pub(crate) async fn alarm_queued(
        &self,
        job: &JobId,
        fire_at: Timestamp,
        event: &crate::record::AlarmEvent,
    ) -> Result<bool> {
        super::retrying(|| async {
            let op = "alarm_waiting";
            let d = &self.d;
            let mut tx = d.begin(op).await?;
            let now = now_in(d, &mut tx, op).await?;
            let q = Sql::new(format!(
                "SELECT alarmed_at FROM {} WHERE job_id = ? AND fire_at = ? AND taken_at IS NULL ORDER BY source{}",
                d.t("releases"),
                D::FOR_UPDATE
            ))
            .bind(job.as_str())
            .bind(fire_at.as_millis());
            let rows = d.fetch_in(&mut tx, op, q).await?;
            let mut fresh = !rows.is_empty();
            for r in &rows {
                fresh &= r.opt_int("alarmed_at").map_err(|e| d.err(op, e))?.is_none();
            }
            if !fresh {
                d.commit(tx, op).await?;
                return Ok(false);
            }
            let mark = Sql::new(format!(
                "UPDATE {} SET alarmed_at = ? WHERE job_id = ? AND fire_at = ? AND taken_at IS NULL",
                d.t("releases")
            ))
            .bind(now)
            .bind(job.as_str())
            .bind(fire_at.as_millis());
            d.exec_in(&mut tx, op, mark).await?;
            super::outbox::insert_alarms(d, &mut tx, std::slice::from_ref(event), now).await?;
            d.commit(tx, op).await?;
            Ok(true)
        })
        .await
    }

    /// [`Jobs::take_releases`](crate::store::Jobs::take_releases): the jobs that
    /// can take one, found by the rule's own conditions, in one transaction.
    pub(crate) async fn take_queued(&self, limit: usize) -> Result<u64> {
        super::retrying(|| async {
            let op = "take_releases";
            let d = &self.d;
            let mut tx = d.begin(op).await?;
            let now = now_in(d, &mut tx, op).await?;
            // Marks of windows taken long enough ago are forgotten.
            let forget = Sql::new(format!(
                "DELETE FROM {} WHERE taken_at IS NOT NULL AND taken_at < ?",
                d.t("releases")
            ))
            .bind(now - rules::WINDOW_KEPT.as_millis() as i64);
            d.exec_in(&mut tx, op, forget).await?;
            let q = Sql::new(format!(
                "SELECT DISTINCT r.job_id FROM {} r JOIN {} j ON j.id = r.job_id
                 WHERE r.taken_at IS NULL AND j.enabled = ? AND j.running_run IS NULL
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
