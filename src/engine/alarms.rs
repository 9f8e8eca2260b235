//! Alarm delivery: claims events from the store's outbox and hands each to every
//! registered alarm, off the path of any fire.
//!
//! * The events of a claim (up to 32) are delivered concurrently, and each registered
//!   alarm is called with its own timeout, concurrently; one slow or failing alarm
//!   neither blocks nor fails the others' delivery.
//! * An event is `sent` once every alarm took it. When some failed, it is `failed`
//!   with a retry time (doubling from `alarm_retry_base`, at most an hour) while the
//!   failures are retryable and attempts remain. This node remembers which alarms
//!   already took the event, so its retry calls only the ones that failed; a retry
//!   claimed by another node calls them all again (at-least-once, as the
//!   [`JobAlarm`](crate::JobAlarm) contract says).
//! * With `alarm_throttle`, an event of a job and kind already alarmed within the
//!   window is recorded `not_needed`, and the next delivered one says how many were
//!   suppressed.

use super::backoff::Backoff;
use super::{Core, bump, lock};
use crate::alarm::{AlarmError, ThrottleDecision};
use crate::error::Result;
use crate::record::*;
use futures::FutureExt;
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::sleep;
use tracing::{info, warn};

/// Entries of per-event progress kept at most; past that it is forgotten (retries then
/// call every alarm again).
const MAX_PROGRESS: usize = 10_000;

/// Claims alarm events and hands each to every registered alarm.
pub(super) async fn alarm_loop(core: Arc<Core>) {
    let mut backoff = Backoff::default();
    loop {
        let wait = match deliver_alarms(&core).await {
            Ok(0) => {
                backoff.reset();
                core.config.poll_interval
            }
            Ok(_) => Duration::ZERO,
            Err(e) => {
                core.backend_error("alarms");
                let d = backoff.next_delay();
                warn!(error = %e, retry_in = ?d, "alarm outbox unavailable");
                d
            }
        };
        tokio::select! {
            _ = core.life.bg_stop.cancelled() => return,
            _ = sleep(wait) => {}
            _ = core.alarm.wake.notified() => {}
        }
    }
}

async fn deliver_alarms(core: &Core) -> Result<usize> {
    let lease = core.config.alarm_timeout * (core.alarm.alarms.len() as u32 + 1);
    let page = core
        .store
        .claim_alarms(&crate::store::AlarmClaim::new(&*core.node_id, 32, lease))
        .await?;
    core.saw_corrupt(&page.corrupt);
    let claimed = page.items;
    // The claimed events are delivered concurrently, so one slow receiver costs one
    // timeout per batch, not one per event.
    let results = futures::future::join_all(claimed.iter().map(|rec| async move {
        let delivery = deliver(core, rec).await;
        info!(alarm = rec.id.0, kind = rec.event.kind.as_str(), job = %rec.event.job_id, outcome = ?delivery, "alarm");
        let written = core
            .store
            .complete_alarm(rec.id, &core.node_id, &delivery)
            .await;
        bump(&core.counters.alarms_handled);
        written
    }))
    .await;
    // An unwritten completion leaves the claim to lapse; the event is claimed again.
    results.into_iter().collect::<Result<Vec<_>>>()?;
    Ok(claimed.len())
}

async fn deliver(core: &Core, rec: &AlarmRecord) -> AlarmDelivery {
    if core.alarm.alarms.is_empty() {
        return AlarmDelivery::NotNeeded;
    }
    let throttle = core.alarm.throttle.as_ref();
    let event = match throttle.map(|t| t.check(&rec.event)) {
        Some(ThrottleDecision::Suppress) => return AlarmDelivery::NotNeeded,
        Some(ThrottleDecision::Send(n)) if n > 0 => {
            let mut e = rec.event.clone();
            e.suppressed += n;
            Cow::Owned(e)
        }
        _ => Cow::Borrowed(&rec.event),
    };
    let done = lock(&core.alarm.progress)
        .get(&rec.id)
        .cloned()
        .unwrap_or_else(|| vec![false; core.alarm.alarms.len()]);
    let calls = core.alarm.alarms.iter().zip(&done).map(|(a, done)| {
        let event = &*event;
        async move {
            if *done {
                return Ok(());
            }
            let call = std::panic::AssertUnwindSafe(a.alarm(event)).catch_unwind();
            let r = match tokio::time::timeout(core.config.alarm_timeout, call).await {
                Ok(Ok(r)) => r,
                Ok(Err(p)) => Err(AlarmError::retryable(
                    core.caught("delivering an alarm (the alarm panicked)", p),
                )),
                Err(_) => Err(AlarmError::retryable("timed out")),
            };
            super::instruments::alarm_delivery(a.name(), r.is_ok());
            r
        }
    });
    let results = futures::future::join_all(calls).await;
    let failures: Vec<(&str, &AlarmError)> = core
        .alarm
        .alarms
        .iter()
        .zip(&results)
        .filter_map(|(a, r)| r.as_ref().err().map(|e| (a.name(), e)))
        .collect();
    if let Some(t) = throttle {
        t.done(
            &rec.event,
            failures.is_empty(),
            event.suppressed - rec.event.suppressed,
        );
    }
    if failures.is_empty() {
        lock(&core.alarm.progress).remove(&rec.id);
        return AlarmDelivery::Sent;
    }
    let retryable = failures.iter().any(|(_, e)| e.retryable);
    let error = failures
        .iter()
        .map(|(n, e)| format!("{n}: {e}"))
        .collect::<Vec<_>>()
        .join("; ");
    let retry_at = (retryable && rec.attempts < core.config.alarm_max_attempts).then(|| {
        let exp = rec.attempts.saturating_sub(1).min(12);
        let delay = (core.config.alarm_retry_base * (1 << exp)).min(Duration::from_secs(3600));
        core.clock.now() + delay
    });
    {
        let mut progress = lock(&core.alarm.progress);
        if retry_at.is_some() {
            if progress.len() >= MAX_PROGRESS {
                progress.clear();
            }
            progress.insert(rec.id, results.iter().map(Result::is_ok).collect());
        } else {
            progress.remove(&rec.id);
        }
    }
    warn!(alarm = rec.id.0, job = %rec.event.job_id, %error, retry_at = ?retry_at, "alarm delivery failed");
    AlarmDelivery::Failed { error, retry_at }
}
