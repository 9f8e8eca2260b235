//! Fault tests with real processes: scheduler nodes killed (`kill -9`), paused
//! (`SIGSTOP`), run under a skewed clock, and the PostgreSQL, MariaDB and Redis
//! servers restarted under them (those restarts run only with `CI=true` or
//! `JOBWHEEL_RESTART_SERVERS=1`: they restart the developer's own servers); Python
//! executor instances killed and paused mid-run; a scheduler node killed while its
//! remote run executes; dependent jobs while nodes are killed; a join's two parents
//! finishing at once on two nodes.

#[path = "../support/mod.rs"]
mod support;

mod dependency_kill;
mod dependency_race;
mod fault_cluster;
mod remote_faults;
mod remote_scheduler_kill;
