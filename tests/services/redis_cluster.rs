//! Redis locks on a Redis Cluster (3 primaries, 3 replicas on loopback, started by
//! `./scripts/test` through `scripts/redis-cluster`): the unchanged lock suite, each
//! lease's keys in one slot with the leases spread over every primary (from
//! `CLUSTER KEYSLOT` and `CLUSTER SHARDS`), and three schedulers on PostgreSQL with
//! the cluster's locks running every fire once. Needs `JOBWHEEL_REDIS_CLUSTER` (the
//! seed URLs, comma-separated); without it the test is skipped with a message, except
//! under `CI=true`.
#![cfg(all(feature = "redis", feature = "postgres"))]

use crate::support;
use jobwheel::redis::{RedisLocks, RedisStore};
use jobwheel::store::JobsExt as _;
use jobwheel::{JobStore, LockProvider, LockRequest, conformance};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// Held by each test on the cluster: one of them kills a primary, which the others
/// must not run beside.
static CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn seeds() -> Option<Vec<String>> {
    let urls = support::server_url("JOBWHEEL_REDIS_CLUSTER")?;
    Some(urls.split(',').map(str::to_string).collect())
}

async fn locks(seeds: &[String], prefix: &str) -> RedisLocks {
    let seeds: Vec<&str> = seeds.iter().map(String::as_str).collect();
    RedisLocks::connect_cluster(&seeds, prefix)
        .await
        .unwrap_or_else(|e| {
            panic!("JOBWHEEL_REDIS_CLUSTER is set but the cluster is unreachable: {e}")
        })
}

/// `CLUSTER KEYSLOT key` asked of one node.
async fn keyslot(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> u16 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query_async(conn)
        .await
        .unwrap()
}

/// The primaries' addresses by slot range, from `CLUSTER NODES` (`ip:port@bus`
/// fields of nodes flagged `master`, then their slot ranges).
async fn primaries(conn: &mut redis::aio::MultiplexedConnection) -> Vec<(String, Vec<(u16, u16)>)> {
    let text: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(conn)
        .await
        .unwrap();
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if !f.get(2)?.contains("master") || f.get(2)?.contains("fail") {
                return None;
            }
            let addr = f[1].split('@').next()?.to_string();
            let ranges = f[8..]
                .iter()
                .filter(|r| !r.starts_with('['))
                .map(|r| match r.split_once('-') {
                    Some((a, b)) => (a.parse().unwrap(), b.parse().unwrap()),
                    None => (r.parse().unwrap(), r.parse().unwrap()),
                })
                .collect();
            Some((addr, ranges))
        })
        .collect()
}

/// The address of the primary that serves `slot`.
fn serving(shards: &[(String, Vec<(u16, u16)>)], slot: u16) -> String {
    shards
        .iter()
        .find(|(_, r)| r.iter().any(|&(a, b)| (a..=b).contains(&slot)))
        .map(|(addr, _)| addr.clone())
        .unwrap_or_else(|| panic!("slot {slot} is served: {shards:?}"))
}

/// A PostgreSQL store with tables under `prefix`, migrated, and the cluster's locks
/// with keys under `<prefix>:`.
async fn store_and_locks(
    pg_url: &str,
    seeds: &[String],
    prefix: &str,
) -> (jobwheel::postgres::PgStore, RedisLocks) {
    let store = jobwheel::postgres::PgStore::builder(pg_url)
        .prefix(prefix)
        .build()
        .await
        .unwrap();
    store.migrate().await.unwrap();
    (store, locks(seeds, &format!("{prefix}:")).await)
}

/// The Redis store on the cluster with keys under `prefix` (the default shard
/// count), not migrated.
async fn cluster_store(seeds: &[String], prefix: &str) -> RedisStore {
    let seeds: Vec<&str> = seeds.iter().map(String::as_str).collect();
    RedisStore::connect_cluster(&seeds, prefix)
        .await
        .unwrap_or_else(|e| {
            panic!("JOBWHEEL_REDIS_CLUSTER is set but the cluster is unreachable: {e}")
        })
}

/// The Redis store on the cluster (8 shards) passes the store, raw-row and lock
/// suites. Every key of one job, and each shard's due index, is in one slot (its
/// shard's); the shards' slots are served by all three primaries, and the suites'
/// keys are stored on each of them.
#[tokio::test]
async fn the_redis_store_on_a_cluster_passes_the_suites_with_shards_on_every_primary() {
    let Some(seeds) = seeds() else { return };
    let _cluster = CLUSTER.lock().await;
    let prefix = format!("t{:08x}:cs:", fastrand::u32(..));
    let store = cluster_store(&seeds, &prefix).await;
    store.migrate().await.unwrap();
    store.migrate().await.expect("migrate is idempotent");
    assert_eq!(store.shards(), jobwheel::redis::DEFAULT_SHARDS as usize);
    conformance::store_suite(&store).await;
    let client = redis::cluster::ClusterClient::new(seeds.clone()).unwrap();
    let raw = support::raw_rows::RedisRows {
        conn: client.get_async_connection().await.unwrap(),
        store: store.clone(),
    };
    conformance::raw_rows_suite(&store, &raw).await;
    support::raw_rows::bad_rows_do_not_stop_the_engine(Arc::new(store.clone()), &raw).await;
    conformance::lock_suite(&store.locks()).await;

    let node = redis::Client::open(seeds[0].as_str()).unwrap();
    let mut one = node.get_multiplexed_async_connection().await.unwrap();
    let shards = primaries(&mut one).await;
    assert_eq!(shards.len(), 3, "three primaries: {shards:?}");
    let mut served: HashMap<String, usize> = HashMap::new();
    for (i, sp) in store.shard_prefixes().iter().enumerate() {
        let due = keyslot(&mut one, &format!("{sp}due")).await;
        for rest in ["running", "runs", "alarms", "audit", "seq:run", "fwd"] {
            assert_eq!(
                keyslot(&mut one, &format!("{sp}{rest}")).await,
                due,
                "shard {i}: {rest}"
            );
        }
        *served.entry(serving(&shards, due)).or_default() += 1;
    }
    assert_eq!(
        served.len(),
        3,
        "the shards cover every primary: {served:?}"
    );
    for k in 0..50 {
        let id = jobwheel::JobId::new(format!("job-{k}")).unwrap();
        let sp = &store.shard_prefixes()[store.shard_of(&id)];
        let slot = keyslot(&mut one, &format!("{sp}due")).await;
        for key in ["job", "runs:job", "rq", "rc", "ra", "rt"] {
            assert_eq!(
                keyslot(&mut one, &format!("{sp}{key}:{id}")).await,
                slot,
                "{id}: {key}"
            );
        }
    }
    // Where the suites' keys are: on every primary.
    let mut stored = Vec::new();
    for (addr, _) in &shards {
        let c = redis::Client::open(format!("redis://{addr}")).unwrap();
        let mut c = c.get_multiplexed_async_connection().await.unwrap();
        let (_, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(0)
            .arg("MATCH")
            .arg(format!("{prefix}*"))
            .arg("COUNT")
            .arg(100_000)
            .query_async(&mut c)
            .await
            .unwrap();
        stored.push(keys.len());
    }
    assert!(
        stored.iter().all(|&n| n > 0),
        "keys on every primary: {stored:?}"
    );
    support::redis_keys::drop_cluster_keys(&seeds, &prefix)
        .await
        .unwrap();
}

/// `connect("redis+cluster://…?wait_replicas=1&wait_timeout_ms=1000")` (what
/// `jobwheel serve` reads) opens the sharded store on the cluster, migrated: a job
/// written through it is on its shard's primary.
#[tokio::test]
async fn a_cluster_url_connects_the_sharded_store() {
    use jobwheel::store::Jobs;
    let Some(seeds) = seeds() else { return };
    let _cluster = CLUSTER.lock().await;
    let prefix = format!("t{:08x}:cu:", fastrand::u32(..));
    let hosts: Vec<&str> = seeds
        .iter()
        .map(|s| s.trim_start_matches("redis://"))
        .collect();
    let url = format!(
        "redis+cluster://{}?wait_replicas=1&wait_timeout_ms=1000",
        hosts.join(",")
    );
    let backend = jobwheel::BackendConfig::new(&url)
        .prefix(&prefix)
        .connect()
        .await
        .unwrap();
    let at = jobwheel::Timestamp::from_millis(1_000_000);
    let job = jobwheel::Job::builder("via-url", "noop", jobwheel::Schedule::once(at))
        .build()
        .unwrap();
    backend.store.upsert(&job, Some(at)).await.unwrap();
    let store = cluster_store(&seeds, &prefix).await;
    assert_eq!(store.shards(), jobwheel::redis::DEFAULT_SHARDS as usize);
    let sp = &store.shard_prefixes()[store.shard_of(job.id())];
    let client = redis::cluster::ClusterClient::new(seeds.clone()).unwrap();
    let mut c = client.get_async_connection().await.unwrap();
    let exists: bool = redis::cmd("EXISTS")
        .arg(format!("{sp}job:via-url"))
        .query_async(&mut c)
        .await
        .unwrap();
    assert!(exists, "the job is under its shard's prefix");
    assert!(store.get(job.id()).await.unwrap().is_some());
    support::redis_keys::drop_cluster_keys(&seeds, &prefix)
        .await
        .unwrap();
}

/// Three schedulers on the Redis store and locks on the cluster: the fleet harness
/// (jobs on every shard, one-shots, a stream) runs every fire exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_schedulers_on_the_redis_store_on_a_cluster_run_every_fire_once() {
    let Some(seeds) = seeds() else { return };
    let _cluster = CLUSTER.lock().await;
    let prefix = format!("t{:08x}:cf:", fastrand::u32(..));
    cluster_store(&seeds, &prefix)
        .await
        .migrate()
        .await
        .unwrap();
    support::cluster::fleet_runs_every_fire_exactly_once(
        || {
            let (seeds, prefix) = (seeds.clone(), prefix.clone());
            async move {
                let store = cluster_store(&seeds, &prefix).await;
                let locks = store.locks();
                (
                    Arc::new(store) as Arc<dyn JobStore>,
                    Arc::new(locks) as Arc<dyn LockProvider>,
                )
            }
        },
        support::cluster::Fleet::three_nodes(100),
    )
    .await;
    support::redis_keys::drop_cluster_keys(&seeds, &prefix)
        .await
        .unwrap();
}

#[tokio::test]
async fn redis_locks_pass_the_lock_suite_on_a_cluster() {
    let Some(seeds) = seeds() else { return };
    let _cluster = CLUSTER.lock().await;
    let prefix = format!("t{:08x}:", fastrand::u32(..));
    conformance::lock_suite(&locks(&seeds, &prefix).await).await;
}

/// A lease's lock and token counter hash to one slot (one script per lease, never
/// `CROSSSLOT`); a batch of 300 keys spans every primary and is granted in one call,
/// each key stored on the primary that serves its slot.
#[tokio::test]
async fn a_lease_is_one_slot_and_a_batch_spans_every_primary() {
    let Some(seeds) = seeds() else { return };
    let _cluster = CLUSTER.lock().await;
    let prefix = format!("t{:08x}:", fastrand::u32(..));
    let l = locks(&seeds, &prefix).await;
    let client = redis::Client::open(seeds[0].as_str()).unwrap();
    let mut one = client.get_multiplexed_async_connection().await.unwrap();
    let shards = primaries(&mut one).await;
    assert_eq!(shards.len(), 3, "three primaries: {shards:?}");
    let owner = |slot: u16| serving(&shards, slot);
    let keys: Vec<String> = (0..300).map(|i| format!("job-{i}")).collect();
    let mut served: HashMap<String, usize> = HashMap::new();
    for k in &keys {
        let lock = keyslot(&mut one, &format!("{prefix}lock:{{{k}}}")).await;
        let token = keyslot(&mut one, &format!("{prefix}token:{{{k}}}")).await;
        assert_eq!(lock, token, "{k}: lock and counter in one slot");
        *served.entry(owner(lock)).or_default() += 1;
    }
    assert_eq!(served.len(), 3, "the keys cover every primary: {served:?}");
    let requests: Vec<LockRequest> = keys
        .iter()
        .map(|k| LockRequest {
            key: k.clone(),
            ttl: Duration::from_secs(30),
        })
        .collect();
    let leases: Vec<_> = l
        .acquire("a", &requests)
        .await
        .unwrap()
        .into_iter()
        .map(|g| g.expect("every free key is granted"))
        .collect();
    let tokens: HashSet<u64> = leases.iter().map(|g| g.token).collect();
    assert!(tokens.iter().all(|&t| t > 0));
    // Each lock is on the primary serving its slot, held by its lease.
    for (k, g) in keys.iter().zip(&leases).step_by(37) {
        let addr = owner(keyslot(&mut one, &format!("{prefix}lock:{{{k}}}")).await);
        let node = redis::Client::open(format!("redis://{addr}")).unwrap();
        let mut c = node.get_multiplexed_async_connection().await.unwrap();
        let held: String = redis::cmd("GET")
            .arg(format!("{prefix}lock:{{{k}}}"))
            .query_async(&mut c)
            .await
            .unwrap();
        assert_eq!(held, format!("a:{}", g.token));
    }
    let again = l.acquire("b", &requests).await.unwrap();
    assert!(again.iter().all(Option::is_none), "held keys are refused");
    let renewed = l.renew(&leases, Duration::from_secs(60)).await.unwrap();
    assert!(renewed.iter().all(Option::is_some));
    let released = l.release(&leases).await.unwrap();
    assert!(released.iter().all(|&r| r), "every lease released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_store_with_cluster_locks_runs_every_fire_once() {
    let Some(seeds) = seeds() else { return };
    let _cluster = CLUSTER.lock().await;
    let Some(pg_url) = support::server_url("JOBWHEEL_POSTGRES_URL") else {
        return;
    };
    let prefix = format!("t{:08x}_rc_", fastrand::u32(..));
    support::cluster::fleet_runs_every_fire_exactly_once(
        || {
            let (pg_url, seeds, prefix) = (pg_url.clone(), seeds.clone(), prefix.clone());
            async move {
                let (store, locks) = store_and_locks(&pg_url, &seeds, &prefix).await;
                (
                    Arc::new(store) as Arc<dyn JobStore>,
                    Arc::new(locks) as Arc<dyn LockProvider>,
                )
            }
        },
        support::cluster::Fleet::three_nodes(100),
    )
    .await;
    support::drop_pg_tables(&pg_url, &prefix).await;
}

/// Three schedulers on PostgreSQL with the cluster's locks, 60 jobs every second for
/// 18 s; 6 s in, the primary serving the first job's lease is killed with `kill -9`
/// and its replica takes over. See [`failover`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_killed_mid_run_loses_no_fire() {
    let Some(seeds) = seeds() else { return };
    let _cluster = CLUSTER.lock().await;
    let Some(pg_url) = support::server_url("JOBWHEEL_POSTGRES_URL") else {
        return;
    };
    let prefix = format!("t{:08x}_rk_", fastrand::u32(..));
    let victim_key = format!("{prefix}:lock:{{every-0}}");
    failover(&seeds, &victim_key, || async {
        let (store, locks) = store_and_locks(&pg_url, &seeds, &prefix).await;
        (
            Arc::new(store) as Arc<dyn JobStore>,
            Arc::new(locks) as Arc<dyn LockProvider>,
        )
    })
    .await;
    support::drop_pg_tables(&pg_url, &prefix).await;
}

/// The same with the Redis store and its locks both on the cluster, the primary
/// serving the first job's shard killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_killed_under_the_redis_store_loses_no_fire() {
    let Some(seeds) = seeds() else { return };
    let _cluster = CLUSTER.lock().await;
    let prefix = format!("t{:08x}:sk:", fastrand::u32(..));
    let store = cluster_store(&seeds, &prefix).await;
    store.migrate().await.unwrap();
    let shard = store.shard_of(&jobwheel::JobId::new("every-0").unwrap());
    let victim_key = format!("{}job:every-0", store.shard_prefixes()[shard]);
    failover(&seeds, &victim_key, || async {
        let store = cluster_store(&seeds, &prefix).await;
        let locks = store.locks();
        (
            Arc::new(store) as Arc<dyn JobStore>,
            Arc::new(locks) as Arc<dyn LockProvider>,
        )
    })
    .await;
    support::redis_keys::drop_cluster_keys(&seeds, &prefix)
        .await
        .unwrap();
}

/// Three schedulers from `backend`, 60 jobs every second for 18 s; 6 s in, the
/// primary serving `victim_key` is killed with `kill -9` and its replica takes over.
/// No fire runs twice, none is skipped (a fire that could not start during the
/// failover runs late), and every job keeps firing after it. The killed node is
/// started again afterwards (it rejoins as a replica).
async fn failover<F, Fut>(seeds: &[String], victim_key: &str, backend: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = (Arc<dyn JobStore>, Arc<dyn LockProvider>)>,
{
    use jobwheel::{Job, JobContext, JobError, Schedule, Scheduler, SchedulerConfig, Timestamp};
    use std::sync::Mutex;
    let seen: Arc<Mutex<HashMap<(String, i64), u32>>> = Arc::default();
    let mut handles = Vec::new();
    for n in 0..3 {
        let s = seen.clone();
        let (store, locks) = backend().await;
        let sched = Scheduler::builder()
            .store(store)
            .locks(locks)
            .handler("count", move |ctx: JobContext| {
                *s.lock()
                    .unwrap()
                    .entry((ctx.job.id().to_string(), ctx.fire_at.as_millis()))
                    .or_default() += 1;
                async { Ok::<(), JobError>(()) }
            })
            .config(SchedulerConfig::default().node_id(format!("rk-{n}")))
            .build()
            .unwrap();
        handles.push(sched.start().await.unwrap());
    }
    // Each missed fire runs late, one by one (the default policy coalesces the fires
    // missed for longer than the misfire threshold, 5 s, which a failover on a busy
    // machine can take).
    for i in 0..60 {
        let job = Job::builder(
            format!("every-{i}"),
            "count",
            Schedule::every(Duration::from_secs(1)).unwrap(),
        )
        .misfire(jobwheel::MisfirePolicy::CatchUp { max: 1000 })
        .build()
        .unwrap();
        handles[i % 3].scheduler().upsert(job).await.unwrap();
    }
    let began = Timestamp::now();
    tokio::time::sleep(Duration::from_secs(6)).await;
    // The primary that serves `every-0`'s lease.
    let client = redis::Client::open(seeds[0].as_str()).unwrap();
    let mut one = client.get_multiplexed_async_connection().await.unwrap();
    let slot = keyslot(&mut one, victim_key).await;
    let victim = serving(&primaries(&mut one).await, slot);
    let node = redis::Client::open(format!("redis://{victim}")).unwrap();
    let mut c = node.get_multiplexed_async_connection().await.unwrap();
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut c)
        .await
        .unwrap();
    let pid = info
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .expect("process_id")
        .trim()
        .to_string();
    let killed_at = Timestamp::now();
    assert!(
        std::process::Command::new("kill")
            .args(["-9", &pid])
            .status()
            .unwrap()
            .success()
    );
    tokio::time::sleep(Duration::from_secs(12)).await;
    let ended = Timestamp::now();
    for h in handles {
        h.shutdown().await;
    }
    // Back to three primaries and three replicas for the tests after this one.
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/redis-cluster");
    let restarted = std::process::Command::new(script).output().unwrap();
    assert!(restarted.status.success(), "{restarted:?}");
    // Asked of a node that was not killed.
    let alive = seeds
        .iter()
        .find(|u| !u.ends_with(victim.as_str()))
        .expect("another node");
    let mut other = redis::Client::open(alive.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let new_primary = serving(&primaries(&mut other).await, slot);
    assert_ne!(new_primary, victim, "a replica took the slot over");

    let seen = seen.lock().unwrap().clone();
    let dups: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(dups.is_empty(), "fires ran twice: {dups:?}");
    for i in 0..60 {
        let id = format!("every-{i}");
        let mut fires: Vec<i64> = seen
            .keys()
            .filter(|(j, _)| *j == id)
            .map(|(_, f)| *f)
            .collect();
        fires.sort_unstable();
        assert!(
            fires.windows(2).all(|w| w[1] - w[0] == 1000),
            "{id} skipped a second: {fires:?}"
        );
        assert!(
            fires.first().is_some_and(|&f| f < killed_at.as_millis())
                && fires
                    .last()
                    .is_some_and(|&f| f >= ended.as_millis() - 3_000),
            "{id} fired before the kill and kept firing after it: {fires:?}"
        );
    }
    println!(
        "cluster failover: primary {victim} killed {} ms after the start, {} fires, none twice, none skipped",
        killed_at.as_millis() - began.as_millis(),
        seen.len()
    );
}

/// `kill -CONT`s a stopped process when dropped, so a failing test leaves no node
/// stopped.
struct Resume(String);

impl Drop for Resume {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-CONT", &self.0])
            .status();
    }
}

/// The address and process id of the replica of the primary serving `slot`.
async fn replica_serving(
    one: &mut redis::aio::MultiplexedConnection,
    slot: u16,
) -> (String, String) {
    let primary = serving(&primaries(one).await, slot);
    let text: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(one)
        .await
        .unwrap();
    let nodes: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let addr = |f: &Vec<&str>| f[1].split('@').next().unwrap().to_string();
    let primary_id = nodes
        .iter()
        .find(|f| addr(f) == primary)
        .map(|f| f[0])
        .unwrap();
    let replica = nodes
        .iter()
        .find(|f| f[2].contains("slave") && f[3] == primary_id)
        .map(addr)
        .unwrap_or_else(|| panic!("{primary} has a replica: {text}"));
    let mut c = redis::Client::open(format!("redis://{replica}"))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut c)
        .await
        .unwrap();
    let pid = info
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .unwrap()
        .trim()
        .to_string();
    (replica, pid)
}

/// With `wait_for_replicas(1, …)` a start returns only once the replica of its
/// shard's primary holds it: with the replica stopped for 600 ms the start takes
/// that long and the run is then read from the replica; without it the same start
/// returns at once; a replica stopped past the timeout makes the start return at
/// the timeout, written on the primary.
#[tokio::test]
async fn waiting_for_replicas_holds_a_start_until_the_replica_has_it() {
    use jobwheel::store::{Jobs, StartOutcome};
    use jobwheel::{Job, Schedule, Timestamp};
    use std::time::Instant;
    let Some(seeds) = seeds() else { return };
    let _cluster = CLUSTER.lock().await;
    let prefix = format!("t{:08x}:wr:", fastrand::u32(..));
    let plain = cluster_store(&seeds, &prefix).await;
    plain.migrate().await.unwrap();
    let waiting = cluster_store(&seeds, &prefix)
        .await
        .wait_for_replicas(1, Duration::from_secs(3))
        .unwrap();
    let short = cluster_store(&seeds, &prefix)
        .await
        .wait_for_replicas(1, Duration::from_millis(300))
        .unwrap();
    let bad = cluster_store(&seeds, &prefix).await;
    assert_eq!(
        bad.wait_for_replicas(1, Duration::from_secs(9))
            .unwrap_err()
            .field(),
        Some("redis.wait_timeout")
    );
    // Three jobs on one shard.
    let shard = plain.shard_of(&jobwheel::JobId::new("w-0").unwrap());
    let ids: Vec<String> = (0..)
        .map(|k| format!("w-{k}"))
        .filter(|id| plain.shard_of(&jobwheel::JobId::new(id.as_str()).unwrap()) == shard)
        .take(3)
        .collect();
    let at = Timestamp::from_millis(1_000_000);
    for id in &ids {
        let job = Job::builder(id.as_str(), "noop", Schedule::once(at))
            .build()
            .unwrap();
        plain.upsert(&job, Some(at)).await.unwrap();
    }
    let start = |id: &str| support::first_start(id, at);
    let node = redis::Client::open(seeds[0].as_str()).unwrap();
    let mut one = node.get_multiplexed_async_connection().await.unwrap();
    let sp = plain.shard_prefixes()[shard].clone();
    let slot = keyslot(&mut one, &format!("{sp}due")).await;
    let (replica, pid) = replica_serving(&mut one, slot).await;
    let stop = |ms: u64| {
        assert!(
            std::process::Command::new("kill")
                .args(["-STOP", &pid])
                .status()
                .unwrap()
                .success()
        );
        let guard = Resume(pid.clone());
        let pid = pid.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            let _ = std::process::Command::new("kill")
                .args(["-CONT", &pid])
                .status();
        });
        guard
    };

    let _g = stop(600);
    let t = Instant::now();
    let out = waiting.start_runs(&[start(&ids[0])]).await.unwrap();
    let held = t.elapsed();
    let StartOutcome::Started { run_id, .. } = out[0] else {
        panic!("{out:?}")
    };
    assert!(
        held >= Duration::from_millis(450),
        "the start waited for the replica: {held:?}"
    );
    let mut r = redis::Client::open(format!("redis://{replica}"))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = redis::cmd("READONLY").query_async(&mut r).await.unwrap();
    let status: Option<String> = redis::cmd("HGET")
        .arg(format!("{sp}run:{}", run_id.0))
        .arg("status")
        .query_async(&mut r)
        .await
        .unwrap();
    assert_eq!(
        status.as_deref(),
        Some("running"),
        "the replica holds the run"
    );

    tokio::time::sleep(Duration::from_millis(300)).await;
    let _g = stop(600);
    let t = Instant::now();
    plain.start_runs(&[start(&ids[1])]).await.unwrap();
    let quick = t.elapsed();
    assert!(
        quick < Duration::from_millis(300),
        "without waiting: {quick:?}"
    );

    tokio::time::sleep(Duration::from_millis(700)).await;
    let _g = stop(1_500);
    let t = Instant::now();
    let out = short.start_runs(&[start(&ids[2])]).await.unwrap();
    let timed_out = t.elapsed();
    assert!(matches!(out[0], StartOutcome::Started { .. }), "{out:?}");
    assert!(
        (Duration::from_millis(250)..Duration::from_millis(1_200)).contains(&timed_out),
        "returned at the timeout: {timed_out:?}"
    );
    println!(
        "wait for replicas: held {held:?} (replica stopped 600 ms), {quick:?} without waiting, {timed_out:?} at a 300 ms timeout"
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    support::redis_keys::drop_cluster_keys(&seeds, &prefix)
        .await
        .unwrap();
}
