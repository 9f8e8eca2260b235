//! Jobs: list, get, create, update, copy, remove, pause, resume, trigger, next
//! fires; and the cron preview the job form uses.

use super::{ApiResult, Paged, Q, St, body_bytes, json, json_body, page_size, query};
use crate::admin::views::{JobView, next_fires};
use crate::admin::{AdminState, ApiError, Principal, Role};
use crate::job::{Job, JobId};
use crate::record::{JobRecord, UpsertOutcome};
use crate::store::{JobQuery, admin};
use crate::time::Timestamp;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
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

fn as_json(job: &Job) -> serde_json::Value {
    serde_json::to_value(job).unwrap_or(serde_json::Value::Null)
}

/// The stored job `id` as `p` may see it. Errors: 404 (also for a job of a group
/// `p` is not limited to: it does not learn the job exists).
async fn visible(s: &AdminState, p: &Principal, id: &str) -> ApiResult<JobRecord> {
    let id = job_id(id)?;
    match s.store.get(&id).await? {
        Some(r) if p.sees(group_of(&r.job)) => Ok(r),
        _ => Err(ApiError::not_found("job", id)),
    }
}

/// Refuses a job in a group `p` may not act on.
fn may_place(p: &Principal, job: &Job) -> ApiResult<()> {
    if p.sees(group_of(job)) {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!(
            "{} may not act on jobs of {}",
            p.name,
            group_of(job).map_or("local handlers".to_string(), |g| format!("group {g}"))
        )))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListQuery {
    after: Option<String>,
    limit: Option<usize>,
    /// Only ids containing this text.
    q: Option<String>,
    handler: Option<String>,
    group: Option<String>,
    enabled: Option<bool>,
}

pub(super) async fn list(State(s): St, h: HeaderMap, q: Q<ListQuery>) -> ApiResult<Response> {
    let p = s.who(&h)?;
    let q = query(q)?;
    let limit = page_size(q.limit)?;
    let after = q.after.as_deref().map(job_id).transpose()?;
    let page = s.store.list(&JobQuery::new(limit).after(after)).await?;
    let looked = page.items.len() + page.corrupt.len();
    let next = (looked >= limit)
        .then(|| page.items.last().map(|r| r.job.id().to_string()))
        .flatten();
    let items: Vec<JobView> = page
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
        .map(JobView::from)
        .collect();
    Ok(json(StatusCode::OK, &Paged { items, next }))
}

pub(super) async fn get_one(
    State(s): St,
    h: HeaderMap,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let p = s.who(&h)?;
    let r = visible(&s, &p, &id).await?;
    Ok(json(StatusCode::OK, &JobView::from(&r)))
}

/// Stores `job` (created only when `create`), audits it, answers its view.
async fn store_job(
    s: &AdminState,
    p: &Principal,
    job: Job,
    create: bool,
    before: Option<&JobRecord>,
    action: &str,
) -> ApiResult<Response> {
    may_place(p, &job)?;
    let now = s.store.now().await?;
    let next = admin::first_fire(&job, now)?;
    let out = if create {
        s.store.create(&job, next).await?
    } else {
        s.store.upsert(&job, next).await?
    };
    if out == UpsertOutcome::Kept {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            format!("job {} exists", job.id()),
        ));
    }
    s.audit(
        p,
        action,
        job.id().as_str(),
        before.map(|b| as_json(&b.job)),
        Some(as_json(&job)),
    )
    .await?;
    let rec = s
        .store
        .get(job.id())
        .await?
        .ok_or_else(|| ApiError::not_found("job", job.id()))?;
    let status = if create {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(json(status, &JobView::from(&rec)))
}

pub(super) async fn create(
    State(s): St,
    h: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let p = s.change(&h, Role::Admin)?;
    let job = job_body(body)?;
    store_job(&s, &p, job, true, None, "job.create").await
}

pub(super) async fn update(
    State(s): St,
    h: HeaderMap,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let p = s.change(&h, Role::Admin)?;
    let job = job_body(body)?;
    if job.id().as_str() != id {
        return Err(ApiError::invalid(
            "job.id",
            job.id(),
            &format!("must be the job's id in the path ({id}); copy a job to change its id"),
        ));
    }
    let before = visible(&s, &p, &id).await?;
    store_job(&s, &p, job, false, Some(&before), "job.update").await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CopyTo {
    id: String,
}

pub(super) async fn copy(
    State(s): St,
    h: HeaderMap,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let p = s.change(&h, Role::Admin)?;
    let to: CopyTo = json_body(body)?;
    let source = visible(&s, &p, &id).await?;
    let mut def = as_json(&source.job);
    def["id"] = serde_json::Value::String(to.id);
    let job = Job::from_json(&def.to_string())?;
    store_job(&s, &p, job, true, None, "job.copy").await
}

pub(super) async fn remove(
    State(s): St,
    h: HeaderMap,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let p = s.change(&h, Role::Admin)?;
    let before = visible(&s, &p, &id).await?;
    if !s.store.remove(before.job.id()).await? {
        return Err(ApiError::not_found("job", &id));
    }
    s.audit(&p, "job.remove", &id, Some(as_json(&before.job)), None)
        .await?;
    Ok(json(StatusCode::OK, &serde_json::json!({"removed": id})))
}

/// An operator's action on one job.
enum Action {
    Pause,
    Resume,
    /// Trigger now, with the fire's payload override if any.
    Trigger(Option<serde_json::Value>),
}

impl Action {
    fn name(&self) -> &'static str {
        match self {
            Action::Pause => "job.pause",
            Action::Resume => "job.resume",
            Action::Trigger(_) => "job.trigger",
        }
    }
}

/// Pause, resume or trigger: the operator's actions on one job.
async fn act(s: &AdminState, p: &Principal, id: &str, action: Action) -> ApiResult<Response> {
    let before = visible(s, p, id).await?;
    let jid = before.job.id().clone();
    match &action {
        Action::Pause => s.store.set_enabled(&jid, false, None).await?,
        Action::Resume => admin::resume(&*s.store, &jid).await?,
        Action::Trigger(payload) => {
            let max = crate::job::DEFAULT_MAX_PAYLOAD_BYTES;
            admin::trigger_now(&*s.store, &jid, payload.as_ref(), max).await?
        }
    }
    let after = s
        .store
        .get(&jid)
        .await?
        .ok_or_else(|| ApiError::not_found("job", &jid))?;
    let state = |r: &JobRecord| {
        serde_json::json!({
            "enabled": r.job.enabled(),
            "next_fire_at": r.next_fire_at(),
            "next_trigger": r.next_trigger().as_str(),
            "next_payload": r.next_payload(),
        })
    };
    s.audit(
        p,
        action.name(),
        id,
        Some(state(&before)),
        Some(state(&after)),
    )
    .await?;
    Ok(json(StatusCode::OK, &JobView::from(&after)))
}

pub(super) async fn pause(
    State(s): St,
    h: HeaderMap,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let p = s.change(&h, Role::Operator)?;
    act(&s, &p, &id, Action::Pause).await
}

pub(super) async fn resume(
    State(s): St,
    h: HeaderMap,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let p = s.change(&h, Role::Operator)?;
    act(&s, &p, &id, Action::Resume).await
}

/// The optional body of a trigger: `{"payload": …}` runs that fire with it in place
/// of the job's payload (`null` or no body: the job's own).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct TriggerBody {
    payload: Option<serde_json::Value>,
}

pub(super) async fn trigger(
    State(s): St,
    h: HeaderMap,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let p = s.change(&h, Role::Operator)?;
    let empty = body
        .as_ref()
        .is_ok_and(|b| b.iter().all(u8::is_ascii_whitespace));
    let body: TriggerBody = if empty {
        TriggerBody::default()
    } else {
        json_body(body)?
    };
    act(&s, &p, &id, Action::Trigger(body.payload)).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FiresQuery {
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
    h: HeaderMap,
    Path(id): Path<String>,
    q: Q<FiresQuery>,
) -> ApiResult<Response> {
    let p = s.who(&h)?;
    let q = query(q)?;
    let r = visible(&s, &p, &id).await?;
    let now = s.store.now().await?;
    let fires = next_fires(r.job.schedule(), now, count(q.next)?);
    Ok(json(
        StatusCode::OK,
        &serde_json::json!({"after": now, "fires": fires}),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PreviewQuery {
    expr: String,
    zone: Option<String>,
    next: Option<usize>,
    after: Option<String>,
}

pub(super) async fn cron_preview(
    State(s): St,
    h: HeaderMap,
    q: Q<PreviewQuery>,
) -> ApiResult<Response> {
    s.who(&h)?;
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
