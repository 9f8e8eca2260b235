//! The audit log's entries: who changed what, when, and the state before and after.

use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

/// What an audited change did: every action the operations layer and the server
/// record, written in the log as `<noun>.<verb>` ([`as_str`](Self::as_str)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AuditAction {
    /// A job stored by an upsert (created, or changed if its definition differed).
    JobUpsert,
    /// A batch of jobs stored by one bulk upsert (one entry for the batch).
    JobUpsertMany,
    /// A job created (refused if one of that id exists).
    JobCreate,
    /// A job's definition replaced.
    JobUpdate,
    /// A job created as a copy of another.
    JobCopy,
    /// A job removed.
    JobRemove,
    /// A job paused.
    JobPause,
    /// A job resumed.
    JobResume,
    /// A job fired by hand.
    JobTrigger,
    /// An instant of a job that waits for its parents released by an operator.
    JobRelease,
    /// An instant of a job that waits for its parents skipped by an operator.
    JobSkip,
    /// A running run killed.
    RunKill,
    /// A failed alarm event sent again.
    AlarmRetry,
    /// A failed alarm event discarded.
    AlarmDiscard,
    /// A login to the admin API.
    SessionLogin,
    /// A refused login.
    SessionLoginFailed,
    /// An account added at runtime.
    AccountAdd,
    /// An account removed.
    AccountRemove,
    /// An API token added at runtime.
    TokenAdd,
    /// An API token removed.
    TokenRemove,
}

impl AuditAction {
    /// Every action.
    pub const ALL: [AuditAction; 20] = [
        AuditAction::JobUpsert,
        AuditAction::JobUpsertMany,
        AuditAction::JobCreate,
        AuditAction::JobUpdate,
        AuditAction::JobCopy,
        AuditAction::JobRemove,
        AuditAction::JobPause,
        AuditAction::JobResume,
        AuditAction::JobTrigger,
        AuditAction::JobRelease,
        AuditAction::JobSkip,
        AuditAction::RunKill,
        AuditAction::AlarmRetry,
        AuditAction::AlarmDiscard,
        AuditAction::SessionLogin,
        AuditAction::SessionLoginFailed,
        AuditAction::AccountAdd,
        AuditAction::AccountRemove,
        AuditAction::TokenAdd,
        AuditAction::TokenRemove,
    ];

    /// The action as the log keeps it: `job.create`, `run.kill`, `token.remove`, …
    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::JobUpsert => "job.upsert",
            AuditAction::JobUpsertMany => "job.upsert_many",
            AuditAction::JobCreate => "job.create",
            AuditAction::JobUpdate => "job.update",
            AuditAction::JobCopy => "job.copy",
            AuditAction::JobRemove => "job.remove",
            AuditAction::JobPause => "job.pause",
            AuditAction::JobResume => "job.resume",
            AuditAction::JobTrigger => "job.trigger",
            AuditAction::JobRelease => "job.release",
            AuditAction::JobSkip => "job.skip",
            AuditAction::RunKill => "run.kill",
            AuditAction::AlarmRetry => "alarm.retry",
            AuditAction::AlarmDiscard => "alarm.discard",
            AuditAction::SessionLogin => "session.login",
            AuditAction::SessionLoginFailed => "session.login_failed",
            AuditAction::AccountAdd => "account.add",
            AuditAction::AccountRemove => "account.remove",
            AuditAction::TokenAdd => "token.add",
            AuditAction::TokenRemove => "token.remove",
        }
    }

    /// The action `text` names (`None`: one this version does not know, such as an
    /// entry a newer jobwheel wrote).
    pub fn parse(text: &str) -> Option<AuditAction> {
        AuditAction::ALL.into_iter().find(|a| a.as_str() == text)
    }

    /// Whether it removed what it names: its entry keeps the state before, not after.
    pub fn removes(self) -> bool {
        matches!(
            self,
            AuditAction::JobRemove | AuditAction::AccountRemove | AuditAction::TokenRemove
        )
    }
}

impl std::fmt::Display for AuditAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One change made by a person or a token through the admin API or the command
/// line, as it is appended to the audit log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct AuditEntry {
    /// Who made it: an account's name, or `token:<name>` for an API token.
    pub actor: String,
    /// What was done, as `<noun>.<verb>` (`job.create`, `job.pause`, `run.kill`,
    /// `alarm.retry`, `session.login` …).
    pub action: String,
    /// What it was done to: a job id, a run id, an alarm id, an account.
    pub target: String,
    /// The state before (for a change or a removal), as JSON.
    pub before: Option<serde_json::Value>,
    /// The state after (for a creation or a change), or the request's arguments, as JSON.
    pub after: Option<serde_json::Value>,
}

impl AuditEntry {
    /// The entry of `action` by `actor` on `target`, with the states before and after.
    pub fn new(
        actor: impl Into<String>,
        action: AuditAction,
        target: impl Into<String>,
        before: Option<serde_json::Value>,
        after: Option<serde_json::Value>,
    ) -> AuditEntry {
        AuditEntry {
            actor: actor.into(),
            action: action.as_str().to_string(),
            target: target.into(),
            before,
            after,
        }
    }

    /// The action, if it is one this version knows.
    pub fn action(&self) -> Option<AuditAction> {
        AuditAction::parse(&self.action)
    }
}

/// An [`AuditEntry`] as the store keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct AuditRecord {
    /// Increases with every entry appended to one store.
    pub id: i64,
    /// When it was appended (store clock).
    pub at: Timestamp,
    /// The entry.
    #[serde(flatten)]
    pub entry: AuditEntry,
}

#[cfg(test)]
mod tests {
    use super::AuditAction;

    #[test]
    fn every_action_reads_back_from_its_name() {
        for a in AuditAction::ALL {
            assert_eq!(AuditAction::parse(a.as_str()), Some(a));
            let (noun, verb) = a.as_str().split_once('.').unwrap();
            assert!(!noun.is_empty() && !verb.is_empty(), "{a}");
        }
        assert_eq!(AuditAction::parse("job.delete"), None);
    }
}
