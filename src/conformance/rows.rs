//! What a store does with rows it did not write through the API: rows damaged by hand
//! or by a failed upgrade, rows written by a newer jobwheel, oversized payloads — and
//! the order of ids.

use super::store::{cleanup, jid, long_ago};
use super::unique;
use crate::error::Error;
use crate::store::JobsExt as _;

use crate::job::Job;
use crate::schedule::Schedule;
use crate::store::{DueQuery, JobQuery, JobStore};
use crate::time::Timestamp;
use async_trait::async_trait;

use std::time::Duration;

/// Writes rows as they are, bypassing the store's encoding: what the unreadable-row
/// checks need from a backend's own test (the memory store keeps values, not rows,
/// and has none to offer).
#[async_trait]
pub trait RawRows: Send + Sync {
    /// Stores job `id` with `definition` as its stored definition text, enabled, idle,
    /// version 1, due at `next_fire_at`.
    async fn write_job(&self, id: &str, definition: &str, next_fire_at: Timestamp);
    /// Stores node `id` with `info` as its stored info text, last beat `beat`.
    async fn write_node(&self, id: &str, info: &str, beat: Timestamp);
}

/// A valid definition of job `id` as JSON, after `edit` has changed it.
fn definition(id: &str, edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let job = Job::builder(
        id,
        "noop",
        Schedule::every(Duration::from_secs(60)).unwrap(),
    )
    .build()
    .unwrap();
    let mut value = serde_json::to_value(&job).unwrap();
    edit(&mut value);
    value.to_string()
}

/// A row that cannot be decoded is skipped by `due`, `list` and `nodes` and reported
/// in their pages (with its due key for `due`), `get` errors with
/// [`Error::Corrupt`], `remove` still removes it, and the rows around it are returned.
pub async fn unreadable_rows_are_skipped(store: &dyn JobStore, raw: &dyn RawRows) {
    let p = unique("bad");
    let t0 = long_ago(store).await;
    let (before, bad, after) = (format!("{p}-a"), format!("{p}-b"), format!("{p}-c"));
    raw.write_job(&before, &definition(&before, |_| ()), t0)
        .await;
    raw.write_job(&bad, "{\"id\": \"not a job", t0 + Duration::from_secs(1))
        .await;
    raw.write_job(
        &after,
        &definition(&after, |_| ()),
        t0 + Duration::from_secs(2),
    )
    .await;
    let page = store
        .due(&DueQuery::new(t0 + Duration::from_secs(10), 100_000))
        .await
        .expect("a scan meeting an unreadable row still succeeds");
    let ids: Vec<&str> = page
        .items
        .iter()
        .map(|f| f.job_id.as_str())
        .filter(|id| id.starts_with(&p))
        .collect();
    assert_eq!(
        ids,
        [before.as_str(), after.as_str()],
        "due skips the unreadable row only"
    );
    let skipped: Vec<_> = page.corrupt.iter().filter(|c| c.id == bad).collect();
    assert_eq!(
        skipped.len(),
        1,
        "due reports the row it skipped: {:?}",
        page.corrupt
    );
    assert_eq!(skipped[0].kind, "job");
    let key = skipped[0]
        .due_key
        .as_ref()
        .expect("with its place in the due order");
    assert_eq!(
        (key.fire_at, key.job_id.as_str()),
        (t0 + Duration::from_secs(1), bad.as_str())
    );
    let listed = store.list(&JobQuery::new(100_000)).await.unwrap();
    assert!(listed.items.iter().any(|r| r.job.id().as_str() == after));
    assert!(
        listed.corrupt.iter().any(|c| c.id == bad),
        "list reports it too"
    );
    match store.get(&jid(&bad)).await {
        Err(Error::Corrupt {
            what: "job", id, ..
        }) => assert_eq!(id, bad),
        other => panic!("get of an unreadable job: {other:?}"),
    }
    assert!(
        store.remove(&jid(&bad)).await.unwrap(),
        "an unreadable job can be removed"
    );
    let node = format!("{p}-node");
    raw.write_node(&node, "not json", store.now().await.unwrap())
        .await;
    let nodes = store.nodes().await.unwrap();
    assert!(
        nodes
            .corrupt
            .iter()
            .any(|c| c.id == node && c.kind == "node")
    );
    assert!(nodes.items.iter().all(|n| n.info.node_id != node));
    assert!(store.deregister(&node).await.unwrap());
    cleanup(store, &[before, after]).await;
}

/// A row written by a newer jobwheel — with fields this version does not know — is
/// read, not skipped.
pub async fn rows_from_newer_versions_are_read(store: &dyn JobStore, raw: &dyn RawRows) {
    let id = unique("newer");
    let t0 = long_ago(store).await;
    let text = definition(&id, |v| {
        v["priority"] = 3.into();
        v["retry"]["max_attempts"] = 2.into();
        v["retry"]["on"] = serde_json::json!(["timeout"]);
    });
    raw.write_job(&id, &text, t0).await;
    let rec = store
        .get(&jid(&id))
        .await
        .unwrap()
        .expect("the job reads back");
    assert_eq!(
        rec.job.retry().max_attempts(),
        2,
        "known fields keep their values"
    );
    let page = store.due(&DueQuery::new(t0, 100_000)).await.unwrap();
    assert!(
        page.items.iter().any(|f| f.job_id.as_str() == id),
        "and it is due"
    );
    cleanup(store, &[id]).await;
}

/// A job stored with a payload over the default limit (its builder allowed more)
/// reads back and is due: limits apply when a job enters through the API, not when a
/// store reads it.
pub async fn oversized_payloads_read_back(store: &dyn JobStore) {
    let id = unique("big");
    let t0 = long_ago(store).await;
    let payload = serde_json::json!({ "blob": "x".repeat(200 * 1024) });
    let job = Job::builder(
        &id,
        "noop",
        Schedule::every(Duration::from_secs(60)).unwrap(),
    )
    .max_payload_bytes(1 << 20)
    .payload(payload.clone())
    .build()
    .unwrap();
    store.upsert(&job, Some(t0)).await.unwrap();
    let rec = store.get(&jid(&id)).await.unwrap().expect("it reads back");
    assert_eq!(rec.job.payload(), &payload);
    let page = store.due(&DueQuery::new(t0, 100_000)).await.unwrap();
    assert!(
        page.items.iter().any(|f| f.job_id.as_str() == id),
        "and it is due"
    );
    assert!(page.corrupt.is_empty(), "{:?}", page.corrupt);
    cleanup(store, &[id]).await;
}

/// Ids order bytewise in `list` and in `due` (ties on `fire_at`), whatever the
/// database's locale: ids that a locale would sort otherwise (case, punctuation).
pub async fn ids_sort_bytewise(store: &dyn JobStore) {
    let p = unique("order");
    let t0 = long_ago(store).await;
    let mut ids: Vec<String> = ["x-B", "x-a", "x-b", "x.a", "x:A", "x_c", "xA", "xa"]
        .iter()
        .map(|s| format!("{p}{s}"))
        .collect();
    for id in &ids {
        let job = Job::builder(
            id,
            "noop",
            Schedule::every(Duration::from_secs(60)).unwrap(),
        )
        .build()
        .unwrap();
        store.upsert(&job, Some(t0)).await.unwrap();
    }
    ids.sort();
    let listed: Vec<String> = store
        .list(&JobQuery::new(100_000))
        .await
        .unwrap()
        .items
        .iter()
        .map(|r| r.job.id().to_string())
        .filter(|id| id.starts_with(&p))
        .collect();
    assert_eq!(listed, ids, "list orders ids bytewise");
    let due: Vec<String> = store
        .due(&DueQuery::new(t0, 100_000))
        .await
        .unwrap()
        .items
        .iter()
        .map(|f| f.job_id.to_string())
        .filter(|id| id.starts_with(&p))
        .collect();
    assert_eq!(due, ids, "due orders ties bytewise");
    cleanup(store, &ids).await;
}
