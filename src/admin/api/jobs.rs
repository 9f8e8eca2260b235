//! Jobs: list, get, create, update, copy, remove, pause, resume, trigger, next
//! fires; and the cron preview the job form uses. Every change goes through the
//! server's operations layer ([`Ops`](crate::ops::Ops)) as the caller.

use super::answers::{
    Defaults, Fires, JobListItem, JobPage, RECENT_RUNS, Recent, Removed, RunBrief,
};
use super::extract::{AdminChange, OperatorChange, Reader};
use super::{ApiResult, Q, St, body_bytes, json, json_body, page_size, query};
use crate::admin::views::{JobView, next_fires};
use crate::admin::{AdminState, ApiError};
use crate::job::{Job, JobId};
use crate::record::RunStatus;
use crate::record::{JobRecord, UpsertOutcome};
use crate::store::{JobQuery, RunQuery};
use crate::time::Timestamp;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use schemars::JsonSchema;
use serde::Deserialize;

fn group_of(job: &Job) -> Option<&str> {
    job.remote().map(|t| t.group())
}

fn job_id(id: &str) -> ApiResult<JobId> {
    JobId::new(id).map_err(ApiError::from)
}

/// A job definition from a request's body, checked as [`Job::from_json`] checks it.
/// Errors: 413; 400 naming the field (`job`, `job.id`, `schedule.cron` …).
fn job_body(body: Result<Bytes, BytesRejection>) -> ApiResult<Job> {
    let bytes = body_bytes(body)?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|e| ApiError::invalid_field("job", &format!("not UTF-8: {e}")))?;
    Ok(Job::from_json(text)?)
}

/// The job `id` as stored now, answered with `status`.
async fn answer(s: &AdminState, id: &JobId, status: StatusCode) -> ApiResult<Response> {
    let rec = s
        .store
        .get(id)
        .await?
        .ok_or_else(|| ApiError::not_found("job", id))?;
    Ok(json(status, &JobView::from(&rec)))
}

/// A create or copy that found the id taken: 409 `conflict`.
fn created(out: UpsertOutcome, id: &JobId) -> ApiResult<()> {
    if out == UpsertOutcome::Kept {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            format!("the job id {id} is taken (ids are unique in the store, whoever holds them)"),
        ));
    }
    Ok(())
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ListQuery {
    /// The page after this job id (the `next` of the page before).
    after: Option<String>,
    /// Jobs per page, 1-1000 (50).
    limit: Option<usize>,
    /// Only ids containing this text.
    q: Option<String>,
    /// Only jobs of this handler.
    handler: Option<String>,
    /// Only jobs of this executor group.
    group: Option<String>,
    /// Only enabled (`true`) or paused (`false`) jobs.
    enabled: Option<bool>,
}

pub(super) async fn list(State(s): St, Reader(p): Reader, q: Q<ListQuery>) -> ApiResult<Response> {
    let q = query(q)?;
    let limit = page_size(q.limit)?;
    let after = q.after.as_deref().map(job_id).transpose()?;
    let page = s.store.list(&JobQuery::new(limit).after(after)).await?;
    let looked = page.items.len() + page.corrupt.len();
    let next = (looked >= limit)
        .then(|| page.items.last().map(|r| r.job.id().to_string()))
        .flatten();
    let items: Vec<&JobRecord> = page
        .items
        .iter()
        .filter(|r| p.sees(group_of(&r.job)))
        .filter(|r| {
            q.q.as_ref()
                .is_none_or(|t| r.job.id().as_str().contains(t.as_str()))
        })
        .filter(|r| q.handler.as_ref().is_none_or(|hd| r.job.handler() == hd))
        .filter(|r| {
            q.group
                .as_ref()
                .is_none_or(|g| group_of(&r.job) == Some(g.as_str()))
        })
        .filter(|r| q.enabled.is_none_or(|e| r.job.enabled() == e))
        .collect();
    // Each job's recent runs, a few jobs at a time: the runs since the job was
    // created are its own (an older run of its id belonged to a job since removed).
    let mut listed = Vec::with_capacity(items.len());
    for chunk in items.chunks(8) {
        for item in futures::future::join_all(chunk.iter().map(|r| summary(&s, r))).await {
            listed.push(item?);
        }
    }
    let items = listed;
    Ok(json(StatusCode::OK, &JobPage { items, next }))
}

/// `r` with its latest run and how its latest ended runs went.
async fn summary(s: &AdminState, r: &JobRecord) -> ApiResult<JobListItem> {
    let runs = s
        .store
        .runs(
            &RunQuery::new()
                .job(r.job.id().clone())
                .since(r.created_at)
                .limit(RECENT_RUNS + 4),
        )
        .await?;
    let ended = runs
        .iter()
        .filter(|x| !matches!(x.status, RunStatus::Running | RunStatus::Returned))
        .take(RECENT_RUNS);
    let (mut n, mut ok) = (0, 0);
    for x in ended {
        n += 1;
        ok += u32::from(x.status == RunStatus::Succeeded);
    }
    Ok(JobListItem {
        view: JobView::from(r),
        last_run: runs.first().map(|x| RunBrief {
            id: x.id.0,
            status: x.status,
            started_at: x.started_at,
        }),
        recent: Recent {
            ended: n,
            succeeded: ok,
        },
    })
}

/// What a job gets for the fields its definition leaves out.
pub(super) async fn defaults(State(s): St, _: Reader) -> ApiResult<Response> {
    let threshold = crate::engine::SchedulerConfig::default().misfire_threshold;
    Ok(json(
        StatusCode::OK,
        &Defaults {
            retry: crate::policy::RetryPolicy::default(),
            misfire: crate::policy::MisfirePolicy::default(),
            misfire_threshold: humantime_serde::re::humantime::format_duration(threshold)
                .to_string(),
            alarm: crate::policy::AlarmPolicy::default(),
            routing: crate::placement::Routing::default(),
            block: crate::placement::BlockStrategy::default(),
            routings: crate::placement::Routing::ALL.to_vec(),
            blocks: crate::placement::BlockStrategy::ALL.to_vec(),
            alarm_kinds: crate::policy::AlarmKind::ALL.to_vec(),
            max_payload_bytes: s.ops.payload_limit(),
            alarms: s
                .config
                .email_alarms
                .iter()
                .map(|_| "email")
                .chain(s.config.webhook_alarms.iter().map(|_| "webhook"))
                .collect(),
        },
    ))
}

pub(super) async fn get_one(
    State(s): St,
    Reader(p): Reader,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let r = s.ops.visible(&p.actor(), &job_id(&id)?).await?;
    Ok(json(StatusCode::OK, &JobView::from(&r)))
}

pub(super) async fn create(
    State(s): St,
    AdminChange(p): AdminChange,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let job = job_body(body)?;
    let id = job.id().clone();
    created(s.ops.create(&p.actor(), job).await?, &id)?;
    answer(&s, &id, StatusCode::CREATED).await
}

pub(super) async fn update(
    State(s): St,
    AdminChange(p): AdminChange,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let job = job_body(body)?;
    let id = job_id(&id)?;
    s.ops.update(&p.actor(), &id, job).await?;
    answer(&s, &id, StatusCode::OK).await
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CopyTo {
    /// The new job's id.
    id: String,
}

pub(super) async fn copy(
    State(s): St,
    AdminChange(p): AdminChange,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let to: CopyTo = json_body(body)?;
    let new = job_id(&to.id)?;
    created(s.ops.copy(&p.actor(), &job_id(&id)?, &to.id).await?, &new)?;
    answer(&s, &new, StatusCode::CREATED).await
}

pub(super) async fn remove(
    State(s): St,
    AdminChange(p): AdminChange,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    if !s.ops.remove(&p.actor(), &job_id(&id)?).await? {
        return Err(ApiError::not_found("job", &id));
    }
    Ok(json(StatusCode::OK, &Removed { removed: id }))
}

/// The job as stored after an operator's action.
fn after(r: &JobRecord) -> Response {
    json(StatusCode::OK, &JobView::from(r))
}

pub(super) async fn pause(
    State(s): St,
    OperatorChange(p): OperatorChange,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    Ok(after(&s.ops.pause(&p.actor(), &job_id(&id)?).await?))
}

pub(super) async fn resume(
    State(s): St,
    OperatorChange(p): OperatorChange,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    Ok(after(&s.ops.resume(&p.actor(), &job_id(&id)?).await?))
}

/// The optional body of a trigger: `{"payload": …}` runs that fire with it in place
/// of the job's payload (`null` or no body: the job's own).
#[derive(Deserialize, Default, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct TriggerBody {
    /// The payload of this fire; `null`: the job's own.
    payload: Option<serde_json::Value>,
}

pub(super) async fn trigger(
    State(s): St,
    OperatorChange(p): OperatorChange,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let id = job_id(&id)?;
    let empty = body
        .as_ref()
        .is_ok_and(|b| b.iter().all(u8::is_ascii_whitespace));
    let body: TriggerBody = if empty {
        TriggerBody::default()
    } else {
        json_body(body)?
    };
    Ok(after(&s.ops.trigger(&p.actor(), &id, body.payload).await?))
}

/// The body of a release or a skip: the upstream instant it is about.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct InstantBody {
    /// The upstream instant (RFC 3339, or epoch milliseconds), as the queued
    /// releases name it (`from.fire_at`; for a job that joins by a window, any
    /// instant of the window).
    fire_at: Timestamp,
}

/// What a release did: the parents released in place of.
#[derive(serde::Serialize, JsonSchema)]
pub(super) struct Released {
    /// The job.
    job: JobId,
    /// The instant.
    fire_at: Timestamp,
    /// The parents of its `after` list released by the caller in their place
    /// (empty when every parent had released the instant).
    in_place_of: Vec<JobId>,
}

/// What a skip did.
#[derive(serde::Serialize, JsonSchema)]
pub(super) struct Skipped {
    /// The job.
    job: JobId,
    /// The instant.
    fire_at: Timestamp,
    /// How many queued releases were dropped.
    dropped: u64,
}

/// `POST /api/v1/jobs/{id}/release`: runs a job that waits for several parents
/// once for an instant, in place of the parents that have not released it.
pub(super) async fn release(
    State(s): St,
    OperatorChange(p): OperatorChange,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let id = job_id(&id)?;
    let body: InstantBody = json_body(body)?;
    let in_place_of = s.ops.release_instant(&p.actor(), &id, body.fire_at).await?;
    Ok(json(
        StatusCode::OK,
        &Released {
            job: id,
            fire_at: body.fire_at,
            in_place_of,
        },
    ))
}

/// `POST /api/v1/jobs/{id}/skip`: drops the releases queued for a job at an
/// instant.
pub(super) async fn skip(
    State(s): St,
    OperatorChange(p): OperatorChange,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let id = job_id(&id)?;
    let body: InstantBody = json_body(body)?;
    let dropped = s.ops.skip_instant(&p.actor(), &id, body.fire_at).await?;
    Ok(json(
        StatusCode::OK,
        &Skipped {
            job: id,
            fire_at: body.fire_at,
            dropped,
        },
    ))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct FiresQuery {
    /// How many fires, 1-1000 (5).
    next: Option<usize>,
}

fn count(next: Option<usize>) -> ApiResult<usize> {
    match next.unwrap_or(5) {
        n @ 1..=1000 => Ok(n),
        n => Err(ApiError::invalid("next", n, "must be 1-1000")),
    }
}

pub(super) async fn fires(
    State(s): St,
    Reader(p): Reader,
    Path(id): Path<String>,
    q: Q<FiresQuery>,
) -> ApiResult<Response> {
    let q = query(q)?;
    let r = s.ops.visible(&p.actor(), &job_id(&id)?).await?;
    let now = s.store.now().await?;
    let fires = next_fires(r.job.schedule(), now, count(q.next)?);
    Ok(json(StatusCode::OK, &Fires { after: now, fires }))
}

/// `GET /api/v1/jobs/{id}/dependencies`: its children, parents and queued
/// releases.
pub(super) async fn dependencies(
    State(s): St,
    Reader(p): Reader,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let deps = s.ops.dependencies(&p.actor(), &job_id(&id)?).await?;
    Ok(json(StatusCode::OK, &deps))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct PreviewQuery {
    /// A Quartz (6-7 fields) or Unix (5 fields) cron expression.
    expr: String,
    /// The IANA zone it fires in (`UTC`).
    zone: Option<String>,
    /// How many fires, 1-1000 (5).
    next: Option<usize>,
    /// The fires after this RFC 3339 instant (now).
    after: Option<String>,
}

pub(super) async fn cron_preview(_: Reader, q: Q<PreviewQuery>) -> ApiResult<Response> {
    let q = query(q)?;
    let after = match &q.after {
        None => Timestamp::now(),
        Some(t) => chrono::DateTime::parse_from_rfc3339(t)
            .map(|d| Timestamp::from_datetime(&d))
            .map_err(|e| ApiError::invalid("after", t, &e.to_string()))?,
    };
    let zone = q.zone.as_deref().unwrap_or("UTC");
    let preview = crate::admin::cron::preview(&q.expr, zone, after, count(q.next)?)?;
    Ok(json(StatusCode::OK, &preview))
}
