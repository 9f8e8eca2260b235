use super::latency::{StoreLatency, delay};
use crate::error::Result;
use crate::lock::{Lease, LockProvider, LockRequest};
use crate::time::{Clock, SystemClock, Timestamp};
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// An instant in microseconds, as lock tokens count.
fn micros(t: Timestamp) -> u64 {
    u64::try_from(t.as_millis())
        .unwrap_or(0)
        .saturating_mul(1000)
}

#[derive(Debug)]
struct Slot {
    /// Last token granted; kept after release so tokens never repeat (until the key
    /// is forgotten, a cutoff past this token: `forget_idle`).
    token: u64,
    holder: Option<(String, Timestamp)>,
}

/// In-process leases for one process (or several schedulers in one process).
///
/// A grant's token is the clock's time in microseconds, or one more than the key's
/// previous token if that is larger (as every bundled lock provider does, so tokens
/// stay comparable when a deployment changes lock provider). Tokens are kept for the
/// life of the value.
#[derive(Debug, Clone)]
pub struct LocalLocks {
    clock: Arc<dyn Clock>,
    slots: Arc<Mutex<HashMap<String, Slot>>>,
    latency: Option<StoreLatency>,
    /// The store whose leases these are ([`MemoryStore::locks`](super::MemoryStore::locks)).
    home: Option<String>,
}

impl Default for LocalLocks {
    fn default() -> Self {
        LocalLocks::new()
    }
}

impl LocalLocks {
    /// Leases on the system clock.
    pub fn new() -> Self {
        LocalLocks::with_clock(Arc::new(SystemClock))
    }

    /// Leases on the given clock.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        LocalLocks {
            clock,
            slots: Arc::default(),
            latency: None,
            home: None,
        }
    }

    /// The same leases (shared with `self`) answering as `latency` says: each call
    /// waits for a connection and its time first.
    pub fn with_latency(&self, latency: StoreLatency) -> Self {
        LocalLocks {
            latency: Some(latency),
            ..self.clone()
        }
    }

    /// The same leases, named as a store's own: see [`LockProvider::home`].
    pub(super) fn homed(mut self, home: String) -> Self {
        self.home = Some(home);
        self
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl LockProvider for LocalLocks {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn home(&self) -> Option<String> {
        self.home.clone()
    }

    async fn acquire(&self, owner: &str, requests: &[LockRequest]) -> Result<Vec<Option<Lease>>> {
        delay(&self.latency, requests.len()).await;
        let now = self.clock.now();
        let mut slots = self.slots();
        Ok(requests
            .iter()
            .map(|r| {
                let slot = slots.entry(r.key.clone()).or_insert(Slot {
                    token: 0,
                    holder: None,
                });
                if matches!(&slot.holder, Some((_, until)) if *until > now) {
                    return None;
                }
                slot.token = (slot.token + 1).max(micros(now));
                let expires_at = now + r.ttl;
                slot.holder = Some((owner.to_string(), expires_at));
                Some(Lease {
                    key: r.key.clone(),
                    owner: owner.to_string(),
                    token: slot.token,
                    expires_at,
                })
            })
            .collect())
    }

    async fn renew(&self, leases: &[Lease], ttl: Duration) -> Result<Vec<Option<Lease>>> {
        delay(&self.latency, leases.len()).await;
        let now = self.clock.now();
        let mut slots = self.slots();
        Ok(leases
            .iter()
            .map(|l| {
                let slot = slots.get_mut(&l.key)?;
                match &mut slot.holder {
                    Some((owner, until))
                        if *owner == l.owner && slot.token == l.token && *until > now =>
                    {
                        *until = now + ttl;
                        Some(Lease {
                            expires_at: *until,
                            ..l.clone()
                        })
                    }
                    _ => None,
                }
            })
            .collect())
    }

    async fn release(&self, leases: &[Lease]) -> Result<Vec<bool>> {
        delay(&self.latency, leases.len()).await;
        let mut slots = self.slots();
        Ok(leases
            .iter()
            .map(|l| match slots.get_mut(&l.key) {
                Some(slot)
                    if slot.token == l.token
                        && matches!(&slot.holder, Some((o, _)) if *o == l.owner) =>
                {
                    slot.holder = None;
                    true
                }
                _ => false,
            })
            .collect())
    }

    async fn forget_idle(&self, older_than: Duration) -> Result<u64> {
        delay(&self.latency, 1).await;
        let now = self.clock.now();
        let cutoff = micros(now).saturating_sub(older_than.as_micros() as u64);
        let mut slots = self.slots();
        let before = slots.len();
        slots.retain(|_, slot| {
            matches!(&slot.holder, Some((_, until)) if *until > now) || slot.token >= cutoff
        });
        Ok((before - slots.len()) as u64)
    }
}
