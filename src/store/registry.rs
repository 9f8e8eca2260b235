//! [`NodeRegistry`]: live scheduler nodes and remote executor instances, by
//! heartbeat on the store's clock.

use super::Page;
use crate::error::Result;
use crate::record::{ExecutorInfo, ExecutorRecord, NodeInfo, NodeRecord, RunRecord};
use crate::time::Timestamp;
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;

/// The members of a cluster: scheduler nodes, and the remote executor instances that
/// beat for their groups. Liveness is judged by the store's clock only: a node or an
/// instance whose own clock is hours off neither evicts others nor looks dead.
#[async_trait]
pub trait NodeRegistry: Send + Sync + 'static {
    /// Registers or refreshes a node; `last_beat` becomes the store's now, which is
    /// returned.
    async fn heartbeat(&self, node: &NodeInfo) -> Result<Timestamp>;

    /// Every registered node, ordered by id; rows that cannot be decoded are skipped
    /// into [`Page::corrupt`].
    async fn nodes(&self) -> Result<Page<NodeRecord>>;

    /// Removes nodes whose last beat is older than `silent_for` before the store's
    /// now; returns their ids.
    async fn reap_nodes(&self, silent_for: Duration) -> Result<Vec<String>>;

    /// Removes one node (graceful shutdown). Returns whether it was registered.
    async fn deregister(&self, node_id: &str) -> Result<bool>;

    /// `Running` runs whose node is not registered, oldest first, at most `limit`:
    /// the runs a dead node left, for another node to record as lost.
    async fn orphaned_runs(&self, limit: usize) -> Result<Vec<RunRecord>>;

    /// Registers or refreshes an executor instance, identified by `(group,
    /// address)`: its info is replaced, `last_beat` becomes the store's now (which
    /// is returned), `registered_at` is kept from its first beat. The caller has
    /// validated `instance` ([`ExecutorInfo::validate`]).
    async fn executor_beat(&self, instance: &ExecutorInfo) -> Result<Timestamp>;

    /// The registered instances of `group` (every group with `None`), ordered by
    /// group then address; rows that cannot be decoded are skipped into
    /// [`Page::corrupt`].
    async fn executors(&self, group: Option<&str>) -> Result<Page<ExecutorRecord>>;

    /// Removes instances whose last beat is older than `silent_for` before the
    /// store's now; returns their `(group, address)`.
    async fn reap_executors(&self, silent_for: Duration) -> Result<Vec<(String, String)>>;

    /// Removes one instance (it stops). Returns whether it was registered.
    async fn deregister_executor(&self, group: &str, address: &str) -> Result<bool>;
}

macro_rules! forward {
    ($($ptr:ty),*) => {$(
        #[async_trait]
        impl<S: NodeRegistry + ?Sized> NodeRegistry for $ptr {
            async fn heartbeat(&self, node: &NodeInfo) -> Result<Timestamp> { (**self).heartbeat(node).await }
            async fn nodes(&self) -> Result<Page<NodeRecord>> { (**self).nodes().await }
            async fn reap_nodes(&self, silent_for: Duration) -> Result<Vec<String>> { (**self).reap_nodes(silent_for).await }
            async fn deregister(&self, node_id: &str) -> Result<bool> { (**self).deregister(node_id).await }
            async fn orphaned_runs(&self, limit: usize) -> Result<Vec<RunRecord>> { (**self).orphaned_runs(limit).await }
            async fn executor_beat(&self, instance: &ExecutorInfo) -> Result<Timestamp> { (**self).executor_beat(instance).await }
            async fn executors(&self, group: Option<&str>) -> Result<Page<ExecutorRecord>> { (**self).executors(group).await }
            async fn reap_executors(&self, silent_for: Duration) -> Result<Vec<(String, String)>> { (**self).reap_executors(silent_for).await }
            async fn deregister_executor(&self, group: &str, address: &str) -> Result<bool> { (**self).deregister_executor(group, address).await }
        }
    )*};
}

forward!(Arc<S>, Box<S>);
