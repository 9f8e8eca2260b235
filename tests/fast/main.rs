//! The fast tier: everything that needs no server, on the memory backend and a
//! paused tokio clock where time matters: the engine (timing, retries, misfires,
//! recovery, fairness, the claim window, on-time fires, a failing store), the
//! randomized scheduling simulation, cron and its model check, the job model, bad
//! input and property tests, handlers, alarm composition, and the conformance suites
//! on the memory store. `./scripts/test --fast` runs it with the unit and doc tests.

mod alarm_compose;
mod bad_input;
mod bulk;
mod cron;
mod cron_dst;
mod cron_model;
mod cron_props;
mod doc_links;
mod engine;
mod engine_cluster;
mod engine_dependencies;
mod engine_fairness;
mod engine_faults;
mod engine_misfire;
mod engine_on_time;
mod engine_recovery;
mod engine_sim;
mod engine_waiting;
mod engine_window;
mod engine_windows;
mod handlers;
mod instruments;
mod layout;
#[cfg(feature = "conformance")]
mod memory;
mod model;
mod props;
mod run_lines;
mod sim;
#[path = "../support/mod.rs"]
mod support;
#[cfg(feature = "otel")]
mod traces;
