//! [`Credentials`]: accounts and API tokens a server adds while it runs, kept in the
//! store so every server of a cluster knows them, each change audited in the same
//! step.

use crate::error::Result;
use crate::record::{AuditEntry, Credential, CredentialKind, CredentialRecord};
use async_trait::async_trait;
use std::sync::Arc;

/// Accounts and tokens by kind and name; the store keeps what it is given (hashes
/// only: a server never hands it a password or a token).
#[async_trait]
pub trait Credentials: Send + Sync + 'static {
    /// Stores `credential` unless one of its kind and name is stored, and appends
    /// `audit` in the same transaction (script on Redis) when it did. Returns whether
    /// it was stored.
    async fn add_credential(&self, credential: &Credential, audit: &AuditEntry) -> Result<bool>;

    /// Removes the credential of `kind` and `name`, appending `audit` in the same
    /// transaction when there was one. Returns whether there was.
    async fn remove_credential(
        &self,
        kind: CredentialKind,
        name: &str,
        audit: &AuditEntry,
    ) -> Result<bool>;

    /// Every stored credential, by kind, then name. One that cannot be decoded is
    /// left out.
    async fn credentials(&self) -> Result<Vec<CredentialRecord>>;
}

macro_rules! forward {
    ($($ptr:ty),*) => {$(
        #[async_trait]
        impl<S: Credentials + ?Sized> Credentials for $ptr {
            async fn add_credential(&self, c: &Credential, a: &AuditEntry) -> Result<bool> { (**self).add_credential(c, a).await }
            async fn remove_credential(&self, k: CredentialKind, n: &str, a: &AuditEntry) -> Result<bool> { (**self).remove_credential(k, n, a).await }
            async fn credentials(&self) -> Result<Vec<CredentialRecord>> { (**self).credentials().await }
        }
    )*};
}

forward!(Arc<S>, Box<S>);
