//! The operations layer: every change to a job, a run or an alarm, implemented once.
//!
//! [`Scheduler`](crate::Scheduler), the admin API and the `jobwheel` command line all
//! change state through an [`Ops`]: upsert, create, update, copy, pause, resume,
//! trigger (with or without a payload override), remove, kill, and an operator's
//! alarm retry and discard. Each operation
//!
//! * takes an [`Actor`] (the library, an account, a token, the command line), limited
//!   to executor groups or not: a job of a group the actor does not see answers as
//!   if it did not exist ([`Error::NotFound`]), and one it may not place is
//!   [`Error::Forbidden`];
//! * validates against the configuration in force (the payload limit given to
//!   [`Ops::max_payload_bytes`], and a validator such as "a handler is registered on
//!   this node"), refusing with a typed error that names the field before anything is
//!   written;
//! * writes one audit entry of one shape ([`AuditEntry`], with the job's state before
//!   and after as a [`JobSnapshot`]) in the same atomic step as the change
//!   ([`Jobs::apply`](crate::store::Jobs::apply)), so a change whose audit entry cannot
//!   be written is not made;
//! * wakes the poller of the node it belongs to ([`Ops::on_change`]), so a trigger
//!   through a server's API runs at once on that server's node.

mod actor;
mod dependencies;
mod doctor;
mod jobs;
mod runs;
mod sight;

pub use actor::Actor;
pub use dependencies::{Dependencies, MAX_QUEUED_SHOWN, ParentLink};
pub use doctor::Doctor;
pub use jobs::{JobSnapshot, first_fire};
pub use runs::RunKiller;
pub use sight::Sight;

use crate::error::{Error, Result};
use crate::job::{DEFAULT_MAX_PAYLOAD_BYTES, Job};
use crate::record::AuditAction;
use crate::record::AuditEntry;
use crate::record::DueKey;
use crate::store::JobStore;
use std::fmt;
use std::sync::Arc;

/// A check a job must pass before it is stored (besides its own validation and the
/// payload limit): a scheduler checks that a handler or executor group for it is
/// registered on its node.
pub type Validator = Arc<dyn Fn(&Job) -> Result<()> + Send + Sync>;

/// The operations on one store, with the configuration they validate against.
///
/// Cheap to clone (everything is behind `Arc`). Build one with [`Ops::new`] and the
/// setters, or take a scheduler's ([`Scheduler::ops`](crate::Scheduler::ops)), which
/// carries its payload limit, its handler check and its poller.
#[derive(Clone)]
pub struct Ops {
    store: Arc<dyn JobStore>,
    max_payload_bytes: usize,
    validator: Option<Validator>,
    on_change: Option<Arc<dyn Fn(Option<DueKey>) + Send + Sync>>,
    killer: Option<Arc<dyn RunKiller>>,
}

impl fmt::Debug for Ops {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ops")
            .field("store", &self.store.name())
            .field("max_payload_bytes", &self.max_payload_bytes)
            .field("validator", &self.validator.is_some())
            .field("on_change", &self.on_change.is_some())
            .field("killer", &self.killer.is_some())
            .finish()
    }
}

impl Ops {
    /// The operations on `store`, with the default payload limit
    /// ([`DEFAULT_MAX_PAYLOAD_BYTES`]), no further validation, no poller to wake and
    /// no way to kill a run.
    pub fn new(store: Arc<dyn JobStore>) -> Ops {
        Ops {
            store,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            validator: None,
            on_change: None,
            killer: None,
        }
    }

    /// Refuses a job's payload, or a trigger's payload override, over `bytes` bytes
    /// of JSON.
    pub fn max_payload_bytes(mut self, bytes: usize) -> Ops {
        self.max_payload_bytes = bytes;
        self
    }

    /// Checks every job stored (upsert, create, update, copy) with `validator` as
    /// well.
    pub fn validator(mut self, validator: Validator) -> Ops {
        self.validator = Some(validator);
        self
    }

    /// The same operations without the validator (a server's API stores jobs for
    /// handlers its own node does not have, for an embedded node that has them).
    pub fn without_validator(mut self) -> Ops {
        self.validator = None;
        self
    }

    /// Runs `f` after every change that may make a job due sooner (stored, resumed,
    /// triggered), with the job's place in the due order as stored (`None`: it has no
    /// next fire): a scheduler wakes its poller, and restarts a sweep through a
    /// backlog only when that place is at or before the sweep's.
    pub fn on_change(mut self, f: Arc<dyn Fn(Option<DueKey>) + Send + Sync>) -> Ops {
        self.on_change = Some(f);
        self
    }

    /// Kills runs through `killer` (without one, [`kill`](Self::kill) is refused).
    pub fn killer(mut self, killer: Arc<dyn RunKiller>) -> Ops {
        self.killer = Some(killer);
        self
    }

    /// The store it changes.
    pub fn store(&self) -> &Arc<dyn JobStore> {
        &self.store
    }

    /// The payload limit it validates against.
    pub fn payload_limit(&self) -> usize {
        self.max_payload_bytes
    }

    fn changed(&self, next: Option<DueKey>) {
        if let Some(f) = &self.on_change {
            f(next);
        }
    }
}

/// An audit entry by `actor`.
fn entry(
    actor: &Actor,
    action: AuditAction,
    target: &str,
    before: Option<serde_json::Value>,
    after: Option<serde_json::Value>,
) -> AuditEntry {
    AuditEntry::new(actor.name(), action, target, before, after)
}

/// [`Error::Conflict`] about `what` `id`.
fn conflict(what: &'static str, id: impl fmt::Display, reason: impl Into<String>) -> Error {
    Error::Conflict {
        what,
        id: id.to_string(),
        reason: reason.into(),
    }
}
