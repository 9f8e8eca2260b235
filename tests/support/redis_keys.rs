//! Removing what a test or benchmark stored in Redis under its own key prefix. Shared
//! by the tests (`support::redis_keys`) and `benches/throughput.rs` (by path).

/// `SCAN MATCH prefix*` and `UNLINK`, a thousand keys at a time, until none is left.
pub async fn drop_keys(url: &str, prefix: &str) -> redis::RedisResult<()> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    unlink_all(&mut conn, prefix, false).await
}

/// On a Redis Cluster (`seeds`: every node's URL): on each primary, `SCAN MATCH
/// prefix*` and `UNLINK` key by key (a cluster refuses one command over several
/// slots), until none is left.
pub async fn drop_cluster_keys(seeds: &[String], prefix: &str) -> redis::RedisResult<()> {
    for url in seeds {
        let client = redis::Client::open(url.as_str())?;
        let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
            continue; // a node that is down holds nothing to drop
        };
        let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut conn).await?;
        if matches!(role.first(), Some(redis::Value::BulkString(r)) if r == b"master") {
            unlink_all(&mut conn, prefix, true).await?;
        }
    }
    Ok(())
}

/// Scans one server for `prefix*` and unlinks what it finds, a page per command or
/// (`one_by_one`) a command per key in one pipeline.
async fn unlink_all(
    conn: &mut redis::aio::MultiplexedConnection,
    prefix: &str,
    one_by_one: bool,
) -> redis::RedisResult<()> {
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await?;
        if !keys.is_empty() {
            let mut pipe = redis::pipe();
            if one_by_one {
                for k in &keys {
                    pipe.cmd("UNLINK").arg(k).ignore();
                }
            } else {
                pipe.cmd("UNLINK").arg(&keys).ignore();
            }
            pipe.query_async::<()>(conn).await?;
        }
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}
