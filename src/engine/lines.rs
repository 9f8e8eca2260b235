//! Local runs' log lines: the node's buffer that the [`run_log_layer`] fills with
//! the events of handlers running here, written to the store
//! ([`RunLog::append_lines`](crate::store::RunLog::append_lines)) every
//! [`log_flush`](crate::SchedulerConfig::log_flush) and when a run ends, so a run
//! lost with its node keeps what was written before.
//!
//! A run keeps its first [`log_lines`](crate::SchedulerConfig::log_lines) lines;
//! the next one is replaced by a marker saying the log was cut, and the rest are
//! dropped (the head of a log says how the run started; a flood after it is cut).
//!
//! [`run_log_layer`]: crate::run_log_layer

use super::instruments::timed;
use super::{Core, lock};
use crate::capture::{self, LineSink, RunKey};
use crate::record::{LogLines, RunId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use tokio::time::sleep;
use tracing::warn;

/// Lines held for the store while its writes fail, across runs that have ended;
/// older ones are dropped past this.
const MAX_HELD: usize = 100_000;

/// The node's buffer of its running local runs' lines.
pub(crate) struct Lines {
    sink: u64,
    max: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Open runs: the next line's offset and the lines not yet written.
    open: HashMap<i64, Buf>,
    /// Ended runs' lines that a failed write left behind.
    held: Vec<LogLines>,
}

#[derive(Default)]
struct Buf {
    next: u64,
    first: u64,
    pending: Vec<String>,
}

impl Buf {
    fn take(&mut self, run: i64) -> Option<LogLines> {
        if self.pending.is_empty() {
            return None;
        }
        let lines = std::mem::take(&mut self.pending);
        let chunk = LogLines {
            run_id: RunId(run),
            first: self.first,
            lines,
        };
        self.first = self.next;
        Some(chunk)
    }
}

impl Lines {
    /// A buffer keeping `max` lines per run (0: none), registered for the layer.
    pub(crate) fn new(max: usize) -> Arc<Lines> {
        Arc::new_cyclic(|me: &Weak<Lines>| {
            let sink: Weak<dyn LineSink> = me.clone();
            Lines {
                sink: capture::register(sink),
                max,
                inner: Mutex::default(),
            }
        })
    }

    /// The number a run's span names this buffer by.
    pub(crate) fn sink(&self) -> u64 {
        self.sink
    }

    /// Starts keeping run `run`'s lines.
    pub(crate) fn open(&self, run: RunId) {
        if self.max > 0 {
            lock(&self.inner).open.entry(run.0).or_default();
        }
    }

    /// Stops keeping run `run`'s lines; returns those not yet written.
    pub(crate) fn close(&self, run: RunId) -> Option<LogLines> {
        if self.max == 0 {
            return None; // nothing was opened: no lock on the finish path
        }
        lock(&self.inner)
            .open
            .remove(&run.0)
            .and_then(|mut b| b.take(run.0))
    }

    /// Every line not yet written: open runs' and those held after a failed write.
    pub(crate) fn take_all(&self) -> Vec<LogLines> {
        let mut inner = lock(&self.inner);
        let mut all = std::mem::take(&mut inner.held);
        all.extend(inner.open.iter_mut().filter_map(|(run, b)| b.take(*run)));
        all
    }

    /// Keeps chunks a write failed to store, for the next flush (dropping the
    /// oldest past a bound). Returns how many lines were dropped.
    pub(crate) fn hold(&self, chunks: Vec<LogLines>) -> usize {
        let mut inner = lock(&self.inner);
        inner.held.extend(chunks);
        let mut total: usize = inner.held.iter().map(|c| c.lines.len()).sum();
        let mut dropped = 0;
        while total > MAX_HELD && !inner.held.is_empty() {
            let c = inner.held.remove(0);
            total -= c.lines.len();
            dropped += c.lines.len();
        }
        dropped
    }
}

impl LineSink for Lines {
    fn push(&self, (run, _): RunKey, line: String) {
        let mut inner = lock(&self.inner);
        let Some(b) = inner.open.get_mut(&run) else {
            return;
        };
        let max = self.max as u64;
        if b.next < max {
            b.pending.push(line);
        } else if b.next == max {
            b.pending.push(format!(
                "[jobwheel: log cut at {max} lines; the run's later lines were dropped]"
            ));
        } else {
            return;
        }
        b.next += 1;
    }
}

/// Writes `chunks` to the store; on failure keeps them for the next flush.
async fn write(core: &Core, chunks: Vec<LogLines>) {
    if chunks.is_empty() {
        return;
    }
    let store = &core.store;
    if let Err(e) = timed("append_lines", store.name(), store.append_lines(&chunks)).await {
        core.backend_error("append_lines");
        let dropped = core.lines.hold(chunks);
        warn!(error = %e, dropped, "writing runs' log lines failed; kept for the next flush");
    }
}

/// Writes run `run`'s last lines as it ends (before its finish, so a reader of the
/// finished run sees them all).
pub(super) async fn flush_run(core: &Core, run: RunId) {
    if let Some(chunk) = core.lines.close(run) {
        write(core, vec![chunk]).await;
    }
}

/// Writes the runs' lines every `log_flush`, and once more when the node stops.
pub(super) async fn flush_loop(core: Arc<Core>) {
    loop {
        let stopping = tokio::select! {
            _ = core.life.bg_stop.cancelled() => true,
            _ = sleep(core.config.log_flush) => false,
        };
        write(&core, core.lines.take_all()).await;
        if stopping {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_keeps_its_first_lines_then_a_cut_marker() {
        let lines = Lines::new(3);
        lines.open(RunId(7));
        for i in 0..5 {
            lines.push((7, None), format!("line {i}"));
        }
        lines.push((8, None), "not open".into());
        let all = lines.take_all();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].first, 0);
        assert_eq!(&all[0].lines[..3], ["line 0", "line 1", "line 2"]);
        assert!(
            all[0].lines[3].contains("log cut at 3 lines"),
            "{:?}",
            all[0]
        );
        assert_eq!(all[0].lines.len(), 4);
        assert!(
            lines.take_all().is_empty(),
            "taken lines are not taken twice"
        );
        assert!(lines.close(RunId(7)).is_none());
        lines.push((7, None), "after the end".into());
        assert!(lines.take_all().is_empty());
    }

    #[test]
    fn offsets_continue_across_flushes_and_failed_writes_are_held() {
        let lines = Lines::new(100);
        lines.open(RunId(1));
        lines.push((1, None), "a".into());
        let first = lines.take_all();
        lines.push((1, None), "b".into());
        lines.push((1, None), "c".into());
        let last = lines.close(RunId(1)).unwrap();
        assert_eq!((first[0].first, last.first), (0, 1));
        assert_eq!(last.lines, ["b", "c"]);
        assert_eq!(lines.hold(vec![last.clone()]), 0);
        assert_eq!(lines.take_all(), [last]);
        let flood = LogLines {
            run_id: RunId(2),
            first: 0,
            lines: vec![String::new(); MAX_HELD + 1],
        };
        assert_eq!(lines.hold(vec![flood]), MAX_HELD + 1, "bounded");
    }
}
