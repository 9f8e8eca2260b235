//! `jobwheel` the program: the admin API over real HTTP, the command line as a
//! process (against stores and against a server), `jobwheel serve` as a process, and
//! the web console in Debian's chromium driven by playwright-core.

#[path = "../support/mod.rs"]
mod support;

mod admin_api;
mod cli;
mod cli_access;
mod cli_serve;
mod console;
mod doors;
mod metrics;
mod readme_path;
mod tenants;
