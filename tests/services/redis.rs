//! Redis locks against the unchanged lock suite, token monotonicity across a Redis
//! that loses everything, and a mixed deployment (PostgreSQL store + Redis locks).
//! Needs `JOBWHEEL_REDIS_URL` (`./scripts/test` sets it, on database 15; the flush test
//! uses database 14 of the same server); without it
//! the test is skipped with a message, except under `CI=true`.
#![cfg(all(feature = "redis", feature = "postgres"))]

use crate::support;

use jobwheel::redis::RedisLocks;
use jobwheel::{JobStore, LockProvider, LockRequest, conformance};
use std::sync::Arc;
use std::time::Duration;

fn url(var: &str) -> Option<String> {
    support::server_url(var)
}

async fn locks(url: &str) -> RedisLocks {
    RedisLocks::connect(url)
        .await
        .unwrap_or_else(|e| panic!("JOBWHEEL_REDIS_URL is set but Redis is unreachable: {e}"))
}

/// `owner`'s grant of `key` for 30 s, or `None`.
async fn grant(l: &RedisLocks, owner: &str, key: &str) -> Option<jobwheel::Lease> {
    let req = LockRequest {
        key: key.to_string(),
        ttl: Duration::from_secs(30),
    };
    l.acquire(owner, &[req]).await.unwrap().pop().flatten()
}

#[tokio::test]
async fn redis_locks_pass_the_lock_suite() {
    let Some(url) = url("JOBWHEEL_REDIS_URL") else {
        return;
    };
    conformance::lock_suite(&locks(&url).await).await;
}

#[tokio::test]
async fn tokens_keep_increasing_after_redis_loses_everything() {
    let Some(url) = url("JOBWHEEL_REDIS_URL") else {
        return;
    };
    // A database of its own (14), so the flush cannot touch the other tests' keys.
    let url = match url.rsplit_once('/') {
        Some((base, db)) if db.chars().all(|c| c.is_ascii_digit()) => format!("{base}/14"),
        _ => format!("{}/14", url.trim_end_matches('/')),
    };
    let l = locks(&url).await;
    let key = format!("restart-{:08x}", fastrand::u32(..));
    let first = grant(&l, "a", &key).await.expect("free key");
    // Stands in for a restart without persistence: every key, counters included, is gone.
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("FLUSHDB")
        .query_async::<()>(&mut conn)
        .await
        .unwrap();
    let second = grant(&l, "b", &key).await.expect("the lost lock is free");
    assert!(
        second.token > first.token,
        "token {} after the flush must exceed {}",
        second.token,
        first.token
    );
    assert_eq!(
        l.release(&[first]).await.unwrap(),
        [false],
        "the old holder cannot release the new grant"
    );
    assert_eq!(l.release(&[second]).await.unwrap(), [true]);
}

/// A key's token counter expires a day after its lease would, so a stream of one-shot
/// jobs leaves nothing behind in Redis (`LockProvider::forget_idle`).
#[tokio::test]
async fn a_token_counter_expires_a_day_after_its_lease() {
    let Some(url) = url("JOBWHEEL_REDIS_URL") else {
        return;
    };
    let l = locks(&url).await;
    let key = format!("counter-{:08x}", fastrand::u32(..));
    let lease = grant(&l, "a", &key).await.expect("free key");
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let ttl: i64 = redis::cmd("PTTL")
        .arg(format!("jobwheel:token:{{{key}}}"))
        .query_async(&mut conn)
        .await
        .unwrap();
    let day_after = 30_000 + 86_400_000;
    assert!(
        (day_after - 5_000..=day_after).contains(&ttl),
        "the counter's time to live is {ttl} ms, not a day past the lease's 30 s"
    );
    assert_eq!(l.release(&[lease]).await.unwrap(), [true]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_store_with_redis_locks_runs_every_fire_once() {
    let Some(redis_url) = url("JOBWHEEL_REDIS_URL") else {
        return;
    };
    let Some(pg_url) = url("JOBWHEEL_POSTGRES_URL") else {
        return;
    };
    let prefix = format!("t{:08x}_mixed_", fastrand::u32(..));
    let redis_prefix = format!("{prefix}:");
    support::cluster::two_schedulers_run_every_fire_once(|| {
        let (pg_url, redis_url, prefix, redis_prefix) = (
            pg_url.clone(),
            redis_url.clone(),
            prefix.clone(),
            redis_prefix.clone(),
        );
        async move {
            let store = jobwheel::postgres::PgStore::builder(&pg_url)
                .prefix(&prefix)
                .build()
                .await
                .unwrap();
            store.migrate().await.unwrap();
            let client = redis::Client::open(redis_url.as_str()).unwrap();
            let conn = redis::aio::ConnectionManager::new(client).await.unwrap();
            let locks = RedisLocks::new(conn, &redis_prefix).unwrap();
            (
                Arc::new(store) as Arc<dyn JobStore>,
                Arc::new(locks) as Arc<dyn LockProvider>,
            )
        }
    })
    .await;
    support::drop_pg_tables(&pg_url, &prefix).await;
}
