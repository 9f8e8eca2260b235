//! The cluster as a whole: daily statistics, the overview, nodes, executor
//! instances, the alarm outbox and the audit log.

use super::answers::{
    AlarmChanged, Alarms, AuditPage, Daily, ExecutorView, Executors, Failing, JobCounts, Nodes,
    Overview, Probe, Slow,
};
use super::extract::{AdminReader, OperatorChange, Reader};
use super::{ApiResult, P, Q, St, json, page_size, path, query};
use crate::admin::{AdminState, ApiError, Principal};
use crate::record::{AlarmId, AlarmStatus, RunStatus};
use crate::store::{AlarmChange, AlarmQuery, AuditQuery, JobQuery, RunQuery};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{Duration as Days, NaiveDate};
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::HashMap;

/// Most jobs the overview counts (it says when there are more).
const OVERVIEW_JOBS: usize = 100_000;
/// Runs the overview's most-failing and slowest jobs are computed from.
const OVERVIEW_RUNS: usize = 1_000;

fn day(field: &str, d: &Option<String>) -> ApiResult<Option<NaiveDate>> {
    d.as_ref()
        .map(|t| {
            NaiveDate::parse_from_str(t, "%Y-%m-%d")
                .map_err(|e| ApiError::invalid(field, t, &format!("{e} (YYYY-MM-DD)")))
        })
        .transpose()
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct DailyQuery {
    /// The first UTC day, YYYY-MM-DD (13 days before `to`).
    from: Option<String>,
    /// The last UTC day, YYYY-MM-DD (today); at most 366 days after `from`.
    to: Option<String>,
}

pub(super) async fn daily(State(s): St, _: Reader, q: Q<DailyQuery>) -> ApiResult<Response> {
    let q = query(q)?;
    let today = s.store.now().await?.to_datetime().date_naive();
    let to = day("to", &q.to)?.unwrap_or(today);
    let from = day("from", &q.from)?.unwrap_or(to - Days::days(13));
    if from > to || (to - from).num_days() > 366 {
        return Err(ApiError::invalid(
            "from",
            from,
            "must be on or before `to`, at most 366 days before it",
        ));
    }
    let days = s.store.daily_stats(from, to).await?;
    Ok(json(StatusCode::OK, &Daily { from, to, days }))
}

pub(super) async fn overview(State(s): St, Reader(p): Reader) -> ApiResult<Response> {
    let now = s.store.now().await?;
    let (mut jobs, mut paused, mut after, mut more) = (0u64, 0u64, None, false);
    loop {
        let page = s.store.list(&JobQuery::new(1_000).after(after)).await?;
        let looked = page.items.len() + page.corrupt.len();
        for r in page
            .items
            .iter()
            .filter(|r| p.sees(r.job.remote().map(|t| t.group())))
        {
            jobs += 1;
            paused += u64::from(!r.job.enabled());
        }
        after = page.items.last().map(|r| r.job.id().clone());
        if looked < 1_000 || after.is_none() {
            break;
        }
        if jobs as usize >= OVERVIEW_JOBS {
            more = true;
            break;
        }
    }
    let today = now.to_datetime().date_naive();
    let days = s.store.daily_stats(today - Days::days(13), today).await?;
    let (ok, ended) = days.iter().fold((0u64, 0u64), |(ok, ended), d| {
        let failed = d.failed + d.timed_out + d.cancelled + d.lost;
        (ok + d.succeeded, ended + d.succeeded + failed)
    });
    let runs = s.store.runs(&RunQuery::new().limit(OVERVIEW_RUNS)).await?;
    let actor = p.actor();
    let mut sight = s.ops.sight(&actor);
    let mut per_job: HashMap<String, (u64, u64, u64)> = HashMap::new(); // failures, ended, total ms
    for r in &runs {
        if !sight.run(r).await? {
            continue;
        }
        let e = per_job.entry(r.job_id.to_string()).or_default();
        if r.status.is_failure() && r.status != RunStatus::Misfired {
            e.0 += 1;
        }
        if let Some(d) = r.duration() {
            e.1 += 1;
            e.2 += d.as_millis() as u64;
        }
    }
    let mut most_failing: Vec<Failing> = per_job
        .iter()
        .filter(|(_, v)| v.0 > 0)
        .map(|(k, v)| Failing {
            job: k.clone(),
            failures: v.0,
        })
        .collect();
    most_failing.sort_by(|a, b| b.failures.cmp(&a.failures).then(a.job.cmp(&b.job)));
    most_failing.truncate(5);
    let mut slowest: Vec<Slow> = per_job
        .iter()
        .filter(|(_, v)| v.1 > 0)
        .map(|(k, v)| Slow {
            job: k.clone(),
            mean_ms: v.2 / v.1,
            runs: v.1,
        })
        .collect();
    slowest.sort_by(|a, b| b.mean_ms.cmp(&a.mean_ms).then(a.job.cmp(&b.job)));
    slowest.truncate(5);
    let nodes = s.store.nodes().await?.items;
    let executors: Vec<_> = s
        .store
        .executors(None)
        .await?
        .items
        .into_iter()
        .filter(|e| p.groups.is_none() || p.sees(Some(&e.info.group)))
        .collect();
    Ok(json(
        StatusCode::OK,
        &Overview {
            now,
            jobs: JobCounts {
                total: jobs,
                paused,
                more,
            },
            days,
            success_ratio: (ended > 0).then(|| ok as f64 / ended as f64),
            most_failing,
            slowest,
            runs_considered: runs.len(),
            nodes,
            executors,
        },
    ))
}

pub(super) async fn nodes(State(s): St, _: Reader) -> ApiResult<Response> {
    let page = s.store.nodes().await?;
    let now = s.store.now().await?;
    Ok(json(
        StatusCode::OK,
        &Nodes {
            now,
            items: page.items,
            unreadable: page.corrupt.len(),
        },
    ))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ExecutorsQuery {
    /// Only instances of this group.
    group: Option<String>,
    /// Whether to send each instance of a group this server dispatches to a signed
    /// beat and answer what it said (`probe`): true by default; `false` answers
    /// from the registrations alone, at once.
    probe: Option<bool>,
}

pub(super) async fn executors(
    State(s): St,
    Reader(p): Reader,
    q: Q<ExecutorsQuery>,
) -> ApiResult<Response> {
    let q = query(q)?;
    let page = s.store.executors(q.group.as_deref()).await?;
    let now = s.store.now().await?;
    let records: Vec<_> = page
        .items
        .into_iter()
        .filter(|e| p.groups.is_none() || p.sees(Some(&e.info.group)))
        .collect();
    let probe = q.probe.unwrap_or(true);
    let mut items = Vec::with_capacity(records.len());
    for chunk in records.chunks(PROBES_AT_ONCE) {
        let views = chunk.iter().map(|r| executor_view(&s, r, now, probe));
        items.extend(futures::future::join_all(views).await);
    }
    let mut groups: Vec<String> = s.groups.keys().cloned().collect();
    groups.sort();
    Ok(json(StatusCode::OK, &Executors { now, groups, items }))
}

/// Instances asked at once by the executors list.
const PROBES_AT_ONCE: usize = 8;
/// How long the executors list waits for an instance's beat.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// `r`, whether it is live, and (when `probe`) its answer to a beat sent now, for a
/// group this server dispatches to.
async fn executor_view(
    s: &AdminState,
    r: &crate::record::ExecutorRecord,
    now: crate::time::Timestamp,
    probe: bool,
) -> ExecutorView {
    let Some(group) = s.groups.get(&r.info.group) else {
        return ExecutorView {
            record: r.clone(),
            live: None,
            probe: None,
        };
    };
    let live = now.duration_since(r.last_beat) <= group.dead_after();
    if !probe {
        return ExecutorView {
            record: r.clone(),
            live: Some(live),
            probe: None,
        };
    }
    let started = std::time::Instant::now();
    let answer = tokio::time::timeout(PROBE_TIMEOUT, group.beat(&r.info.address)).await;
    let ms = started.elapsed().as_millis() as u64;
    let probe = match answer {
        Ok(Ok(b)) => Probe {
            ms,
            error: None,
            instance: Some(b.instance),
            running: Some(b.running),
            queued: Some(b.queued),
            capacity: Some(b.capacity),
        },
        Ok(Err(e)) => Probe::failed(ms, e.to_string()),
        Err(_) => Probe::failed(ms, format!("no answer within {PROBE_TIMEOUT:?}")),
    };
    ExecutorView {
        record: r.clone(),
        live: Some(live),
        probe: Some(probe),
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AlarmsQuery {
    /// Only events with this status (`pending`, `sending`, `sent`, `failed`,
    /// `not_needed`).
    status: Option<String>,
    /// Most events, 1-1000 (50).
    limit: Option<usize>,
}

pub(super) async fn alarms(
    State(s): St,
    Reader(p): Reader,
    q: Q<AlarmsQuery>,
) -> ApiResult<Response> {
    let q = query(q)?;
    let status = q
        .status
        .as_ref()
        .map(|t| {
            AlarmStatus::parse(t)
                .ok_or_else(|| ApiError::invalid("status", t, "not an alarm status"))
        })
        .transpose()?;
    let all = s
        .store
        .alarms(&AlarmQuery::new(page_size(q.limit)?).status(status))
        .await?;
    let actor = p.actor();
    let mut sight = s.ops.sight(&actor);
    let mut items = Vec::new();
    for a in all {
        if sight.alarm(&a).await? {
            items.push(a);
        }
    }
    Ok(json(StatusCode::OK, &Alarms { items }))
}

/// Retry or discard: an operator's action on one alarm event.
async fn alarm_action(s: &AdminState, p: &Principal, change: AlarmChange) -> ApiResult<Response> {
    let id = change.id().0;
    s.ops.alarm_change(&p.actor(), change).await?;
    let status = match change {
        AlarmChange::Retry(_) => "pending",
        _ => "failed",
    };
    Ok(json(StatusCode::OK, &AlarmChanged { id, status }))
}

pub(super) async fn retry_alarm(
    State(s): St,
    OperatorChange(p): OperatorChange,
    id: P<i64>,
) -> ApiResult<Response> {
    alarm_action(&s, &p, AlarmChange::Retry(AlarmId(path(id)?))).await
}

pub(super) async fn discard_alarm(
    State(s): St,
    OperatorChange(p): OperatorChange,
    id: P<i64>,
) -> ApiResult<Response> {
    alarm_action(&s, &p, AlarmChange::Discard(AlarmId(path(id)?))).await
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AuditQueryParams {
    /// Only entries of this actor (`user:NAME`, `token:NAME`, `cli:USER`, `library`).
    actor: Option<String>,
    /// Only entries about this target (a job id, a run id, an alarm id).
    target: Option<String>,
    /// The page before this entry id (the `next` of the page before).
    before: Option<i64>,
    /// Entries per page, 1-1000 (50).
    limit: Option<usize>,
}

pub(super) async fn audit(
    State(s): St,
    AdminReader(p): AdminReader,
    q: Q<AuditQueryParams>,
) -> ApiResult<Response> {
    let q = query(q)?;
    let limit = page_size(q.limit)?;
    let page = s
        .store
        .audit(
            &AuditQuery::new(limit)
                .actor(q.actor)
                .target(q.target)
                .before(q.before),
        )
        .await?;
    let next = (page.len() >= limit)
        .then(|| page.last().map(|r| r.id))
        .flatten();
    // An admin limited to groups reads the entries about its groups' jobs (and
    // their runs and alarms) and its own logins, like every other read.
    let actor = p.actor();
    let mut sight = s.ops.sight(&actor);
    let mut items = Vec::with_capacity(page.len());
    for r in page {
        if sight.audit(&r).await? {
            items.push(r);
        }
    }
    Ok(json(StatusCode::OK, &AuditPage { items, next }))
}

/// `GET /metrics`: the engine's instruments as Prometheus text, for any caller with
/// credentials. Errors: 401; 503 when another `metrics` recorder holds the process.
pub(super) async fn metrics(_: Reader) -> ApiResult<Response> {
    use axum::response::IntoResponse;
    match crate::admin::metrics::render() {
        Some(text) => Ok((
            [(
                axum::http::header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            text,
        )
            .into_response()),
        None => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "another metrics recorder is installed in this process",
        )),
    }
}
