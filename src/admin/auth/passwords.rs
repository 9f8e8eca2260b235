//! Passwords: argon2id hashes, verified by a fixed pool of threads that each reuse
//! one block of memory, behind a bounded queue; and the per-account count of failed
//! and pending logins that locks an account out.
//!
//! What this bounds, whatever arrives:
//! * **Memory.** Argon2 needs `m` KiB per verification (19 MiB with the default
//!   parameters). Only `login_concurrency` verifications run at once, each in a
//!   thread that keeps and reuses its block, so the memory spent on passwords is
//!   `login_concurrency × m` however many logins arrive, and stays that after a burst.
//! * **Waiting.** At most [`QUEUE_PER_WORKER`] logins per thread wait; one more is
//!   refused at once with 429 `busy`.
//! * **Guessing.** An account's failed logins *and its logins being checked* count
//!   against [`MAX_FAILURES`] before a password is looked at, under one lock: a
//!   burst of parallel guesses gets [`MAX_FAILURES`] verifications, the rest 429.

use argon2::{Algorithm, Argon2, Block, Params, PasswordHash, Version};
use std::collections::HashMap;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

/// Failed (or pending) logins of an account after which it is locked out.
pub(crate) const MAX_FAILURES: u32 = 5;
/// How long a lock-out lasts after the last failure.
pub(crate) const LOCKOUT: Duration = Duration::from_secs(300);
/// Logins of one account checked at once; more are refused 429 `busy`.
pub(crate) const MAX_PENDING_PER_ACCOUNT: u32 = 2;
/// Logins that may wait per verifying thread before more are refused 429 `busy`.
pub(crate) const QUEUE_PER_WORKER: usize = 8;
/// Largest argon2 memory cost accepted in a configured hash (256 MiB), so one
/// account's hash cannot make every verification huge.
pub(crate) const MAX_M_COST_KIB: u32 = 256 * 1024;

/// `n` random bytes from the operating system.
pub(crate) fn random_bytes(n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    getrandom::fill(&mut b).expect("the operating system's random source is available");
    b
}

/// Hashes `password` with argon2id (default parameters: 19 MiB, 2 passes) and a
/// random salt, as a PHC string for `users.password_hash`.
pub fn hash_password(password: &str) -> String {
    use argon2::PasswordHasher;
    let salt = argon2::password_hash::SaltString::encode_b64(&random_bytes(16))
        .expect("16 bytes make a valid salt");
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .expect("argon2 hashes any password with the default parameters")
        .to_string()
}

/// Checks that `phc` is an argon2 hash this server can verify within its memory
/// bound; the reason otherwise.
pub(crate) fn check_hash(phc: &str) -> Result<(), String> {
    let h = PasswordHash::new(phc).map_err(|e| format!("not a PHC string: {e}"))?;
    Algorithm::try_from(h.algorithm).map_err(|e| format!("not argon2: {e}"))?;
    let params = Params::try_from(&h).map_err(|e| format!("bad argon2 parameters: {e}"))?;
    if params.m_cost() > MAX_M_COST_KIB {
        return Err(format!(
            "argon2 memory m={} KiB is over {MAX_M_COST_KIB}",
            params.m_cost()
        ));
    }
    if h.salt.is_none() || h.hash.is_none() {
        return Err("the hash has no salt or no output".into());
    }
    Ok(())
}

/// Whether `password` matches `phc`, computed in `blocks` (grown when the hash
/// needs more, never shrunk). A hash that does not parse, or needs more than
/// [`MAX_M_COST_KIB`], matches nothing.
fn verify(password: &[u8], phc: &str, blocks: &mut Vec<Block>) -> bool {
    let Ok(h) = PasswordHash::new(phc) else {
        return false;
    };
    let (Ok(algorithm), Ok(params)) = (Algorithm::try_from(h.algorithm), Params::try_from(&h))
    else {
        return false;
    };
    let version = match h.version.map(Version::try_from).transpose() {
        Ok(v) => v.unwrap_or_default(),
        Err(_) => return false,
    };
    let (Some(salt), Some(expected)) = (h.salt, h.hash) else {
        return false;
    };
    if params.m_cost() > MAX_M_COST_KIB {
        return false;
    }
    let mut salt_bytes = [0u8; 64];
    let Ok(salt) = salt.decode_b64(&mut salt_bytes) else {
        return false;
    };
    let n = params.block_count();
    if blocks.len() < n {
        blocks.resize(n, Block::default());
    }
    let mut out = vec![0u8; expected.len()];
    Argon2::new(algorithm, version, params)
        .hash_password_into_with_memory(password, salt, &mut out, &mut blocks[..n])
        .is_ok()
        && bool::from(out.as_slice().ct_eq(expected.as_bytes()))
}

/// One verification: the password, the hash, and where the answer goes.
type Job = (Vec<u8>, String, tokio::sync::oneshot::Sender<bool>);

/// The pool that verifies passwords: `workers` threads behind a queue of
/// `workers × QUEUE_PER_WORKER`. The threads end when it is dropped.
pub(crate) struct Verifiers {
    queue: SyncSender<Job>,
}

/// The pool's queue is full.
#[derive(Debug)]
pub(crate) struct Busy;

impl Verifiers {
    /// Starts `workers` (at least 1) verifying threads.
    pub(crate) fn start(workers: usize) -> Verifiers {
        let workers = workers.max(1);
        let (queue, jobs) = std::sync::mpsc::sync_channel::<Job>(workers * QUEUE_PER_WORKER);
        let jobs = Arc::new(Mutex::new(jobs));
        for i in 0..workers {
            let jobs = jobs.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("jobwheel-password-{i}"))
                .spawn(move || work(&jobs));
            if let Err(e) = spawned {
                tracing::error!(error = %e, "cannot start a password-verifying thread");
            }
        }
        Verifiers { queue }
    }

    /// Whether `password` matches `phc`, once a thread is free.
    ///
    /// Errors: [`Busy`] when the queue is full (nothing was queued).
    pub(crate) async fn verify(&self, password: &str, phc: String) -> Result<bool, Busy> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        match self
            .queue
            .try_send((password.as_bytes().to_vec(), phc, reply))
        {
            Ok(()) => Ok(answer.await.unwrap_or(false)),
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => Err(Busy),
        }
    }
}

/// A verifying thread: takes jobs until the pool is dropped, in one block of memory.
fn work(jobs: &Mutex<Receiver<Job>>) {
    let mut blocks: Vec<Block> = Vec::new();
    loop {
        let job = jobs.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok((password, phc, reply)) = job else {
            return;
        };
        let ok = verify(&password, &phc, &mut blocks);
        let _ = reply.send(ok);
    }
}

/// An account's recent logins.
#[derive(Debug)]
struct Tally {
    failures: u32,
    pending: u32,
    last: Instant,
}

/// Why a login may not be checked now.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// [`MAX_FAILURES`] failed or pending logins: locked out until [`LOCKOUT`] after
    /// the last failure.
    LockedOut,
    /// [`MAX_PENDING_PER_ACCOUNT`] logins of the account are being checked.
    Busy,
}

/// Failed and pending logins per account name (lower-cased), under one lock.
#[derive(Debug, Default)]
pub(crate) struct Attempts(Mutex<HashMap<String, Tally>>);

impl Attempts {
    /// Reserves a check of a login to `name`: counted as a failure until
    /// [`Attempt::succeeded`] says otherwise (a dropped attempt stays a failure).
    pub(crate) fn begin(self: &Arc<Self>, name: &str) -> Result<Attempt, Refused> {
        let key = name.to_lowercase();
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() > 10_000 {
            map.retain(|_, t| t.pending > 0 || t.last.elapsed() < LOCKOUT);
        }
        let t = map.entry(key.clone()).or_insert(Tally {
            failures: 0,
            pending: 0,
            last: Instant::now(),
        });
        if t.pending == 0 && t.last.elapsed() >= LOCKOUT {
            t.failures = 0;
        }
        if t.failures >= MAX_FAILURES {
            return Err(Refused::LockedOut);
        }
        if t.failures + t.pending >= MAX_FAILURES {
            return Err(Refused::LockedOut);
        }
        if t.pending >= MAX_PENDING_PER_ACCOUNT {
            return Err(Refused::Busy);
        }
        t.pending += 1;
        Ok(Attempt {
            attempts: self.clone(),
            key,
            outcome: None,
        })
    }

    /// The failures counted for `name` now.
    #[cfg(test)]
    fn failures(&self, name: &str) -> u32 {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&name.to_lowercase()).map_or(0, |t| t.failures)
    }
}

/// A login being checked; ends as a failure unless marked otherwise.
pub(crate) struct Attempt {
    attempts: Arc<Attempts>,
    key: String,
    /// `Some(true)` succeeded, `Some(false)` failed, `None` (dropped): failed.
    outcome: Option<bool>,
}

impl Attempt {
    /// The password was right: the account's failures are forgotten.
    pub(crate) fn succeeded(mut self) {
        self.outcome = Some(true);
    }

    /// The attempt was not checked after all (the queue was full): it counts for
    /// nothing.
    pub(crate) fn withdrawn(mut self) {
        let mut map = self.attempts.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = map.get_mut(&self.key) {
            t.pending = t.pending.saturating_sub(1);
        }
        self.key.clear();
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if self.key.is_empty() {
            return; // withdrawn
        }
        let mut map = self.attempts.0.lock().unwrap_or_else(|e| e.into_inner());
        let Some(t) = map.get_mut(&self.key) else {
            return;
        };
        t.pending = t.pending.saturating_sub(1);
        if self.outcome == Some(true) {
            t.failures = 0;
            if t.pending == 0 {
                map.remove(&self.key);
            }
        } else {
            t.failures += 1;
            t.last = Instant::now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_its_password_only_and_reuses_its_memory() {
        let phc = hash_password("correct horse");
        let mut blocks = Vec::new();
        assert!(verify(b"correct horse", &phc, &mut blocks));
        let grown = blocks.len();
        assert_eq!(
            grown,
            19 * 1024,
            "the default hash needs 19 MiB of 1 KiB blocks"
        );
        assert!(!verify(b"correct horsf", &phc, &mut blocks));
        assert!(!verify(b"correct horse", "not a hash", &mut blocks));
        assert_eq!(blocks.len(), grown);
        assert!(check_hash(&phc).is_ok());
        let huge = "$argon2id$v=19$m=1048576,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
        assert!(check_hash(huge).unwrap_err().contains("m=1048576"));
        assert!(!verify(b"x", huge, &mut blocks));
        assert_eq!(blocks.len(), grown, "an over-large hash allocates nothing");
    }

    #[test]
    fn pending_logins_count_against_the_lock_out() {
        let a = Arc::new(Attempts::default());
        let first = a.begin("Ada").unwrap();
        let second = a.begin("ada").unwrap();
        assert_eq!(a.begin("ADA").err(), Some(Refused::Busy));
        drop(first); // a failure
        drop(second);
        assert_eq!(a.failures("ada"), 2);
        for _ in 0..3 {
            drop(a.begin("ada").unwrap());
        }
        assert_eq!(a.begin("ada").err(), Some(Refused::LockedOut));
        assert!(a.begin("grace").is_ok(), "other accounts are not locked");
    }

    #[test]
    fn pending_and_failed_logins_together_reach_the_limit() {
        let a = Arc::new(Attempts::default());
        for _ in 0..4 {
            drop(a.begin("ada").unwrap());
        }
        let last = a.begin("ada").unwrap();
        assert_eq!(
            a.begin("ada").err(),
            Some(Refused::LockedOut),
            "4 failures and 1 pending make 5"
        );
        last.succeeded();
        assert_eq!(a.failures("ada"), 0, "a success forgets the failures");
        let w = a.begin("ada").unwrap();
        w.withdrawn();
        assert_eq!(
            a.failures("ada"),
            0,
            "a withdrawn attempt counts for nothing"
        );
    }
}
