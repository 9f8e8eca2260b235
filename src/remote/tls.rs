//! TLS for the servers of the remote protocol (rustls): the certificate and key read from PEM, and a
//! listener that completes each handshake off the accept path, so a slow or silent
//! client never holds up the others.

use crate::error::{Error, Result};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::rustls::{self, pki_types};
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;

/// Longest a client may take to complete its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Most handshakes in progress at once; connections past it are closed at once.
const MAX_HANDSHAKES: usize = 256;

/// The settings a TLS error names: the certificate's and the key's.
pub(crate) type Fields = (&'static str, &'static str);

/// A server configuration from a PEM certificate chain (leaf first) and its PEM
/// private key, HTTP/1.1 only. Errors: [`Error::Invalid`] naming the certificate's
/// or the key's field of `fields`.
pub(crate) fn server_config(
    fields: Fields,
    cert_pem: &[u8],
    key_pem: &[u8],
) -> Result<Arc<rustls::ServerConfig>> {
    use pki_types::pem::PemObject;
    let certs = pki_types::CertificateDer::pem_slice_iter(cert_pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::invalid(fields.0, "(PEM)", e.to_string()))?;
    if certs.is_empty() {
        return Err(Error::invalid(
            fields.0,
            "(PEM)",
            "holds no CERTIFICATE block",
        ));
    }
    let key = pki_types::PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| Error::invalid(fields.1, "(PEM)", e.to_string()))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::invalid(fields.0, "(PEM)", e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| Error::invalid(fields.1, "(PEM)", e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Accepts TCP connections and hands out those whose TLS handshake completed.
pub(crate) struct TlsListener {
    addr: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
}

impl TlsListener {
    /// Starts accepting on `listener` until `stop`.
    pub(crate) fn new(
        listener: TcpListener,
        addr: SocketAddr,
        config: Arc<rustls::ServerConfig>,
        stop: CancellationToken,
    ) -> Self {
        let (tx, ready) = mpsc::channel(64);
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let handshakes = Arc::new(Semaphore::new(MAX_HANDSHAKES));
        tokio::spawn(async move {
            loop {
                let (tcp, peer) = tokio::select! {
                    _ = stop.cancelled() => return,
                    accepted = listener.accept() => match accepted {
                        Ok(c) => c,
                        Err(e) => {
                            tracing::warn!(error = %e, "executor server: accept failed");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    },
                };
                let Ok(permit) = handshakes.clone().try_acquire_owned() else {
                    tracing::warn!(%peer, "executor server: too many TLS handshakes in progress; connection closed");
                    continue;
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    let _permit = permit;
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        TlsListener { addr, ready }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(conn) => conn,
            // The accept loop stopped: the server is shutting down.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.addr)
    }
}

/// Serves `app` on `listener` — over TLS with `tls`, plain HTTP without — until
/// `stop` is cancelled, on a task of its own.
pub(crate) fn spawn_serve(
    listener: TcpListener,
    addr: SocketAddr,
    app: axum::Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let s = stop.clone();
    match tls {
        None => tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { s.cancelled().await })
                .await;
        }),
        Some(config) => {
            let listener = TlsListener::new(listener, addr, config, stop);
            tokio::spawn(async move {
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async move { s.cancelled().await })
                    .await;
            })
        }
    }
}
