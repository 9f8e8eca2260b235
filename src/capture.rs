//! Runs' logs from `tracing`: [`run_log_layer`] is a `tracing_subscriber` layer that
//! sends every event emitted inside a run's span to that run's log.
//!
//! A run's span is any span carrying the fields `run_id` (set when the span is
//! created or recorded later) and `sink` (the number of the buffer that keeps the
//! lines): the engine's span for a local run ([`RUN_SPAN`](crate::engine::RUN_SPAN),
//! buffered by the node and written to the store) and an executor server's span for
//! a remote run (kept by the server, read by offset). Events outside such a span, or
//! whose buffer is gone, are left alone. A service adds the layer to its subscriber
//! once: `tracing_subscriber::registry().with(jobwheel::run_log_layer())`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, Weak};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// Longest log line kept, in bytes; a longer one is cut and ends with `…`.
pub const MAX_LINE_BYTES: usize = 4096;

/// A run's log: its run id, and the shard's index for one shard of a sharded
/// broadcast (on an executor server).
pub(crate) type RunKey = (i64, Option<u32>);

/// Where a buffer of runs' lines takes them.
pub(crate) trait LineSink: Send + Sync {
    /// Takes one line of run `run` (already cut to [`MAX_LINE_BYTES`]); a run the
    /// buffer does not hold open drops it.
    fn push(&self, run: RunKey, line: String);
}

fn sinks() -> &'static Mutex<HashMap<u64, Weak<dyn LineSink>>> {
    static SINKS: OnceLock<Mutex<HashMap<u64, Weak<dyn LineSink>>>> = OnceLock::new();
    SINKS.get_or_init(Mutex::default)
}

/// Registers a buffer for the layer to find; returns the number a run's span names
/// it by. Buffers dropped since are forgotten here.
pub(crate) fn register(sink: Weak<dyn LineSink>) -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut s = sinks().lock().unwrap_or_else(|p| p.into_inner());
    s.retain(|_, w| w.strong_count() > 0);
    s.insert(n, sink);
    n
}

/// Writes lines to one run's log directly, without `tracing`: what a remote
/// executor's lines arrive through on the scheduler node, and what a handler may use
/// for output it has as text (a child process's, say). Every run's
/// [`JobContext::log`](crate::JobContext::log) is one. A line goes where the run's
/// `tracing` events go (the node's buffer, written to the store; an executor
/// server's buffer), cut to [`MAX_LINE_BYTES`], under the same bound on lines per
/// run. The default logger (a context made by hand, in a test) drops what it is
/// given.
#[derive(Clone, Debug, Default)]
pub struct RunLogger {
    to: Option<(u64, RunKey)>,
}

impl RunLogger {
    /// A logger that drops every line.
    pub fn discard() -> RunLogger {
        RunLogger::default()
    }

    /// A logger for run `run` of the buffer registered as `sink`.
    pub(crate) fn to(sink: u64, run: RunKey) -> RunLogger {
        RunLogger {
            to: Some((sink, run)),
        }
    }

    /// Appends `line` to the run's log, as it is (no time or level is added). A
    /// run whose log is closed (ended), or a discarding logger, drops it.
    pub fn line(&self, line: impl Into<String>) {
        self.lines([line.into()]);
    }

    /// Appends `lines` in order, as [`line`](Self::line) does each.
    pub fn lines(&self, lines: impl IntoIterator<Item = String>) {
        let Some((sink, run)) = self.to else {
            return;
        };
        let sink = sinks()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&sink)
            .and_then(Weak::upgrade);
        if let Some(sink) = sink {
            for line in lines {
                sink.push(run, bound_line(line));
            }
        }
    }
}

/// The layer that captures handlers' events into their runs' logs (see the module
/// documentation): `tracing_subscriber::registry().with(jobwheel::run_log_layer())`.
/// It keeps events at `INFO` and above (libraries' debug chatter inside a handler,
/// such as a driver's statements, stays out); [`RunLogLayer::level`] changes that.
pub fn run_log_layer() -> RunLogLayer {
    RunLogLayer { level: Level::INFO }
}

/// The layer [`run_log_layer`] returns.
#[derive(Debug)]
pub struct RunLogLayer {
    level: Level,
}

impl RunLogLayer {
    /// Keeps events at `level` and above (`Level::DEBUG` keeps debug events too).
    /// The layer only leaves events out: what the subscriber's other layers and
    /// filters see is theirs to decide.
    #[must_use]
    pub fn level(mut self, level: Level) -> Self {
        self.level = level;
        self
    }
}

/// A span's run fields, kept in its extensions once it names a sink.
#[derive(Default, Clone, Copy)]
struct RunFields {
    sink: Option<u64>,
    run: Option<i64>,
    shard: Option<u32>,
}

impl RunFields {
    fn key(&self) -> Option<(u64, RunKey)> {
        Some((self.sink?, (self.run?, self.shard)))
    }
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

/// Cuts `line` to [`MAX_LINE_BYTES`] (on a character boundary, marked `…`) and
/// replaces NUL, which no SQL text column holds.
pub(crate) fn bound_line(mut line: String) -> String {
    if line.len() > MAX_LINE_BYTES {
        let mut cut = MAX_LINE_BYTES;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        line.truncate(cut);
        line.push('…');
    }
    if line.contains('\0') {
        line = line.replace('\0', "\u{fffd}");
    }
    line
}

impl<S> Layer<S> for RunLogLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().fields().field("sink").is_none() {
            return;
        }
        let mut f = RunFields::default();
        attrs.record(&mut f);
        if let (Some(_), Some(span)) = (f.sink, ctx.span(id)) {
            span.extensions_mut().insert(f);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut ext = span.extensions_mut();
        if let Some(f) = ext.get_mut::<RunFields>() {
            values.record(f);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if *event.metadata().level() > self.level {
            return;
        }
        let Some(scope) = ctx.event_scope(event) else {
            return;
        };
        let Some((sink, run)) = scope.into_iter().find_map(|span| {
            span.extensions()
                .get::<RunFields>()
                .and_then(RunFields::key)
        }) else {
            return;
        };
        let Some(sink) = sinks()
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
        sink.push(
            run,
            bound_line(format!(
                "{} {:>5} {}: {}{}",
                chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ"),
                m.level(),
                m.target(),
                line.0,
                line.1
            )),
        );
    }
}
