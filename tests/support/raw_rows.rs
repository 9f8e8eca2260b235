//! [`RawRows`] for each backend: rows written with the backend's own client, as a hand
//! edit, a failed upgrade or a newer jobwheel would leave them.

use async_trait::async_trait;
use jobwheel::Timestamp;
use jobwheel::conformance::RawRows;

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
