//! [`NodeRegistry`]: live nodes, by heartbeat on the store's clock.

use super::Page;
use crate::error::Result;
use crate::record::{NodeInfo, NodeRecord, RunRecord};
use crate::time::Timestamp;
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;

/// The nodes of a cluster. Liveness is judged by the store's clock only: a node whose
/// own clock is hours off neither evicts others nor looks dead.
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
        }
    )*};
}

forward!(Arc<S>, Box<S>);
