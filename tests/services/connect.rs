//! `connect(url)`: one line to a migrated store and its lock provider, for every
//! scheme; errors name `backend.url` and never echo a password.

use crate::support;
use jobwheel::store::JobsExt as _;

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

const PLANTED: &str = "pl4nt3dS3cret";

/// Every error and `Debug` text of every constructor, for URLs carrying [`PLANTED`]
/// as a password (in the authority and as a query parameter), hides it.
#[tokio::test]
async fn no_error_or_debug_text_shows_a_password() {
    let urls = [
        format!("postgres://app:{PLANTED}@127.0.0.1:1/app"),
        format!("postgres://app:{PLANTED}@127.0.0.1:notaport/app"),
        format!("postgres://127.0.0.1:1/app?user=app&password={PLANTED}"),
        format!("mysql://app:{PLANTED}@127.0.0.1:1/app"),
        format!("mysql://app:{PLANTED}@127.0.0.1:notaport/app"),
        format!("redis://:{PLANTED}@127.0.0.1:1/0"),
        format!("redis://:{PLANTED}@127.0.0.1:notaport/9"),
        format!("redis://:{PLANTED}@127.0.0.1:6379/0"),
        format!("oracle://scott:{PLANTED}@db/orcl"),
        format!("sqlite://app:{PLANTED}@/nonexistent/dir/x.db"),
    ];
    let clean = |what: &str, text: String| {
        assert!(!text.contains(PLANTED), "{what} shows the password: {text}");
    };
    for url in &urls {
        let config = BackendConfig::new(url).connect_timeout(Duration::from_secs(2));
        clean("BackendConfig's Debug", format!("{config:?}"));
        if let Err(e) = config.connect().await {
            clean("connect's error", format!("{e} / {e:?}"));
        }
        let pg = jobwheel::postgres::PgStore::builder(url.as_str())
            .connect_timeout(Duration::from_secs(2));
        clean("PgBuilder's Debug", format!("{pg:?}"));
        if let Err(e) = pg.build().await {
            clean("PgStore's error", format!("{e} / {e:?}"));
        }
        let my = jobwheel::mysql::MySqlStore::builder(url.as_str())
            .connect_timeout(Duration::from_secs(2));
        clean("MySqlBuilder's Debug", format!("{my:?}"));
        if let Err(e) = my.build().await {
            clean("MySqlStore's error", format!("{e} / {e:?}"));
        }
        let lite = jobwheel::sqlite::SqliteStore::builder(url.as_str());
        if let Err(e) = lite.build().await {
            clean("SqliteStore's error", format!("{e} / {e:?}"));
        }
        if let Err(e) = jobwheel::redis::RedisStore::connect(url).await {
            clean("RedisStore's error", format!("{e} / {e:?}"));
        }
        if let Err(e) = jobwheel::redis::RedisLocks::connect(url).await {
            clean("RedisLocks' error", format!("{e} / {e:?}"));
        }
    }
}

/// Nothing listens on port 1: each backend fails at once, naming the server and the
/// cause, instead of a pool timing out without one.
#[tokio::test]
async fn a_refused_connection_names_the_server_and_the_cause() {
    for url in [
        "postgres://root@127.0.0.1:1/test",
        "mysql://root@127.0.0.1:1/test",
        "redis://127.0.0.1:1/0",
    ] {
        let e = connect(url).await.unwrap_err();
        let text = e.to_string();
        assert!(text.contains("127.0.0.1:1"), "{url}: {text}");
        assert!(
            text.to_lowercase().contains("refused"),
            "{url}: the cause is named: {text}"
        );
        assert!(e.is_temporary(), "a server that may come up later: {e:?}");
    }
}

#[tokio::test]
async fn a_url_of_another_backend_is_refused_naming_the_field() {
    let e = jobwheel::postgres::PgStore::builder("mysql://root@127.0.0.1:3306/test")
        .build()
        .await
        .unwrap_err();
    assert_eq!(e.field(), Some("postgres.url"), "{e}");
    let e = jobwheel::mysql::MySqlStore::builder("postgres://root@127.0.0.1/test")
        .build()
        .await
        .unwrap_err();
    assert_eq!(e.field(), Some("mysql.url"), "{e}");
}

/// The server is up but refuses what was asked: the cause comes back at once.
#[tokio::test]
async fn a_refused_login_or_database_names_the_cause() {
    if let Some(url) = server_url("JOBWHEEL_POSTGRES_URL") {
        let base = url.rsplit_once('/').map_or(url.as_str(), |(b, _)| b);
        let e = connect(&format!("{base}/no_such_database_jw"))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("no_such_database_jw"), "{e}");
        assert!(!e.is_temporary(), "{e:?}");
    }
    if let Some(url) = server_url("JOBWHEEL_REDIS_URL") {
        let bad_db = format!(
            "{}/99999",
            url.trim_end_matches(|c: char| c.is_ascii_digit())
                .trim_end_matches('/')
        );
        let e = connect(&bad_db).await.unwrap_err();
        assert!(e.to_string().contains("127.0.0.1"), "{e}");
    }
}

/// Every TCP connection to a SQL server has Nagle's algorithm off (`TCP_NODELAY`).
/// With it on, a statement written in two segments waits for the server's delayed
/// acknowledgement, about 40 ms on Linux: sqlx 0.9.0 left it on, and under a mixed
/// load on MariaDB that stall on 1 % of statements made thousands of fires seconds
/// late. The check reads the option from this process's own sockets to the server's
/// port, so it fails on a driver that stops setting it.
#[tokio::test]
async fn sql_connections_have_nagle_off() {
    for var in ["JOBWHEEL_POSTGRES_URL", "JOBWHEEL_MYSQL_URL"] {
        let Some(url) = server_url(var) else { continue };
        let b = BackendConfig::new(&url)
            .prefix("nd_")
            .connect()
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        // A statement, so the pool holds an open connection.
        b.store
            .get(&JobId::new("nodelay-probe").unwrap())
            .await
            .unwrap();
        let port = port_of(&url);
        let (mut found, mut delayed) = (0, Vec::new());
        for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
            let Some(fd) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            // SAFETY: the descriptor is only read (`getsockopt`, `getpeername`), never
            // closed; one another thread closes meanwhile fails the calls (skipped).
            let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
            let sock = socket2::SockRef::from(&fd);
            let Ok(peer) = sock.peer_addr() else { continue };
            if peer.as_socket().map(|a| a.port()) != Some(port) {
                continue;
            }
            match sock.tcp_nodelay() {
                Ok(true) => found += 1,
                Ok(false) => delayed.push(peer.as_socket()),
                Err(_) => {}
            }
        }
        assert!(
            delayed.is_empty(),
            "{var}: connections with Nagle on: {delayed:?}"
        );
        assert!(found > 0, "{var}: no connection to port {port} found");
        drop(b);
    }
}

/// The port of a `scheme://user@host:port/db` URL, or the scheme's default.
fn port_of(url: &str) -> u16 {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    let host = authority.rsplit('@').next().unwrap_or(authority);
    match host.rsplit_once(':') {
        Some((_, p)) => p.parse().unwrap(),
        None if url.starts_with("mysql") => 3306,
        None => 5432,
    }
}
