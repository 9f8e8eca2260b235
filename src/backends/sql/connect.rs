//! Opening a pool with a fast, explicit failure: one connection is tried first under
//! the builder's connect timeout, so a refused port, a failed login or an unknown
//! database is reported at once with the server's address and the driver's cause,
//! instead of a pool timing out with no cause after 30 s.

use crate::error::{Error, Result};
#[cfg(any(feature = "postgres", feature = "mysql"))]
use sqlx::pool::{Pool, PoolOptions};
#[cfg(any(feature = "postgres", feature = "mysql"))]
use sqlx::{ConnectOptions, Connection, Database};
use std::time::Duration;

/// The connect timeout of every SQL builder unless set.
pub(crate) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Checks that `url` starts with one of `schemes` (`postgres://`, say). Errors name
/// `<backend>.url` with the URL's password hidden.
pub(crate) fn check_scheme(field: &'static str, url: &str, schemes: &[&str]) -> Result<()> {
    let scheme = url.split_once(':').map_or("", |(s, _)| s);
    if schemes.contains(&scheme) {
        return Ok(());
    }
    Err(Error::invalid(
        field,
        crate::error::redact_url(url),
        format!(
            "must start with {}",
            schemes
                .iter()
                .map(|s| format!("{s}://"))
                .collect::<Vec<_>>()
                .join(" or ")
        ),
    ))
}

/// Parses `url` into connect options. Errors name `field`, password hidden.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) fn options<O: ConnectOptions>(field: &'static str, url: &str) -> Result<O> {
    url.parse::<O>()
        .map_err(|e| Error::invalid(field, crate::error::redact_url(url), e.to_string()))
}

/// Connects once to `server` (`host:port`) under `timeout`, then opens `pool` with the
/// same options and timeout. Errors: [`Error::Backend`] whose message names `server`
/// and the cause (refused, timed out, the server's own refusal of the login or
/// database); marked temporary when the server may come up later.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) async fn open<DB: Database>(
    backend: &'static str,
    server: String,
    options: <DB::Connection as Connection>::Options,
    pool: PoolOptions<DB>,
    timeout: Duration,
) -> Result<Pool<DB>> {
    let failed = |temporary: bool, cause: String| {
        Error::backend(backend, "connect", temporary, format!("{server}: {cause}"))
    };
    match tokio::time::timeout(timeout, DB::Connection::connect_with(&options)).await {
        Err(_) => return Err(failed(true, format!("timed out after {timeout:?}"))),
        Ok(Err(e)) => {
            let temporary = matches!(e, sqlx::Error::Io(_) | sqlx::Error::Tls(_));
            return Err(failed(temporary, e.to_string()));
        }
        Ok(Ok(conn)) => {
            let _ = conn.close().await;
        }
    }
    pool.acquire_timeout(timeout)
        .connect_with(options)
        .await
        .map_err(|e| failed(true, e.to_string()))
}
