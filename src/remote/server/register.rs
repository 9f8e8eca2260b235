//! An instance's registration: it beats under its group — into the schedulers'
//! store, or through a scheduler's registration endpoint — until it stops, then
//! removes itself.

use crate::error::{Error, Result};
use crate::record::ExecutorInfo;
use crate::remote::client::{CallError, Client};
use crate::remote::protocol::{self, LeaveRequest, Left, Registered};
use crate::store::JobStore;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Where an instance registers.
#[derive(Clone)]
pub(super) enum Target {
    /// Into the schedulers' store, directly.
    Store(Arc<dyn JobStore>),
    /// Through a scheduler's registration endpoint (its base URL), signed with the
    /// group's secret.
    Endpoint(String, Arc<Client>),
}

impl Target {
    async fn beat(&self, info: &ExecutorInfo) -> std::result::Result<(), String> {
        match self {
            Target::Store(store) => store
                .executor_beat(info)
                .await
                .map(drop)
                .map_err(|e| e.to_string()),
            Target::Endpoint(url, client) => client
                .call::<_, Registered>(url, protocol::REGISTER, info, None)
                .await
                .map(drop)
                .map_err(|e: CallError| e.to_string()),
        }
    }

    async fn leave(&self, info: &ExecutorInfo) -> std::result::Result<(), String> {
        match self {
            Target::Store(store) => store
                .deregister_executor(&info.group, &info.address)
                .await
                .map(drop)
                .map_err(|e| e.to_string()),
            Target::Endpoint(url, client) => {
                let q = LeaveRequest {
                    group: info.group.clone(),
                    address: info.address.clone(),
                };
                client
                    .call::<_, Left>(url, protocol::LEAVE, &q, None)
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
        }
    }
}

/// Where and how often an instance registers.
pub(super) struct Registration {
    pub(super) target: Target,
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

/// Beats every `every` until `stop`, then deregisters. The first beat written is
/// logged (`executor registered`), as is the first after a failure. A failed beat is logged and
/// tried again at the next one: the instance keeps serving, and schedulers stop
/// sending it runs only once its beats have been missing for their `dead_after`.
pub(super) async fn beat_loop(
    target: Target,
    info: ExecutorInfo,
    every: Duration,
    stop: CancellationToken,
) {
    // Whether the last beat was written: the first one that is, and the first after
    // failures, say so at `info` (the others are silent).
    let mut registered = false;
    loop {
        match target.beat(&info).await {
            Ok(()) if !registered => {
                registered = true;
                tracing::info!(group = %info.group, address = %info.address, every = ?every, "executor registered");
            }
            Ok(()) => {}
            Err(e) => {
                registered = false;
                tracing::warn!(group = %info.group, address = %info.address, error = %e, "executor beat failed");
            }
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(every) => {}
        }
    }
    match target.leave(&info).await {
        Ok(()) => {
            tracing::info!(group = %info.group, address = %info.address, "executor deregistered")
        }
        Err(e) => {
            tracing::warn!(group = %info.group, address = %info.address, error = %e, "deregistering failed; the registration lapses after its dead_after")
        }
    }
}
