//! The keyset pages of `due`.

use super::store::{DAY, jid, job, long_ago};
use super::unique;
use crate::record::*;
use crate::store::JobStore;
use crate::time::Timestamp;
use std::time::Duration;

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
    let all = mine(store.due(until, None, 100_000).await.unwrap());
    assert_eq!(all.len(), 6, "six of the seven fires are due by `until`");
    let mut paged = Vec::new();
    let mut cursor: Option<DueKey> = None;
    for _ in 0..100_000 {
        let page = store.due(until, cursor.as_ref(), 2).await.unwrap();
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
        let got = mine(store.due(until, Some(k), 100).await.unwrap());
        assert_eq!(got, after(k), "due after {k:?}");
    }
    let between = DueKey {
        fire_at: at(15),
        job_id: jid(&format!("{p}-a")),
    };
    let got = mine(store.due(until, Some(&between), 100).await.unwrap());
    assert_eq!(got, all[3..].to_vec(), "a key that is no fire works");
    let absent = DueKey {
        fire_at: at(20),
        job_id: jid(&format!("{p}-d0")),
    };
    let got = mine(store.due(until, Some(&absent), 100).await.unwrap());
    assert_eq!(got, all[4..].to_vec(), "a key between two fires works");
    let moved = DueKey {
        fire_at: at(25),
        job_id: jid(&format!("{p}-d")),
    };
    let got = mine(store.due(until, Some(&moved), 100).await.unwrap());
    assert_eq!(
        got,
        all[4..].to_vec(),
        "a job's other instant works as a key"
    );
    assert_eq!(
        mine(store.due(until, None, 100_000).await.unwrap()),
        all,
        "reading pages changes nothing"
    );
    let end = DueKey {
        fire_at: Timestamp::from_millis(until.as_millis()),
        job_id: jid(&format!("{p}-z")),
    };
    assert!(
        mine(store.due(until, Some(&end), 100).await.unwrap()).is_empty(),
        "nothing after the last key"
    );
    for (id, _) in jobs {
        store.remove(&jid(&format!("{p}-{id}"))).await.unwrap();
    }
}
