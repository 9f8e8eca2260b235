//! The job model: a named definition kept in the store.
//!
//! A [`Job`] can only be built through [`JobBuilder`] (or deserialized, which runs the
//! same checks), so every `Job` value is valid: its id, schedule, payload size,
//! durations and policies have all been checked.

use crate::error::{Error, Result};
pub use crate::job_id::{JobId, MAX_JOB_ID_LEN};
use crate::limits;
use crate::links::{ChildLink, JoinWindow};
use crate::placement::RemoteTarget;
use crate::policy::{AlarmPolicy, MisfirePolicy, RetryPolicy};
use crate::schedule::Schedule;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

/// Default payload limit: 64 KiB of serialized JSON.
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 64 * 1024;

/// A job definition.
///
/// Two jobs are equal when every field is equal; the store uses that to make
/// `upsert` idempotent.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(into = "JobRepr")]
pub struct Job {
    id: JobId,
    handler: String,
    payload: Value,
    schedule: Schedule,
    retry: RetryPolicy,
    misfire: MisfirePolicy,
    misfire_threshold: Option<Duration>,
    timeout: Option<Duration>,
    alarm: AlarmPolicy,
    enabled: bool,
    remote: Option<RemoteTarget>,
    children: Vec<ChildLink>,
    after: Vec<JobId>,
    join_window: Option<JoinWindow>,
    wait_deadline: Option<Duration>,
}

impl Job {
    /// Starts a builder for a job with this id, handler name and schedule.
    pub fn builder(
        id: impl Into<String>,
        handler: impl Into<String>,
        schedule: Schedule,
    ) -> JobBuilder {
        JobBuilder {
            repr: JobRepr {
                id: id.into(),
                handler: handler.into(),
                payload: Value::Null,
                schedule,
                retry: RetryPolicy::default(),
                misfire: MisfirePolicy::default(),
                misfire_threshold: None,
                timeout: None,
                alarm: AlarmPolicy::default(),
                enabled: true,
                remote: None,
                children: Vec::new(),
                after: Vec::new(),
                join_window: None,
                wait_deadline: None,
            },
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
        }
    }

    /// Where the job runs: `None` in the scheduler's process (a handler registered
    /// on the scheduler), or the remote executor group that runs its handler.
    pub fn remote(&self) -> Option<&RemoteTarget> {
        self.remote.as_ref()
    }

    /// A builder holding this job's fields, to derive a changed copy.
    pub fn to_builder(&self) -> JobBuilder {
        JobBuilder {
            repr: self.clone().into(),
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
        }
    }

    /// The id.
    pub fn id(&self) -> &JobId {
        &self.id
    }
    /// Name of the registered handler that runs this job.
    pub fn handler(&self) -> &str {
        &self.handler
    }
    /// JSON payload handed to the handler.
    pub fn payload(&self) -> &Value {
        &self.payload
    }
    /// When it fires.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }
    /// Retry policy.
    pub fn retry(&self) -> &RetryPolicy {
        &self.retry
    }
    /// Misfire policy.
    pub fn misfire(&self) -> MisfirePolicy {
        self.misfire
    }
    /// Per-job misfire threshold; `None` uses the scheduler's (default 5 s).
    pub fn misfire_threshold(&self) -> Option<Duration> {
        self.misfire_threshold
    }
    /// Per-run timeout; `None` means no limit.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
    /// Alarm policy.
    pub fn alarm(&self) -> &AlarmPolicy {
        &self.alarm
    }
    /// Whether the job fires (false when paused).
    pub fn enabled(&self) -> bool {
        self.enabled
    }
    /// The jobs each of its fires triggers when it ends as their link asks (see
    /// [`dependency`](crate::dependency)).
    pub fn children(&self) -> &[ChildLink] {
        &self.children
    }
    /// The parents whose releases it waits to have all of, for one instant, before
    /// it runs once for them (fan-in; see [`dependency`](crate::dependency)); empty:
    /// it runs once per release.
    pub fn after(&self) -> &[JobId] {
        &self.after
    }
    /// The window its parents' releases are joined over instead of their exact
    /// instant (`None`: the exact instant; see [`dependency`](crate::dependency)).
    pub fn join_window(&self) -> Option<&JoinWindow> {
        self.join_window.as_ref()
    }
    /// How long a release may wait in the job's queue (for the rest of a join, or
    /// for the job to be able to take it) before a [`Waiting`](crate::AlarmKind::Waiting)
    /// alarm is raised for its instant; `None`: no such alarm.
    pub fn wait_deadline(&self) -> Option<Duration> {
        self.wait_deadline
    }

    /// The same job, enabled or paused.
    pub fn with_enabled(&self, enabled: bool) -> Job {
        Job {
            enabled,
            ..self.clone()
        }
    }

    /// The same job with another payload (what a fire triggered with a payload
    /// override runs). The payload is not checked: see [`check_payload_value`].
    pub fn with_payload(&self, payload: Value) -> Job {
        Job {
            id: self.id.clone(),
            handler: self.handler.clone(),
            payload,
            schedule: self.schedule.clone(),
            retry: self.retry.clone(),
            misfire: self.misfire,
            misfire_threshold: self.misfire_threshold,
            timeout: self.timeout,
            alarm: self.alarm.clone(),
            enabled: self.enabled,
            remote: self.remote.clone(),
            children: self.children.clone(),
            after: self.after.clone(),
            join_window: self.join_window.clone(),
            wait_deadline: self.wait_deadline,
        }
    }

    /// Checks the payload against a size limit (bytes of serialized JSON).
    pub fn check_payload(&self, max_bytes: usize) -> Result<()> {
        check_payload_value("job.payload", &self.payload, max_bytes)
    }
}

/// Checks a payload given apart from a job (a manual trigger's override) as a job's
/// payload is checked: at most [`MAX_PAYLOAD_DEPTH`](limits::MAX_PAYLOAD_DEPTH)
/// levels and `max_bytes` bytes of JSON. Errors: [`Error::Invalid`] naming `field`.
pub fn check_payload_value(field: &'static str, payload: &Value, max_bytes: usize) -> Result<()> {
    let depth = limits::depth(payload, limits::MAX_PAYLOAD_DEPTH);
    if depth > limits::MAX_PAYLOAD_DEPTH {
        return Err(Error::invalid(
            field,
            format!("nested over {} levels", depth - 1),
            format!("must nest at most {} levels", limits::MAX_PAYLOAD_DEPTH),
        ));
    }
    let len = serde_json::to_vec(payload)
        .map(|v| v.len())
        .unwrap_or(usize::MAX);
    if len > max_bytes {
        return Err(Error::invalid(
            field,
            format!("{len} bytes"),
            format!("exceeds the limit of {max_bytes} bytes"),
        ));
    }
    Ok(())
}

/// Builds a [`Job`]; [`build`](JobBuilder::build) validates every field.
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build()`"]
pub struct JobBuilder {
    repr: JobRepr,
    max_payload_bytes: usize,
}

impl JobBuilder {
    /// Sets the JSON payload.
    pub fn payload(mut self, payload: Value) -> Self {
        self.repr.payload = payload;
        self
    }
    /// Sets the schedule.
    pub fn schedule(mut self, schedule: Schedule) -> Self {
        self.repr.schedule = schedule;
        self
    }
    /// Sets the handler name.
    pub fn handler(mut self, handler: impl Into<String>) -> Self {
        self.repr.handler = handler.into();
        self
    }
    /// Sets the retry policy.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.repr.retry = retry;
        self
    }
    /// Sets the misfire policy.
    pub fn misfire(mut self, misfire: MisfirePolicy) -> Self {
        self.repr.misfire = misfire;
        self
    }
    /// Sets the misfire threshold (must be positive).
    pub fn misfire_threshold(mut self, threshold: Duration) -> Self {
        self.repr.misfire_threshold = Some(threshold);
        self
    }
    /// Sets the per-run timeout (must be positive).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.repr.timeout = Some(timeout);
        self
    }
    /// Sets the alarm policy.
    pub fn alarm(mut self, alarm: AlarmPolicy) -> Self {
        self.repr.alarm = alarm;
        self
    }
    /// Enables or pauses the job.
    pub fn enabled(mut self, enabled: bool) -> Self {
        self.repr.enabled = enabled;
        self
    }
    /// Sets the jobs each fire triggers when it ends as their link asks
    /// (checked by [`build`](Self::build): at most 32, none twice, not the job).
    pub fn children(mut self, children: Vec<ChildLink>) -> Self {
        self.repr.children = children;
        self
    }

    /// Sets the parents whose releases for one instant the job waits to have all of
    /// before it runs once for them (checked by [`build`](Self::build): at most 32,
    /// none twice, not the job; each lists the job among its children).
    pub fn after(mut self, parents: Vec<JobId>) -> Self {
        self.repr.after = parents;
        self
    }

    /// Joins the parents' releases by the window (an hour or a day of a zone) their
    /// instants fall in, instead of the exact instant (checked by
    /// [`build`](Self::build): a valid zone, and parents in `after`).
    pub fn join_window(mut self, window: JoinWindow) -> Self {
        self.repr.join_window = Some(window);
        self
    }

    /// Sets how long a release may wait in the job's queue before a
    /// [`Waiting`](crate::AlarmKind::Waiting) alarm is raised for its instant (must
    /// be positive).
    pub fn wait_deadline(mut self, deadline: Duration) -> Self {
        self.repr.wait_deadline = Some(deadline);
        self
    }

    /// Adds a child triggered when a fire of this job succeeds.
    pub fn child(mut self, job: JobId) -> Self {
        self.repr.children.push(ChildLink::on_success(job));
        self
    }

    /// Runs the job on a remote executor group: the job's handler name is the
    /// handler an instance of that group serves.
    pub fn remote(mut self, target: RemoteTarget) -> Self {
        self.repr.remote = Some(target);
        self
    }

    /// Runs the job in the scheduler's process (the default).
    pub fn local(mut self) -> Self {
        self.repr.remote = None;
        self
    }

    /// Changes the payload limit checked by `build` (default 64 KiB).
    pub fn max_payload_bytes(mut self, bytes: usize) -> Self {
        self.max_payload_bytes = bytes;
        self
    }

    /// Validates and builds the job.
    ///
    /// Errors ([`Error::Invalid`], naming the field): `job.id` outside 1-200 chars of
    /// `[A-Za-z0-9._:-]`, empty `job.handler`, `job.payload` over the limit, zero
    /// `job.timeout`, `job.misfire_threshold` or `job.wait_deadline`, `misfire.max`
    /// of 0.
    pub fn build(self) -> Result<Job> {
        Job::from_repr(self.repr, self.max_payload_bytes)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
struct JobRepr {
    id: String,
    handler: String,
    #[serde(default)]
    payload: Value,
    schedule: Schedule,
    #[serde(default)]
    retry: RetryPolicy,
    #[serde(default)]
    misfire: MisfirePolicy,
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schemars(with = "Option<String>"))]
    misfire_threshold: Option<Duration>,
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schemars(with = "Option<String>"))]
    timeout: Option<Duration>,
    #[serde(default)]
    alarm: AlarmPolicy,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    remote: Option<RemoteTarget>,
    /// Jobs to trigger when a fire of this one ends (see `dependency`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    children: Vec<ChildLink>,
    /// Parents whose releases for one instant it waits to have all of.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    after: Vec<JobId>,
    /// The window parents' releases are joined over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    join_window: Option<JoinWindow>,
    /// How long a release may wait in its queue before a `waiting` alarm.
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schemars(with = "Option<String>"))]
    wait_deadline: Option<Duration>,
}

fn yes() -> bool {
    true
}

/// Deserializing a job is strict, as at any edge where a person or another program
/// supplies one: an unknown field anywhere in it is refused (naming its path), and the
/// payload is held to the default limit. Rows a store reads back use
/// [`Job::from_stored`] instead.
/// A job's schema is its definition's: the JSON that creates it.
#[cfg(feature = "openapi")]
impl schemars::JsonSchema for Job {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Job".into()
    }
    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        JobRepr::json_schema(g)
    }
}

impl<'de> Deserialize<'de> for Job {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        use serde::de::Error as _;
        let mut unknown: Option<String> = None;
        let repr: JobRepr = serde_ignored::deserialize(d, |path| {
            unknown.get_or_insert_with(|| path.to_string());
        })?;
        if let Some(path) = unknown {
            return Err(D::Error::custom(format!("unknown field `{path}`")));
        }
        Job::from_repr(repr, DEFAULT_MAX_PAYLOAD_BYTES).map_err(D::Error::custom)
    }
}

impl Job {
    /// Reads a job definition that a person or another program supplied (JSON), as
    /// strictly as deserializing one: an unknown field is refused, the payload is held
    /// to the default limit.
    ///
    /// Errors: [`Error::Invalid`] naming the field — `job.<path>` for JSON that does
    /// not fit the definition (an unknown field, a wrong type), or the field a check
    /// refused (`job.id`, `job.handler`, `job.payload`, `schedule.cron` …).
    pub fn from_json(text: &str) -> Result<Job> {
        let mut unknown: Option<String> = None;
        let de = &mut serde_json::Deserializer::from_str(text);
        let repr: JobRepr = serde_path_to_error::deserialize(serde_ignored::Deserializer::new(
            de,
            &mut |path: serde_ignored::Path<'_>| {
                unknown.get_or_insert_with(|| path.to_string());
            },
        ))
        .map_err(|e| {
            let path = e.path().to_string();
            Error::invalid(
                "job",
                if path == "." {
                    "(definition)".to_string()
                } else {
                    path
                },
                e.into_inner().to_string(),
            )
        })?;
        if let Some(path) = unknown {
            return Err(Error::invalid("job", path, "unknown field"));
        }
        Job::from_repr(repr, DEFAULT_MAX_PAYLOAD_BYTES)
    }

    /// Reads a job definition as a store wrote it (JSON), leniently: fields it does not
    /// know (written by a newer version) are ignored, and no payload limit applies —
    /// limits are enforced when a job is stored through the API, so a job accepted with
    /// a larger `max_payload_bytes` reads back. Everything that makes a job runnable
    /// (id, handler, schedule, policies) is still checked.
    pub fn from_stored(text: &str) -> Result<Job> {
        let repr: JobRepr = serde_json::from_str(text)
            .map_err(|e| Error::invalid("job.definition", truncate(text), e.to_string()))?;
        Job::from_repr(repr, usize::MAX)
    }
}

fn truncate(text: &str) -> String {
    text.chars().take(80).collect()
}

impl Job {
    fn from_repr(r: JobRepr, max_payload_bytes: usize) -> Result<Self> {
        let id = JobId::new(&r.id)?;
        let handler = r.handler.trim();
        if handler.is_empty() || handler.len() > 200 {
            return Err(Error::invalid(
                "job.handler",
                &r.handler,
                "must be 1-200 characters",
            ));
        }
        if let Err(e) = check_payload_value("job.payload", &r.payload, max_payload_bytes) {
            limits::drop_flat(r.payload);
            return Err(e);
        }
        for (field, d) in [
            ("job.timeout", r.timeout),
            ("job.misfire_threshold", r.misfire_threshold),
            ("job.wait_deadline", r.wait_deadline),
        ] {
            if let Some(d) = d {
                limits::duration(field, d, limits::MAX_SPAN)?;
            }
        }
        r.schedule.check()?;
        r.misfire.validate()?;
        crate::links::check_children(&id, &r.children)?;
        crate::links::check_after(&id, &r.after)?;
        crate::links::check_window(r.join_window.as_ref(), &r.after)?;
        Ok(Job {
            id,
            handler: handler.to_string(),
            payload: r.payload,
            schedule: r.schedule,
            retry: r.retry,
            misfire: r.misfire,
            misfire_threshold: r.misfire_threshold,
            timeout: r.timeout,
            alarm: r.alarm,
            enabled: r.enabled,
            remote: r.remote,
            children: r.children,
            after: r.after,
            join_window: r.join_window,
            wait_deadline: r.wait_deadline,
        })
    }
}

impl From<Job> for JobRepr {
    fn from(j: Job) -> Self {
        JobRepr {
            id: j.id.to_string(),
            handler: j.handler,
            payload: j.payload,
            schedule: j.schedule,
            retry: j.retry,
            misfire: j.misfire,
            misfire_threshold: j.misfire_threshold,
            timeout: j.timeout,
            alarm: j.alarm,
            enabled: j.enabled,
            remote: j.remote,
            children: j.children,
            after: j.after,
            join_window: j.join_window,
            wait_deadline: j.wait_deadline,
        }
    }
}
