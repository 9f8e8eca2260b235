//! [`AlarmOutbox`]: alarm events with a claimable delivery status.

use super::{AlarmClaim, AlarmQuery, Page};
use crate::error::Result;
use crate::record::{AlarmDelivery, AlarmId, AlarmRecord, AuditEntry};
use crate::time::Timestamp;
use async_trait::async_trait;
use std::sync::Arc;

/// The alarm outbox. Events enter it with the finish that raised them
/// ([`Jobs::finish_runs`](super::Jobs::finish_runs)); exactly one claimer at a time
/// delivers each; delivered and abandoned events are purged by retention.
#[async_trait]
pub trait AlarmOutbox: Send + Sync + 'static {
    /// Claims up to `claim.limit` events for delivery by `claim.owner`: `Pending` or
    /// `Failed` events whose `next_attempt_at` has come, and `Sending` events whose
    /// claim has lapsed. Each becomes `Sending` with `claim_until = now + lease` and
    /// its attempt count bumped. An event is handed to exactly one claimer at a time.
    /// An event whose row cannot be decoded is not handed out: it is recorded `Failed`
    /// with no retry and reported in [`Page::corrupt`].
    async fn claim_alarms(&self, claim: &AlarmClaim) -> Result<Page<AlarmRecord>>;

    /// Records the end of a delivery. Written only while `owner` holds the claim;
    /// returns whether it was written.
    async fn complete_alarm(
        &self,
        id: AlarmId,
        owner: &str,
        delivery: &AlarmDelivery,
    ) -> Result<bool>;

    /// Events, newest first, per [`AlarmQuery`].
    async fn alarms(&self, query: &AlarmQuery) -> Result<Vec<AlarmRecord>>;

    /// Deletes events that are done — `Sent`, `NotNeeded`, or `Failed` with no retry
    /// left — and were created before `before`. Returns how many.
    async fn purge_alarms(&self, before: Timestamp) -> Result<u64>;

    /// An operator's change to an event and, when `audit` is given, that audit entry
    /// appended in the same atomic step (only when the change is applied). Returns
    /// whether it was applied:
    ///
    /// * [`AlarmChange::Retry`]: a `Pending` or `Failed` event (with or without a
    ///   retry left) becomes `Pending`, claimable at the store's now; its attempts and
    ///   last error are kept.
    /// * [`AlarmChange::Discard`]: a `Pending` or `Failed` event becomes `Failed` with
    ///   no retry left, so it is never delivered and retention purges it.
    ///
    /// Any other event (`Sending`, `Sent`, `NotNeeded`), or none with the id, is left
    /// as it is: `false`, nothing written.
    async fn apply_alarm(&self, change: AlarmChange, audit: Option<&AuditEntry>) -> Result<bool>;
}

/// An operator's change to an alarm event ([`AlarmOutbox::apply_alarm`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AlarmChange {
    /// Deliver it again now.
    Retry(AlarmId),
    /// Never deliver it.
    Discard(AlarmId),
}

impl AlarmChange {
    /// The event it changes.
    pub fn id(self) -> AlarmId {
        match self {
            AlarmChange::Retry(id) | AlarmChange::Discard(id) => id,
        }
    }
}

macro_rules! forward {
    ($($ptr:ty),*) => {$(
        #[async_trait]
        impl<S: AlarmOutbox + ?Sized> AlarmOutbox for $ptr {
            async fn claim_alarms(&self, c: &AlarmClaim) -> Result<Page<AlarmRecord>> { (**self).claim_alarms(c).await }
            async fn complete_alarm(&self, id: AlarmId, owner: &str, d: &AlarmDelivery) -> Result<bool> { (**self).complete_alarm(id, owner, d).await }
            async fn alarms(&self, q: &AlarmQuery) -> Result<Vec<AlarmRecord>> { (**self).alarms(q).await }
            async fn purge_alarms(&self, before: Timestamp) -> Result<u64> { (**self).purge_alarms(before).await }
            async fn apply_alarm(&self, c: AlarmChange, audit: Option<&AuditEntry>) -> Result<bool> { (**self).apply_alarm(c, audit).await }
        }
    )*};
}

forward!(Arc<S>, Box<S>);
