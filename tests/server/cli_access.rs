//! `jobwheel access`, run as a process: accounts and tokens added on the store (as
//! `cli:$USER`) are admitted by a running server without a restart, and refused once
//! removed; the same through the server with an admin token; bad input exits 2
//! naming the field, nothing stored.

use crate::support;

use serde_json::{Value, json};
use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use support::admin::{Api, Who, config, serve};

/// Runs `jobwheel args…` with `stdin` as its standard input, off the runtime's threads.
async fn run(args: &[&str], stdin: &str) -> Output {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let stdin = stdin.to_string();
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_jobwheel"))
            .env_remove("JOBWHEEL_URL")
            .env("USER", "cli-tester")
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("jobwheel runs");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap()
}

fn ok(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The status `who` gets for `GET /api/v1/session`.
async fn session_status(api: &Api, who: &Who) -> u16 {
    api.call(who, "GET", "/api/v1/session", "/api/v1/session", None)
        .await
        .status
}

/// Waits (bounded) until `who` gets `status`; how long it took.
async fn until_status(api: &Api, who: &Who, status: u16) -> Duration {
    let started = Instant::now();
    for _ in 0..100 {
        if session_status(api, who).await == status {
            return started.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the server never answered {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_from_the_command_line_needs_no_restart() {
    let dir = std::env::temp_dir().join(format!("jobwheel-cli-access-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.join("jobs.db").display());
    let (cfg, tokens) = config(&url, None, false, None);
    let server = serve(cfg).await;
    let api = Api::new(&server);
    let base = format!("http://{}", server.local_addr());
    let store = ["--url", url.as_str()];

    // On the store: a token, then an account whose password comes on standard input.
    let args = [
        &store[..],
        &[
            "--json",
            "access",
            "add-token",
            "deploy",
            "--role",
            "viewer",
        ],
    ]
    .concat();
    let added = ok(&run(&args, "").await);
    assert_eq!(
        (&added["name"], &added["source"]),
        (&json!("deploy"), &json!("store"))
    );
    let token = Who::Token(added["token"].as_str().unwrap().to_string());
    let took = until_status(&api, &token, 200).await;
    assert!(
        took < Duration::from_secs(3),
        "admitted within the refresh: {took:?}"
    );

    let args = [
        &store[..],
        &["access", "add-account", "rita", "--role", "operator"],
    ]
    .concat();
    let short = run(&args, "short\n").await;
    assert_eq!(short.status.code(), Some(2), "{short:?}");
    assert!(String::from_utf8_lossy(&short.stderr).contains("password"));
    ok(&run(&[&store[..], &["--json", "access", "list"]].concat(), "").await)
        .as_array()
        .unwrap()
        .iter()
        .for_each(|v| assert_ne!(v["name"], "rita", "nothing stored for a refused add"));
    let out = run(&args, "rita-password-1\n").await;
    assert!(out.status.success(), "{out:?}");
    // Tried once a second: a login the server refuses counts toward the account's
    // lock-out (5 failures), and the server knows the account within 2 s.
    let mut logged_in = false;
    for _ in 0..4 {
        let a = api
            .send(
                &Who::Anon,
                "POST",
                "/api/v1/session",
                "/api/v1/session",
                json!({"name": "rita", "password": "rita-password-1"}),
            )
            .await;
        if a.status == 200 {
            logged_in = true;
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(
        logged_in,
        "the account added on the store logs in to the running server"
    );
    let listed = ok(&run(&[&store[..], &["--json", "access", "list"]].concat(), "").await);
    let text = listed.to_string();
    assert!(
        !text.contains("argon2") && !text.contains("rita-password-1"),
        "{text}"
    );

    // Removed on the store: refused by the server within its refresh.
    let out = run(
        &[&store[..], &["access", "rm-token", "deploy"]].concat(),
        "",
    )
    .await;
    assert!(out.status.success(), "{out:?}");
    let took = until_status(&api, &token, 401).await;
    assert!(
        took < Duration::from_secs(3),
        "refused within the refresh: {took:?}"
    );
    let audit: Vec<(String, String)> = server
        .store()
        .audit(&jobwheel::AuditQuery::new(100).actor(Some("cli:cli-tester".into())))
        .await
        .unwrap()
        .into_iter()
        .rev()
        .map(|e| (e.entry.action, e.entry.target))
        .collect();
    assert_eq!(
        audit,
        [
            ("token.add", "deploy"),
            ("account.add", "rita"),
            ("token.remove", "deploy")
        ]
        .map(|(a, t)| (a.to_string(), t.to_string()))
    );

    // Through the server with an admin token: as its owner, refused at once once removed.
    let remote = ["--server", base.as_str(), "--token", tokens.admin.as_str()];
    let added = ok(&run(
        &[
            &remote[..],
            &[
                "--json",
                "access",
                "add-token",
                "t2",
                "--role",
                "operator",
                "--groups",
                "billing",
            ],
        ]
        .concat(),
        "",
    )
    .await);
    let t2 = Who::Token(added["token"].as_str().unwrap().to_string());
    assert_eq!(
        session_status(&api, &t2).await,
        200,
        "admitted at once by the server that added it"
    );
    let out = run(&[&remote[..], &["access", "rm-token", "t2"]].concat(), "").await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(session_status(&api, &t2).await, 401, "refused at once");
    let out = run(&[&remote[..], &["access", "rm-token", "ci"]].concat(), "").await;
    assert_eq!(
        out.status.code(),
        Some(1),
        "the configuration's token stays: {out:?}"
    );
    let out = run(
        &[&remote[..], &["access", "rm-token", "nobody"]].concat(),
        "",
    )
    .await;
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let viewer = ["--server", base.as_str(), "--token", tokens.viewer.as_str()];
    let out = run(&[&viewer[..], &["access", "list"]].concat(), "").await;
    assert_eq!(out.status.code(), Some(1), "a viewer may not: {out:?}");
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
