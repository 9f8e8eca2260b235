//! An instance's registration: it beats into the scheduler's store under its group
//! until it stops, then removes itself.

use crate::error::{Error, Result};
use crate::record::ExecutorInfo;
use crate::store::JobStore;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Where and how often an instance registers.
pub(super) struct Registration {
    pub(super) store: Arc<dyn JobStore>,
    /// The address schedulers reach it at; `None`: `scheme://` and the bound address.
    pub(super) advertise: Option<String>,
    pub(super) every: Duration,
    /// `http` or `https` (when it serves TLS).
    pub(super) scheme: &'static str,
}

impl Registration {
    /// What the instance says about itself at each beat. Errors: [`Error::Invalid`]
    /// naming `executor.address` (none to advertise: bound to an unspecified
    /// address) or another [`ExecutorInfo`] field, or `executor.beat_every`.
    pub(super) fn info(
        &self,
        group: &str,
        bound: SocketAddr,
        mut handlers: Vec<String>,
        capacity: usize,
    ) -> Result<ExecutorInfo> {
        crate::limits::duration("executor.beat_every", self.every, Duration::from_secs(600))?;
        if self.every < Duration::from_millis(10) {
            return Err(Error::invalid(
                "executor.beat_every",
                format!("{:?}", self.every),
                "must be at least 10ms",
            ));
        }
        let address = match &self.advertise {
            Some(a) => a.trim_end_matches('/').to_string(),
            None if bound.ip().is_unspecified() => {
                return Err(Error::invalid(
                    "executor.address",
                    bound,
                    "bound to every interface: set the address schedulers reach it at with .advertise(..)",
                ));
            }
            None => format!("{}://{bound}", self.scheme),
        };
        handlers.sort();
        let info = ExecutorInfo {
            group: group.to_string(),
            address,
            handlers,
            capacity: u32::try_from(capacity).unwrap_or(u32::MAX),
            version: env!("CARGO_PKG_VERSION").to_string(),
        };
        info.validate()?;
        Ok(info)
    }
}

/// Beats every `every` until `stop`, then deregisters. A failed beat is logged and
/// tried again at the next one: the instance keeps serving, and schedulers stop
/// sending it runs only once its beats have been missing for their `dead_after`.
pub(super) async fn beat_loop(
    store: Arc<dyn JobStore>,
    info: ExecutorInfo,
    every: Duration,
    stop: CancellationToken,
) {
    loop {
        if let Err(e) = store.executor_beat(&info).await {
            tracing::warn!(group = %info.group, address = %info.address, error = %e, "executor beat failed");
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(every) => {}
        }
    }
    match store.deregister_executor(&info.group, &info.address).await {
        Ok(_) => {
            tracing::info!(group = %info.group, address = %info.address, "executor deregistered")
        }
        Err(e) => {
            tracing::warn!(group = %info.group, address = %info.address, error = %e, "deregistering failed; the registration lapses after its dead_after")
        }
    }
}
