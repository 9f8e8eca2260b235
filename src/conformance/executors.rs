//! Executor instances in the registry: beats on the store's clock, listing by group,
//! silent instances reaped.

use super::unique;
use crate::record::{ExecutorInfo, ExecutorRecord};
use crate::store::JobStore;
use std::time::Duration;

fn instance(group: &str, address: &str, capacity: u32) -> ExecutorInfo {
    ExecutorInfo {
        group: group.to_string(),
        address: address.to_string(),
        handlers: vec!["report".into(), "sync".into()],
        capacity,
        version: "1.2.3".into(),
    }
}

async fn listed(store: &dyn JobStore, group: Option<&str>) -> Vec<ExecutorRecord> {
    let page = store.executors(group).await.unwrap();
    assert!(page.corrupt.is_empty(), "{:?}", page.corrupt);
    page.items
}

/// An instance's beat registers it on the store's clock and keeps its first
/// registration; listing filters by group exactly (a group that prefixes another is
/// not the other) and orders by group then address; a silent instance is reaped, one
/// that just beat is not; deregistering says whether the instance was there.
pub async fn executor_instances_by_heartbeat(store: &dyn JobStore) {
    let g = unique("group");
    let g2 = format!("{g}x");
    let (a, b) = ("http://127.0.0.1:9001", "http://127.0.0.1:9000");
    let beat = store.executor_beat(&instance(&g, a, 4)).await.unwrap();
    let now = store.now().await.unwrap();
    assert!(now >= beat && now.duration_since(beat) < Duration::from_secs(60));
    let mine = listed(store, Some(&g)).await;
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert_eq!(mine[0].info, instance(&g, a, 4));
    assert_eq!(
        (mine[0].registered_at, mine[0].last_beat),
        (beat, beat),
        "a first beat registers the instance at the instant it returned"
    );

    tokio::time::sleep(Duration::from_millis(20)).await;
    let again = store.executor_beat(&instance(&g, a, 8)).await.unwrap();
    let mine = listed(store, Some(&g)).await;
    assert_eq!(mine[0].info.capacity, 8, "a beat replaces the info");
    assert_eq!(mine[0].registered_at, beat, "a beat keeps the registration");
    assert_eq!(mine[0].last_beat, again);
    assert!(again >= beat);

    store.executor_beat(&instance(&g, b, 2)).await.unwrap();
    store.executor_beat(&instance(&g2, a, 2)).await.unwrap();
    let addresses = |rs: &[ExecutorRecord]| -> Vec<(String, String)> {
        rs.iter()
            .map(|r| (r.info.group.clone(), r.info.address.clone()))
            .collect()
    };
    assert_eq!(
        addresses(&listed(store, Some(&g)).await),
        [(g.clone(), b.to_string()), (g.clone(), a.to_string())],
        "one group's instances, by address"
    );
    let all: Vec<(String, String)> = addresses(&listed(store, None).await)
        .into_iter()
        .filter(|(group, _)| group.starts_with(&g))
        .collect();
    assert_eq!(
        all,
        [
            (g.clone(), b.to_string()),
            (g.clone(), a.to_string()),
            (g2.clone(), a.to_string())
        ],
        "every group, by group then address"
    );

    tokio::time::sleep(Duration::from_millis(400)).await;
    store.executor_beat(&instance(&g, b, 2)).await.unwrap();
    let reaped = store
        .reap_executors(Duration::from_millis(200))
        .await
        .unwrap();
    assert!(
        reaped.contains(&(g.clone(), a.to_string()))
            && reaped.contains(&(g2.clone(), a.to_string())),
        "instances silent past the limit are reaped: {reaped:?}"
    );
    assert!(
        !reaped.contains(&(g.clone(), b.to_string())),
        "an instance that just beat is not reaped"
    );
    assert_eq!(
        addresses(&listed(store, Some(&g)).await),
        [(g.clone(), b.to_string())]
    );
    assert!(listed(store, Some(&g2)).await.is_empty());

    assert!(store.deregister_executor(&g, b).await.unwrap());
    assert!(!store.deregister_executor(&g, b).await.unwrap());
    assert!(listed(store, Some(&g)).await.is_empty());
}
