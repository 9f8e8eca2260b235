//! The due scan: order, limits and keyset pages.

use super::store::{DAY, cleanup, finish_one, finish_req, jid, job, long_ago, start_req, started};
use super::unique;
use crate::record::*;
use crate::store::JobsExt as _;
use crate::store::{DueQuery, JobStore};
use crate::time::Timestamp;
use std::time::Duration;

/// `due` returns fires up to `until`, oldest first, at most `limit`, skipping paused
/// and running jobs and jobs with nothing to fire.
pub async fn due_ordering_and_limits(store: &dyn JobStore) {
    let p = unique("due");
    let t0 = long_ago(store).await;
    let offsets = [30u64, 10, 50, 20, 40];
    let ids: Vec<String> = offsets.iter().map(|o| format!("{p}-{o}")).collect();
    for (id, o) in ids.iter().zip(offsets) {
        store
            .upsert(&job(id), Some(t0 + Duration::from_secs(o)))
            .await
            .unwrap();
    }
    let idle = format!("{p}-idle");
    store.upsert(&job(&idle), None).await.unwrap();
    let mine = |fires: Vec<DueFire>| -> Vec<(String, Timestamp)> {
        fires
            .into_iter()
            .filter(|f| f.job_id.as_str().starts_with(&p))
            .map(|f| (f.job_id.to_string(), f.fire_at()))
            .collect()
    };
    let want = |os: &[u64]| -> Vec<(String, Timestamp)> {
        os.iter()
            .map(|o| (format!("{p}-{o}"), t0 + Duration::from_secs(*o)))
            .collect()
    };
    let got = mine(
        store
            .due(&DueQuery::new(t0 + Duration::from_secs(45), 1000))
            .await
            .unwrap()
            .items,
    );
    assert_eq!(
        got,
        want(&[10, 20, 30, 40]),
        "due is ordered by fire_at and stops at until"
    );
    let got = store
        .due(&DueQuery::new(t0 + Duration::from_secs(1000), 2))
        .await
        .unwrap()
        .items;
    assert_eq!(got.len(), 2, "due honours its limit");
    assert_eq!(
        mine(got),
        want(&[10, 20]),
        "the limit keeps the oldest fires"
    );
    let first = store
        .due(&DueQuery::new(t0 + Duration::from_secs(10), 10))
        .await
        .unwrap()
        .items;
    let f = first
        .iter()
        .find(|f| f.job_id.as_str() == format!("{p}-10"))
        .expect("due fire");
    assert_eq!(
        (f.version, f.attempt(), f.trigger()),
        (1, 0, TriggerKind::Schedule)
    );

    store
        .set_enabled(&jid(&format!("{p}-10")), false, None)
        .await
        .unwrap();
    let run = started(
        store,
        start_req(&format!("{p}-20"), t0 + Duration::from_secs(20), 1, 1),
    )
    .await;
    let got = mine(
        store
            .due(&DueQuery::new(t0 + Duration::from_secs(1000), 1000))
            .await
            .unwrap()
            .items,
    );
    assert_eq!(
        got,
        want(&[30, 40, 50]),
        "paused and running jobs are not due"
    );
    finish_one(
        store,
        finish_req(run, &format!("{p}-20"), 1, RunStatus::Succeeded, None),
    )
    .await;
    let mut all = ids.clone();
    all.push(idle);
    cleanup(store, &all).await;
}

/// `due` with `after` returns exactly the fires that sort after the key in the store's
/// own due order: paging with a small limit yields the same sequence as one large
/// call, keys that are no fire (or a job's other instant) work too, and reading a page
/// changes nothing.
pub async fn due_pages(store: &dyn JobStore) {
    let p = unique("page");
    let t0 = long_ago(store).await - DAY;
    let at = |s: u64| t0 + Duration::from_secs(s);
    // Mixed case: bytewise and dictionary orders differ, the pages must follow the store's.
    let jobs = [
        ("a", 10),
        ("B", 10),
        ("c", 10),
        ("d", 20),
        ("e", 30),
        ("F", 30),
        ("g", 40),
    ];
    for (id, s) in jobs {
        store
            .upsert(&job(&format!("{p}-{id}")), Some(at(s)))
            .await
            .unwrap();
    }
    let until = at(35);
    let mine = |fires: Vec<DueFire>| -> Vec<DueKey> {
        fires
            .into_iter()
            .filter(|f| f.job_id.as_str().starts_with(&p))
            .map(|f| f.key())
            .collect()
    };
    let all = mine(
        store
            .due(&DueQuery::new(until, 100_000))
            .await
            .unwrap()
            .items,
    );
    assert_eq!(all.len(), 6, "six of the seven fires are due by `until`");
    let mut paged = Vec::new();
    let mut cursor: Option<DueKey> = None;
    for _ in 0..100_000 {
        let page = store
            .due(&DueQuery::new(until, 2).after(cursor.as_ref().cloned()))
            .await
            .unwrap()
            .items;
        assert!(page.len() <= 2, "a page honours its limit");
        let Some(last) = page.last() else { break };
        if let Some(c) = &cursor {
            assert_ne!(&last.key(), c, "a page moves past its key");
        }
        cursor = Some(last.key());
        paged.extend(mine(page));
    }
    assert_eq!(paged, all, "pages of two give the same fires as one call");

    let after = |k: &DueKey| {
        let all = all.clone();
        let pos = all.iter().position(|x| x == k).unwrap();
        all[pos + 1..].to_vec()
    };
    for k in &all {
        let got = mine(
            store
                .due(&DueQuery::new(until, 100).after(Some(k.clone())))
                .await
                .unwrap()
                .items,
        );
        assert_eq!(got, after(k), "due after {k:?}");
    }
    let between = DueKey {
        fire_at: at(15),
        job_id: jid(&format!("{p}-a")),
    };
    let got = mine(
        store
            .due(&DueQuery::new(until, 100).after(Some(between.clone())))
            .await
            .unwrap()
            .items,
    );
    assert_eq!(got, all[3..].to_vec(), "a key that is no fire works");
    let absent = DueKey {
        fire_at: at(20),
        job_id: jid(&format!("{p}-d0")),
    };
    let got = mine(
        store
            .due(&DueQuery::new(until, 100).after(Some(absent.clone())))
            .await
            .unwrap()
            .items,
    );
    assert_eq!(got, all[4..].to_vec(), "a key between two fires works");
    let moved = DueKey {
        fire_at: at(25),
        job_id: jid(&format!("{p}-d")),
    };
    let got = mine(
        store
            .due(&DueQuery::new(until, 100).after(Some(moved.clone())))
            .await
            .unwrap()
            .items,
    );
    assert_eq!(
        got,
        all[4..].to_vec(),
        "a job's other instant works as a key"
    );
    assert_eq!(
        mine(
            store
                .due(&DueQuery::new(until, 100_000))
                .await
                .unwrap()
                .items
        ),
        all,
        "reading pages changes nothing"
    );
    let end = DueKey {
        fire_at: Timestamp::from_millis(until.as_millis()),
        job_id: jid(&format!("{p}-z")),
    };
    assert!(
        mine(
            store
                .due(&DueQuery::new(until, 100).after(Some(end.clone())))
                .await
                .unwrap()
                .items
        )
        .is_empty(),
        "nothing after the last key"
    );
    for (id, _) in jobs {
        store.remove(&jid(&format!("{p}-{id}"))).await.unwrap();
    }
}
