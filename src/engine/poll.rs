//! Poll and claim: read the due fires, take the ones this node has room for, lease
//! them, and hand each to a fire task.
//!
//! Room is counted in executor slots. A fire already due needs a free slot now; a
//! fire due later (inside the lookahead) is armed on a timer and holds no slot until
//! its instant, but a poll arms no more of them than the node has free slots, so a
//! busy node does not hoard future work. Due fires come first: a fire armed ahead
//! never keeps a due fire from being claimed.

use super::fire::{self, Claim};
use super::{Core, Sweep, bump, lock};
use crate::error::Result;
use crate::lock::LockRequest;
use crate::record::*;
use crate::store::DueQuery;
use crate::store::{ClaimOutcome, ClaimRun, StartRefusal};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::time::{Instant, sleep};
use tracing::{debug, warn};

/// What a poll found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Polled {
    /// Everything due within the lookahead was seen.
    Done,
    /// The page was full: more may be due, poll again at once from the cursor.
    More,
    /// Claimable fires were left for lack of free slots: poll again once the fires
    /// waiting for a slot have one (or after the poll interval).
    Starved,
}

/// A poll's verdict and, when it left a future fire unarmed although due fires could
/// still be claimed, that fire's instant: the next poll comes no later.
type Verdict = (Polled, Option<crate::time::Timestamp>);

pub(super) async fn poll_loop(core: Arc<Core>) {
    let mut backoff = super::backoff::Backoff::default();
    loop {
        let wait = match poll_once(&core).await {
            Ok((Polled::More, _)) => {
                backoff.reset();
                tokio::task::yield_now().await;
                continue;
            }
            Ok((polled, until)) => {
                backoff.reset();
                if polled == Polled::Starved {
                    core.load.starved.store(line(&core) + 1, Ordering::SeqCst);
                }
                let wait = core.config.poll_interval;
                match until {
                    Some(t) => core
                        .clock
                        .local_instant(t)
                        .saturating_duration_since(Instant::now())
                        .min(wait),
                    None => wait,
                }
            }
            Err(e) => {
                core.backend_error("due");
                let d = backoff.next_delay();
                warn!(node = %core.node_id, error = %e, retry_in = ?d, "poll failed");
                d
            }
        };
        tokio::select! {
            _ = core.life.stop.cancelled() => return,
            _ = sleep(wait) => {}
            _ = core.poll.wake.notified() => {}
        }
    }
}

/// The line: how many due fires a node claims beyond its free slots, to wait for the
/// next slots to free up — as many as its slots can start within a quarter of a poll
/// interval at the mean run time, and no more than it starts in a poll interval at
/// its measured start rate, at most `claim_window`. Each writes its start
/// while it waits, so no slot idles through a start's round trip. A node whose
/// handlers are slow claims little beyond its slots (nothing before its first run
/// ended), and a node that was idle claims only its free slots until it has started
/// runs again — a mean run time learnt from instant handlers does not make it take a
/// burst of slower ones that other nodes have slots for — so no fire waits long in a
/// line while another node could start it.
fn line(core: &Core) -> usize {
    let poll = core.config.poll_interval;
    core.load
        .starts_within(poll / 4)
        .min(core.load.pace.started_within(poll))
        .min(core.config.claim_window)
}

/// The smallest page a poll that continues from the cursor asks for (at most
/// `claim_batch`).
const MIN_PAGE: usize = 256;

/// The cursor to continue from, or `None` to start from the beginning of the due
/// order: no sweep is in progress, or it has run for a poll interval already (fires
/// that became due behind its cursor — given back by another node, retried at their
/// own instant — are then found within one poll interval).
fn continue_from(core: &Core) -> Option<DueKey> {
    let mut sweep = lock(&core.poll.sweep);
    match (&sweep.cursor, sweep.since) {
        (Some(_), Some(since)) if since.elapsed() < core.config.poll_interval => {
            sweep.cursor.clone()
        }
        _ => {
            *sweep = Sweep {
                cursor: None,
                since: Some(Instant::now()),
            };
            None
        }
    }
}

/// Why a poll stopped taking fires before the end of its page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// A due fire found no free slot.
    Due,
    /// A future fire found no free slot to arm against.
    Ahead,
}

async fn poll_once(core: &Arc<Core>) -> Result<Verdict> {
    let now = core.store.now().await?;
    // The store read its clock at some point of the call; paired with the instant the
    // call returned, the estimate never runs ahead of the store's clock, so a timer
    // may wake up to one round trip late but never early.
    core.clock.set(now, Instant::now());
    core.pump_slots();
    let line = line(core);
    let mut due_room = core.load.line_room(line).min(core.config.claim_batch);
    let mut ahead_room = core
        .load
        .free_slots()
        .saturating_sub(core.load.ahead.load(Ordering::SeqCst))
        .min(due_room);
    if due_room == 0 {
        core.load.backlog.store(true, Ordering::SeqCst);
        return Ok((Polled::Starved, None));
    }
    let held = lock(&core.load.armed).len();
    // Where due fires are claimed and started in one call, a poll that met other
    // nodes' claims last time passes twice the fires it wants as candidates: nodes
    // that read the same due fires at once then each take the rows the others are
    // not writing, in the same call.
    let want = due_room;
    let mut candidates = if core.row_leases && core.poll.contended.load(Ordering::SeqCst) {
        due_room * 2
    } else {
        due_room
    };
    // From the start of the due order the fires this node already holds come first,
    // so ask for them too; a poll that continues from the cursor has them behind it
    // and asks for one page (not a tiny one: a page lost to other nodes' leases is
    // skipped, and skipping one row per round trip would be slow).
    let after = continue_from(core);
    let ask = match after {
        Some(_) => candidates.max(core.config.claim_batch.min(MIN_PAGE)),
        None => candidates + held,
    };
    let from_start = after.is_none();
    let query = DueQuery::new(now + core.config.lookahead, ask).after(after);
    let page =
        match super::instruments::timed("due", core.store.name(), core.store.due(&query)).await {
            Ok(page) => page,
            Err(e) => {
                *lock(&core.poll.sweep) = Sweep::default();
                return Err(e);
            }
        };
    core.saw_corrupt(&page.corrupt);
    let page_full = page.rows() >= ask;
    // A page that ends in rows the store could not read continues after them.
    let last_corrupt = page
        .corrupt
        .iter()
        .filter_map(|c| c.due_key.clone())
        .max_by(|a, b| (a.fire_at, a.job_id.as_str()).cmp(&(b.fire_at, b.job_id.as_str())));
    let due = page.items;
    if from_start {
        // A poll from the start of the index: what waits, and since when.
        let waiting = due.iter().take_while(|f| f.fire.at <= now);
        let oldest = due.first().map(|f| f.fire.at).filter(|at| *at <= now);
        core.instruments().due(waiting.count(), oldest, now);
    }
    let mut fresh: Vec<DueFire> = Vec::with_capacity(due_room.min(due.len()));
    // The last row looked at: the last one skipped, unless a fresh one came after it.
    let mut skipped = None;
    let mut stop = None;
    let mut unarmed = None;
    {
        let armed = lock(&core.load.armed);
        for f in due {
            if armed.contains(&f.job_id) {
                skipped = Some(f);
                continue;
            }
            if core.handlers.for_job(&f.job).is_err() {
                core.unserved(&f, now);
                skipped = Some(f);
                continue;
            }
            if f.fire.at <= now {
                if candidates == 0 {
                    stop = Some(Stop::Due);
                    break;
                }
                candidates -= 1;
                due_room = due_room.saturating_sub(1);
                ahead_room = ahead_room.saturating_sub(1);
            } else {
                if ahead_room == 0 {
                    stop = Some(Stop::Ahead);
                    // Claimable with a free slot once due: poll again by then.
                    unarmed = (due_room > 0).then_some(f.fire.at);
                    break;
                }
                ahead_room -= 1;
            }
            fresh.push(f);
            skipped = None;
        }
    }
    let mut last = skipped.as_ref().or(fresh.last()).map(DueFire::key);
    if stop.is_none()
        && let Some(c) = last_corrupt
        && last
            .as_ref()
            .is_none_or(|l| (c.fire_at, c.job_id.as_str()) > (l.fire_at, l.job_id.as_str()))
    {
        last = Some(c);
    }
    let polled = match stop {
        Some(Stop::Due) => {
            core.load.backlog.store(true, Ordering::SeqCst);
            Polled::Starved
        }
        // Every due fire was taken; the next poll comes by the instant of the first
        // future fire left unarmed, when it can be claimed as due.
        // (Or, with no room left at all, once slots free up.)
        Some(Stop::Ahead) => {
            core.load.backlog.store(false, Ordering::SeqCst);
            if unarmed.is_some() {
                Polled::Done
            } else {
                Polled::Starved
            }
        }
        None if page_full => Polled::More,
        None => {
            core.load.backlog.store(false, Ordering::SeqCst);
            Polled::Done
        }
    };
    // A poll that left fires behind continues after the last one it looked at;
    // otherwise every due fire was seen and the next poll starts from the beginning.
    {
        let mut sweep = lock(&core.poll.sweep);
        if polled == Polled::Done {
            *sweep = Sweep::default();
        } else {
            sweep.cursor = last;
        }
    }
    if fresh.is_empty() {
        return Ok((polled, unarmed));
    }
    let (asked, granted) = claim(core, now, fresh, want).await?;
    // Room counted for fires another node holds is still free: go on after them,
    // or a node whose page starts with another node's line would idle beside the
    // fires behind it until its next poll.
    if granted < asked && stop == Some(Stop::Due) {
        return Ok((Polled::More, unarmed));
    }
    Ok((polled, unarmed))
}

/// Leases `fresh` in one call and spawns a fire task for each fire granted: how
/// many it asked for and how many were granted. Where the store keeps each job's
/// lease in its row, the fires already due are claimed and started in one call
/// ([`claim_due`]), up to `want` of them.
async fn claim(
    core: &Arc<Core>,
    now: crate::time::Timestamp,
    fresh: Vec<DueFire>,
    want: usize,
) -> Result<(usize, usize)> {
    let (due, ahead): (Vec<DueFire>, Vec<DueFire>) = if core.row_leases {
        fresh.into_iter().partition(|f| f.fire.at <= now)
    } else {
        (Vec::new(), fresh)
    };
    let (mut asked, mut granted) = (0, 0);
    if !due.is_empty() {
        asked += want.min(due.len());
        granted += claim_due(core, due, want).await?;
    }
    if ahead.is_empty() {
        return Ok((asked, granted));
    }
    asked += ahead.len();
    let requests: Vec<LockRequest> = ahead
        .iter()
        .map(|f| LockRequest {
            key: f.job_id.to_string(),
            ttl: f.fire.at.duration_since(now) + core.config.lease_ttl,
        })
        .collect();
    let asked_at = Instant::now();
    super::instruments::claim_batch(requests.len());
    let leases = super::instruments::timed(
        "acquire",
        core.locks.name(),
        core.locks.acquire(&core.node_id, &requests),
    )
    .await?;
    for ((fire, lease), req) in ahead.into_iter().zip(leases).zip(&requests) {
        let Some(lease) = lease else { continue };
        granted += 1;
        if !arm(core, &fire) {
            super::finish::release(core, lease).await;
            continue;
        }
        bump(&core.counters.claimed);
        debug!(job = %fire.job_id, fire_at = %fire.fire.at, token = lease.token, "claimed");
        // A fire already due takes its place in line for a slot now, so the next
        // poll counts it; one due later holds no slot until its instant.
        let slot = if fire.fire.at <= now {
            Some(core.load.slots.request(fire.fire.at))
        } else {
            core.load.ahead.fetch_add(1, Ordering::SeqCst);
            None
        };
        let claim = Claim {
            fire,
            lease,
            deadline: asked_at + req.ttl,
            started: None,
        };
        core.life
            .fires
            .spawn(fire::fire_task(core.clone(), claim, slot));
    }
    Ok((asked, granted))
}

/// Claims and starts up to `want` of the due fires `due` (candidates, in due order)
/// in one call, the misfire policy applied to each first, and hands each fire
/// started to a fire task in line for a slot; how many were. Claims lost to other
/// nodes mark the poller contended (more candidates next time) or not. A call that
/// fails may have been written: each candidate's start is then in doubt
/// ([`Doubt`](super::maintenance::Doubt)), settled by the maintenance loop.
async fn claim_due(core: &Arc<Core>, due: Vec<DueFire>, want: usize) -> Result<usize> {
    let planned: Vec<(DueFire, super::plan::Attempt, Option<fire::Skip>)> = due
        .into_iter()
        .map(|f| {
            let (attempt, skip) = fire::plan_attempt(core, &f);
            (f, attempt, skip)
        })
        .collect();
    let ttl = core.config.lease_ttl;
    let claims: Vec<ClaimRun> = planned
        .iter()
        .map(|(f, a, _)| ClaimRun {
            job_id: f.job_id.clone(),
            fire_at: f.fire.at,
            version: f.version,
            node: core.node_id.to_string(),
            attempt: a.attempt,
            trigger: a.trigger,
            covers: a.covers,
            context: a.context.clone(),
            ttl,
        })
        .collect();
    super::instruments::claim_batch(claims.len());
    let asked_at = Instant::now();
    let leases = core.store.job_leases().ok_or_else(|| {
        crate::error::Error::invalid(
            "scheduler.locks",
            core.store.name(),
            "the store keeps no leases in its job rows",
        )
    })?;
    let claiming = core.load.claiming();
    let outcomes = match super::instruments::timed(
        "claim_runs",
        core.store.name(),
        leases.claim_runs(&claims, want),
    )
    .await
    {
        Ok(outcomes) => outcomes,
        Err(e) => {
            // The call may have been written: each candidate's start is in doubt
            // until the store says whether it recorded it.
            core.backend_error("claim_runs");
            lock(&core.doubts).extend(planned.iter().map(|(f, a, _)| super::maintenance::Doubt {
                job_id: f.job_id.clone(),
                job: f.job.clone(),
                fire_at: f.fire.at,
                token: None,
                attempt: a.attempt,
            }));
            return Err(e);
        }
    };
    let mut granted = 0;
    let mut lost = false;
    for ((fire, attempt, skip), outcome) in planned.into_iter().zip(outcomes) {
        let (run_id, started_at, lease) = match outcome {
            ClaimOutcome::Started {
                run_id,
                started_at,
                lease,
            } => (run_id, started_at, lease),
            ClaimOutcome::Refused(
                StartRefusal::Held | StartRefusal::Running | StartRefusal::NotDue,
            ) => {
                lost = true;
                continue;
            }
            ClaimOutcome::Refused(why) => {
                bump(&core.counters.start_refused);
                debug!(job = %fire.job_id, ?why, "claim refused");
                continue;
            }
            ClaimOutcome::Left => continue,
        };
        granted += 1;
        claiming.take(run_id);
        if !arm(core, &fire) {
            // Never: a job this node holds is leased or running, so not due.
            warn!(job = %fire.job_id, "claimed a job this node already holds; its run is left to the reclaim pass");
            continue;
        }
        bump(&core.counters.claimed);
        debug!(job = %fire.job_id, fire_at = %fire.fire.at, token = lease.token, "claimed and started");
        let slot = core.load.slots.request(fire.fire.at);
        let claim = Claim {
            fire,
            lease,
            deadline: asked_at + ttl,
            started: Some(fire::ClaimedStart {
                run_id,
                started_at,
                attempt,
                skip,
            }),
        };
        core.life
            .fires
            .spawn(fire::fire_task(core.clone(), claim, Some(slot)));
    }
    core.poll.contended.store(lost, Ordering::SeqCst);
    Ok(granted)
}

/// Counts `fire`'s job among those this node holds; `false` when it holds it already.
fn arm(core: &Core, fire: &DueFire) -> bool {
    let mut armed = lock(&core.load.armed);
    let inserted = armed.insert(fire.job_id.clone());
    core.instruments().armed(armed.len());
    inserted
}
