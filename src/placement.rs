//! Where a job runs: in the scheduler's process (the default), or on an instance of
//! a remote executor group, picked per fire by a [`Routing`] strategy, with a
//! [`BlockStrategy`] the instance applies when the job is still running there.
//!
//! These are part of the job's definition (stored with it, validated with it); the
//! client and server that carry remote runs are in the `remote` module (feature
//! `remote`).

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// Longest executor group name, in characters.
pub const MAX_GROUP_LEN: usize = 100;

/// A job that runs on a remote executor group.
///
/// ```
/// use jobwheel::placement::{BlockStrategy, RemoteTarget, Routing};
/// let target = RemoteTarget::new("billing")?
///     .routing(Routing::ConsistentHash)
///     .block(BlockStrategy::DiscardLater);
/// assert_eq!(target.group(), "billing");
/// # Ok::<(), jobwheel::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(try_from = "TargetRepr", into = "TargetRepr")]
pub struct RemoteTarget {
    group: String,
    routing: Routing,
    block: BlockStrategy,
}

#[derive(Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
struct TargetRepr {
    group: String,
    #[serde(default)]
    routing: Routing,
    #[serde(default)]
    block: BlockStrategy,
}

impl TryFrom<TargetRepr> for RemoteTarget {
    type Error = Error;
    fn try_from(r: TargetRepr) -> Result<Self> {
        Ok(RemoteTarget::new(r.group)?
            .routing(r.routing)
            .block(r.block))
    }
}

impl From<RemoteTarget> for TargetRepr {
    fn from(t: RemoteTarget) -> Self {
        TargetRepr {
            group: t.group,
            routing: t.routing,
            block: t.block,
        }
    }
}

impl RemoteTarget {
    /// Runs on the executor group `group` (1-100 characters of `[A-Za-z0-9._:-]`),
    /// routed [`Routing::RoundRobin`], blocking [`BlockStrategy::Serial`].
    ///
    /// Errors: [`Error::Invalid`] on `job.remote.group`.
    pub fn new(group: impl Into<String>) -> Result<Self> {
        let group = group.into();
        check_group(&group)?;
        Ok(RemoteTarget {
            group,
            routing: Routing::default(),
            block: BlockStrategy::default(),
        })
    }

    /// Sets how an instance is picked for each fire.
    pub fn routing(mut self, routing: Routing) -> Self {
        self.routing = routing;
        self
    }

    /// Sets what an instance does with a run of a job it is still running.
    pub fn block(mut self, block: BlockStrategy) -> Self {
        self.block = block;
        self
    }

    /// The executor group.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The routing strategy.
    pub fn routing_strategy(&self) -> Routing {
        self.routing
    }

    /// The block strategy.
    pub fn block_strategy(&self) -> BlockStrategy {
        self.block
    }
}

/// Checks an executor group name: 1-100 characters of `[A-Za-z0-9._:-]`.
///
/// Errors: [`Error::Invalid`] on `job.remote.group`.
pub fn check_group(group: &str) -> Result<()> {
    if group.is_empty() || group.chars().count() > MAX_GROUP_LEN {
        return Err(Error::invalid(
            "job.remote.group",
            group,
            format!("must be 1-{MAX_GROUP_LEN} characters"),
        ));
    }
    if let Some(c) = group
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
    {
        return Err(Error::invalid(
            "job.remote.group",
            group,
            format!("character {c:?} is not allowed; use [A-Za-z0-9._:-]"),
        ));
    }
    Ok(())
}

/// How the scheduler picks the instance of a group that runs a fire (XXL-JOB's
/// routing strategies). Instances are taken in address order, so every scheduler
/// node sees the same list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Routing {
    /// The first instance.
    First,
    /// The last instance.
    Last,
    /// Each instance in turn, counted per job.
    #[default]
    RoundRobin,
    /// Any instance, uniformly at random.
    Random,
    /// The instance the job's id hashes to on a ring of virtual nodes: a job stays
    /// on its instance while the group changes, except the jobs of an instance that
    /// left (or of the stretch of the ring one that joined takes over).
    ConsistentHash,
    /// The instance that has run this job the fewest times (ties: address order).
    LeastFrequentlyUsed,
    /// The instance that ran this job longest ago, or never (ties: address order).
    LeastRecentlyUsed,
    /// The first instance, in address order, whose beat answers.
    Failover,
    /// The first instance, in address order, that answers it is not running the job.
    BusyOver,
    /// Every live instance that serves the job's handler: a fire becomes one run
    /// per instance, each told its [`Shard`] (index in address order, and the
    /// total), retried on its own; the fire succeeds when every shard has.
    ShardingBroadcast,
}

impl Routing {
    /// Every strategy, in declaration order.
    pub const ALL: [Routing; 10] = [
        Routing::First,
        Routing::Last,
        Routing::RoundRobin,
        Routing::Random,
        Routing::ConsistentHash,
        Routing::LeastFrequentlyUsed,
        Routing::LeastRecentlyUsed,
        Routing::Failover,
        Routing::BusyOver,
        Routing::ShardingBroadcast,
    ];
}

/// The part of a fire a shard of a [`Routing::ShardingBroadcast`] run is to do: shard
/// `index` of `total` (0-based), so a handler can take its slice of the work (say the
/// rows whose id modulo `total` is `index`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct Shard {
    /// This shard, 0-based (`index < total`).
    pub index: u32,
    /// How many shards the fire was split into (the live instances at its dispatch).
    pub total: u32,
}

/// What an executor instance does with a run of a job that it is still running
/// (XXL-JOB's block strategies).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum BlockStrategy {
    /// Queue it behind the running one: runs of a job execute one after another.
    #[default]
    Serial,
    /// Refuse it: the new run fails at once as discarded, the running one goes on.
    DiscardLater,
    /// Cancel the running one and run the new one.
    CoverEarly,
}

impl BlockStrategy {
    /// Every strategy, in declaration order.
    pub const ALL: [BlockStrategy; 3] = [
        BlockStrategy::Serial,
        BlockStrategy::DiscardLater,
        BlockStrategy::CoverEarly,
    ];

    /// The wire name (`serial`, `discard_later`, `cover_early`).
    pub fn as_str(self) -> &'static str {
        match self {
            BlockStrategy::Serial => "serial",
            BlockStrategy::DiscardLater => "discard_later",
            BlockStrategy::CoverEarly => "cover_early",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_round_trips_and_refuses_bad_groups() {
        let t = RemoteTarget::new("billing.eu-1")
            .unwrap()
            .routing(Routing::LeastRecentlyUsed)
            .block(BlockStrategy::CoverEarly);
        let json = serde_json::to_value(&t).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"group": "billing.eu-1", "routing": "least_recently_used", "block": "cover_early"})
        );
        assert_eq!(serde_json::from_value::<RemoteTarget>(json).unwrap(), t);
        let d: RemoteTarget = serde_json::from_str(r#"{"group": "g"}"#).unwrap();
        assert_eq!(
            (d.routing_strategy(), d.block_strategy()),
            (Routing::RoundRobin, BlockStrategy::Serial)
        );
        for bad in ["", "a b", "é", &"g".repeat(101)] {
            let e = RemoteTarget::new(bad).unwrap_err().to_string();
            assert!(e.contains("job.remote.group"), "{e}");
        }
        let e = serde_json::from_str::<RemoteTarget>(r#"{"group": "g", "routing": "sideways"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("sideways"), "{e}");
    }
}
