//! The admin API's OpenAPI 3.1 document (`docs/admin-api.json`, served at
//! `/api/v1/openapi.json`), generated from the types the handlers decode and answer
//! and the table of operations below, which lists them in the router's order.

use super::answers::*;
use super::{cluster, jobs, runs, session};
use crate::admin::ApiError;
use crate::admin::cron::CronPreview;
use crate::admin::views::JobView;
use crate::job::Job;
use crate::openapi::{Document, Operation, PathParam, SchemaFn, document, schema, to_file};
use serde_json::json;

mod access_ops;
mod job_ops;

/// Refused without credentials, or with unknown, forged or expired ones.
const E401: (u16, &str) = (
    401,
    "`unauthenticated` (no, unknown, forged or expired credentials)",
);
/// Refused a bad query, path or body.
const E400: (u16, &str) = (
    400,
    "`invalid` (the message names the field and the value refused)",
);
/// Refused a caller who may not act.
const E403: (u16, &str) = (
    403,
    "`forbidden` (the caller's role is below the operation's, or the job is outside its groups), `csrf` (a change with the session cookie and without its `X-CSRF-Token`), `read_only` (the server refuses every change)",
);
const E404: (u16, &str) = (404, "`not_found` (or outside the caller's groups)");
const E413: (u16, &str) = (413, "`too_large` (the body is over `max_body_bytes`)");
const E503: (u16, &str) = (503, "`unavailable` (the store did not answer)");

/// A read of the store.
const READ: &[(u16, &str)] = &[E400, E401, E503];
/// A read of one thing.
const READ_ONE: &[(u16, &str)] = &[E400, E401, E404, E503];
/// An action on one job, run or alarm.
const ACTION: &[(u16, &str)] = &[
    E400,
    E401,
    E403,
    E404,
    (
        409,
        "`conflict` (the job is paused, the run is not running, the event is not pending or failed)",
    ),
    E413,
    E503,
];

const ID_JOB: &[PathParam] = &[PathParam {
    name: "id",
    kind: "string",
    description: "The job's id.",
}];
const ID_RUN: &[PathParam] = &[PathParam {
    name: "id",
    kind: "integer",
    description: "The run's id.",
}];
const NAME: &[PathParam] = &[PathParam {
    name: "name",
    kind: "string",
    description: "The account's or token's name.",
}];
const ID_ALARM: &[PathParam] = &[PathParam {
    name: "id",
    kind: "integer",
    description: "The alarm event's id.",
}];

/// An operation (method and path) with no path parameter, query or body, answering
/// 200.
fn op(
    (method, path): (&'static str, &'static str),
    id: &'static str,
    tag: &'static str,
    role: &'static str,
    summary: &'static str,
    answer: Option<SchemaFn>,
    refusals: &'static [(u16, &'static str)],
) -> Operation {
    Operation {
        method,
        path,
        id,
        tag,
        summary,
        description: "",
        path_params: &[],
        query: None,
        body: None,
        ok: (200, "Answered.", answer),
        refusals,
        role: Some(role),
    }
}

/// The API's operations, in the router's order.
fn operations() -> Vec<Operation> {
    use serde_json::Value;
    let mut ops = vec![
        Operation {
            description: "Answers without credentials and without touching the store.",
            ..op(
                ("get", "/api/v1/health"),
                "health",
                "server",
                "none",
                "Liveness",
                Some(schema::<Health>),
                &[],
            )
        },
        Operation {
            description: "Generated from the server's types; the same as docs/admin-api.json.",
            ..op(
                ("get", "/api/v1/openapi.json"),
                "openapi",
                "server",
                "none",
                "This document",
                Some(schema::<Value>),
                &[],
            )
        },
        op(
            ("get", "/api/v1/session"),
            "whoami",
            "session",
            "viewer",
            "Who is calling, and the session's CSRF token",
            Some(schema::<Session>),
            &[E400, E401],
        ),
        Operation {
            description: "Sets the session cookie (HttpOnly, SameSite=Strict, Path=/; Secure when configured). A login is audited. An account is locked out for a while after repeated failed passwords.",
            body: Some((schema::<session::Login>, false)),
            ..op(
                ("post", "/api/v1/session"),
                "login",
                "session",
                "none",
                "Log in",
                Some(schema::<Session>),
                &[
                    E400,
                    (
                        401,
                        "`bad_credentials` (an unknown name or a wrong password: the two are not told apart)",
                    ),
                    E413,
                    (429, "`locked_out` (too many failed logins for the account)"),
                ],
            )
        },
        Operation {
            ok: (204, "Logged out.", None),
            ..op(
                ("delete", "/api/v1/session"),
                "logout",
                "session",
                "none",
                "Log out: clears the session cookie",
                None,
                &[],
            )
        },
    ];
    ops.extend(job_ops::operations());
    ops.extend(vec![
        Operation {
            query: Some(schema::<runs::ListQuery>),
            ..op(
                ("get", "/api/v1/runs"),
                "listRuns",
                "runs",
                "viewer",
                "The run log, newest first, a keyset page, filtered",
                Some(schema::<RunPage>),
                READ,
            )
        },
        Operation {
            path_params: ID_RUN,
            ..op(
                ("get", "/api/v1/runs/{id}"),
                "getRun",
                "runs",
                "viewer",
                "One run, with its error",
                Some(schema::<RunDetail>),
                READ_ONE,
            )
        },
        Operation {
            description: "Asks the group's live instances for the log of a remote run; a client tails it by asking from `next_offset` until `done`.",
            path_params: ID_RUN,
            query: Some(schema::<runs::LogQuery>),
            ..op(
                ("get", "/api/v1/runs/{id}/log"),
                "runLog",
                "runs",
                "viewer",
                "A remote run's log from an offset",
                Some(schema::<RunLog>),
                &[
                    E400,
                    E401,
                    E404,
                    (
                        409,
                        "`not_remote` (a local job's run), `unknown_group` (this server has no such executor group)",
                    ),
                    E503,
                ],
            )
        },
        Operation {
            description: "Cancels the run on the node or executor instance running it; it ends `cancelled` and is not retried.",
            path_params: ID_RUN,
            ..op(
                ("post", "/api/v1/runs/{id}/kill"),
                "killRun",
                "runs",
                "operator",
                "Cancel a running run",
                Some(schema::<Killed>),
                ACTION,
            )
        },
        Operation {
            query: Some(schema::<cluster::DailyQuery>),
            ..op(
                ("get", "/api/v1/stats/daily"),
                "dailyStats",
                "cluster",
                "viewer",
                "Run counts per UTC day by outcome",
                Some(schema::<Daily>),
                READ,
            )
        },
        op(
            ("get", "/api/v1/overview"),
            "overview",
            "cluster",
            "viewer",
            "Counts, the last 14 days by outcome, success ratio, most failing and slowest jobs, live nodes and executors",
            Some(schema::<Overview>),
            READ,
        ),
        op(
            ("get", "/api/v1/nodes"),
            "nodes",
            "cluster",
            "viewer",
            "Scheduler nodes and their heartbeats",
            Some(schema::<Nodes>),
            READ,
        ),
        Operation {
            query: Some(schema::<cluster::ExecutorsQuery>),
            ..op(
                ("get", "/api/v1/executors"),
                "executors",
                "cluster",
                "viewer",
                "Executor groups and their registered instances",
                Some(schema::<Executors>),
                READ,
            )
        },
        Operation {
            query: Some(schema::<cluster::AlarmsQuery>),
            ..op(
                ("get", "/api/v1/alarms"),
                "alarms",
                "alarms",
                "viewer",
                "The alarm outbox, newest first",
                Some(schema::<Alarms>),
                READ,
            )
        },
        Operation {
            path_params: ID_ALARM,
            ..op(
                ("post", "/api/v1/alarms/{id}/retry"),
                "retryAlarm",
                "alarms",
                "operator",
                "Make a pending or failed event claimable now",
                Some(schema::<AlarmChanged>),
                ACTION,
            )
        },
        Operation {
            path_params: ID_ALARM,
            ..op(
                ("post", "/api/v1/alarms/{id}/discard"),
                "discardAlarm",
                "alarms",
                "operator",
                "Fail a pending or failed event for good",
                Some(schema::<AlarmChanged>),
                ACTION,
            )
        },
        Operation {
            description: "An admin limited to executor groups reads the entries about those groups' jobs (and their runs and alarms) and its own logins.",
            query: Some(schema::<cluster::AuditQueryParams>),
            ..op(
                ("get", "/api/v1/audit"),
                "audit",
                "audit",
                "admin",
                "The audit log, newest first, a keyset page",
                Some(schema::<AuditPage>),
                &[E400, E401, E403, E503],
            )
        },
    ]);
    ops.extend(access_ops::operations());
    ops
}

/// The admin API's OpenAPI 3.1 document, as `docs/admin-api.json` holds it.
pub(crate) fn openapi() -> String {
    let doc = Document {
        info: json!({
            "title": "jobwheel admin API",
            "version": "1",
            "description": "The HTTP API of `jobwheel serve`: jobs, runs, statistics, nodes, executors, alarms and the audit log. Authenticate with a bearer token (`Authorization: Bearer jw_…`) or the session cookie from `POST /api/v1/session`; a change made with the cookie carries `X-CSRF-Token`. `x-role` names the least role an operation needs (`none`: no credentials). Every change is written to the audit log, in the same transaction as the change.",
        }),
        servers: json!([{"url": "/"}]),
        tags: json!([
            {"name": "server"},
            {"name": "session"},
            {"name": "jobs"},
            {"name": "runs"},
            {"name": "cluster"},
            {"name": "alarms"},
            {"name": "audit"},
            {"name": "access"},
        ]),
        components: json!({
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "session": {"type": "apiKey", "in": "cookie", "name": "jobwheel_session"},
            },
        }),
        security: None,
        root_security: Some(json!([{"bearer": []}, {"session": []}])),
        common_params: json!([]),
        response_headers: None,
        error: schema::<ApiError>,
    };
    to_file(&document(&doc, &operations()))
}
