//! The queries the store traits take. Each is `#[non_exhaustive]` and built with
//! chained setters, so a field added later breaks no custom store and no caller.

use crate::job::JobId;
use crate::record::{
    AlarmId, AlarmRecord, AlarmStatus, AuditRecord, DueKey, RunId, RunRecord, RunStatus,
    TriggerKind,
};
use crate::time::Timestamp;
use std::time::Duration;

/// What [`Jobs::due`](super::Jobs::due) returns: due fires with `next_fire_at <=
/// until`, in due order, only those after `after`, at most `limit`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DueQuery {
    /// The latest instant returned (inclusive).
    pub until: Timestamp,
    /// Only fires that sort strictly after this key (a keyset page).
    pub after: Option<DueKey>,
    /// At most this many rows looked at (fires returned plus corrupt rows skipped).
    pub limit: usize,
}

impl DueQuery {
    /// Fires due by `until`, at most `limit`, from the start of the due order.
    pub fn new(until: Timestamp, limit: usize) -> Self {
        DueQuery {
            until,
            after: None,
            limit,
        }
    }

    /// Continues after `key`.
    pub fn after(mut self, key: Option<DueKey>) -> Self {
        self.after = key;
        self
    }
}

/// What [`Jobs::list`](super::Jobs::list) returns: jobs in id order (bytewise), only
/// those with an id after `after`, at most `limit`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobQuery {
    /// Only ids that sort strictly after this one.
    pub after: Option<JobId>,
    /// At most this many rows looked at (0 means 100).
    pub limit: usize,
}

impl JobQuery {
    /// At most `limit` jobs from the first id.
    pub fn new(limit: usize) -> Self {
        JobQuery { after: None, limit }
    }

    /// Continues after `id`.
    pub fn after(mut self, id: Option<JobId>) -> Self {
        self.after = id;
        self
    }

    /// The effective limit: 100 for 0, at most
    /// [`MAX_PAGE`](crate::limits::MAX_PAGE) rows.
    pub fn effective_limit(&self) -> usize {
        match self.limit {
            0 => 100,
            n => n.min(crate::limits::MAX_PAGE),
        }
    }
}

/// A run-log query. Results are newest first (by run id, descending).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunQuery {
    /// Only this job.
    pub job_id: Option<JobId>,
    /// Only this status.
    pub status: Option<RunStatus>,
    /// Only runs recorded on this node.
    pub node: Option<String>,
    /// Only runs of this trigger (`Manual`, `Retry`, …).
    pub trigger: Option<TriggerKind>,
    /// Only runs started at or after this.
    pub since: Option<Timestamp>,
    /// Only runs started before this.
    pub until: Option<Timestamp>,
    /// Only runs with an id below this (paging).
    pub before: Option<RunId>,
    /// At most this many (0 means 100).
    pub limit: usize,
}

impl RunQuery {
    /// Every run, newest first, at most 100.
    pub fn new() -> Self {
        RunQuery::default()
    }

    /// Only runs of `job`.
    pub fn job(mut self, job: JobId) -> Self {
        self.job_id = Some(job);
        self
    }

    /// Only runs in `status`.
    pub fn status(mut self, status: RunStatus) -> Self {
        self.status = Some(status);
        self
    }

    /// Only runs recorded on the node `id`.
    pub fn node(mut self, id: impl Into<String>) -> Self {
        self.node = Some(id.into());
        self
    }

    /// Only runs whose trigger is `trigger`.
    pub fn trigger(mut self, trigger: TriggerKind) -> Self {
        self.trigger = Some(trigger);
        self
    }

    /// Only runs started at or after `t`.
    pub fn since(mut self, t: Timestamp) -> Self {
        self.since = Some(t);
        self
    }

    /// Only runs started before `t`.
    pub fn until(mut self, t: Timestamp) -> Self {
        self.until = Some(t);
        self
    }

    /// Only runs with an id below `id` (the next page).
    pub fn before(mut self, id: RunId) -> Self {
        self.before = Some(id);
        self
    }

    /// At most `n` runs (0 means 100).
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = n;
        self
    }

    /// The effective limit: 100 for 0, at most
    /// [`MAX_PAGE`](crate::limits::MAX_PAGE) rows.
    pub fn effective_limit(&self) -> usize {
        match self.limit {
            0 => 100,
            n => n.min(crate::limits::MAX_PAGE),
        }
    }

    /// Whether `r` passes every filter.
    pub fn matches(&self, r: &RunRecord) -> bool {
        self.job_id.as_ref().is_none_or(|j| *j == r.job_id)
            && self.status.is_none_or(|s| s == r.status)
            && self.node.as_ref().is_none_or(|n| *n == r.node)
            && self.trigger.is_none_or(|t| t == r.trigger)
            && self.since.is_none_or(|s| r.started_at >= s)
            && self.until.is_none_or(|u| r.started_at < u)
            && self.before.is_none_or(|b| r.id < b)
    }
}

/// What [`AlarmOutbox::alarms`](super::AlarmOutbox::alarms) returns: events newest
/// first, optionally of one status or the one with an id, at most `limit`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AlarmQuery {
    /// Only events in this status.
    pub status: Option<AlarmStatus>,
    /// Only the event with this id.
    pub id: Option<AlarmId>,
    /// At most this many (0 means 100).
    pub limit: usize,
}

impl AlarmQuery {
    /// The newest `limit` events.
    pub fn new(limit: usize) -> Self {
        AlarmQuery {
            status: None,
            id: None,
            limit,
        }
    }

    /// Only the event `id` (at most one).
    pub fn id(mut self, id: AlarmId) -> Self {
        self.id = Some(id);
        self
    }

    /// Whether `a` passes every filter.
    pub fn matches(&self, a: &AlarmRecord) -> bool {
        self.status.is_none_or(|s| a.status == s) && self.id.is_none_or(|i| a.id == i)
    }

    /// Only events in `status`.
    pub fn status(mut self, status: Option<AlarmStatus>) -> Self {
        self.status = status;
        self
    }

    /// The effective limit: 100 for 0, at most
    /// [`MAX_PAGE`](crate::limits::MAX_PAGE) rows.
    pub fn effective_limit(&self) -> usize {
        match self.limit {
            0 => 100,
            n => n.min(crate::limits::MAX_PAGE),
        }
    }
}

/// A claim of alarm events for delivery
/// ([`AlarmOutbox::claim_alarms`](super::AlarmOutbox::claim_alarms)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AlarmClaim {
    /// Who delivers them (a node id).
    pub owner: String,
    /// At most this many events.
    pub limit: usize,
    /// How long the claim lasts before another claimer may take the events.
    pub lease: Duration,
}

impl AlarmClaim {
    /// Up to `limit` events for `owner`, held for `lease`.
    pub fn new(owner: impl Into<String>, limit: usize, lease: Duration) -> Self {
        AlarmClaim {
            owner: owner.into(),
            limit,
            lease,
        }
    }
}

/// What [`AuditLog::audit`](super::AuditLog::audit) returns: entries newest first,
/// optionally only one actor's or one target's, only ids below `before`, at most
/// `limit`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuditQuery {
    /// Only entries by this actor.
    pub actor: Option<String>,
    /// Only entries about this target.
    pub target: Option<String>,
    /// Only entries with an id below this (the next page).
    pub before: Option<i64>,
    /// At most this many (0 means 100).
    pub limit: usize,
}

impl AuditQuery {
    /// The newest `limit` entries.
    pub fn new(limit: usize) -> Self {
        AuditQuery {
            limit,
            ..AuditQuery::default()
        }
    }

    /// Only entries by `actor`.
    pub fn actor(mut self, actor: Option<String>) -> Self {
        self.actor = actor;
        self
    }

    /// Only entries about `target`.
    pub fn target(mut self, target: Option<String>) -> Self {
        self.target = target;
        self
    }

    /// Only entries with an id below `id`.
    pub fn before(mut self, id: Option<i64>) -> Self {
        self.before = id;
        self
    }

    /// The effective limit: 100 for 0, at most
    /// [`MAX_PAGE`](crate::limits::MAX_PAGE) rows.
    pub fn effective_limit(&self) -> usize {
        match self.limit {
            0 => 100,
            n => n.min(crate::limits::MAX_PAGE),
        }
    }

    /// Whether `r` passes every filter.
    pub fn matches(&self, r: &AuditRecord) -> bool {
        self.actor.as_ref().is_none_or(|a| *a == r.entry.actor)
            && self.target.as_ref().is_none_or(|t| *t == r.entry.target)
            && self.before.is_none_or(|b| r.id < b)
    }
}
