//! The operations on runs and alarm events: kill, and an operator's retry and
//! discard of an alarm.

use super::{Actor, Ops, conflict, entry};
use crate::error::{Error, Result};
use crate::job::Job;
use crate::record::AuditAction;
use crate::record::{AlarmId, AlarmRecord, LogLine, RunId, RunRecord, RunStatus};
use crate::store::{AlarmChange, AlarmQuery, RunQuery};
use async_trait::async_trait;

/// What stops a run where it executes: the executor instances of its group (the
/// admin API, and the command line with the group's secret), or the node that runs
/// it (a scheduler's own handlers).
#[async_trait]
pub trait RunKiller: Send + Sync + 'static {
    /// Asks whatever executes `run` (of `job`, when it still exists) to stop it.
    /// Returns where it was stopped (instance addresses, node ids); empty when
    /// nothing reachable was running it.
    async fn kill(&self, run: &RunRecord, job: Option<&Job>) -> Result<Vec<String>>;
}

impl Ops {
    /// Run `id` as `actor` may see it.
    ///
    /// Errors: [`Error::NotFound`], also for a run of a job in a group the actor is
    /// not limited to.
    pub async fn run(&self, actor: &Actor, id: RunId) -> Result<RunRecord> {
        let run = self
            .store
            .runs(
                &RunQuery::new()
                    .before(RunId(id.0.saturating_add(1)))
                    .limit(1),
            )
            .await?
            .into_iter()
            .find(|r| r.id == id)
            .ok_or_else(|| Error::not_found("run", id))?;
        if !self.sight(actor).run(&run).await? {
            return Err(Error::not_found("run", id));
        }
        Ok(run)
    }

    /// Run `id` as `actor` may see it, with up to `limit` (at most 1,000) of its
    /// stored log lines from offset `offset` on: a local run's handler's events
    /// ([`run_log_layer`](crate::run_log_layer)) and [`RunLogger`](crate::RunLogger)
    /// lines; a remote run's lines as they came back from its executor instance
    /// (with each result poll while it runs, all of them with its result).
    ///
    /// Errors: as [`run`](Self::run).
    pub async fn run_lines(
        &self,
        actor: &Actor,
        id: RunId,
        offset: u64,
        limit: usize,
    ) -> Result<(RunRecord, Vec<LogLine>)> {
        let run = self.run(actor, id).await?;
        let lines = self.store.lines(id, offset, limit.clamp(1, 1000)).await?;
        Ok((run, lines))
    }

    /// Kills run `id` where it executes, audited as `run.kill`. Returns where it was
    /// stopped.
    ///
    /// Errors: [`Error::NotFound`]; [`Error::Conflict`] when the run is not running,
    /// when nothing reachable runs it, or when these operations have no way to reach
    /// executors ([`Ops::killer`]).
    pub async fn kill(&self, actor: &Actor, id: RunId) -> Result<Vec<String>> {
        let run = self.run(actor, id).await?;
        if run.status != RunStatus::Running {
            return Err(conflict(
                "run",
                id,
                format!("it is {}", run.status.as_str()),
            ));
        }
        let Some(killer) = &self.killer else {
            return Err(conflict(
                "run",
                id,
                "this door cannot reach the executor that runs it: kill it through a server",
            ));
        };
        let job = self.store.get(&run.job_id).await?;
        let killed = killer.kill(&run, job.as_ref().map(|r| &*r.job)).await?;
        let audit = entry(
            actor,
            AuditAction::RunKill,
            &id.to_string(),
            Some(serde_json::json!({"status": "running", "job": run.job_id})),
            Some(serde_json::json!({"killed_on": killed})),
        );
        self.store.append_audit(&audit).await?;
        if killed.is_empty() {
            return Err(conflict("run", id, "no live executor is running it"));
        }
        Ok(killed)
    }

    /// Alarm event `id` as `actor` may see it. Errors: [`Error::NotFound`].
    pub async fn alarm(&self, actor: &Actor, id: AlarmId) -> Result<AlarmRecord> {
        let found = self
            .store
            .alarms(&AlarmQuery::new(1).id(id))
            .await?
            .into_iter()
            .next();
        match found {
            Some(a) if self.sight(actor).alarm(&a).await? => Ok(a),
            _ => Err(Error::not_found("alarm", id.0)),
        }
    }

    /// An operator's retry (deliver it again now) or discard (never deliver it) of
    /// alarm event `id`, audited as `alarm.retry` / `alarm.discard`.
    ///
    /// Errors: [`Error::NotFound`]; [`Error::Conflict`] when the event is neither
    /// pending nor failed (nothing written).
    pub async fn alarm_change(&self, actor: &Actor, change: AlarmChange) -> Result<()> {
        let id = change.id();
        let before = self.alarm(actor, id).await?;
        let (action, status) = match change {
            AlarmChange::Retry(_) => (AuditAction::AlarmRetry, "pending"),
            _ => (AuditAction::AlarmDiscard, "failed"),
        };
        let audit = entry(
            actor,
            action,
            &id.0.to_string(),
            Some(serde_json::json!({"status": before.status.as_str(), "job": before.event.job_id})),
            Some(serde_json::json!({"status": status})),
        );
        if self.store.apply_alarm(change, Some(&audit)).await? {
            Ok(())
        } else {
            Err(conflict(
                "alarm",
                id.0,
                format!(
                    "it is {}: only pending or failed events are retried or discarded",
                    before.status.as_str()
                ),
            ))
        }
    }
}
