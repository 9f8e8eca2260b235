//! The Redis job store against the unchanged conformance suites and the engine end to
//! end (two schedulers; the three-scheduler fleet). Needs `JOBWHEEL_REDIS_URL`
//! (`./scripts/test` sets it); without it the test is skipped with a message, except
//! under `CI=true`, where that is a failure. Each test keeps its keys under a prefix
//! of its own and deletes them at the end.
#![cfg(feature = "redis")]

use crate::support;
use jobwheel::store::JobsExt as _;

use jobwheel::redis::{RedisLocks, RedisStore};
use jobwheel::{JobStore, LockProvider, conformance};
use std::sync::Arc;

fn url() -> Option<String> {
    support::server_url("JOBWHEEL_REDIS_URL")
}

fn prefix(name: &str) -> String {
    format!("t{:08x}:{name}:", fastrand::u32(..))
}

async fn open(url: &str, prefix: &str) -> (RedisStore, RedisLocks) {
    let store = RedisStore::connect_with_prefix(url, prefix)
        .await
        .unwrap_or_else(|e| panic!("JOBWHEEL_REDIS_URL is set but Redis is unreachable: {e}"));
    store.migrate().await.unwrap();
    let locks = store.locks();
    (store, locks)
}

fn pair(open: (RedisStore, RedisLocks)) -> (Arc<dyn JobStore>, Arc<dyn LockProvider>) {
    (Arc::new(open.0), Arc::new(open.1))
}

/// Deletes every key under `prefix`.
async fn drop_keys(url: &str, prefix: &str) {
    support::redis_keys::drop_keys(url, prefix).await.unwrap();
}

#[tokio::test]
async fn redis_store_passes_the_conformance_suites() {
    let Some(url) = url() else { return };
    let p = prefix("cf");
    let (store, locks) = open(&url, &p).await;
    store.migrate().await.expect("migrate is idempotent");
    conformance::store_suite(&store).await;
    let raw = support::raw_rows::RedisRows {
        conn: store.connection().unwrap().clone(),
        store: store.clone(),
    };
    conformance::raw_rows_suite(&store, &raw).await;
    support::raw_rows::bad_rows_do_not_stop_the_engine(Arc::new(store.clone()), &raw).await;
    conformance::lock_suite(&locks).await;
    drop_keys(&url, &p).await;
}

/// The store split into 4 shards on one server (each shard's keys under a hash tag
/// of its own): the same suites, and every key the suites wrote is under a shard's
/// prefix or one of the store's own two (`shards`, `schema`).
#[tokio::test]
async fn a_sharded_redis_store_passes_the_conformance_suites() {
    let Some(url) = url() else { return };
    let p = prefix("shards");
    let store = RedisStore::connect_with_prefix(&url, &p)
        .await
        .unwrap()
        .with_shards(4)
        .unwrap();
    store.migrate().await.unwrap();
    let again = RedisStore::connect_with_prefix(&url, &p).await.unwrap();
    assert_eq!(again.shards(), 4, "a new connection reads the shard count");
    let refused = again.clone().with_shards(5).unwrap_err();
    assert_eq!(refused.field(), Some("redis.shards"), "{refused}");
    // A store that connected before the keyspace had a count: its migrate refuses.
    let early_p = prefix("early");
    let early = RedisStore::connect_with_prefix(&url, &early_p)
        .await
        .unwrap();
    early
        .clone()
        .with_shards(2)
        .unwrap()
        .migrate()
        .await
        .unwrap();
    let refused = early.with_shards(3).unwrap().migrate().await.unwrap_err();
    assert_eq!(refused.field(), Some("redis.shards"), "{refused}");
    drop_keys(&url, &early_p).await;
    conformance::store_suite(&store).await;
    let raw = support::raw_rows::RedisRows {
        conn: store.connection().unwrap().clone(),
        store: store.clone(),
    };
    conformance::raw_rows_suite(&store, &raw).await;
    support::raw_rows::bad_rows_do_not_stop_the_engine(Arc::new(store.clone()), &raw).await;
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{p}*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    let prefixes = store.shard_prefixes();
    let mut per_shard = vec![0usize; prefixes.len()];
    for k in &keys {
        match prefixes.iter().position(|sp| k.starts_with(sp.as_str())) {
            Some(i) => per_shard[i] += 1,
            None => assert!(
                *k == format!("{p}shards") || *k == format!("{p}schema"),
                "{k} is under no shard's prefix"
            ),
        }
    }
    assert!(
        per_shard.iter().all(|&n| n > 10),
        "the suites' keys spread over every shard: {per_shard:?}"
    );
    drop_keys(&url, &p).await;
}

#[tokio::test]
async fn prefixes_are_validated_and_newer_keyspaces_refused() {
    let Some(url) = url() else { return };
    let bad = RedisStore::connect_with_prefix(&url, "has space:")
        .await
        .unwrap_err();
    assert_eq!(bad.field(), Some("redis.prefix"));
    let p = prefix("schema");
    let (store, _) = open(&url, &p).await;
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("SET")
        .arg(format!("{p}schema"))
        .arg(99)
        .query_async::<()>(&mut conn)
        .await
        .unwrap();
    let err = store.migrate().await.unwrap_err();
    assert!(err.to_string().contains("newer"), "{err}");
    drop_keys(&url, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_schedulers_on_one_redis_run_every_fire_once() {
    let Some(url) = url() else { return };
    let p = prefix("cluster");
    support::cluster::two_schedulers_run_every_fire_once(|| {
        let (url, p) = (url.clone(), p.clone());
        async move { pair(open(&url, &p).await) }
    })
    .await;
    // The store's own locks name its home: every lease was kept in a job hash.
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    // (A lease key goes at its release; its token counter stays a day.)
    for kind in ["lock", "token"] {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{p}{kind}:*"))
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(keys.is_empty(), "lease keys written: {keys:?}");
    }
    drop_keys(&url, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_schedulers_300_jobs_for_20_s_and_5000_one_shots_run_every_fire_once() {
    let Some(url) = url() else { return };
    let p = prefix("fleet");
    support::cluster::fleet_runs_every_fire_exactly_once(
        || {
            let (url, p) = (url.clone(), p.clone());
            async move { pair(open(&url, &p).await) }
        },
        support::cluster::Fleet::three_nodes(200),
    )
    .await;
    drop_keys(&url, &p).await;
}

/// Hashes written before fire contexts existed keep a payload override alone (the
/// job's `npayload`, the run's `payload`): they read back as the context's payload,
/// through `get`, `due` and the run log.
#[tokio::test]
async fn payload_overrides_written_before_contexts_read_back() {
    use jobwheel::store::{DueQuery, Jobs, RunLog};
    use jobwheel::{Job, RunQuery, Schedule, Timestamp};
    let Some(url) = url() else { return };
    let p = prefix("legacy");
    let (store, _) = open(&url, &p).await;
    let at = Timestamp::from_millis(1_000_000);
    let job = Job::builder("legacy", "noop", Schedule::once(at))
        .build()
        .unwrap();
    store.upsert(&job, Some(at)).await.unwrap();
    let payload = serde_json::json!({"report": "<b>é</b>", "q": "\"quoted\""});
    let mut conn = store.connection().unwrap().clone();
    let cmd = |args: &[&str]| {
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        c
    };
    let text = payload.to_string();
    let key = format!("{p}job:legacy");
    let _: () = cmd(&["HDEL", &key, "nctx"])
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: () = cmd(&["HSET", &key, "npayload", &text])
        .query_async(&mut conn)
        .await
        .unwrap();
    let rec = store.get(job.id()).await.unwrap().unwrap();
    assert_eq!(
        rec.next_payload(),
        Some(&payload),
        "get reads the legacy field"
    );
    let due = store.due(&DueQuery::new(at, 10)).await.unwrap();
    assert_eq!(due.items[0].payload(), Some(&payload), "so does due");
    let start = support::first_start(job.id().as_str(), at);
    store.start_runs(&[start]).await.unwrap();
    let run = &store.runs(&RunQuery::new()).await.unwrap()[0];
    let rkey = format!("{p}run:{}", run.id);
    let _: () = cmd(&["HDEL", &rkey, "ctx"])
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: () = cmd(&["HSET", &rkey, "payload", &text])
        .query_async(&mut conn)
        .await
        .unwrap();
    let run = &store.runs(&RunQuery::new()).await.unwrap()[0];
    assert_eq!(run.payload(), Some(&payload), "the run log reads the run's");
    drop_keys(&url, &p).await;
}

/// A release of a job on another shard is kept by the parent's finish and delivered
/// once: the child takes it; the same kept entry delivered again (a node that died
/// after delivering it but before removing it) queues nothing; an entry not yet
/// delivered is queued.
#[tokio::test]
async fn a_release_across_shards_is_delivered_once() {
    use jobwheel::dependency::{Release, UpstreamRun};
    use jobwheel::store::{FinishRun, Jobs, StartOutcome};
    use jobwheel::{Job, JobId, RunStatus, Schedule, Timestamp, TriggerKind};
    let Some(url) = url() else { return };
    let p = prefix("fwd");
    let store = RedisStore::connect_with_prefix(&url, &p)
        .await
        .unwrap()
        .with_shards(4)
        .unwrap();
    store.migrate().await.unwrap();
    let parent = JobId::new("parent").unwrap();
    let child = (0..)
        .map(|k| JobId::new(format!("child-{k}")).unwrap())
        .find(|c| store.shard_of(c) != store.shard_of(&parent))
        .unwrap();
    let t0 = Timestamp::from_millis(1_000_000);
    let job = Job::builder(parent.as_str(), "noop", Schedule::once(t0))
        .build()
        .unwrap();
    store.upsert(&job, Some(t0)).await.unwrap();
    let never = Job::builder(child.as_str(), "noop", Schedule::never())
        .build()
        .unwrap();
    store.upsert(&never, None).await.unwrap();
    let out = store
        .start_runs(&[support::first_start(parent.as_str(), t0)])
        .await
        .unwrap();
    let StartOutcome::Started { run_id, .. } = out[0] else {
        panic!("{out:?}")
    };
    let upstream = |fire_at: Timestamp| UpstreamRun {
        job: parent.clone(),
        fire_at,
        run: run_id,
        status: RunStatus::Succeeded,
        depth: 1,
        released_by: None,
        window: None,
    };
    store
        .finish_runs(&[FinishRun {
            run_id,
            job_id: parent.clone(),
            token: 1,
            takeover: false,
            status: RunStatus::Succeeded,
            error: None,
            will_retry: false,
            executor: None,
            version: 1,
            next: None,
            alarms: Vec::new(),
            releases: vec![Release::new(child.clone(), upstream(t0))],
            lease: jobwheel::store::LeaseEnd::Untouched,
        }])
        .await
        .unwrap();
    let next = store
        .get(&child)
        .await
        .unwrap()
        .unwrap()
        .next
        .expect("released");
    assert_eq!(next.trigger, TriggerKind::Upstream);
    assert_eq!(next.context.upstream, vec![upstream(t0)]);

    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let src = &store.shard_prefixes()[store.shard_of(&parent)];
    let kept: std::collections::HashMap<String, String> = redis::cmd("HGETALL")
        .arg(format!("{src}fwd"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(kept.is_empty(), "delivered and removed: {kept:?}");
    let last: String = redis::cmd("GET")
        .arg(format!("{src}seq:fwd"))
        .query_async(&mut conn)
        .await
        .unwrap();
    let entry = |fire_at: Timestamp| {
        serde_json::json!([
            store.shard_of(&child).to_string(),
            child.as_str(),
            format!("parent|{}", fire_at.as_millis()),
            serde_json::to_string(&upstream(fire_at)).unwrap(),
        ])
        .to_string()
    };
    // Delivered already: queued nothing.
    let _: () = redis::cmd("HSET")
        .arg(format!("{src}fwd"))
        .arg(&last)
        .arg(entry(t0))
        .query_async(&mut conn)
        .await
        .unwrap();
    store.take_releases(10).await.unwrap();
    assert!(store.releases(Some(&child), 10).await.unwrap().is_empty());
    // Not delivered yet (another id, a later instant): queued behind the taken one.
    let t1 = t0 + std::time::Duration::from_secs(60);
    let _: () = redis::cmd("HSET")
        .arg(format!("{src}fwd"))
        .arg("1")
        .arg(entry(t1))
        .query_async(&mut conn)
        .await
        .unwrap();
    store.take_releases(10).await.unwrap();
    let queued = store.releases(Some(&child), 10).await.unwrap();
    assert_eq!(queued.len(), 1, "{queued:?}");
    assert_eq!(queued[0].from, upstream(t1));
    let left: std::collections::HashMap<String, String> = redis::cmd("HGETALL")
        .arg(format!("{src}fwd"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
    drop_keys(&url, &p).await;
}

/// `due` on 4 shards reads the one due order a single index gives: 3,000 jobs, most
/// on one shard and many at the same instant, paged through with `after` in pages of
/// 1,000 and of 7, give the same keys in the same order as the same jobs in one
/// keyspace (the sharded store asks each shard for about its share and reads more
/// where the merge is not yet complete).
#[tokio::test]
async fn sharded_due_pages_are_those_of_one_index() {
    use jobwheel::store::{DueQuery, Jobs};
    use jobwheel::{Job, JobId, Schedule, Timestamp};
    let Some(url) = url() else { return };
    let (p1, p4) = (prefix("due1"), prefix("due4"));
    let one = RedisStore::connect_with_prefix(&url, &p1).await.unwrap();
    one.migrate().await.unwrap();
    let four = RedisStore::connect_with_prefix(&url, &p4)
        .await
        .unwrap()
        .with_shards(4)
        .unwrap();
    four.migrate().await.unwrap();
    // 2,400 ids of shard 0 and 600 of the others, at 50 instants.
    let (mut home, mut rest) = (Vec::new(), Vec::new());
    for k in 0.. {
        let id = JobId::new(format!("d-{k}")).unwrap();
        if four.shard_of(&id) == 0 {
            if home.len() < 2_400 {
                home.push(id);
            }
        } else if rest.len() < 600 {
            rest.push(id);
        }
        if home.len() == 2_400 && rest.len() == 600 {
            break;
        }
    }
    let jobs: Vec<(Job, Option<Timestamp>)> = home
        .iter()
        .chain(&rest)
        .enumerate()
        .map(|(i, id)| {
            let at = Timestamp::from_millis(1_000_000 + (i as i64 % 50) * 1_000);
            (
                Job::builder(id.as_str(), "noop", Schedule::once(at))
                    .build()
                    .unwrap(),
                Some(at),
            )
        })
        .collect();
    one.upsert_many(&jobs).await.unwrap();
    four.upsert_many(&jobs).await.unwrap();
    let until = Timestamp::from_millis(2_000_000);
    for limit in [1_000, 7] {
        let (mut a, mut b) = (None, None);
        let mut seen = 0;
        loop {
            let pa = one
                .due(&DueQuery::new(until, limit).after(a.clone()))
                .await
                .unwrap();
            let pb = four
                .due(&DueQuery::new(until, limit).after(b.clone()))
                .await
                .unwrap();
            let ka: Vec<_> = pa.items.iter().map(|f| f.key()).collect();
            let kb: Vec<_> = pb.items.iter().map(|f| f.key()).collect();
            assert_eq!(ka, kb, "limit {limit}, after {seen} rows");
            seen += ka.len();
            if ka.len() < limit {
                break;
            }
            a = ka.last().cloned();
            b = kb.last().cloned();
        }
        assert_eq!(seen, 3_000, "limit {limit}: every job once");
    }
    drop_keys(&url, &p1).await;
    drop_keys(&url, &p4).await;
}

/// Where leases live: a one-keyspace store's `locks()` and `RedisLocks::connect` on
/// the same server and database name the store's home (a scheduler then keeps its
/// leases in the job hashes); a sharded store's locks, locks on a handed-over
/// connection and locks under another prefix name none or another.
#[tokio::test]
async fn lock_providers_name_the_store_they_share_leases_with() {
    use jobwheel::store::Jobs;
    let Some(url) = url() else { return };
    // Connecting reads one key and writes none.
    let store = RedisStore::connect(&url).await.unwrap();
    let home = store.job_leases().map(|l| l.home());
    assert!(
        home.is_some(),
        "a one-keyspace store keeps leases in its job hashes"
    );
    assert_eq!(store.locks().home(), home);
    assert_eq!(RedisLocks::connect(&url).await.unwrap().home(), home);
    let other = RedisStore::connect_with_prefix(&url, &prefix("other"))
        .await
        .unwrap();
    assert_ne!(other.locks().home(), home, "another prefix is another home");
    let sharded = other.clone().with_shards(2).unwrap();
    assert!(sharded.job_leases().is_none());
    assert_eq!(sharded.locks().home(), None);
    let conn = store.connection().unwrap().clone();
    assert_eq!(RedisLocks::new(conn, "jobwheel:").unwrap().home(), None);
}
