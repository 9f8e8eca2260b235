//! [`Server`]: `jobwheel serve` as one value — the store, a scheduler node that
//! dispatches to the configured executor groups, the admin API and the executor
//! registration endpoint on one listener.

use super::config::ServerConfig;
use super::{AdminState, router};
use crate::backends::connect::BackendConfig;
use crate::engine::{Scheduler, SchedulerHandle};
use crate::error::{Error, Result};
use crate::remote::{RegistryServer, RemoteGroup};
use crate::store::JobStore;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// A running server. Several servers on one PostgreSQL, MySQL or Redis store form a
/// cluster: their scheduler nodes share the fires, and any of them answers the API.
pub struct Server {
    addr: SocketAddr,
    store: Arc<dyn JobStore>,
    scheduler: Option<SchedulerHandle>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .field("scheduler", &self.scheduler.is_some())
            .finish_non_exhaustive()
    }
}

/// The executor groups of `config`, as the scheduler dispatches to them.
pub(crate) fn groups(config: &ServerConfig) -> Result<Vec<RemoteGroup>> {
    config
        .groups
        .iter()
        .map(|g| {
            if g.addresses.is_empty() {
                RemoteGroup::registered(&g.name, &g.secret.0)
            } else {
                RemoteGroup::fixed(&g.name, &g.secret.0, &g.addresses)
            }
        })
        .collect()
}

impl Server {
    /// Validates `config`, connects to its store (running pending migrations),
    /// starts a scheduler node when at least one executor group is configured (a
    /// server has no handlers of its own; without a group it only serves the API),
    /// and serves on `config.listen`.
    ///
    /// Errors: [`Error::Invalid`] naming the first bad setting; the store's error when
    /// it cannot be reached or migrated; [`Error::Backend`] when the address cannot be
    /// bound.
    pub async fn start(config: ServerConfig) -> Result<Server> {
        config.validate()?;
        let listener = tokio::net::TcpListener::bind(&config.listen)
            .await
            .map_err(|e| Error::backend("server", "bind", false, e))?;
        Server::serve(config, listener).await
    }

    /// As [`start`](Self::start), on a bound listener (`config.listen` is ignored).
    ///
    /// Errors: as `start`.
    pub async fn serve(config: ServerConfig, listener: tokio::net::TcpListener) -> Result<Server> {
        config.validate()?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::backend("server", "bind", false, e))?;
        // The process's Prometheus recorder, before the scheduler node records anything.
        super::metrics::handle();
        let mut backend = BackendConfig::new(&config.store).migrate(true);
        if let Some(p) = &config.prefix {
            backend = backend.prefix(p);
        }
        let backend = backend.connect().await?;
        let store = backend.store.clone();
        let groups = groups(&config)?;
        let scheduler = if groups.is_empty() {
            tracing::warn!(
                "no executor group is configured: this server runs no scheduler node, only the admin API"
            );
            None
        } else {
            let mut b = Scheduler::builder().backend(backend);
            for g in &groups {
                b = b.remote(g.clone());
            }
            for w in &config.webhook_alarms {
                b = b.alarm(w.alarm()?);
            }
            for e in &config.email_alarms {
                b = b.alarm(e.alarm()?);
            }
            let node = crate::engine::SchedulerConfig {
                max_payload_bytes: config.max_payload_bytes,
                poll_interval: config.poll_interval,
                ..Default::default()
            };
            Some(b.config(node).build()?.start().await?)
        };
        // Changes through the API go through the node's operations (waking its
        // poller), without its handler check: a job for handlers no server has is
        // stored for an embedded node that registers them.
        let ops = match &scheduler {
            Some(h) => h.scheduler().ops().without_validator(),
            None => crate::ops::Ops::new(store.clone()),
        }
        .max_payload_bytes(config.max_payload_bytes);
        let state = Arc::new(AdminState::new(ops, &config, groups)?);
        let mut app = router(state, config.max_body_bytes);
        if !config.groups.is_empty() {
            let mut registry = RegistryServer::builder(store.clone());
            for g in &config.groups {
                registry = registry.group(&g.name, &g.secret.0)?;
            }
            app = app.merge(registry.router()?);
        }
        let stop = CancellationToken::new();
        let s = stop.clone();
        let task = tokio::spawn(async move {
            let app = app.into_make_service_with_connect_info::<SocketAddr>();
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { s.cancelled().await })
                .await;
        });
        spawn_audit_retention(store.clone(), config.audit_retention, stop.clone());
        tracing::info!(%addr, "jobwheel server listening");
        Ok(Server {
            addr,
            store,
            scheduler,
            stop,
            task,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The store it serves.
    pub fn store(&self) -> &Arc<dyn JobStore> {
        &self.store
    }

    /// Stops serving and shuts the scheduler node down (runs in progress finish
    /// within the scheduler's shutdown grace).
    pub async fn shutdown(self) {
        self.stop.cancel();
        let _ = self.task.await;
        if let Some(s) = self.scheduler {
            s.shutdown().await;
        }
    }
}

/// Purges audit entries older than `retention`, hourly.
fn spawn_audit_retention(
    store: Arc<dyn JobStore>,
    retention: std::time::Duration,
    stop: CancellationToken,
) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(3600));
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            let purged = match store.now().await {
                Ok(now) => store.purge_audit(now - retention).await,
                Err(e) => Err(e),
            };
            if let Err(e) = purged {
                tracing::warn!(error = %e, "purging old audit entries failed; retried in an hour");
            }
        }
    });
}
