//! [`JobLeases`]: a job's lease kept in the job's own row, so that a fire's claim,
//! its start and its finish write the same row.

use crate::error::Result;
use crate::lock::{Lease, LockRequest};
use crate::record::{ClaimOutcome, ClaimRun};
use async_trait::async_trait;
use std::time::Duration;

/// Leases kept in the job rows of a store.
///
/// A store that keeps leases in its job rows offers them through
/// [`Jobs::job_leases`](super::Jobs::job_leases). A scheduler uses them in place of
/// its lock provider when that provider's [`home`](crate::LockProvider::home) is the
/// same as the leases' [`home`](JobLeases::home): the store's own `locks()`, or a
/// lock provider on the same tables. With any other lock provider (Redis locks
/// beside a PostgreSQL store, say) the scheduler takes its leases from that provider
/// and the store's rows hold none.
///
/// # Contract
///
/// The leases are those of [`LockProvider`](crate::LockProvider) for keys that are
/// job ids, kept in the job's row:
///
/// * **Exclusive.** While a job's lease is unexpired by the store's clock, no other
///   grant of it is made ([`acquire_jobs`](JobLeases::acquire_jobs),
///   [`claim_runs`](JobLeases::claim_runs)), to any owner, the holder included.
/// * **Fenced.** A grant's token is `max(last_token + 1, the store's clock in µs)`
///   and becomes the job's `last_token` in the same step, so it is greater than every
///   token of the job before it; the start and finish rules
///   ([`rules`](super::rules)) compare against it.
/// * **Owner-checked.** [`renew_jobs`](JobLeases::renew_jobs) and
///   [`release_jobs`](JobLeases::release_jobs) act only on a lease whose job is still
///   held by the same owner with the same token (`last_token`); a renewal only
///   while it is unexpired.
/// * **A finish ends it.** A finish written with
///   [`LeaseEnd::Release`](crate::record::LeaseEnd::Release) frees the lease and one
///   with [`LeaseEnd::Keep`](crate::record::LeaseEnd::Keep) extends it, in the
///   finish's atomic step.
/// * **No job, no lease.** A key no job has is granted at once with a token from
///   the store's clock, and excludes nothing: there is no fire of it to run, and the
///   only use of such a grant is recording a removed job's lost run, which the
///   finish rules let one node do.
/// * Calls are batched as a lock provider's are: items are independent, results in
///   request order.
#[async_trait]
pub trait JobLeases: Send + Sync + 'static {
    /// Where the leases live, as a [`LockProvider::home`](crate::LockProvider::home)
    /// on the same tables names it (for example `postgres 127.0.0.1:5432/app
    /// public.jobwheel_`).
    fn home(&self) -> String;

    /// Claims up to `want` of the candidate fires `claims`, in their order, and
    /// records their runs' starts, in one atomic step per item: when the job's lease
    /// is free at the store's clock and [`rules::claim`] allows the start, the lease
    /// goes to `claim.node` for `claim.ttl` under a new token (the job's
    /// `last_token` from then on) and the run is recorded as `Running` under that
    /// token, as [`start_runs`](super::Jobs::start_runs) records one. Otherwise
    /// nothing is written and the outcome says why (a lease held by another, or a
    /// row being written by a concurrent call, is
    /// [`Held`](crate::record::StartRefusal::Held)); a candidate that could have been
    /// claimed after `want` were is [`Left`](ClaimOutcome::Left). Within one call,
    /// the first item of a job decides.
    ///
    /// Nodes that read the same due fires at once each pass more candidates than
    /// they want: one node's claims skip the rows another's are writing and take the
    /// next ones, in the same call.
    ///
    /// [`rules::claim`]: super::rules::claim
    async fn claim_runs(&self, claims: &[ClaimRun], want: usize) -> Result<Vec<ClaimOutcome>>;

    /// Grants each job's lease that is free (or expired) to `owner` for its `ttl`;
    /// `None` for each one held by another.
    async fn acquire_jobs(
        &self,
        owner: &str,
        requests: &[LockRequest],
    ) -> Result<Vec<Option<Lease>>>;

    /// Extends each lease still held, unexpired, by its owner with its token, to
    /// `ttl` from now; `None` for each one that was lost.
    async fn renew_jobs(&self, leases: &[Lease], ttl: Duration) -> Result<Vec<Option<Lease>>>;

    /// Frees each lease still held by its owner with its token; which were.
    async fn release_jobs(&self, leases: &[Lease]) -> Result<Vec<bool>>;
}

/// A [`LockProvider`](crate::LockProvider) over a store's [`JobLeases`]: what a
/// scheduler renews, releases and takes over leases through when the store keeps
/// them in its job rows. Its keys are job ids.
#[derive(Clone)]
pub(crate) struct JobRowLocks {
    pub(crate) store: std::sync::Arc<dyn super::JobStore>,
}

impl std::fmt::Debug for JobRowLocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobRowLocks")
            .field("store", &self.store.name())
            .finish()
    }
}

impl JobRowLocks {
    fn leases(&self) -> Result<&dyn JobLeases> {
        self.store.job_leases().ok_or_else(|| {
            crate::error::Error::invalid(
                "scheduler.locks",
                self.store.name(),
                "the store keeps no leases in its job rows",
            )
        })
    }
}

#[async_trait]
impl crate::lock::LockProvider for JobRowLocks {
    fn name(&self) -> &'static str {
        self.store.name()
    }
    fn home(&self) -> Option<String> {
        self.store.job_leases().map(JobLeases::home)
    }
    async fn acquire(&self, owner: &str, requests: &[LockRequest]) -> Result<Vec<Option<Lease>>> {
        self.leases()?.acquire_jobs(owner, requests).await
    }
    async fn renew(&self, leases: &[Lease], ttl: Duration) -> Result<Vec<Option<Lease>>> {
        self.leases()?.renew_jobs(leases, ttl).await
    }
    async fn release(&self, leases: &[Lease]) -> Result<Vec<bool>> {
        self.leases()?.release_jobs(leases).await
    }
}
