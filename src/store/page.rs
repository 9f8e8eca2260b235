//! A page of stored rows, with the rows that could not be read.

use crate::record::DueKey;

/// Rows a store read for one call, and the rows it skipped because they could not be
/// decoded (a row written by hand, by a newer version with a changed meaning, or
/// damaged). A skipped row never fails the call: every other job keeps firing. The
/// engine counts and logs what it is told here
/// ([`EngineMetrics::corrupt_rows`](crate::EngineMetrics::corrupt_rows)), and
/// [`Scheduler::doctor`](crate::Scheduler::doctor) lists every such row.
#[derive(Clone, Debug, PartialEq)]
pub struct Page<T> {
    /// The rows read, in the call's order.
    pub items: Vec<T>,
    /// The rows skipped.
    pub corrupt: Vec<CorruptRow>,
}

impl<T> Page<T> {
    /// A page with no skipped row.
    pub fn of(items: Vec<T>) -> Self {
        Page {
            items,
            corrupt: Vec::new(),
        }
    }

    /// How many rows were looked at: read plus skipped.
    pub fn rows(&self) -> usize {
        self.items.len() + self.corrupt.len()
    }
}

impl<T> Default for Page<T> {
    fn default() -> Self {
        Page::of(Vec::new())
    }
}

/// A stored row that could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CorruptRow {
    /// What kind of row: `job`, `node` or `alarm`.
    pub kind: &'static str,
    /// Its id, as stored.
    pub id: String,
    /// For a job skipped by `due`, its place in the due order, so a keyset page
    /// continues after it.
    pub due_key: Option<DueKey>,
    /// Why it could not be decoded.
    pub reason: String,
}
