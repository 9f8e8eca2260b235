//! Scheduler configuration.

use crate::error::{Error, Result};
use crate::job::DEFAULT_MAX_PAYLOAD_BYTES;
use crate::limits;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How a scheduler behaves. Every field has a default; load it from a service's own
/// configuration file with serde (durations as `"30s"`, `"1m 30s"`, `"250ms"`), or
/// set fields with the chainable setters of the same names:
/// `SchedulerConfig::default().lease_ttl(Duration::from_secs(45))`. It is
/// `#[non_exhaustive]`: new fields come with defaults.
///
/// ```
/// let c: jobwheel::SchedulerConfig = serde_json::from_str(r#"{"lease_ttl": "45s"}"#).unwrap();
/// assert_eq!(c.lease_ttl, std::time::Duration::from_secs(45));
/// assert_eq!(c.poll_interval, std::time::Duration::from_secs(1));
/// ```
///
/// [`validate`](SchedulerConfig::validate) (called by the builder) refuses values
/// that cannot work, naming the field.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct SchedulerConfig {
    /// Node id; default `<host>-<pid>-<random>`, unique per process start.
    pub node_id: Option<String>,
    /// How often the store is polled for due fires (default 1 s). A local upsert or
    /// trigger polls at once.
    #[serde(with = "humantime_serde")]
    pub poll_interval: Duration,
    /// How far ahead fires are claimed and armed on precise timers (default 5 s).
    #[serde(with = "humantime_serde")]
    pub lookahead: Duration,
    /// Lease time to live while a run executes, renewed every third of it (default 30 s).
    #[serde(with = "humantime_serde")]
    pub lease_ttl: Duration,
    /// Default misfire threshold for jobs that set none (default 5 s).
    #[serde(with = "humantime_serde")]
    pub misfire_threshold: Duration,
    /// Heartbeat period (default 10 s). A node silent for `dead_after_beats` beats is
    /// dead.
    #[serde(with = "humantime_serde")]
    pub heartbeat: Duration,
    /// Missed beats after which a node is dead (default 3).
    pub dead_after_beats: u32,
    /// Most fires claimed per poll (default 2000).
    pub claim_batch: usize,
    /// Most due fires a node claims beyond its free executor slots (default 4000),
    /// to wait in line for the next slot; those near the head of the line write
    /// their start while they wait, so a start's round trip never keeps a slot idle.
    /// The line a node actually claims is also bounded by how many fires its slots
    /// start within a quarter of a poll interval at the mean run time: a node with
    /// slow handlers claims only what it has slots for, and other nodes take the
    /// rest of a backlog. 0: claim only free slots.
    pub claim_window: usize,
    /// Most starts or finishes written per store call (default 1000). A batch holds
    /// what queued while the previous call was in flight, so a lone write still goes
    /// out at once.
    pub write_batch: usize,
    /// How long shutdown waits for running handlers before cancelling them
    /// (default 30 s).
    #[serde(with = "humantime_serde")]
    pub shutdown_grace: Duration,
    /// Delete finished runs that started on a UTC day wholly older than this (so a
    /// run is kept between this and a day more); `None` (default) keeps them all.
    /// Checked hourly.
    #[serde(with = "humantime_serde")]
    pub run_retention: Option<Duration>,
    /// Delete alarm events that are done (sent, not needed, or failed for good) and
    /// older than this (default 7 days); `None` keeps them all. Checked hourly.
    #[serde(with = "humantime_serde")]
    pub alarm_retention: Option<Duration>,
    /// Largest payload accepted by `upsert`, in bytes of JSON (default 64 KiB).
    pub max_payload_bytes: usize,
    /// First retry delay of a failed alarm delivery, doubling up to an hour
    /// (default 10 s).
    #[serde(with = "humantime_serde")]
    pub alarm_retry_base: Duration,
    /// Give up on an alarm event after this many delivery attempts (default 10).
    pub alarm_max_attempts: u32,
    /// Longest time one alarm may take to deliver one event (default 30 s).
    #[serde(with = "humantime_serde")]
    pub alarm_timeout: Duration,
    /// At most one alarm per job and event kind within this window; the events in
    /// between are recorded `not_needed` and counted in the next delivered one
    /// ([`AlarmEvent::suppressed`](crate::AlarmEvent::suppressed)). Per node. `None`
    /// (default): every event is delivered.
    #[serde(with = "humantime_serde")]
    pub alarm_throttle: Option<Duration>,
    /// Lines of a local run's log kept (default 1,000): a handler's `tracing` events
    /// inside its run, captured by [`run_log_layer`](crate::run_log_layer). Past it,
    /// one marker line says the log was cut and later lines are dropped. 0: no
    /// local run keeps a log.
    pub log_lines: usize,
    /// How often the node writes its running local runs' new log lines to the store
    /// (default 1 s); a run's last lines are written as it ends.
    #[serde(with = "humantime_serde")]
    pub log_flush: Duration,
    /// Label runs' instruments (fire lag, claim lag, pickup, run duration, runs
    /// finished, fires misfired) with their `job` and `handler` too, besides their
    /// `group` (default off: a series per job multiplies what a metrics backend
    /// stores by the number of jobs; turn it on for a few hundred jobs, not for
    /// millions).
    pub metric_job_labels: bool,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            node_id: None,
            poll_interval: Duration::from_secs(1),
            lookahead: Duration::from_secs(5),
            lease_ttl: Duration::from_secs(30),
            misfire_threshold: Duration::from_secs(5),
            heartbeat: Duration::from_secs(10),
            dead_after_beats: 3,
            claim_batch: 2000,
            claim_window: 4000,
            write_batch: 1000,
            shutdown_grace: Duration::from_secs(30),
            run_retention: None,
            alarm_retention: Some(Duration::from_secs(7 * 24 * 3600)),
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            alarm_retry_base: Duration::from_secs(10),
            alarm_max_attempts: 10,
            alarm_timeout: Duration::from_secs(30),
            alarm_throttle: None,
            log_lines: 1000,
            log_flush: Duration::from_secs(1),
            metric_job_labels: false,
        }
    }
}

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(86_400);

setters!(SchedulerConfig {
    poll_interval: Duration,
    lookahead: Duration,
    lease_ttl: Duration,
    misfire_threshold: Duration,
    heartbeat: Duration,
    dead_after_beats: u32,
    claim_batch: usize,
    claim_window: usize,
    write_batch: usize,
    shutdown_grace: Duration,
    max_payload_bytes: usize,
    alarm_retry_base: Duration,
    alarm_max_attempts: u32,
    alarm_timeout: Duration,
    log_lines: usize,
    log_flush: Duration,
    metric_job_labels: bool,
} optional {
    run_retention: Duration,
    alarm_retention: Duration,
    alarm_throttle: Duration,
});

impl SchedulerConfig {
    /// With this node id (default `<host>-<pid>-<random>`).
    #[must_use]
    pub fn node_id(mut self, id: impl Into<String>) -> Self {
        self.node_id = Some(id.into());
        self
    }

    /// Checks every field against its range. Errors: [`Error::Invalid`] naming
    /// `config.<field>` and the value.
    ///
    /// | field | range |
    /// |---|---|
    /// | `poll_interval`, `heartbeat`, `alarm_timeout`, `log_flush` | over 0, at most 1 hour |
    /// | `lookahead` | at most 1 hour (0: claim only what is due) |
    /// | `lease_ttl` | 30 ms to 1 day (it is renewed every third of itself) |
    /// | `shutdown_grace`, `alarm_retry_base`, `alarm_throttle` | over 0, at most 1 day |
    /// | `misfire_threshold`, `run_retention`, `alarm_retention` | over 0, at most 100 years |
    /// | `dead_after_beats` | 2 to 1,000 (one late beat must not kill a live node) |
    /// | `claim_batch` | 1 to 100,000 |
    /// | `claim_window` | 0 to 100,000 |
    /// | `write_batch` | 1 to 10,000 |
    /// | `max_payload_bytes` | 1 to 16 MiB |
    /// | `alarm_max_attempts` | 1 to 1,000 |
    /// | `log_lines` | 0 to 100,000 |
    /// | `node_id` | 1-200 characters without spaces or control characters |
    pub fn validate(&self) -> Result<()> {
        let span = limits::MAX_SPAN;
        let durations = [
            ("config.poll_interval", Some(self.poll_interval), HOUR),
            ("config.heartbeat", Some(self.heartbeat), HOUR),
            ("config.alarm_timeout", Some(self.alarm_timeout), HOUR),
            ("config.log_flush", Some(self.log_flush), HOUR),
            ("config.lease_ttl", Some(self.lease_ttl), DAY),
            ("config.shutdown_grace", Some(self.shutdown_grace), DAY),
            ("config.alarm_retry_base", Some(self.alarm_retry_base), DAY),
            ("config.alarm_throttle", self.alarm_throttle, DAY),
            (
                "config.misfire_threshold",
                Some(self.misfire_threshold),
                span,
            ),
            ("config.run_retention", self.run_retention, span),
            ("config.alarm_retention", self.alarm_retention, span),
        ];
        for (field, d, max) in durations {
            if let Some(d) = d {
                limits::duration(field, d, max)?;
            }
        }
        limits::at_most("config.lookahead", self.lookahead, HOUR)?;
        if self.lease_ttl < Duration::from_millis(30) {
            return Err(Error::invalid(
                "config.lease_ttl",
                format!("{:?}", self.lease_ttl),
                "must be at least 30ms (it is renewed every third of itself)",
            ));
        }
        limits::count("config.dead_after_beats", self.dead_after_beats, 2, 1000)?;
        limits::count("config.claim_batch", self.claim_batch, 1, 100_000)?;
        limits::count("config.claim_window", self.claim_window, 0, 100_000)?;
        limits::count("config.write_batch", self.write_batch, 1, 10_000)?;
        limits::count(
            "config.max_payload_bytes",
            self.max_payload_bytes,
            1,
            16 << 20,
        )?;
        limits::count("config.log_lines", self.log_lines, 0, 100_000)?;
        limits::count(
            "config.alarm_max_attempts",
            self.alarm_max_attempts,
            1,
            1000,
        )?;
        if let Some(id) = &self.node_id
            && (id.is_empty()
                || id.len() > 200
                || id.chars().any(|c| c.is_control() || c.is_whitespace()))
        {
            return Err(Error::invalid(
                "config.node_id",
                id,
                "must be 1-200 characters without spaces or control characters",
            ));
        }
        Ok(())
    }

    /// The silence after which a node is dead: `heartbeat × dead_after_beats`.
    pub fn dead_after(&self) -> Duration {
        self.heartbeat * self.dead_after_beats
    }
}
