//! Removing what a test or benchmark stored in Redis under its own key prefix. Shared
//! by the tests (`support::redis_keys`) and `benches/throughput.rs` (by path).

/// `SCAN MATCH prefix*` and `UNLINK`, a thousand keys at a time, until none is left.
pub async fn drop_keys(url: &str, prefix: &str) -> redis::RedisResult<()> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await?;
        if !keys.is_empty() {
            redis::cmd("UNLINK")
                .arg(&keys)
                .query_async::<()>(&mut conn)
                .await?;
        }
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}
