//! Executor slots, handed to due fires in fire order.
//!
//! A claimed fire holds no slot while it waits for its instant. When its instant
//! comes it asks [`Slots::acquire`]: while the executor has free capacity beyond the
//! fires already on their way into it, the fire goes at once; otherwise it waits,
//! and freed slots go to the waiting fires earliest instant first. A grant is given
//! back when the fire enters the executor (whose capacity then counts it) or when it
//! will not run after all.
//!
//! The first [`near`](Slots::set_near) fires in line are told they are near the head
//! ([`SlotRequest::near`]): a fire claimed beyond the free slots writes its start then,
//! while it still waits, and a fire that is not near within its wait goes back.

use super::lock;
use crate::executor::Executor;
use crate::time::Timestamp;
use std::collections::BTreeMap;
use std::future::Future;
use std::ops::Bound;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

#[derive(Default)]
struct State {
    /// Fires waiting for a slot, by `(fire_at, arrival)`.
    waiting: BTreeMap<(Timestamp, u64), Waiter>,
    arrivals: u64,
    /// Fires granted a slot that have not entered the executor yet.
    starting: usize,
    /// How many fires at the head of the line are near it.
    near: usize,
    /// Waiting fires told they are near (their `near` sender taken).
    told: usize,
    /// The last fire told, while any waits: telling goes on after it.
    told_until: Option<(Timestamp, u64)>,
}

/// A fire in line: told when it is near the head, then when it has its slot.
struct Waiter {
    grant: oneshot::Sender<()>,
    near: Option<oneshot::Sender<()>>,
}

impl State {
    /// Tells waiting fires that they are near the head until `near` of them are.
    /// Claims come in fire order, so telling goes on after the last fire told, and
    /// each fire is looked at once: one that arrives ahead of the fires told waits
    /// for its slot, which it gets before them.
    fn tell_near(&mut self) {
        let State {
            waiting,
            near,
            told,
            told_until,
            ..
        } = self;
        if *told >= *near {
            return;
        }
        let after = match *told_until {
            Some(key) => (Bound::Excluded(key), Bound::Unbounded),
            None => (Bound::Unbounded, Bound::Unbounded),
        };
        for (key, w) in waiting.range_mut(after).take(*near - *told) {
            if let Some(tx) = w.near.take() {
                let _ = tx.send(());
                *told += 1;
            }
            *told_until = Some(*key);
        }
    }

    /// Takes a fire out of the line.
    fn leave(&mut self, key: &(Timestamp, u64)) -> Option<Waiter> {
        let w = self.waiting.remove(key)?;
        if w.near.is_none() {
            self.told = self.told.saturating_sub(1);
        }
        if self.waiting.is_empty() {
            self.told_until = None;
        }
        Some(w)
    }
}

/// The slot gate of one node.
pub(crate) struct Slots {
    executor: Arc<dyn Executor>,
    state: Mutex<State>,
}

impl Slots {
    pub(crate) fn new(executor: Arc<dyn Executor>) -> Self {
        Slots {
            executor,
            state: Mutex::default(),
        }
    }

    /// Due fires of this node that do not hold an executor slot yet: waiting for
    /// one, or granted one and on their way into the executor.
    pub(crate) fn pending(&self) -> usize {
        let st = lock(&self.state);
        st.waiting.len() + st.starting
    }

    /// Free executor slots not promised to a pending fire.
    pub(crate) fn free(&self) -> usize {
        self.executor.capacity().saturating_sub(self.pending())
    }

    /// Sets how many fires at the head of the line count as near it, and tells them.
    pub(crate) fn set_near(&self, near: usize) {
        let mut st = lock(&self.state);
        st.near = near;
        st.tell_near();
    }

    /// Asks for a slot for a fire due at `fire_at`. The fire counts as pending from
    /// now on; [`SlotRequest::granted`] waits for the slot. Dropping the request (or
    /// the wait) gives back a slot it was granted meanwhile.
    pub(crate) fn request(self: &Arc<Self>, fire_at: Timestamp) -> SlotRequest {
        let mut st = lock(&self.state);
        let state = if st.waiting.is_empty() && self.executor.capacity() > st.starting {
            st.starting += 1;
            Req::Granted
        } else {
            let (tx, rx) = oneshot::channel();
            let (near_tx, near_rx) = oneshot::channel();
            st.arrivals += 1;
            let key = (fire_at, st.arrivals);
            let waiter = Waiter {
                grant: tx,
                near: Some(near_tx),
            };
            st.waiting.insert(key, waiter);
            st.tell_near();
            Req::Waiting(key, rx, Some(near_rx))
        };
        SlotRequest {
            slots: self.clone(),
            state,
        }
    }

    /// Hands free slots to waiting fires, earliest first. Called whenever a slot
    /// may have freed up (a run ended, a grant was given back).
    pub(crate) fn pump(&self) {
        let mut st = lock(&self.state);
        while !st.waiting.is_empty() && self.executor.capacity() > st.starting {
            let Some(key) = st.waiting.first_key_value().map(|(k, _)| *k) else {
                break;
            };
            let Some(w) = st.leave(&key) else {
                break;
            };
            if w.grant.send(()).is_ok() {
                st.starting += 1;
            }
        }
        st.tell_near();
    }

    fn give_back(&self) {
        {
            let mut st = lock(&self.state);
            st.starting = st.starting.saturating_sub(1);
        }
        self.pump();
    }
}

enum Req {
    Granted,
    /// In line: the grant's receiver, and the near one until it has been told.
    Waiting(
        (Timestamp, u64),
        oneshot::Receiver<()>,
        Option<oneshot::Receiver<()>>,
    ),
    Done,
}

/// A fire's place in line for a slot.
pub(crate) struct SlotRequest {
    slots: Arc<Slots>,
    state: Req,
}

impl SlotRequest {
    /// Waits until the fire is near the head of the line (or has its slot). Returns at
    /// once for a fire granted at its request.
    pub(crate) async fn near(&mut self) {
        if let Req::Waiting(_, _, near) = &mut self.state
            && let Some(rx) = near
        {
            // The sender is sent on, or dropped when the fire leaves the line with
            // its slot: either way the fire is near.
            let _ = rx.await;
            *near = None;
        }
    }

    /// Waits until the slot is granted.
    pub(crate) async fn granted(mut self) -> SlotGrant {
        if let Req::Waiting(_, rx, _) = &mut self.state {
            // The sender stays in `waiting` until it grants, and is only dropped
            // after sending, so this returns once the slot is granted.
            let _ = rx.await;
        }
        self.state = Req::Done;
        SlotGrant {
            slots: self.slots.clone(),
            live: true,
        }
    }
}

impl Drop for SlotRequest {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.state, Req::Done) {
            Req::Done => {}
            Req::Granted => self.slots.give_back(),
            Req::Waiting(key, _, _) => {
                let still_waiting = lock(&self.slots.state).leave(&key).is_some();
                if !still_waiting {
                    // Granted between the last poll of the wait and now.
                    self.slots.give_back();
                }
            }
        }
    }
}

/// A slot promised to one fire. Dropping it gives the slot back; [`SlotGrant::run`]
/// hands it to the executor instead.
pub(crate) struct SlotGrant {
    slots: Arc<Slots>,
    live: bool,
}

impl SlotGrant {
    /// Drives `execution` (an [`Executor::execute`] future); once it has been polled
    /// the first time the executor's capacity counts it, and the grant is released.
    pub(crate) async fn run<F: Future>(mut self, execution: F) -> F::Output {
        let mut execution = std::pin::pin!(execution);
        let mut entered = false;
        std::future::poll_fn(|cx| {
            let r = Pin::as_mut(&mut execution).poll(cx);
            if !entered {
                entered = true;
                self.release_entered();
            }
            r
        })
        .await
    }

    #[cfg(test)]
    fn is_live(&self) -> bool {
        self.live
    }

    fn release_entered(&mut self) {
        if std::mem::take(&mut self.live) {
            let mut st = lock(&self.slots.state);
            st.starting = st.starting.saturating_sub(1);
        }
    }
}

impl Drop for SlotGrant {
    fn drop(&mut self) {
        if std::mem::take(&mut self.live) {
            self.slots.give_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::{Execution, Outcome};
    use futures::FutureExt;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// An executor whose free capacity the test sets.
    struct Fixed(AtomicUsize);

    #[async_trait::async_trait]
    impl Executor for Fixed {
        fn capacity(&self) -> usize {
            self.0.load(Ordering::SeqCst)
        }
        async fn execute(&self, _: Execution) -> Outcome {
            Outcome::Succeeded
        }
    }

    fn gate(free: usize) -> (Arc<Fixed>, Arc<Slots>) {
        let ex = Arc::new(Fixed(AtomicUsize::new(free)));
        (ex.clone(), Arc::new(Slots::new(ex)))
    }

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    #[tokio::test]
    async fn grants_at_once_while_capacity_exceeds_the_fires_starting() {
        let (_ex, slots) = gate(2);
        let a = slots.request(t(1)).granted().await;
        let b = slots.request(t(2)).granted().await;
        assert!(a.is_live() && b.is_live());
        assert_eq!(slots.pending(), 2);
        assert_eq!(slots.free(), 0);
        let c = slots.request(t(0));
        assert_eq!(slots.pending(), 3, "a request counts as pending at once");
        drop(c);
        drop(a);
        assert_eq!(
            slots.pending(),
            1,
            "dropped grants and requests are given back"
        );
        drop(b);
        assert_eq!(slots.free(), 2);
    }

    #[tokio::test]
    async fn freed_slots_go_to_the_earliest_fire_first() {
        let (ex, slots) = gate(0);
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for ms in [30, 10, 20] {
            let (req, o) = (slots.request(t(ms)), order.clone());
            tasks.push(tokio::spawn(async move {
                let g = req.granted().await;
                o.lock().unwrap().push(ms);
                g.run(async {}).await;
            }));
        }
        assert_eq!(slots.pending(), 3);
        for _ in 0..3 {
            ex.0.fetch_add(1, Ordering::SeqCst);
            slots.pump();
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
            ex.0.fetch_sub(1, Ordering::SeqCst);
        }
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), [10, 20, 30]);
        assert_eq!(slots.pending(), 0);
    }

    #[tokio::test]
    async fn a_dropped_wait_gives_back_a_grant_it_never_took() {
        let (ex, slots) = gate(0);
        let mut waiting = Box::pin(slots.request(t(1)).granted());
        assert!((&mut waiting).now_or_never().is_none());
        ex.0.store(1, Ordering::SeqCst);
        slots.pump();
        assert_eq!(slots.pending(), 1, "granted, not yet taken");
        drop(waiting);
        assert_eq!(slots.pending(), 0);
        assert_eq!(slots.free(), 1);
    }

    #[tokio::test]
    async fn a_dropped_request_leaves_the_line() {
        let (ex, slots) = gate(0);
        let first = slots.request(t(1));
        let second = slots.request(t(2));
        drop(first);
        ex.0.store(1, Ordering::SeqCst);
        slots.pump();
        let g = second.granted().await;
        assert!(g.is_live(), "the slot went to the fire still in line");
    }

    #[tokio::test]
    async fn the_head_of_the_line_is_told_it_is_near() {
        let (ex, slots) = gate(0);
        slots.set_near(2);
        // Claims come in fire order.
        let mut line: Vec<SlotRequest> = [10, 20, 30, 40].map(|ms| slots.request(t(ms))).into();
        let near = |line: &mut Vec<SlotRequest>| -> Vec<bool> {
            line.iter_mut()
                .map(|r| r.near().now_or_never().is_some())
                .collect()
        };
        assert_eq!(near(&mut line), [true, true, false, false]);
        // 10 gets the slot and leaves the line: 30 moves up.
        ex.0.store(1, Ordering::SeqCst);
        slots.pump();
        assert_eq!(near(&mut line), [true, true, true, false]);
        // A longer reach tells the rest at once.
        slots.set_near(10);
        assert_eq!(near(&mut line), [true, true, true, true]);
        let granted = line.remove(0).granted().await;
        assert!(granted.is_live(), "the first in fire order was granted");
    }

    #[tokio::test]
    async fn entering_the_executor_releases_the_grant_without_freeing_a_slot() {
        let (ex, slots) = gate(1);
        let g = slots.request(t(1)).granted().await;
        let ex2 = ex.clone();
        g.run(async move {
            // The executor takes its slot on the first poll.
            ex2.0.fetch_sub(1, Ordering::SeqCst);
        })
        .await;
        assert_eq!(slots.pending(), 0);
        assert_eq!(slots.free(), 0);
    }
}
