//! Who a [`RemoteGroup`](super::RemoteGroup) dispatches to: a fixed list of
//! addresses, or the live instances that registered by heartbeat in the scheduler's
//! store, read on the store's clock and cached between refreshes.

use crate::error::{Error, Result};
use crate::record::ExecutorRecord;
use crate::store::JobStore;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::time::Instant;

/// An instance the group may dispatch to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Member {
    /// Its base address.
    pub(crate) address: String,
    /// The handlers it serves; `None`: every handler (a fixed address).
    pub(crate) handlers: Option<Vec<String>>,
}

impl Member {
    fn serves(&self, handler: &str) -> bool {
        self.handlers
            .as_ref()
            .is_none_or(|hs| hs.iter().any(|h| h == handler))
    }
}

/// The group's members.
pub(crate) enum Members {
    /// Addresses given at construction; each serves every handler.
    Fixed(Vec<String>),
    /// Instances registered in the scheduler's store.
    Registered(Registry),
}

/// The registered instances of a group as this node last read them.
pub(crate) struct Registry {
    /// The scheduler's store, set when the group is registered on a scheduler.
    store: OnceLock<Arc<dyn JobStore>>,
    cache: tokio::sync::Mutex<Option<Cached>>,
}

struct Cached {
    read_at: Instant,
    live: Arc<Vec<Member>>,
}

impl Registry {
    pub(crate) fn new() -> Self {
        Registry {
            store: OnceLock::new(),
            cache: tokio::sync::Mutex::new(None),
        }
    }

    /// Reads from `store` from now on (the first store set is kept).
    pub(crate) fn attach(&self, store: Arc<dyn JobStore>) {
        let _ = self.store.set(store);
    }

    /// The live instances of `group`: those whose last beat is within `dead_after`
    /// of the store's now, read at most once per `refresh`. Silent instances are
    /// reaped from the store on each read. When a read fails, the last list read
    /// stays in use (a failing store does not stop dispatch); with none, the error
    /// is returned.
    async fn live(
        &self,
        group: &str,
        dead_after: Duration,
        refresh: Duration,
    ) -> Result<Arc<Vec<Member>>> {
        let mut cache = self.cache.lock().await;
        if let Some(c) = cache.as_ref()
            && c.read_at.elapsed() < refresh
        {
            return Ok(c.live.clone());
        }
        let read = async {
            let store = self.store.get().ok_or_else(|| {
                Error::invalid(
                    "remote.instances",
                    group,
                    "a registered group must be added to a scheduler (SchedulerBuilder::remote) before it dispatches",
                )
            })?;
            let now = store.now().await?;
            if let Err(e) = store.reap_executors(dead_after).await {
                tracing::warn!(group, error = %e, "reaping silent executor instances failed");
            }
            let page = store.executors(Some(group)).await?;
            Ok::<_, Error>(live_at(page.items, now, dead_after))
        };
        match read.await {
            Ok(live) => {
                let live = Arc::new(live);
                *cache = Some(Cached {
                    read_at: Instant::now(),
                    live: live.clone(),
                });
                Ok(live)
            }
            Err(e) => match cache.as_ref() {
                Some(c) => {
                    tracing::warn!(group, error = %e, "reading the group's instances failed; using the last list read");
                    Ok(c.live.clone())
                }
                None => Err(e),
            },
        }
    }
}

/// The records whose last beat is within `dead_after` of `now`, as members.
fn live_at(
    records: Vec<ExecutorRecord>,
    now: crate::time::Timestamp,
    dead_after: Duration,
) -> Vec<Member> {
    let mut live: Vec<Member> = records
        .into_iter()
        .filter(|r| now.duration_since(r.last_beat) <= dead_after)
        .map(|r| Member {
            address: r.info.address.trim_end_matches('/').to_string(),
            handlers: Some(r.info.handlers),
        })
        .collect();
    live.sort_by(|a, b| a.address.cmp(&b.address));
    live.dedup_by(|a, b| a.address == b.address);
    live
}

impl Members {
    /// How many members get runs now, read afresh (a registered group's list from
    /// the store, leaving the dispatch cache alone: a gauge must not make a
    /// dispatch see an older list).
    pub(crate) async fn count_live(&self, group: &str, dead_after: Duration) -> Result<usize> {
        match self {
            Members::Fixed(list) => Ok(list.len()),
            Members::Registered(r) => {
                let Some(store) = r.store.get() else {
                    return Ok(0);
                };
                let now = store.now().await?;
                let page = store.executors(Some(group)).await?;
                Ok(live_at(page.items, now, dead_after).len())
            }
        }
    }

    /// The addresses that serve `handler` (`None`: any), in address order.
    pub(crate) async fn serving(
        &self,
        group: &str,
        handler: Option<&str>,
        dead_after: Duration,
        refresh: Duration,
    ) -> Result<Vec<String>> {
        match self {
            Members::Fixed(list) => Ok(list.clone()),
            Members::Registered(r) => Ok(r
                .live(group, dead_after, refresh)
                .await?
                .iter()
                .filter(|m| handler.is_none_or(|h| m.serves(h)))
                .map(|m| m.address.clone())
                .collect()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::ExecutorInfo;
    use crate::time::Timestamp;

    fn record(address: &str, handlers: &[&str], beat_ms: i64) -> ExecutorRecord {
        ExecutorRecord {
            info: ExecutorInfo {
                group: "g".into(),
                address: address.into(),
                handlers: handlers.iter().map(|h| h.to_string()).collect(),
                capacity: 1,
                version: String::new(),
            },
            registered_at: Timestamp::from_millis(0),
            last_beat: Timestamp::from_millis(beat_ms),
        }
    }

    #[test]
    fn live_members_beat_within_the_limit_on_the_store_clock() {
        let now = Timestamp::from_millis(100_000);
        let live = live_at(
            vec![
                record("http://b:1", &["x"], 100_000),
                record("http://a:1/", &["x", "y"], 10_000),
                record("http://c:1", &["y"], 9_999),
            ],
            now,
            Duration::from_secs(90),
        );
        let addresses: Vec<&str> = live.iter().map(|m| m.address.as_str()).collect();
        assert_eq!(
            addresses,
            ["http://a:1", "http://b:1"],
            "c is 90.001 s silent"
        );
        assert!(live[0].serves("y") && !live[1].serves("y"));
    }
}
