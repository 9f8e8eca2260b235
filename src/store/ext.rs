//! Unaudited one-line writes over [`Jobs::apply`] and [`AlarmOutbox::apply_alarm`],
//! for tests, conformance suites and tools that own the store: [`JobsExt`] and
//! [`AlarmOutboxExt`], implemented for every store. A change people make goes
//! through the operations layer ([`Ops`](crate::ops::Ops)) instead, which checks it
//! and writes its audit entry in the same step.

use super::{AlarmChange, AlarmOutbox, Applied, JobChange, Jobs};
use crate::error::Result;
use crate::job::{Job, JobId};
use crate::record::*;
use crate::time::Timestamp;
use async_trait::async_trait;
use serde_json::Value;

/// Unaudited job writes on any [`Jobs`] store (`use jobwheel::store::JobsExt`).
#[async_trait]
pub trait JobsExt: Jobs {
    /// Creates or replaces a job ([`JobChange::Upsert`], unaudited).
    async fn upsert(&self, job: &Job, next_fire_at: Option<Timestamp>) -> Result<UpsertOutcome> {
        let change = JobChange::Upsert {
            job: job.clone(),
            next: next_fire_at,
            context: FireContext::default(),
        };
        Ok(self.apply(&change, None).await?.upsert_outcome())
    }

    /// Creates a job unless one with its id exists ([`JobChange::Create`],
    /// unaudited).
    async fn create(&self, job: &Job, next_fire_at: Option<Timestamp>) -> Result<UpsertOutcome> {
        let change = JobChange::Create {
            job: job.clone(),
            next: next_fire_at,
            context: FireContext::default(),
        };
        Ok(self.apply(&change, None).await?.upsert_outcome())
    }

    /// Removes a job ([`JobChange::Remove`], unaudited). Returns whether it existed.
    async fn remove(&self, id: &JobId) -> Result<bool> {
        let change = JobChange::Remove { id: id.clone() };
        Ok(matches!(
            self.apply(&change, None).await?,
            Applied::Removed(true)
        ))
    }

    /// Pauses or resumes a job ([`JobChange::Pause`], [`JobChange::Resume`] with a
    /// scheduled fire at `next_fire_at`; unaudited). Errors: `NotFound`.
    async fn set_enabled(
        &self,
        id: &JobId,
        enabled: bool,
        next_fire_at: Option<Timestamp>,
    ) -> Result<()> {
        let id = id.clone();
        let change = if enabled {
            JobChange::Resume {
                id,
                next: next_fire_at.map(FireState::scheduled),
            }
        } else {
            JobChange::Pause { id }
        };
        self.apply(&change, None).await.map(drop)
    }

    /// Makes a job due at `at` with trigger `Manual`, carrying `payload` in place of
    /// the job's own when given ([`JobChange::Trigger`], unaudited). Errors:
    /// `NotFound`.
    async fn trigger(&self, id: &JobId, at: Timestamp, payload: Option<&Value>) -> Result<()> {
        let change = JobChange::Trigger {
            id: id.clone(),
            fire: FireState::fresh(
                at,
                TriggerKind::Manual,
                FireContext::with_payload(payload.cloned()),
            ),
        };
        self.apply(&change, None).await.map(drop)
    }
}

impl<T: Jobs + ?Sized> JobsExt for T {}

/// Unaudited alarm changes on any [`AlarmOutbox`] (`use jobwheel::store::AlarmOutboxExt`).
#[async_trait]
pub trait AlarmOutboxExt: AlarmOutbox {
    /// [`AlarmChange::Retry`], unaudited.
    async fn retry_alarm(&self, id: AlarmId) -> Result<bool> {
        self.apply_alarm(AlarmChange::Retry(id), None).await
    }

    /// [`AlarmChange::Discard`], unaudited.
    async fn discard_alarm(&self, id: AlarmId) -> Result<bool> {
        self.apply_alarm(AlarmChange::Discard(id), None).await
    }
}

impl<T: AlarmOutbox + ?Sized> AlarmOutboxExt for T {}
