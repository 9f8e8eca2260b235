//! Alarms built from alarms: fan-out over a `Vec`, an optional alarm, and wrappers that
//! retry or throttle any alarm.

use super::{AlarmError, JobAlarm};
use crate::job::JobId;
use crate::policy::AlarmKind;
use crate::record::AlarmEvent;
use async_trait::async_trait;
use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// Every alarm of the vector hears the event, concurrently; one failing does not stop
/// the others. The result is `Ok` when all succeeded, otherwise an error naming each
/// failed alarm, retryable when any failure is.
#[async_trait]
impl<A: JobAlarm> JobAlarm for Vec<A> {
    fn name(&self) -> &str {
        "all"
    }

    async fn alarm(&self, event: &AlarmEvent) -> Result<(), AlarmError> {
        let results = futures::future::join_all(
            self.iter()
                .map(|a| async move { (a.name(), a.alarm(event).await) }),
        )
        .await;
        let failures: Vec<(&str, AlarmError)> = results
            .into_iter()
            .filter_map(|(n, r)| r.err().map(|e| (n, e)))
            .collect();
        if failures.is_empty() {
            return Ok(());
        }
        Err(AlarmError {
            retryable: failures.iter().any(|(_, e)| e.retryable),
            message: failures
                .iter()
                .map(|(n, e)| format!("{n}: {e}"))
                .collect::<Vec<_>>()
                .join("; "),
        })
    }
}

/// `None` accepts every event and does nothing (an alarm switched off by
/// configuration); `Some(a)` is `a`.
#[async_trait]
impl<A: JobAlarm> JobAlarm for Option<A> {
    fn name(&self) -> &str {
        self.as_ref().map_or("none", |a| a.name())
    }

    async fn alarm(&self, event: &AlarmEvent) -> Result<(), AlarmError> {
        match self {
            Some(a) => a.alarm(event).await,
            None => Ok(()),
        }
    }
}

/// Retries a retryable failure of the inner alarm in place, up to `attempts` calls in
/// all, waiting `base`, `2 × base`, … between them. For short blips (a connection
/// reset); longer outages are the outbox's to retry.
#[derive(Debug)]
pub struct Retrying<A> {
    inner: A,
    attempts: u32,
    base: Duration,
}

impl<A: JobAlarm> Retrying<A> {
    /// Wraps `inner`; `attempts` is at least 1 (a 0 is taken as 1).
    pub fn new(inner: A, attempts: u32, base: Duration) -> Self {
        Retrying {
            inner,
            attempts: attempts.max(1),
            base,
        }
    }
}

#[async_trait]
impl<A: JobAlarm> JobAlarm for Retrying<A> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn alarm(&self, event: &AlarmEvent) -> Result<(), AlarmError> {
        let mut delay = self.base;
        for left in (0..self.attempts).rev() {
            match self.inner.alarm(event).await {
                Err(e) if e.retryable && left > 0 => {
                    tokio::time::sleep(delay).await;
                    delay = delay.saturating_mul(2);
                }
                other => return other,
            }
        }
        unreachable!("the last attempt returns")
    }
}

/// What a [`Throttle`] says about one event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ThrottleDecision {
    /// Deliver it, mentioning this many suppressed events.
    Send(u32),
    /// Suppress it (counted for the next one).
    Suppress,
}

/// At most one delivered event per job and kind within `window`; the events in
/// between are counted. State is in process memory.
pub(crate) struct Throttle {
    window: Duration,
    state: Mutex<HashMap<(JobId, AlarmKind), Slot>>,
}

#[derive(Default)]
struct Slot {
    sent: Option<Instant>,
    suppressed: u32,
}

impl fmt::Debug for Throttle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Throttle")
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

impl Throttle {
    pub(crate) fn new(window: Duration) -> Self {
        Throttle {
            window,
            state: Mutex::default(),
        }
    }

    fn key(event: &AlarmEvent) -> (JobId, AlarmKind) {
        (event.job_id.clone(), event.kind)
    }

    /// Decides about `event`; a `Send` takes the suppressed count with it.
    pub(crate) fn check(&self, event: &AlarmEvent) -> ThrottleDecision {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.len() > 10_000 {
            let window = self.window;
            state.retain(|_, s| s.suppressed > 0 || s.sent.is_some_and(|t| now - t < window));
        }
        let slot = state.entry(Self::key(event)).or_default();
        if slot.sent.is_some_and(|t| now - t < self.window) {
            slot.suppressed += 1;
            return ThrottleDecision::Suppress;
        }
        ThrottleDecision::Send(std::mem::take(&mut slot.suppressed))
    }

    /// Records how the delivery that `check` allowed ended: a success opens a new
    /// window; a failure gives the suppressed count back.
    pub(crate) fn done(&self, event: &AlarmEvent, delivered: bool, suppressed: u32) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let slot = state.entry(Self::key(event)).or_default();
        if delivered {
            slot.sent = Some(Instant::now());
        } else {
            slot.suppressed += suppressed;
        }
    }
}

/// Throttles any alarm: at most one event per job and kind within `window` reaches
/// the inner alarm; the events in between are accepted and dropped, and the next
/// delivered event carries their number in [`AlarmEvent::suppressed`]. The state is
/// per process: with N nodes delivering, up to N events per window get through. (The
/// scheduler's own `alarm_throttle` setting does the same for all alarms and records
/// suppressed events as `not_needed`.)
#[derive(Debug)]
pub struct Throttled<A> {
    inner: A,
    throttle: Throttle,
}

impl<A: JobAlarm> Throttled<A> {
    /// Wraps `inner` with a window.
    pub fn new(inner: A, window: Duration) -> Self {
        Throttled {
            inner,
            throttle: Throttle::new(window),
        }
    }
}

#[async_trait]
impl<A: JobAlarm> JobAlarm for Throttled<A> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn alarm(&self, event: &AlarmEvent) -> Result<(), AlarmError> {
        let ThrottleDecision::Send(n) = self.throttle.check(event) else {
            return Ok(());
        };
        let result = if n == 0 {
            self.inner.alarm(event).await
        } else {
            let mut e = event.clone();
            e.suppressed += n;
            self.inner.alarm(&e).await
        };
        self.throttle.done(event, result.is_ok(), n);
        result
    }
}
