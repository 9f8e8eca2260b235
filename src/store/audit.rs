//! [`AuditLog`]: every change made through the admin API or the command line, kept
//! in the store so every server of a cluster writes to and reads one log.

use super::AuditQuery;
use crate::error::Result;
use crate::record::{AuditEntry, AuditRecord};
use crate::time::Timestamp;
use async_trait::async_trait;
use std::sync::Arc;

/// The audit log: append-only, newest first when read, purged by retention.
#[async_trait]
pub trait AuditLog: Send + Sync + 'static {
    /// Appends `entry`, stamped with the store's now and the next id.
    async fn append_audit(&self, entry: &AuditEntry) -> Result<()>;

    /// Entries newest first (by id, descending), per [`AuditQuery`].
    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>>;

    /// Deletes entries appended before `before`. Returns how many.
    async fn purge_audit(&self, before: Timestamp) -> Result<u64>;
}

macro_rules! forward {
    ($($ptr:ty),*) => {$(
        #[async_trait]
        impl<S: AuditLog + ?Sized> AuditLog for $ptr {
            async fn append_audit(&self, e: &AuditEntry) -> Result<()> { (**self).append_audit(e).await }
            async fn audit(&self, q: &AuditQuery) -> Result<Vec<AuditRecord>> { (**self).audit(q).await }
            async fn purge_audit(&self, before: Timestamp) -> Result<u64> { (**self).purge_audit(before).await }
        }
    )*};
}

forward!(Arc<S>, Box<S>);
