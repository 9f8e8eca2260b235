//! The audit log's entries: who changed what, when, and the state before and after.

use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

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
