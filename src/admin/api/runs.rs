//! The run log: list with filters, one run, its log tail and killing it.

use super::answers::{Killed, RunDetail, RunLog, RunPage};
use super::extract::{OperatorChange, Reader};
use super::{ApiResult, P, Q, St, json, page_size, path, query};
use crate::admin::{AdminState, ApiError, Principal};
use crate::job::JobId;
use crate::record::{RunId, RunRecord, RunStatus, TriggerKind};
use crate::store::RunQuery;
use crate::time::Timestamp;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use schemars::JsonSchema;
use serde::Deserialize;

fn instant(field: &str, t: &Option<String>) -> ApiResult<Option<Timestamp>> {
    t.as_ref()
        .map(|t| {
            chrono::DateTime::parse_from_rfc3339(t)
                .map(|d| Timestamp::from_datetime(&d))
                .map_err(|e| ApiError::invalid(field, t, &e.to_string()))
        })
        .transpose()
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ListQuery {
    /// Only runs of this job.
    job: Option<String>,
    /// Only runs with this status (`running`, `succeeded`, `failed`, `timed_out`,
    /// `cancelled`, `lost`, `misfired`, `returned`).
    status: Option<String>,
    /// Only runs on this scheduler node.
    node: Option<String>,
    /// Only runs of this trigger (`schedule`, `retry`, `manual`, `misfire`).
    trigger: Option<String>,
    /// Only runs that started at or after this RFC 3339 instant.
    since: Option<String>,
    /// Only runs that started before this RFC 3339 instant.
    until: Option<String>,
    /// The page before this run id (the `next` of the page before).
    before: Option<i64>,
    /// Runs per page, 1-1000 (50).
    limit: Option<usize>,
}

pub(super) async fn list(State(s): St, Reader(p): Reader, q: Q<ListQuery>) -> ApiResult<Response> {
    let q = query(q)?;
    let limit = page_size(q.limit)?;
    let mut query = RunQuery::new().limit(limit);
    if let Some(j) = &q.job {
        query = query.job(JobId::new(j)?);
    }
    if let Some(st) = &q.status {
        query = query.status(
            RunStatus::parse(st)
                .ok_or_else(|| ApiError::invalid("status", st, "not a run status"))?,
        );
    }
    if let Some(t) = &q.trigger {
        query = query.trigger(
            TriggerKind::parse(t)
                .ok_or_else(|| ApiError::invalid("trigger", t, "not a trigger kind"))?,
        );
    }
    if let Some(t) = instant("since", &q.since)? {
        query = query.since(t);
    }
    if let Some(t) = instant("until", &q.until)? {
        query = query.until(t);
    }
    if let Some(b) = q.before {
        query = query.before(RunId(b));
    }
    if let Some(n) = &q.node {
        query = query.node(n.clone());
    }
    let runs = s.store.runs(&query).await?;
    let next = (runs.len() >= limit)
        .then(|| runs.last().map(|r| r.id.0))
        .flatten();
    let actor = p.actor();
    let mut sight = s.ops.sight(&actor);
    let mut items: Vec<RunRecord> = Vec::with_capacity(runs.len());
    for r in runs {
        if sight.run(&r).await? {
            items.push(r);
        }
    }
    Ok(json(StatusCode::OK, &RunPage { items, next }))
}

/// Run `id` as `p` may see it, and the group of the job it belongs to (`None`: a
/// local job's, or a job's that is gone). Errors: 404.
async fn visible(s: &AdminState, p: &Principal, id: i64) -> ApiResult<(RunRecord, Option<String>)> {
    let actor = p.actor();
    let run = s.ops.run(&actor, RunId(id)).await?;
    let group = s
        .ops
        .sight(&actor)
        .group_at(&run.job_id, run.started_at)
        .await?;
    Ok((run, group))
}

pub(super) async fn get_one(State(s): St, Reader(p): Reader, id: P<i64>) -> ApiResult<Response> {
    let id = path(id)?;
    let (run, group) = visible(&s, &p, id).await?;
    Ok(json(StatusCode::OK, &RunDetail { run, group }))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct LogQuery {
    /// The first line wanted (0); a tail asks from the last answer's `next_offset`.
    offset: Option<u64>,
}

pub(super) async fn log(
    State(s): St,
    Reader(p): Reader,
    id: P<i64>,
    q: Q<LogQuery>,
) -> ApiResult<Response> {
    let q = query(q)?;
    let id = path(id)?;
    let offset = q.offset.unwrap_or(0);
    // A local run's lines are written by the node that runs it; a remote run's by
    // the node that dispatched it, as they come back from its instance.
    let (run, lines) = s.ops.run_lines(&p.actor(), RunId(id), offset, 1000).await?;
    Ok(json(
        StatusCode::OK,
        &RunLog::stored(&run, offset, 1000, lines),
    ))
}

pub(super) async fn kill(
    State(s): St,
    OperatorChange(p): OperatorChange,
    id: P<i64>,
) -> ApiResult<Response> {
    let killed = s.ops.kill(&p.actor(), RunId(path(id)?)).await?;
    Ok(json(StatusCode::OK, &Killed { killed_on: killed }))
}
