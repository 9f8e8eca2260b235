//! Remote executors over loopback HTTP: every routing strategy, sharding broadcast,
//! the protocol suite against the Rust executor server and the Python one,
//! registration through a scheduler's endpoint and the store's registry, TLS, and
//! OpenTelemetry traces across the protocol.

#[path = "../support/mod.rs"]
mod support;

mod remote;
mod remote_protocol;
mod remote_registration;
mod remote_registry;
mod remote_sharding;
mod remote_tls;
#[cfg(feature = "otel")]
mod remote_traces;
