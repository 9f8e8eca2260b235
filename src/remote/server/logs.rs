//! Each run's log lines on an executor server: what `tracing` events inside the
//! handler say, kept per run with bounded size, readable by offset so a client can
//! tail them.
//!
//! The server runs each handler inside a span named [`RUN_SPAN`] carrying the run
//! id and the server's sink number; [`run_log_layer`](crate::run_log_layer) sends
//! every event inside such a span to the server's buffer for that run.

use crate::capture::{self, LineSink};
use crate::remote::protocol::{LogChunk, MAX_CHUNK_BYTES};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::watch;

/// The name of the span a handler runs in on an executor server.
pub const RUN_SPAN: &str = "jobwheel.remote_run";

/// A run on an instance: the run's id, and the shard's index for a run dispatched
/// as a shard of a sharding broadcast.
pub(crate) use crate::capture::RunKey;

/// One server's run logs.
#[derive(Debug)]
pub(crate) struct Logs {
    sink: u64,
    max_lines: usize,
    runs: Mutex<HashMap<RunKey, Buf>>,
}

#[derive(Debug)]
struct Buf {
    lines: VecDeque<String>,
    /// Offset of `lines[0]`.
    first: u64,
    done: bool,
    /// The offset after the last line, for requests waiting for lines.
    written: watch::Sender<u64>,
}

impl Default for Buf {
    fn default() -> Self {
        Buf {
            lines: VecDeque::new(),
            first: 0,
            done: false,
            written: watch::Sender::new(0),
        }
    }
}

impl Logs {
    /// Buffers keeping each run's last `max_lines` lines, registered for the layer.
    pub(crate) fn new(max_lines: usize) -> Arc<Logs> {
        Arc::new_cyclic(|me: &Weak<Logs>| {
            let sink: Weak<dyn LineSink> = me.clone();
            Logs {
                sink: capture::register(sink),
                max_lines,
                runs: Mutex::default(),
            }
        })
    }

    /// The number the run span names this server by.
    pub(crate) fn sink(&self) -> u64 {
        self.sink
    }

    fn runs(&self) -> std::sync::MutexGuard<'_, HashMap<RunKey, Buf>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn open(&self, run: RunKey) {
        self.runs().entry(run).or_default();
    }

    pub(crate) fn close(&self, run: RunKey) {
        if let Some(b) = self.runs().get_mut(&run) {
            b.done = true;
        }
    }

    pub(crate) fn forget(&self, run: RunKey) {
        self.runs().remove(&run);
    }

    /// Follows the offset after run `run`'s last line (`None`: no such run).
    pub(crate) fn written(&self, run: RunKey) -> Option<watch::Receiver<u64>> {
        self.runs().get(&run).map(|b| b.written.subscribe())
    }

    /// Up to `limit` lines from `offset` (lines already dropped are skipped).
    pub(crate) fn read(&self, run: RunKey, offset: u64, limit: usize) -> Option<LogChunk> {
        let runs = self.runs();
        let b = runs.get(&run)?;
        let from = offset.max(b.first);
        let skip = (from - b.first) as usize;
        let mut lines: Vec<String> = Vec::new();
        let mut bytes = 0;
        for line in b.lines.iter().skip(skip).take(limit) {
            bytes += line.len();
            if bytes > MAX_CHUNK_BYTES && !lines.is_empty() {
                break;
            }
            lines.push(line.clone());
        }
        let next_offset = from + lines.len() as u64;
        Some(LogChunk {
            next_offset,
            first_offset: b.first,
            more: next_offset < b.first + b.lines.len() as u64,
            lines,
            done: b.done,
        })
    }
}

impl LineSink for Logs {
    /// Appends a line to an open run's log, dropping its oldest past the bound.
    fn push(&self, run: RunKey, line: String) {
        let mut runs = self.runs();
        let Some(b) = runs.get_mut(&run).filter(|b| !b.done) else {
            return;
        };
        b.lines.push_back(line);
        while b.lines.len() > self.max_lines {
            b.lines.pop_front();
            b.first += 1;
        }
        b.written.send_replace(b.first + b.lines.len() as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_log_is_bounded_and_read_by_offset() {
        let logs = Logs::new(3);
        let run = (7, None);
        logs.open(run);
        for i in 0..5 {
            logs.push(run, format!("line {i}"));
        }
        let c = logs.read(run, 0, 10).unwrap();
        assert_eq!(c.lines, vec!["line 2", "line 3", "line 4"]);
        assert_eq!((c.first_offset, c.next_offset, c.done), (2, 5, false));
        let c = logs.read(run, 4, 10).unwrap();
        assert_eq!(c.lines, vec!["line 4"]);
        logs.close(run);
        logs.push(run, "after the end".into());
        let c = logs.read(run, 5, 10).unwrap();
        assert!(c.lines.is_empty() && c.done);
        assert!(logs.read((8, None), 0, 1).is_none());
        assert!(
            logs.read((7, Some(0)), 0, 1).is_none(),
            "a shard is another run"
        );
    }

    #[test]
    fn the_layer_routes_events_inside_a_run_span_to_that_run() {
        use tracing_subscriber::layer::SubscriberExt;
        let logs = Logs::new(100);
        logs.open((42, None));
        logs.open((42, Some(1)));
        let subscriber = tracing_subscriber::registry().with(crate::capture::run_log_layer());
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!("outside any run");
            let span = tracing::info_span!(RUN_SPAN, run_id = 42_i64, sink = logs.sink());
            span.in_scope(|| {
                tracing::info!(rows = 3, "exported <b>");
                tracing::warn_span!("inner").in_scope(|| tracing::warn!("nested"));
            });
            let shard = tracing::info_span!(
                RUN_SPAN,
                run_id = 42_i64,
                shard = Some(1_u32),
                sink = logs.sink()
            );
            shard.in_scope(|| tracing::info!("shard one"));
        });
        let c = logs.read((42, Some(1)), 0, 10).unwrap();
        assert_eq!(c.lines.len(), 1, "{:?}", c.lines);
        assert!(c.lines[0].ends_with("shard one"), "{}", c.lines[0]);
        let c = logs.read((42, None), 0, 10).unwrap();
        assert_eq!(c.lines.len(), 2, "{:?}", c.lines);
        assert!(
            c.lines[0].ends_with("INFO jobwheel::remote::server::logs::tests: exported <b> rows=3"),
            "{}",
            c.lines[0]
        );
        assert!(c.lines[1].contains("WARN") && c.lines[1].contains("nested"));
    }
}
