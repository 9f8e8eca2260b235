//! The in-process backend: [`MemoryStore`] and [`LocalLocks`].
//!
//! Always compiled. Everything lives behind one mutex per object, so every call is
//! atomic as a whole. Nothing survives the process; use it for tests, the
//! quickstart and single-process deployments that can lose their state.
//!
//! Both read time from a [`Clock`](crate::Clock) (the system clock by default);
//! [`TokioClock`](crate::TokioClock) makes them follow a paused tokio runtime, and
//! [`StoreLatency`] makes them answer as slowly as a store over a network does.

mod latency;
mod leases;
mod locks;
mod log;
mod releases;
mod store;

pub use latency::StoreLatency;
pub use locks::LocalLocks;
pub use store::MemoryStore;
