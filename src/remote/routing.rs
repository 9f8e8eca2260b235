//! Which instance of a group runs a fire: the nine strategies of [`Routing`].
//!
//! [`Router::candidates`] answers the instances to try, in order. The strategies that
//! name one instance (first, last, round-robin, random, consistent hash, least
//! frequently and least recently used) answer one; failover and busy-over answer the
//! whole group in address order, and the dispatcher asks each in turn (a beat, an
//! idle beat) until one answers yes. Counts are kept per job and instance on this
//! scheduler node, as XXL-JOB keeps them per admin process, and are forgotten daily
//! or when they grow past a bound.

use crate::placement::Routing;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Virtual nodes per instance on the consistent-hash ring.
pub const VIRTUAL_NODES: usize = 100;

/// Jobs remembered per strategy before the counts start over.
const MAX_JOBS: usize = 100_000;

/// Counts older than this start over (XXL-JOB: a day).
const FORGET_AFTER: Duration = Duration::from_secs(24 * 3600);

/// Per-node routing state: round-robin positions, use counts and last uses.
#[derive(Debug)]
pub struct Router {
    state: Mutex<State>,
}

/// The consistent-hash ring of one instance list: (point, instance index), sorted.
type Ring = (Vec<String>, Vec<(u64, usize)>);

#[derive(Debug)]
struct State {
    since: Instant,
    turn: HashMap<String, usize>,
    uses: HashMap<String, HashMap<String, u64>>,
    last: HashMap<String, HashMap<String, u64>>,
    clock: u64,
    ring: Option<Ring>,
}

impl Default for Router {
    fn default() -> Self {
        Router {
            state: Mutex::new(State {
                since: Instant::now(),
                turn: HashMap::new(),
                uses: HashMap::new(),
                last: HashMap::new(),
                clock: 0,
                ring: None,
            }),
        }
    }
}

fn hash64(text: &str) -> u64 {
    let d = Sha256::digest(text.as_bytes());
    u64::from_be_bytes(d[..8].try_into().expect("8 bytes"))
}

impl Router {
    /// The instances (indexes into `instances`, which is in address order) to try
    /// for one fire of `job`, in order; empty when the group has no instance.
    pub fn candidates(&self, routing: Routing, job: &str, instances: &[String]) -> Vec<usize> {
        let n = instances.len();
        if n == 0 {
            return Vec::new();
        }
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.since.elapsed() > FORGET_AFTER
            || s.turn.len() > MAX_JOBS
            || s.uses.len() > MAX_JOBS
            || s.last.len() > MAX_JOBS
        {
            s.since = Instant::now();
            s.turn.clear();
            s.uses.clear();
            s.last.clear();
        }
        let pick = match routing {
            Routing::Failover | Routing::BusyOver | Routing::ShardingBroadcast => {
                return (0..n).collect();
            }
            Routing::First => 0,
            Routing::Last => n - 1,
            Routing::Random => fastrand::usize(..n),
            Routing::RoundRobin => {
                // A job's first turn starts anywhere, so jobs spread over the group.
                let turn = s
                    .turn
                    .entry(job.to_string())
                    .or_insert_with(|| fastrand::usize(..n));
                let pick = *turn % n;
                *turn = turn.wrapping_add(1);
                pick
            }
            Routing::ConsistentHash => s.ring_pick(job, instances),
            Routing::LeastFrequentlyUsed => {
                let uses = s.uses.entry(job.to_string()).or_default();
                uses.retain(|i, _| instances.contains(i));
                let pick = (0..n)
                    .min_by_key(|&i| uses.get(&instances[i]).copied().unwrap_or(0))
                    .expect("n > 0");
                *uses.entry(instances[pick].clone()).or_insert(0) += 1;
                pick
            }
            Routing::LeastRecentlyUsed => {
                s.clock += 1;
                let clock = s.clock;
                let last = s.last.entry(job.to_string()).or_default();
                last.retain(|i, _| instances.contains(i));
                let pick = (0..n)
                    .min_by_key(|&i| last.get(&instances[i]).copied().unwrap_or(0))
                    .expect("n > 0");
                last.insert(instances[pick].clone(), clock);
                pick
            }
        };
        vec![pick]
    }
}

impl State {
    fn ring_pick(&mut self, job: &str, instances: &[String]) -> usize {
        if self.ring.as_ref().is_none_or(|(list, _)| list != instances) {
            let mut ring: Vec<(u64, usize)> = instances
                .iter()
                .enumerate()
                .flat_map(|(i, name)| {
                    (0..VIRTUAL_NODES).map(move |v| (hash64(&format!("{name}#{v}")), i))
                })
                .collect();
            ring.sort_unstable();
            self.ring = Some((instances.to_vec(), ring));
        }
        let (_, ring) = self.ring.as_ref().expect("built above");
        let h = hash64(job);
        let at = ring.partition_point(|(p, _)| *p < h);
        ring[at % ring.len()].1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three() -> Vec<String> {
        ["http://a:1", "http://b:1", "http://c:1"]
            .map(String::from)
            .to_vec()
    }

    fn one(r: &Router, routing: Routing, job: &str, list: &[String]) -> usize {
        let c = r.candidates(routing, job, list);
        assert_eq!(c.len(), 1, "{routing:?}");
        c[0]
    }

    #[test]
    fn first_last_and_the_walking_strategies() {
        let (r, list) = (Router::default(), three());
        assert_eq!(one(&r, Routing::First, "j", &list), 0);
        assert_eq!(one(&r, Routing::Last, "j", &list), 2);
        assert_eq!(r.candidates(Routing::Failover, "j", &list), vec![0, 1, 2]);
        assert_eq!(r.candidates(Routing::BusyOver, "j", &list), vec![0, 1, 2]);
        assert!(r.candidates(Routing::First, "j", &[]).is_empty());
    }

    #[test]
    fn round_robin_visits_each_in_turn_per_job() {
        let (r, list) = (Router::default(), three());
        let picks: Vec<usize> = (0..6)
            .map(|_| one(&r, Routing::RoundRobin, "j", &list))
            .collect();
        for w in picks.windows(2) {
            assert_eq!(w[1], (w[0] + 1) % 3, "{picks:?}");
        }
    }

    #[test]
    fn random_reaches_every_instance() {
        let (r, list) = (Router::default(), three());
        let mut seen = [0; 3];
        for _ in 0..300 {
            seen[one(&r, Routing::Random, "j", &list)] += 1;
        }
        assert!(seen.iter().all(|&c| c > 50), "{seen:?}");
    }

    #[test]
    fn least_frequently_used_evens_out_and_counts_per_job() {
        let (r, list) = (Router::default(), three());
        let mut count = [0; 3];
        for _ in 0..9 {
            count[one(&r, Routing::LeastFrequentlyUsed, "j", &list)] += 1;
        }
        assert_eq!(count, [3, 3, 3]);
        // Another job has counts of its own: it starts at the first instance.
        assert_eq!(one(&r, Routing::LeastFrequentlyUsed, "k", &list), 0);
        // A new instance has run the job least: it goes there next.
        let mut four = list.clone();
        four.push("http://d:1".into());
        assert_eq!(one(&r, Routing::LeastFrequentlyUsed, "j", &four), 3);
    }

    #[test]
    fn least_recently_used_takes_the_one_idle_longest() {
        let (r, list) = (Router::default(), three());
        let picks: Vec<usize> = (0..6)
            .map(|_| one(&r, Routing::LeastRecentlyUsed, "j", &list))
            .collect();
        assert_eq!(picks, vec![0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn consistent_hash_is_stable_and_moves_only_the_leavers_jobs() {
        let (r, list) = (Router::default(), three());
        let jobs: Vec<String> = (0..600).map(|i| format!("job-{i}")).collect();
        let before: Vec<usize> = jobs
            .iter()
            .map(|j| one(&r, Routing::ConsistentHash, j, &list))
            .collect();
        let again: Vec<usize> = jobs
            .iter()
            .map(|j| one(&r, Routing::ConsistentHash, j, &list))
            .collect();
        assert_eq!(before, again);
        let mut spread = [0; 3];
        for &b in &before {
            spread[b] += 1;
        }
        assert!(spread.iter().all(|&c| c > 100), "{spread:?}");
        // b leaves: the jobs on a and c stay; b's move to a or c.
        let two = vec![list[0].clone(), list[2].clone()];
        let router2 = Router::default();
        for (j, &b) in jobs.iter().zip(&before) {
            let after = &two[one(&router2, Routing::ConsistentHash, j, &two)];
            if b != 1 {
                assert_eq!(after, &list[b], "{j} moved although its instance stayed");
            }
        }
    }
}
