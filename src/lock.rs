//! The [`LockProvider`] trait: leases with fencing tokens.

use crate::error::Result;
use crate::time::Timestamp;
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;

/// A lock on one key held by one owner until `expires_at`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lease {
    /// The locked key (a job id, for the engine).
    pub key: String,
    /// Who holds it (a node id).
    pub owner: String,
    /// Fencing token: strictly greater than every token granted before for this key.
    pub token: u64,
    /// Expiry by the lock server's clock. A node must not compare this with its own
    /// clock; it should count the ttl from the moment it asked, on its monotonic clock.
    pub expires_at: Timestamp,
}

/// One key to acquire, with its time to live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockRequest {
    /// The key.
    pub key: String,
    /// How long the lease lasts from the grant, at least 1 ms.
    pub ttl: Duration,
}

/// Exclusive, expiring, fenced leases.
///
/// # Contract
///
/// * **Exclusive.** While a lease on a key is unexpired (by the lock server's clock),
///   no other grant of that key is made, to any owner, including the holder itself.
/// * **Fenced.** Every grant of a key carries a token strictly greater than all
///   earlier tokens of that key, bumped atomically with the grant — also across a
///   restart of the lock server.
/// * **Owner-checked.** [`renew`](LockProvider::renew) and [`release`](LockProvider::release)
///   act only on a lease whose key is still held by the same owner with the same token.
/// * **Batched.** Each call handles many keys; each key is independent and results are
///   in request order. A server failure fails the whole call with
///   [`Error::Backend`](crate::Error::Backend).
///
/// Any lock provider works with any store: the store's fencing check (tokens never
/// go backwards) is what keeps a stale holder from committing.
#[async_trait]
pub trait LockProvider: Send + Sync + 'static {
    /// Short backend name for logs and errors.
    fn name(&self) -> &'static str;

    /// Where the leases live when they live in a store's tables: equal to that
    /// store's [`JobLeases::home`](crate::store::JobLeases::home) for a provider on
    /// the same tables, and a scheduler given both then keeps each job's lease in
    /// the job's row (one write per claim instead of a row of its own). `None` (the
    /// default) for a provider of its own.
    fn home(&self) -> Option<String> {
        None
    }

    /// Tries to lock each key for `owner`. `Some(lease)` for each key granted, `None`
    /// for each key held by someone else.
    async fn acquire(&self, owner: &str, requests: &[LockRequest]) -> Result<Vec<Option<Lease>>>;

    /// Extends each lease to `ttl` from now. `Some(updated)` when it was still held by
    /// its owner with its token (same token, new expiry), `None` when it was lost.
    async fn renew(&self, leases: &[Lease], ttl: Duration) -> Result<Vec<Option<Lease>>>;

    /// Releases each lease held by its owner with its token; returns which were.
    async fn release(&self, leases: &[Lease]) -> Result<Vec<bool>>;

    /// Forgets the keys nobody holds whose last grant is older than `older_than` by
    /// the lock server's clock, and returns how many, so that a stream of one-shot
    /// jobs does not leave one row per job behind. A later grant of a forgotten key
    /// still carries a greater token: tokens are the clock's microseconds, and a
    /// forgotten key's last token is older than the cutoff (the condition: the lock
    /// server's clock never steps back by `older_than`). The default forgets
    /// nothing, for providers whose keys expire by themselves (Redis's).
    async fn forget_idle(&self, older_than: Duration) -> Result<u64> {
        let _ = older_than;
        Ok(0)
    }
}

#[async_trait]
impl<L: LockProvider + ?Sized> LockProvider for Arc<L> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn home(&self) -> Option<String> {
        (**self).home()
    }
    async fn acquire(&self, owner: &str, requests: &[LockRequest]) -> Result<Vec<Option<Lease>>> {
        (**self).acquire(owner, requests).await
    }
    async fn renew(&self, leases: &[Lease], ttl: Duration) -> Result<Vec<Option<Lease>>> {
        (**self).renew(leases, ttl).await
    }
    async fn release(&self, leases: &[Lease]) -> Result<Vec<bool>> {
        (**self).release(leases).await
    }
    async fn forget_idle(&self, older_than: Duration) -> Result<u64> {
        (**self).forget_idle(older_than).await
    }
}

/// Implements [`LockProvider`] for a wrapper type by delegating to one of its fields.
#[allow(unused_macros)]
macro_rules! delegate_locks {
    ($ty:ty => $field:ident, $name:expr) => {
        #[async_trait::async_trait]
        impl $crate::lock::LockProvider for $ty {
            fn name(&self) -> &'static str {
                $name
            }
            fn home(&self) -> Option<String> {
                self.$field.home()
            }
            async fn acquire(
                &self,
                owner: &str,
                requests: &[$crate::lock::LockRequest],
            ) -> $crate::error::Result<Vec<Option<$crate::lock::Lease>>> {
                self.$field.acquire(owner, requests).await
            }
            async fn renew(
                &self,
                leases: &[$crate::lock::Lease],
                ttl: std::time::Duration,
            ) -> $crate::error::Result<Vec<Option<$crate::lock::Lease>>> {
                self.$field.renew(leases, ttl).await
            }
            async fn release(
                &self,
                leases: &[$crate::lock::Lease],
            ) -> $crate::error::Result<Vec<bool>> {
                self.$field.release(leases).await
            }
            async fn forget_idle(
                &self,
                older_than: std::time::Duration,
            ) -> $crate::error::Result<u64> {
                self.$field.forget_idle(older_than).await
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use delegate_locks;
