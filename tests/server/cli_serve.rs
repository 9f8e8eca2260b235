//! `jobwheel serve`, the binary: a first start with no configuration at all (an
//! embedded SQLite file, a generated `admin` password printed once, `jobwheel.toml`
//! written private), a restart that reads it back, and a server on PostgreSQL named
//! by `--config`. Each is logged in to over HTTP with what it printed or was given,
//! and stopped with SIGTERM.

use crate::support;

use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

/// A running `jobwheel serve` and its output so far.
struct Serving {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    printed: Vec<String>,
    base: String,
}

/// Starts `jobwheel serve args…` in `dir` on a free loopback port and waits (30 s at
/// most) for the line with its address. Its log (standard error) goes to
/// `dir/serve.log`.
async fn serve(dir: &Path, args: &[&str]) -> Serving {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("serve.log"))
        .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_jobwheel"))
        .arg("serve")
        .args(args)
        .current_dir(dir)
        .env("JOBWHEEL_LISTEN", "127.0.0.1:0")
        .env_remove("JOBWHEEL_URL")
        .env_remove("JOBWHEEL_CONFIG")
        .env_remove("JOBWHEEL_PREFIX")
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut printed = Vec::new();
    let base = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            printed.push(line.clone());
            if let Some(rest) = line.strip_prefix("jobwheel serving on ") {
                return rest.to_string();
            }
        }
        panic!("serve ended before it printed its address: {printed:?}");
    })
    .await
    .expect("serve printed its address within 30 s");
    Serving {
        child,
        lines,
        printed,
        base,
    }
}

impl Serving {
    /// Reads output lines until one contains `what` (5 s at most).
    async fn wait_for(&mut self, what: &str) -> String {
        tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                let line = self.lines.next_line().await.unwrap().expect("more output");
                self.printed.push(line.clone());
                if line.contains(what) {
                    return line;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no line with {what:?}: {:?}", self.printed))
    }

    /// Logs in; the answer's status and the session cookie.
    async fn log_in(&self, name: &str, password: &str) -> (u16, Option<String>) {
        let r = reqwest::Client::new()
            .post(format!("{}/api/v1/session", self.base))
            .header("content-type", "application/json")
            .body(json!({"name": name, "password": password}).to_string())
            .send()
            .await
            .unwrap();
        let cookie = r
            .headers()
            .get("set-cookie")
            .map(|v| v.to_str().unwrap().split(';').next().unwrap().to_string());
        (r.status().as_u16(), cookie)
    }

    async fn get(&self, cookie: &str, path: &str) -> (u16, Value) {
        let r = reqwest::Client::new()
            .get(format!("{}{path}", self.base))
            .header("cookie", cookie)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (
            status,
            serde_json::from_slice(&r.bytes().await.unwrap()).unwrap(),
        )
    }

    /// A line of `/proc/PID/status` (`VmHWM`: peak resident memory), in KiB.
    fn memory_kib(&self, field: &str) -> u64 {
        let pid = self.child.id().unwrap();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        status
            .lines()
            .find_map(|l| {
                l.strip_prefix(field)?
                    .trim_start_matches(':')
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
    }

    /// Sends SIGTERM and waits (30 s at most) for a clean exit.
    async fn stop(mut self) {
        let pid = self.child.id().unwrap().to_string();
        assert!(
            std::process::Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        self.wait_for("jobwheel: stopping").await;
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("serve stopped within 30 s")
            .unwrap();
        assert!(status.success(), "serve exits 0 on SIGTERM: {status}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_start_needs_no_configuration_and_a_restart_reads_it_back() {
    let dir = std::env::temp_dir().join(format!("jobwheel-serve-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let mut s = serve(&dir, &[]).await;
    let line = s.wait_for("log in as admin with password").await;
    let password = line.rsplit(' ').next().unwrap().to_string();
    assert!(password.len() >= 16, "a generated password: {line}");
    s.wait_for("attach an executor: group default").await;
    let config = dir.join("jobwheel.toml");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&config).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the written configuration is private");
    }
    assert!(
        !std::fs::read_to_string(&config)
            .unwrap()
            .contains(&password),
        "only the password's hash is written"
    );
    assert_eq!(s.log_in("admin", "not-it").await.0, 401);
    let (status, cookie) = s.log_in("admin", &password).await;
    assert_eq!(status, 200);
    let cookie = cookie.expect("a session cookie");
    let (status, jobs) = s.get(&cookie, "/api/v1/jobs").await;
    assert_eq!(
        (status, jobs["items"].as_array().map(Vec::len)),
        (200, Some(0))
    );
    let (status, groups) = s.get(&cookie, "/api/v1/executors").await;
    assert_eq!((status, &groups["groups"]), (200, &json!(["default"])));
    s.stop().await;
    assert!(dir.join("jobwheel.db").exists(), "the store is a file here");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // The database and whatever SQLite wrote beside it (-wal, -shm) are private
        // (serve.log is this test's record of the process's output).
        let written: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(Result::unwrap)
            .filter(|e| e.file_name().to_string_lossy().starts_with("jobwheel."))
            .collect();
        assert!(written.len() >= 2, "jobwheel.toml and jobwheel.db at least");
        for entry in written {
            let mode = entry.metadata().unwrap().permissions().mode();
            assert_eq!(
                mode & 0o077,
                0,
                "{} is readable by others ({:o})",
                entry.file_name().to_string_lossy(),
                mode & 0o777
            );
        }
    }

    // A second start reads the file it wrote: no new password, the old one works.
    let mut s = serve(&dir, &[]).await;
    s.wait_for("log in with an account of the configuration")
        .await;
    assert_eq!(s.log_in("admin", &password).await.0, 200);
    s.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_runs_on_postgres_from_its_configuration_file() {
    let Some(url) = support::server_url("JOBWHEEL_POSTGRES_URL") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("jobwheel-serve-pg-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let prefix = format!("serve{}_", fastrand::u32(..));
    let hash = jobwheel::admin::hash_password("pg-password-1");
    let text = format!(
        "listen = \"127.0.0.1:8080\"\nstore = \"{url}\"\nprefix = \"{prefix}\"\nsession_secret = \"{:032x}\"\n\n[[users]]\nname = \"ops\"\npassword_hash = \"{hash}\"\nrole = \"viewer\"\n\n[[groups]]\nname = \"pg\"\nsecret = \"{:032x}\"\n",
        fastrand::u128(..),
        fastrand::u128(..)
    );
    std::fs::write(dir.join("pg.toml"), text).unwrap();
    let s = serve(&dir, &["--config", "pg.toml"]).await;
    let (status, cookie) = s.log_in("ops", "pg-password-1").await;
    assert_eq!(status, 200);
    let cookie = cookie.unwrap();
    let mut nodes = Value::Null;
    for _ in 0..50 {
        let (status, n) = s.get(&cookie, "/api/v1/nodes").await;
        assert_eq!(status, 200);
        nodes = n;
        if nodes["items"].as_array().is_some_and(|a| !a.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        nodes["items"].as_array().map(Vec::len),
        Some(1),
        "its scheduler node is registered in the PostgreSQL store: {nodes}"
    );
    assert!(
        !dir.join("jobwheel.toml").exists(),
        "nothing written beside it"
    );
    s.stop().await;
    support::drop_pg_tables(&url, &prefix).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Logins under attack, against the program as run: a failed login is audited and
/// logged; 40 parallel guesses at one account get no more password checks than
/// sequential ones would (5, then 429), whatever their order; and bursts of logins
/// for unknown names leave the server's peak memory bounded (each password check
/// holds argon2's 19 MiB, and only `login_concurrency` run at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_logins_get_no_more_guesses_and_bounded_memory() {
    let dir = std::env::temp_dir().join(format!("jobwheel-logins-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let mut s = serve(&dir, &[]).await;
    let line = s.wait_for("log in as admin with password").await;
    let password = line.rsplit(' ').next().unwrap().to_string();

    // One failed login: audited as anonymous, naming the account tried, and logged.
    assert_eq!(s.log_in("admin", "wrong-password").await.0, 401);
    let (status, cookie) = s.log_in("admin", &password).await;
    assert_eq!(status, 200);
    let (status, audit) = s
        .get(&cookie.unwrap(), "/api/v1/audit?actor=anonymous")
        .await;
    assert_eq!(status, 200);
    let failed: Vec<&Value> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "session.login_failed")
        .collect();
    assert_eq!(failed.len(), 1, "{audit}");
    assert_eq!(failed[0]["target"], "admin");
    // The console asks who is logged in before it shows the login page: a request
    // with no credentials is refused, and logged, but not as a warning.
    let asked = reqwest::get(format!("{}/api/v1/session", s.base))
        .await
        .unwrap();
    assert_eq!(asked.status().as_u16(), 401);
    let log = until_logged(&dir, "without credentials").await;
    let line = |needle: &str| {
        log.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle} in {log}"))
            .to_string()
    };
    assert!(line("failed login").contains("WARN"), "{log}");
    assert!(
        line("admin API request refused").contains("WARN")
            && line("admin API request refused").contains("/api/v1/session"),
        "the refused login is a warning: {log}"
    );
    let quiet = line("admin API request without credentials");
    assert!(
        quiet.contains("INFO") && quiet.contains("/api/v1/session"),
        "{quiet}"
    );

    // 40 parallel logins to one account, the right password among them.
    let right = fastrand::usize(..40);
    let client = reqwest::Client::new();
    let attempts = (0..40).map(|i| {
        let pw = if i == right {
            password.clone()
        } else {
            format!("guess-{i}")
        };
        let (client, url) = (client.clone(), format!("{}/api/v1/session", s.base));
        async move {
            let r = client
                .post(url)
                .header("content-type", "application/json")
                .body(json!({"name": "admin", "password": pw}).to_string())
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let body: Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
            (status, body["error"].as_str().unwrap_or("").to_string())
        }
    });
    let answers = futures::future::join_all(attempts).await;
    let checked = answers
        .iter()
        .filter(|(s, _)| *s == 200 || *s == 401)
        .count();
    let refused = answers.iter().filter(|(s, _)| *s == 429).count();
    println!("40 parallel logins: {checked} checked, {refused} refused 429");
    assert!(
        checked <= 5 && checked + refused == 40,
        "at most 5 passwords checked, the rest refused: {answers:?}"
    );

    // Bursts of logins for unknown names with long passwords: every one answered
    // (401 or 429 busy), and the peak memory bounded.
    let before = s.memory_kib("VmHWM");
    let mut tally = std::collections::BTreeMap::<u16, usize>::new();
    for round in 0..3 {
        let burst = (0..150).map(|i| {
            let (client, url) = (client.clone(), format!("{}/api/v1/session", s.base));
            async move {
                let body =
                    json!({"name": format!("nobody-{round}-{i}"), "password": "x".repeat(4096)});
                client
                    .post(url)
                    .header("content-type", "application/json")
                    .body(body.to_string())
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            }
        });
        for status in futures::future::join_all(burst).await {
            *tally.entry(status).or_default() += 1;
        }
    }
    let peak = s.memory_kib("VmHWM");
    println!(
        "450 logins for unknown names: answers {tally:?}; peak memory {} MiB (before the bursts {} MiB)",
        peak / 1024,
        before / 1024
    );
    assert_eq!(
        tally.keys().copied().collect::<Vec<_>>(),
        vec![401, 429],
        "each login is checked (401) or refused at once (429): {tally:?}"
    );
    assert!(
        peak < 200 * 1024,
        "peak memory {} MiB: password checks are bounded to login_concurrency × 19 MiB",
        peak / 1024
    );
    s.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// serve.log in `dir` once it holds `needle` (within 5 s).
async fn until_logged(dir: &std::path::Path, needle: &str) -> String {
    for _ in 0..100 {
        let log = std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
        if log.contains(needle) {
            return log;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("serve.log never held {needle:?}");
}
