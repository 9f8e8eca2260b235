//! `connect(url)`: one line to a migrated store and its lock provider, for every
//! scheme; errors name `backend.url` and never echo a password.

mod support;

use jobwheel::store::Jobs;
use jobwheel::{BackendConfig, Error, Job, JobId, LockRequest, Schedule, connect};
use std::time::Duration;
use support::server_url;

/// The backend works end to end: a job is stored and read back, a lease is granted.
async fn works(url: &str, store_name: &str) {
    let b = BackendConfig::new(url)
        .prefix(if url.starts_with("redis") {
            "cx:"
        } else {
            "cx_"
        })
        .connect()
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    assert_eq!(b.store.name(), store_name);
    let id = format!("connect-{:08x}", fastrand::u32(..));
    let job = Job::builder(
        id.as_str(),
        "h",
        Schedule::every(Duration::from_secs(60)).unwrap(),
    )
    .build()
    .unwrap();
    b.store.upsert(&job, None).await.unwrap();
    let got = b
        .store
        .get(&JobId::new(id.as_str()).unwrap())
        .await
        .unwrap();
    assert_eq!(got.map(|r| r.job.id().to_string()), Some(id.clone()));
    b.store
        .remove(&JobId::new(id.as_str()).unwrap())
        .await
        .unwrap();
    let lease = b
        .locks
        .acquire(
            "n1",
            &[LockRequest {
                key: id.clone(),
                ttl: Duration::from_secs(5),
            }],
        )
        .await
        .unwrap();
    assert!(lease[0].is_some(), "{url}: a lease is granted");
}

#[tokio::test]
async fn memory_and_sqlite_urls_connect() {
    works("memory:", "memory").await;
    works("sqlite::memory:", "sqlite").await;
    let dir = std::env::temp_dir().join(format!("jobwheel-connect-{}.db", fastrand::u32(..)));
    let url = format!("sqlite://{}?mode=rwc", dir.display());
    works(&url, "sqlite").await;
    // Connecting again finds the schema migrated.
    works(&url, "sqlite").await;
    let _ = std::fs::remove_file(dir);
}

#[tokio::test]
async fn server_urls_connect() {
    for (var, name) in [
        ("JOBWHEEL_POSTGRES_URL", "postgres"),
        ("JOBWHEEL_MYSQL_URL", "mysql"),
        ("JOBWHEEL_REDIS_URL", "redis"),
    ] {
        if let Some(url) = server_url(var) {
            works(&url, name).await;
        }
    }
}

#[tokio::test]
async fn a_bad_url_is_an_error_naming_the_field_without_the_password() {
    for url in [
        "oracle://scott:tiger@db/orcl",
        "redis://:s3cr3tpw@127.0.0.1:notaport/9",
    ] {
        let e = connect(url).await.unwrap_err();
        let text = e.to_string();
        assert!(
            !text.contains("s3cr3tpw") && !text.contains("tiger"),
            "{text}"
        );
        assert!(
            matches!(&e, Error::Invalid { field, .. } if field.ends_with(".url")),
            "{e:?}"
        );
    }
    let e = connect("oracle://db").await.unwrap_err();
    assert_eq!(e.field(), Some("backend.url"));
}
