//! The jobs' operations in the admin API's document: the list, one job, its
//! actions, fires and dependencies, and what the job form reads (cron preview,
//! defaults).

use super::*;

/// This area's operations, in the router's order.
pub(super) fn operations() -> Vec<Operation> {
    vec![
        Operation {
            query: Some(schema::<jobs::ListQuery>),
            ..op(
                ("get", "/api/v1/jobs"),
                "listJobs",
                "jobs",
                "viewer",
                "Jobs in id order, a keyset page, filtered",
                Some(schema::<JobPage>),
                READ,
            )
        },
        Operation {
            description: "The body is a job definition, as `Job::from_json` reads it.",
            body: Some((schema::<Job>, false)),
            ok: (201, "Created.", Some(schema::<JobView>)),
            ..op(
                ("post", "/api/v1/jobs"),
                "createJob",
                "jobs",
                "admin",
                "Create a job",
                None,
                &[
                    E400,
                    E401,
                    E403,
                    (409, "`conflict` (a job has the id)"),
                    E413,
                    E503,
                ],
            )
        },
        Operation {
            path_params: ID_JOB,
            ..op(
                ("get", "/api/v1/jobs/{id}"),
                "getJob",
                "jobs",
                "viewer",
                "One job",
                Some(schema::<JobView>),
                READ_ONE,
            )
        },
        Operation {
            description: "The body's id must be the path's. The job's next fire is computed again from now when its schedule changes.",
            path_params: ID_JOB,
            body: Some((schema::<Job>, false)),
            ..op(
                ("put", "/api/v1/jobs/{id}"),
                "updateJob",
                "jobs",
                "admin",
                "Replace a job's definition",
                Some(schema::<JobView>),
                &[E400, E401, E403, E404, E413, E503],
            )
        },
        Operation {
            path_params: ID_JOB,
            ..op(
                ("delete", "/api/v1/jobs/{id}"),
                "removeJob",
                "jobs",
                "admin",
                "Remove a job (its runs stay in the log)",
                Some(schema::<Removed>),
                &[E400, E401, E403, E404, E503],
            )
        },
        Operation {
            description: "The copy has the original's definition under the new id, its enabled state included.",
            path_params: ID_JOB,
            body: Some((schema::<jobs::CopyTo>, false)),
            ok: (201, "Created.", Some(schema::<JobView>)),
            ..op(
                ("post", "/api/v1/jobs/{id}/copy"),
                "copyJob",
                "jobs",
                "admin",
                "Copy a job under a new id",
                None,
                &[
                    E400,
                    E401,
                    E403,
                    E404,
                    (409, "`conflict` (a job has the new id)"),
                    E413,
                    E503,
                ],
            )
        },
        Operation {
            path_params: ID_JOB,
            ..op(
                ("post", "/api/v1/jobs/{id}/pause"),
                "pauseJob",
                "jobs",
                "operator",
                "Pause a job",
                Some(schema::<JobView>),
                ACTION,
            )
        },
        Operation {
            path_params: ID_JOB,
            ..op(
                ("post", "/api/v1/jobs/{id}/resume"),
                "resumeJob",
                "jobs",
                "operator",
                "Resume a job from its next fire after now",
                Some(schema::<JobView>),
                ACTION,
            )
        },
        Operation {
            description: "Runs once any run in progress ends. With a body `{\"payload\": …}` that fire and its retries run with this payload in place of the job's own (the run log records it); the job's definition is unchanged. No body, or `null`, runs the job's payload. A payload over the server's `max_payload_bytes` answers 400 naming `payload`. A paused job is refused 409 `conflict`. The node is woken: the run starts without waiting for its next poll.",
            path_params: ID_JOB,
            body: Some((schema::<jobs::TriggerBody>, true)),
            ..op(
                ("post", "/api/v1/jobs/{id}/trigger"),
                "triggerJob",
                "jobs",
                "operator",
                "Run a job now (trigger `manual`)",
                Some(schema::<JobView>),
                ACTION,
            )
        },
        Operation {
            path_params: ID_JOB,
            query: Some(schema::<jobs::FiresQuery>),
            ..op(
                ("get", "/api/v1/jobs/{id}/fires"),
                "jobFires",
                "jobs",
                "viewer",
                "The job's next fires in its zone",
                Some(schema::<Fires>),
                READ_ONE,
            )
        },
        Operation {
            path_params: ID_JOB,
            ..op(
                ("get", "/api/v1/jobs/{id}/dependencies"),
                "jobDependencies",
                "jobs",
                "viewer",
                "The job's children, the jobs whose children it is, and the releases queued for it",
                Some(schema::<crate::ops::Dependencies>),
                READ_ONE,
            )
        },
        Operation {
            description: "For a job that waits for several parents (`after`): queues a release of the instant in place of each parent that has not released it (named by the caller, run 0), so the job runs once for the instant as soon as it is free. A job that waits for no parents answers 400 naming `job.after`.",
            path_params: ID_JOB,
            body: Some((schema::<jobs::InstantBody>, true)),
            ..op(
                ("post", "/api/v1/jobs/{id}/release"),
                "releaseJobInstant",
                "jobs",
                "operator",
                "Run a job once for an upstream instant its parents have not all released",
                Some(schema::<jobs::Released>),
                ACTION,
            )
        },
        Operation {
            description: "Drops the releases queued for the job at the instant: it does not run for it (a parent that releases it again queues it again). An instant with nothing queued answers 404.",
            path_params: ID_JOB,
            body: Some((schema::<jobs::InstantBody>, true)),
            ..op(
                ("post", "/api/v1/jobs/{id}/skip"),
                "skipJobInstant",
                "jobs",
                "operator",
                "Skip an upstream instant a job waits for",
                Some(schema::<jobs::Skipped>),
                ACTION,
            )
        },
        Operation {
            query: Some(schema::<jobs::PreviewQuery>),
            ..op(
                ("get", "/api/v1/cron/preview"),
                "cronPreview",
                "jobs",
                "viewer",
                "A cron expression's next fires in a zone, and a description",
                Some(schema::<CronPreview>),
                &[E400, E401],
            )
        },
        op(
            ("get", "/api/v1/defaults"),
            "jobDefaults",
            "jobs",
            "viewer",
            "What a job gets for each field its definition leaves out, the choices of each policy field, and the payload limit in force",
            Some(schema::<Defaults>),
            &[E401, E503],
        ),
    ]
}
