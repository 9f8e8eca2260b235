//! `GET /metrics`: the engine's instruments ([`crate::engine::instruments`]) in
//! Prometheus's text exposition format, on the admin listener, for any account or
//! token (a scrape sends `Authorization: Bearer <token>`; a `viewer` token is
//! enough). On the one listener rather than a second address: one port to open and
//! one set of credentials, and nothing readable without them.
//!
//! The server installs the Prometheus recorder as the process's `metrics` recorder
//! once, when the first server starts. Every histogram has the buckets below (not
//! quantiles), so `histogram_quantile` aggregates them across nodes.

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;

/// Bucket bounds of every `*_seconds` histogram.
pub(crate) const SECONDS_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0,
];

/// Bucket bounds of the claim batch size histogram.
pub(crate) const BATCH_BUCKETS: &[f64] = &[
    1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0,
];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// The Prometheus exporter as `jobwheel serve` configures it: every histogram
/// bucketed (seconds from 5 ms to 30 min; the claim batch size from 1 to 5,000).
pub fn prometheus_builder() -> PrometheusBuilder {
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
        .and_then(|b| {
            b.set_buckets_for_metric(
                Matcher::Full(crate::engine::instruments::CLAIM_BATCH.into()),
                BATCH_BUCKETS,
            )
        })
        .expect("the bucket lists are not empty")
}

/// The process's Prometheus recorder, installed on first use; `None` when another
/// `metrics` recorder was installed first (by an application embedding the server).
pub(crate) fn handle() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let installed = prometheus_builder().install_recorder();
            match installed {
                Ok(h) => Some(h),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot install the Prometheus recorder: /metrics answers 503");
                    None
                }
            }
        })
        .as_ref()
}

/// The exposition text now.
pub(crate) fn render() -> Option<String> {
    let h = handle()?;
    h.run_upkeep();
    Some(h.render())
}
