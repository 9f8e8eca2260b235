//! What one node holds ([`Load`]): its executor and slots, the jobs it has claimed,
//! the runs it executes and finishes, and the pace at which its slots free up, which
//! together decide how many more fires it may claim.

use super::lock;
use super::slots::Slots;
use crate::executor::Executor;
use crate::job::JobId;
use crate::lock::Lease;
use crate::record::RunId;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The executor and the fires this node holds, which decide how many more it may
/// claim.
pub(crate) struct Load {
    pub(crate) executor: Arc<dyn Executor>,
    /// Executor slots, handed to due fires in fire order.
    pub(crate) slots: Arc<Slots>,
    /// Jobs claimed by this node and not yet done.
    pub(crate) armed: Mutex<HashSet<JobId>>,
    /// Fires whose handler has ended and whose finish is being written: they hold
    /// their lease but no slot, and a poll counts them as busy so that a node never
    /// holds more leases than it has slots.
    pub(crate) finishing: AtomicUsize,
    /// Claimed fires waiting for their instant. They hold no slot; a poll arms no
    /// more of them than the node has free slots.
    pub(crate) ahead: AtomicUsize,
    /// Set (to the line plus one) when a poll left claimable fires for lack of free
    /// slots; the poller is woken once half the line has slots. 0: not starved.
    pub(crate) starved: AtomicUsize,
    /// How fast executor slots free up: bounds the line.
    pub(crate) pace: Pace,
    /// Set while the last poll saw due fires this node had no free slot for; a job
    /// then gives its lease back after a run instead of keeping it for its next fire,
    /// so every due job gets its turn in fire order and other nodes can take the rest.
    pub(crate) backlog: AtomicBool,
    /// Runs executing on this node, watched by the lease renewer.
    pub(crate) running: Mutex<HashMap<RunId, RunningEntry>>,
    /// Runs this node started and has not done with: executing, waiting for a slot,
    /// or writing their finish ([`Load::hold`]). A run the store records running on
    /// this node outside this set is nobody's (its acknowledged finish was lost, or
    /// an earlier process of the same node id started it).
    in_hand: Mutex<HashSet<RunId>>,
    /// Claim calls in flight ([`Load::claiming`]): the runs they start are not in
    /// hand until the call has answered and its fires were handed to their tasks.
    claiming: AtomicUsize,
}

impl Load {
    /// An idle load on `executor`.
    pub(crate) fn new(executor: Arc<dyn Executor>) -> Load {
        Load {
            slots: Arc::new(Slots::new(executor.clone())),
            executor,
            armed: Mutex::default(),
            finishing: AtomicUsize::new(0),
            ahead: AtomicUsize::new(0),
            starved: AtomicUsize::new(0),
            pace: Pace::default(),
            backlog: AtomicBool::new(false),
            running: Mutex::default(),
            in_hand: Mutex::default(),
            claiming: AtomicUsize::new(0),
        }
    }

    /// Counts `run` in hand until the guard drops: from the moment its start is
    /// recorded to the moment its finish is written (or given up at a stop).
    pub(crate) fn hold(&self, run: RunId) -> InHand<'_> {
        lock(&self.in_hand).insert(run);
        InHand { load: self, run }
    }

    /// The runs in hand now.
    pub(crate) fn in_hand(&self) -> HashSet<RunId> {
        lock(&self.in_hand).clone()
    }

    /// Counts a claim call in flight while the guard lives; runs it started go in
    /// hand through [`Claiming::take`] before the guard is dropped.
    pub(crate) fn claiming(&self) -> Claiming<'_> {
        self.claiming.fetch_add(1, Ordering::SeqCst);
        Claiming { load: self }
    }

    /// Whether a claim call is in flight: a run the store records running on this
    /// node may be one it started and has not handed on yet.
    pub(crate) fn claims_in_flight(&self) -> bool {
        self.claiming.load(Ordering::SeqCst) > 0
    }

    /// Executor slots not promised to a due fire of this node, less the fires still
    /// writing their finish.
    pub(crate) fn free_slots(&self) -> usize {
        self.slots
            .free()
            .saturating_sub(self.finishing.load(Ordering::SeqCst))
    }

    /// How many runs this node's slots start within `span` at the mean run time
    /// ([`Pace::starts_within`] over the executor's slots).
    pub(crate) fn starts_within(&self, span: std::time::Duration) -> usize {
        self.pace.starts_within(self.executor.capacity(), span)
    }

    /// Due fires this node may still claim with a line of `line` fires waiting for
    /// slots: its free slots plus the line, less the due fires already waiting.
    pub(crate) fn line_room(&self, line: usize) -> usize {
        (self.executor.capacity() + line)
            .saturating_sub(self.slots.pending() + self.finishing.load(Ordering::SeqCst))
    }
}

/// How fast this node's executor slots free up: the runs executing now, the mean
/// time a run holds its slot (a moving average over the last runs that follows
/// slower runs faster than faster ones), and how many runs entered a slot per second
/// lately (an exponentially decayed rate over [`RATE_WINDOW`]).
#[derive(Default)]
pub(crate) struct Pace {
    executing: AtomicUsize,
    /// Mean run time in nanoseconds; 0 before the first run.
    mean_nanos: std::sync::atomic::AtomicU64,
    /// Runs entering a slot per second, decayed, and when it was last updated.
    entered: Mutex<(f64, Option<Instant>)>,
    /// When the node's current stretch of starts began: its first start after
    /// [`IDLE_AFTER`] without one.
    busy_since: Mutex<Option<Instant>>,
}

/// A gap between starts after which the next one begins a new stretch.
const IDLE_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// The window of the measured start rate: starts older than a few windows no longer
/// count, so the rate follows a change of pace within about a second.
const RATE_WINDOW: std::time::Duration = std::time::Duration::from_millis(250);

impl Pace {
    /// Counts a run entering its slot; the guard counts it out and records how long it
    /// held the slot.
    pub(crate) fn enter(&self) -> Executing<'_> {
        self.executing.fetch_add(1, Ordering::SeqCst);
        {
            let mut entered = lock(&self.entered);
            let now = Instant::now();
            if entered
                .1
                .is_none_or(|at| now.duration_since(at) >= IDLE_AFTER)
            {
                *lock(&self.busy_since) = Some(now);
            }
            let rate = decayed(*entered, now);
            *entered = (rate + 1.0 / RATE_WINDOW.as_secs_f64(), Some(now));
        }
        Executing {
            pace: self,
            since: Instant::now(),
        }
    }

    /// How many runs the executor can start within `span`: its slots (free and busy)
    /// times `span` over the mean run time. 0 before the first run ended.
    pub(crate) fn starts_within(&self, free: usize, span: std::time::Duration) -> usize {
        let mean = self.mean_nanos.load(Ordering::SeqCst);
        if mean == 0 {
            return 0;
        }
        let slots = (free + self.executing.load(Ordering::SeqCst)) as f64;
        // Saturating float-to-int conversion.
        (slots * span.as_nanos() as f64 / mean as f64) as usize
    }

    /// How many runs entered a slot within a `span` lately, at the measured rate: what
    /// the node actually turns its slots over at, which handlers that end at once
    /// do not raise (the node's own work bounds it), and 0 on a node that has been
    /// idle for a second.
    ///
    /// The decayed rate starts from 0, so early in a stretch of starts it counts
    /// the starts so far against the whole window; it is divided by the share of
    /// the window the stretch has lasted (at least a tenth of it), so a node that
    /// starts a backlog measures its pace within its first polls rather than a
    /// window later.
    pub(crate) fn started_within(&self, span: std::time::Duration) -> usize {
        let now = Instant::now();
        let rate = decayed(*lock(&self.entered), now);
        let lasted = lock(&self.busy_since).map_or(0.0, |since| {
            now.duration_since(since)
                .as_secs_f64()
                .max(RATE_WINDOW.as_secs_f64() / 10.0)
        });
        let share = 1.0 - (-lasted / RATE_WINDOW.as_secs_f64()).exp();
        if share <= 0.0 {
            return 0;
        }
        (rate / share * span.as_secs_f64()) as usize
    }

    /// Records a run that held its slot for `took` nanoseconds.
    fn record(&self, took: u64) {
        // A moving average that rises fast (half-way to a slower run) and falls
        // slowly (an eighth of the way to a faster one), so the line shrinks at once
        // when runs get slower and grows back over many fast runs.
        let _ = self
            .mean_nanos
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |old| {
                Some(if old == 0 {
                    took
                } else if took > old {
                    old + (took - old) / 2
                } else {
                    (old - (old - took) / 8).max(1)
                })
            });
    }
}

/// The start rate `(rate, at)` decayed to `now` over [`RATE_WINDOW`].
fn decayed((rate, at): (f64, Option<Instant>), now: Instant) -> f64 {
    match at {
        Some(at) => {
            rate * (-now.duration_since(at).as_secs_f64() / RATE_WINDOW.as_secs_f64()).exp()
        }
        None => 0.0,
    }
}

/// A run in its executor slot, counted by [`Pace`].
pub(crate) struct Executing<'a> {
    pace: &'a Pace,
    since: Instant,
}

impl Drop for Executing<'_> {
    fn drop(&mut self) {
        self.pace.executing.fetch_sub(1, Ordering::SeqCst);
        let took = u64::try_from(self.since.elapsed().as_nanos())
            .unwrap_or(u64::MAX)
            .max(1);
        self.pace.record(took);
    }
}

/// A claim call in flight ([`Load::claiming`]).
pub(crate) struct Claiming<'a> {
    load: &'a Load,
}

impl Claiming<'_> {
    /// Puts a run the claim started in hand, before its fire task holds it.
    pub(crate) fn take(&self, run: RunId) {
        lock(&self.load.in_hand).insert(run);
    }
}

impl Drop for Claiming<'_> {
    fn drop(&mut self) {
        self.load.claiming.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A run in progress on this node, watched by the lease renewer.
pub(crate) struct RunningEntry {
    pub(crate) lease: Lease,
    pub(crate) deadline: Instant,
    pub(crate) cancel: CancellationToken,
    pub(crate) lost: bool,
    /// An operator killed it (the cancellation is a kill, not a lost lease or a
    /// shutdown): it is recorded `cancelled` and not retried.
    pub(crate) killed: bool,
}

/// A run counted in [`Load::hold`] until this drops.
pub(crate) struct InHand<'a> {
    load: &'a Load,
    run: RunId,
}

impl Drop for InHand<'_> {
    fn drop(&mut self) {
        lock(&self.load.in_hand).remove(&self.run);
    }
}

#[cfg(test)]
mod tests {
    use super::Pace;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn pace_counts_the_starts_the_slots_make_room_for() {
        let pace = Pace::default();
        let quarter = Duration::from_millis(250);
        assert_eq!(
            pace.starts_within(4, quarter),
            0,
            "no run ended yet: no line"
        );
        // 4 slots turned over every 10 ms for two seconds: 400 starts a second.
        for _ in 0..200 {
            let runs = [pace.enter(), pace.enter(), pace.enter(), pace.enter()];
            tokio::time::sleep(Duration::from_millis(10)).await;
            drop(runs);
        }
        assert_eq!(pace.starts_within(4, quarter), 100);
        let n = pace.started_within(quarter);
        assert!(
            (95..=102).contains(&n),
            "measured: about 100 in 250 ms: {n}"
        );
        let busy = [pace.enter(), pace.enter()];
        assert_eq!(
            pace.starts_within(2, quarter),
            100,
            "busy slots count as slots that free up"
        );
        drop(busy);
        for _ in 0..40 {
            let run = pace.enter();
            tokio::time::sleep(Duration::from_secs(5)).await;
            drop(run);
        }
        assert_eq!(
            pace.starts_within(4, quarter),
            0,
            "runs of 5 s: nothing starts within a quarter second"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stretch_of_starts_measures_its_pace_from_its_first_polls() {
        let pace = Pace::default();
        let second = Duration::from_secs(1);
        // 64 starts every 10 ms (6,400 a second), for 30 ms only.
        for _ in 0..3 {
            for _ in 0..64 {
                drop(pace.enter());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let n = pace.started_within(second);
        assert!(
            (4_000..=8_000).contains(&n),
            "30 ms into a stretch of 6,400 starts a second: {n}"
        );
        // A lone start after an idle second is a new stretch of one start.
        tokio::time::sleep(Duration::from_secs(5)).await;
        drop(pace.enter());
        let n = pace.started_within(second);
        assert!(n <= 50, "one start is no pace: {n}");
    }

    #[tokio::test(start_paused = true)]
    async fn instant_runs_start_no_faster_than_they_were_started() {
        let pace = Pace::default();
        // Runs that take no time, 20 a second for two seconds.
        for _ in 0..40 {
            drop(pace.enter());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let quarter = Duration::from_millis(250);
        assert!(pace.starts_within(8, quarter) > 1_000_000, "instant runs");
        let n = pace.started_within(quarter);
        assert!((4..=5).contains(&n), "but they entered 20 a second: {n}");
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(
            pace.started_within(quarter),
            0,
            "an idle node has no measured pace to commit fires on"
        );
    }
}
