//! Each run's log lines: what `tracing` events inside the handler say, kept per run
//! with bounded size, readable by offset so a client can tail them.
//!
//! The executor server runs each handler inside a span named [`RUN_SPAN`] carrying
//! the run id and the server's sink number. [`log_layer`] is a
//! `tracing_subscriber` layer that sends every event inside such a span to the
//! server's buffer for that run; a service adds it to its subscriber once, for all
//! the executor servers it embeds.

use crate::executors::protocol::LogChunk;
use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// The name of the span a handler runs in on an executor server.
pub const RUN_SPAN: &str = "jobwheel.remote_run";

/// Longest log line kept, in bytes; longer ones are cut.
pub const MAX_LINE_BYTES: usize = 4096;

/// Every server's buffers, by sink number, for the layer to find.
fn sinks() -> &'static Mutex<HashMap<u64, Weak<Logs>>> {
    static SINKS: OnceLock<Mutex<HashMap<u64, Weak<Logs>>>> = OnceLock::new();
    SINKS.get_or_init(Mutex::default)
}

/// A run on an instance: the run's id, and the shard's index for a run dispatched
/// as a shard of a sharding broadcast.
pub(crate) type RunKey = (i64, Option<u32>);

/// One server's run logs.
#[derive(Debug)]
pub(crate) struct Logs {
    sink: u64,
    max_lines: usize,
    runs: Mutex<HashMap<RunKey, Buf>>,
}

#[derive(Debug, Default)]
struct Buf {
    lines: VecDeque<String>,
    /// Offset of `lines[0]`.
    first: u64,
    done: bool,
}

impl Logs {
    /// Buffers keeping each run's last `max_lines` lines, registered for the layer.
    pub(crate) fn new(max_lines: usize) -> Arc<Logs> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let logs = Arc::new(Logs {
            sink: NEXT.fetch_add(1, Ordering::Relaxed),
            max_lines,
            runs: Mutex::default(),
        });
        let mut s = sinks().lock().unwrap_or_else(|p| p.into_inner());
        s.retain(|_, w| w.strong_count() > 0);
        s.insert(logs.sink, Arc::downgrade(&logs));
        logs
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

    /// Appends a line to an open run's log, dropping its oldest past the bound.
    pub(crate) fn push(&self, run: RunKey, mut line: String) {
        if line.len() > MAX_LINE_BYTES {
            let mut cut = MAX_LINE_BYTES;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
            line.push('…');
        }
        let mut runs = self.runs();
        let Some(b) = runs.get_mut(&run).filter(|b| !b.done) else {
            return;
        };
        b.lines.push_back(line);
        while b.lines.len() > self.max_lines {
            b.lines.pop_front();
            b.first += 1;
        }
    }

    /// Up to `limit` lines from `offset` (lines already dropped are skipped).
    pub(crate) fn read(&self, run: RunKey, offset: u64, limit: usize) -> Option<LogChunk> {
        let runs = self.runs();
        let b = runs.get(&run)?;
        let from = offset.max(b.first);
        let skip = (from - b.first) as usize;
        let lines: Vec<String> = b.lines.iter().skip(skip).take(limit).cloned().collect();
        Some(LogChunk {
            next_offset: from + lines.len() as u64,
            first_offset: b.first,
            lines,
            done: b.done,
        })
    }
}

/// A `tracing_subscriber` layer that captures the events of handlers running on
/// executor servers in this process into each run's log:
/// `tracing_subscriber::registry().with(jobwheel::executors::log_layer())`.
pub fn log_layer() -> RunLogLayer {
    RunLogLayer { _private: () }
}

/// The layer [`log_layer`] returns.
#[derive(Debug)]
pub struct RunLogLayer {
    _private: (),
}

/// The run a span stands for, kept in its extensions.
struct RunOf {
    sink: u64,
    run: RunKey,
}

#[derive(Default)]
struct RunFields {
    sink: Option<u64>,
    run: Option<i64>,
    shard: Option<u32>,
}

impl Visit for RunFields {
    fn record_i64(&mut self, field: &Field, value: i64) {
        match field.name() {
            "run_id" => self.run = Some(value),
            "sink" => self.sink = u64::try_from(value).ok(),
            "shard" => self.shard = u32::try_from(value).ok(),
            _ => {}
        }
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "run_id" => self.run = i64::try_from(value).ok(),
            "sink" => self.sink = Some(value),
            "shard" => self.shard = u32::try_from(value).ok(),
            _ => {}
        }
    }
    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

/// An event's message and fields as one line.
#[derive(Default)]
struct Line(String, String);

impl Visit for Line {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        } else {
            let _ = write!(self.1, " {}={value:?}", field.name());
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let _ = write!(self.1, " {}={value:?}", field.name());
        }
    }
}

impl<S> Layer<S> for RunLogLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().name() != RUN_SPAN {
            return;
        }
        let mut f = RunFields::default();
        attrs.record(&mut f);
        if let (Some(sink), Some(run), Some(span)) = (f.sink, f.run, ctx.span(id)) {
            span.extensions_mut().insert(RunOf {
                sink,
                run: (run, f.shard),
            });
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let Some(scope) = ctx.event_scope(event) else {
            return;
        };
        let Some((sink, run)) = scope
            .into_iter()
            .find_map(|span| span.extensions().get::<RunOf>().map(|r| (r.sink, r.run)))
        else {
            return;
        };
        let Some(logs) = sinks()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&sink)
            .and_then(Weak::upgrade)
        else {
            return;
        };
        let mut line = Line::default();
        event.record(&mut line);
        let m = event.metadata();
        logs.push(
            run,
            format!(
                "{} {:>5} {}: {}{}",
                chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ"),
                m.level(),
                m.target(),
                line.0,
                line.1
            ),
        );
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
        logs.push(run, "x".repeat(MAX_LINE_BYTES + 10));
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
        let subscriber = tracing_subscriber::registry().with(log_layer());
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
            c.lines[0]
                .ends_with("INFO jobwheel::executors::server::logs::tests: exported <b> rows=3"),
            "{}",
            c.lines[0]
        );
        assert!(c.lines[1].contains("WARN") && c.lines[1].contains("nested"));
    }
}
