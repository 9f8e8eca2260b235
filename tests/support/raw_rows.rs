//! [`RawRows`] for each backend: rows written with the backend's own client, as a hand
//! edit, a failed upgrade or a newer jobwheel would leave them.

use async_trait::async_trait;
use jobwheel::conformance::RawRows;
use jobwheel::memory::LocalLocks;
use jobwheel::store::JobsExt as _;
use jobwheel::{
    Job, JobContext, JobError, JobId, JobStore, Schedule, Scheduler, SchedulerConfig, Timestamp,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A scheduler on a store holding an unreadable row (due before everything else) and
/// a job whose payload is over the default limit: every other job fires — one-shots
/// once, a recurring job again and again — the oversized job fires, the bad row is
/// counted once in `corrupt_rows` however often the poller meets it, and
/// [`Scheduler::doctor`] names it. Runs a scheduler on `store` for about two seconds.
pub async fn bad_rows_do_not_stop_the_engine(store: Arc<dyn JobStore>, raw: &dyn RawRows) {
    let p = format!("rows-{:08x}-engine", fastrand::u32(..));
    let now = store.now().await.unwrap();
    let bad = format!("{p}-bad");
    raw.write_job(&bad, "{\"id\": 7}", now - Duration::from_secs(1))
        .await;
    let big = format!("{p}-big");
    let job = Job::builder(&big, "record", Schedule::once(now))
        .max_payload_bytes(1 << 20)
        .payload(serde_json::json!({ "blob": "x".repeat(200 * 1024) }))
        .build()
        .unwrap();
    store.upsert(&job, Some(now)).await.unwrap();
    let once: Vec<String> = (0..5).map(|i| format!("{p}-once-{i}")).collect();
    for id in &once {
        let job = Job::builder(id, "record", Schedule::once(now))
            .build()
            .unwrap();
        store.upsert(&job, Some(now)).await.unwrap();
    }
    let tick = format!("{p}-tick");
    let every = Schedule::every(Duration::from_millis(500)).unwrap();
    let job = Job::builder(&tick, "record", every).build().unwrap();
    store.upsert(&job, Some(now)).await.unwrap();

    let ran: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = ran.clone();
    let scheduler = Scheduler::builder()
        .store(store.clone())
        .locks(LocalLocks::new())
        .handler("record", move |ctx: JobContext| {
            seen.lock().unwrap().push(ctx.job.id().to_string());
            async { Ok::<(), JobError>(()) }
        })
        .config(
            SchedulerConfig::default()
                .node_id(format!("{p}-node"))
                .poll_interval(Duration::from_millis(100)),
        )
        .build()
        .unwrap();
    let handle = scheduler.start().await.unwrap();
    let count = |id: &str| ran.lock().unwrap().iter().filter(|r| *r == id).count();
    for _ in 0..100 {
        if count(&tick) >= 3 && once.iter().chain([&big]).all(|id| count(id) == 1) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for id in once.iter().chain([&big]) {
        assert_eq!(count(id), 1, "{id} fires once beside an unreadable row");
    }
    assert!(
        count(&tick) >= 3,
        "the recurring job keeps firing: {}",
        count(&tick)
    );
    assert_eq!(
        handle.scheduler().metrics().corrupt_rows,
        1,
        "the unreadable row is counted once, however often the poller meets it"
    );
    let doctor = handle.scheduler().doctor().await.unwrap();
    assert!(!doctor.is_healthy());
    assert!(
        doctor.jobs.iter().any(|c| c.id == bad),
        "doctor names it: {doctor:?}"
    );
    handle.shutdown().await;
    assert!(store.remove(&JobId::new(&bad).unwrap()).await.unwrap());
    let mut all = once;
    all.extend([big, tick]);
    for id in &all {
        store
            .remove(&JobId::new(id).unwrap())
            .await
            .expect("remove");
    }
}

/// Rows in the SQLite tables of one prefix.
#[cfg(feature = "sqlite")]
pub struct SqliteRows {
    /// The store's pool.
    pub pool: sqlx::SqlitePool,
    /// The table prefix.
    pub prefix: String,
}

#[cfg(feature = "sqlite")]
#[async_trait]
impl RawRows for SqliteRows {
    async fn write_job(&self, id: &str, definition: &str, next_fire_at: Timestamp) {
        let now = Timestamp::now().as_millis();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO {}jobs (id, definition, version, enabled, next_fire_at, next_trigger,
                 attempt, last_token, created_at, updated_at)
             VALUES (?, ?, 1, 1, ?, 'schedule', 0, 0, ?, ?)",
            self.prefix
        )))
        .bind(id)
        .bind(definition)
        .bind(next_fire_at.as_millis())
        .bind(now)
        .bind(now)
        .execute(&self.pool)
        .await
        .unwrap();
    }

    async fn write_node(&self, id: &str, info: &str, beat: Timestamp) {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO {}nodes (node_id, info, last_beat) VALUES (?, ?, ?)",
            self.prefix
        )))
        .bind(id)
        .bind(info)
        .bind(beat.as_millis())
        .execute(&self.pool)
        .await
        .unwrap();
    }
}

/// Rows in the PostgreSQL tables `public.<prefix>*`.
#[cfg(feature = "postgres")]
pub struct PgRows {
    /// The store's pool.
    pub pool: sqlx::PgPool,
    /// The table prefix (schema `public`).
    pub prefix: String,
}

#[cfg(feature = "postgres")]
#[async_trait]
impl RawRows for PgRows {
    async fn write_job(&self, id: &str, definition: &str, next_fire_at: Timestamp) {
        let now = Timestamp::now().as_millis();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO public.{}jobs (id, definition, version, enabled, next_fire_at,
                 next_trigger, attempt, last_token, created_at, updated_at)
             VALUES ($1, $2, 1, TRUE, $3, 'schedule', 0, 0, $4, $4)",
            self.prefix
        )))
        .bind(id)
        .bind(definition)
        .bind(next_fire_at.as_millis())
        .bind(now)
        .execute(&self.pool)
        .await
        .unwrap();
    }

    async fn write_node(&self, id: &str, info: &str, beat: Timestamp) {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO public.{}nodes (node_id, info, last_beat) VALUES ($1, $2, $3)",
            self.prefix
        )))
        .bind(id)
        .bind(info)
        .bind(beat.as_millis())
        .execute(&self.pool)
        .await
        .unwrap();
    }
}

/// Rows in the MySQL tables of one prefix.
#[cfg(feature = "mysql")]
pub struct MySqlRows {
    /// The store's pool.
    pub pool: sqlx::MySqlPool,
    /// The table prefix.
    pub prefix: String,
}

#[cfg(feature = "mysql")]
#[async_trait]
impl RawRows for MySqlRows {
    async fn write_job(&self, id: &str, definition: &str, next_fire_at: Timestamp) {
        let now = Timestamp::now().as_millis();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO {}jobs (id, definition, version, enabled, next_fire_at, next_trigger,
                 attempt, last_token, created_at, updated_at)
             VALUES (?, ?, 1, 1, ?, 'schedule', 0, 0, ?, ?)",
            self.prefix
        )))
        .bind(id)
        .bind(definition)
        .bind(next_fire_at.as_millis())
        .bind(now)
        .bind(now)
        .execute(&self.pool)
        .await
        .unwrap();
    }

    async fn write_node(&self, id: &str, info: &str, beat: Timestamp) {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO {}nodes (node_id, info, last_beat) VALUES (?, ?, ?)",
            self.prefix
        )))
        .bind(id)
        .bind(info)
        .bind(beat.as_millis())
        .execute(&self.pool)
        .await
        .unwrap();
    }
}

/// Hashes and index entries under the prefix of the shard each belongs to.
#[cfg(feature = "redis")]
pub struct RedisRows<C> {
    /// A connection to the store's server or cluster.
    pub conn: C,
    /// The store, for the prefix of the shard each row goes to.
    pub store: jobwheel::redis::RedisStore,
}

#[cfg(feature = "redis")]
impl<C> RedisRows<C> {
    /// The prefix of the shard that holds job `id`.
    fn job_prefix(&self, id: &str) -> String {
        let shard = self.store.shard_of(&jobwheel::JobId::new(id).unwrap());
        self.store.shard_prefixes()[shard].clone()
    }
}

#[cfg(feature = "redis")]
#[async_trait]
impl<C: redis::aio::ConnectionLike + Clone + Send + Sync> RawRows for RedisRows<C> {
    async fn write_job(&self, id: &str, definition: &str, next_fire_at: Timestamp) {
        let p = &self.job_prefix(id);
        let now = Timestamp::now().as_millis().to_string();
        let next = next_fire_at.as_millis();
        let fields = [
            ("def", definition.to_string()),
            ("enabled", "1".into()),
            ("version", "1".into()),
            ("next", next.to_string()),
            ("trigger", "schedule".into()),
            ("attempt", "0".into()),
            ("resume", String::new()),
            ("token", "0".into()),
            ("running", String::new()),
            ("created", now.clone()),
            ("updated", now),
        ];
        redis::pipe()
            .atomic()
            .hset_multiple(format!("{p}job:{id}"), &fields)
            .zadd(format!("{p}jobs"), id, 0)
            .zadd(format!("{p}due"), id, next)
            .query_async::<()>(&mut self.conn.clone())
            .await
            .unwrap();
    }

    async fn write_node(&self, id: &str, info: &str, beat: Timestamp) {
        let p = &self.store.shard_prefixes()[0];
        let beat = beat.as_millis();
        redis::pipe()
            .atomic()
            .hset_multiple(
                format!("{p}node:{id}"),
                &[("info", info.to_string()), ("beat", beat.to_string())],
            )
            .zadd(format!("{p}nodes"), id, beat)
            .query_async::<()>(&mut self.conn.clone())
            .await
            .unwrap();
    }
}
