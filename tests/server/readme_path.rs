//! The README's server path, run as written: the shell block after the
//! `server-path` marker in README.md, in a fresh directory, with `cargo run
//! --release --features server --` standing for the built `jobwheel` and the
//! server on a free port instead of 8080. Terminal 1's `serve` and terminal 2's
//! executor run in the background; terminal 3's commands in turn. It ends as the
//! README says: the run succeeded on the Python executor, and its log, as the
//! console shows it (`GET /api/v1/runs/{id}/log`), ends with `report: finished`.

use serde_json::Value;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// The README's block, line by line.
fn readme_block() -> Vec<String> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let start = readme
        .find("<!-- server-path:")
        .expect("README.md marks its server path");
    let block = &readme[start..];
    let open = block.find("```sh\n").unwrap() + "```sh\n".len();
    let close = open + block[open..].find("\n```").unwrap();
    block[open..close].lines().map(str::to_string).collect()
}

/// Runs `script` with `sh` in `dir`; its output, after asserting it succeeded.
async fn sh(dir: &Path, script: &str) -> String {
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(dir)
            .env_remove("JOBWHEEL_URL")
            .env_remove("JOBWHEEL_CONFIG")
            .env_remove("JOBWHEEL_PREFIX")
            .env_remove("JOBWHEEL_SERVER")
            .env_remove("JOBWHEEL_TOKEN")
            .output(),
    )
    .await
    .expect("finished within 60 s")
    .unwrap();
    assert!(
        out.status.success(),
        "{script}\nfailed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_server_path_ends_with_a_run_and_its_log() {
    if Command::new("python3")
        .arg("--version")
        .output()
        .await
        .is_err()
    {
        crate::support::skip("python3 is missing");
        return;
    }
    let bin = env!("CARGO_BIN_EXE_jobwheel");
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = std::env::temp_dir().join(format!("jobwheel-readme-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let lines = readme_block();
    let cargo = "cargo run --release --features server --";
    let serve = format!("{cargo} serve");
    assert!(lines.contains(&serve), "terminal 1 serves: {lines:?}");

    // Terminal 1.
    let log = std::fs::File::create(dir.join("serve.log")).unwrap();
    let mut server = Command::new(bin)
        .arg("serve")
        .current_dir(&dir)
        .env("JOBWHEEL_LISTEN", "127.0.0.1:0")
        .env_remove("JOBWHEEL_URL")
        .env_remove("JOBWHEEL_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut out = BufReader::new(server.stdout.take().unwrap()).lines();
    let (mut base, mut password) = (String::new(), String::new());
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = out.next_line().await.unwrap() {
            if let Some(rest) = line.strip_prefix("jobwheel serving on ") {
                base = rest.to_string();
            }
            if line.contains("log in as admin with password") {
                password = line.rsplit(' ').next().unwrap().to_string();
                return;
            }
        }
    })
    .await
    .expect("serve printed its address and the password");

    // Terminals 2 and 3: the rest of the block, as one script. The executor runs in
    // the background until its registration shows in its output; the server's
    // address is the one it printed.
    let mut script = format!("set -e\ncd {}\n", dir.display());
    let mut executor = None;
    for line in lines.iter().filter(|l| !l.starts_with('#') && **l != serve) {
        let line = line
            .replace(cargo, bin)
            .replace("http://127.0.0.1:8080", &base)
            .replace(" examples/", &format!(" {root}/examples/"));
        if line.starts_with("python3 ") {
            script.push_str(&format!(
                "{line} > executor.log 2>&1 &\necho $! > executor.pid\n\
                 for i in $(seq 100); do grep -q 'listening on' executor.log && break; sleep 0.1; done\n"
            ));
            executor = Some(line);
        } else {
            script.push_str(&line);
            script.push('\n');
        }
    }
    assert!(executor.is_some(), "terminal 2 starts the Python executor");
    sh(&dir, &script).await;

    // What the console shows: the run, succeeded on the executor, and its log.
    let client = reqwest::Client::new();
    let r = client
        .post(format!("{base}/api/v1/session"))
        .header("content-type", "application/json")
        .body(serde_json::json!({"name": "admin", "password": password}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let cookie = r.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let get = |path: String| {
        let (client, cookie) = (client.clone(), cookie.clone());
        async move {
            let r = client
                .get(path)
                .header("cookie", cookie)
                .send()
                .await
                .unwrap();
            let body: Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
            body
        }
    };
    let mut run = Value::Null;
    for _ in 0..200 {
        let runs = get(format!("{base}/api/v1/runs?job=report.daily")).await;
        if let Some(r) = runs["items"].as_array().and_then(|a| a.first())
            && r["status"] != "running"
        {
            run = r.clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let executor_log = std::fs::read_to_string(dir.join("executor.log")).unwrap_or_default();
    assert_eq!(
        run["status"], "succeeded",
        "the triggered run succeeded: {run}\nexecutor: {executor_log}"
    );
    let log = get(format!("{base}/api/v1/runs/{}/log", run["id"])).await;
    let lines: Vec<&str> = log["log"]["lines"]
        .as_array()
        .unwrap_or_else(|| panic!("a log: {log}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(lines.last(), Some(&"report: finished"), "{log}");
    assert!(
        lines[0].starts_with("[jobwheel] dispatched to http://127.0.0.1:"),
        "{lines:?}"
    );
    assert!(lines[1].contains("report for 2026-12-05"), "{lines:?}");

    // The executor stops and starts again (its memory is gone): the run's log was
    // stored with the run, so the console's API and the command line still show it.
    let pid = std::fs::read_to_string(dir.join("executor.pid")).unwrap();
    sh(
        &dir,
        &format!(
            "kill -TERM {pid}
for i in $(seq 100); do kill -0 {pid} 2>/dev/null || exit 0; sleep 0.1; done
exit 1
",
            pid = pid.trim()
        ),
    )
    .await;
    let executor = executor.unwrap();
    sh(
        &dir,
        &format!(
            "{executor} > executor2.log 2>&1 &
echo $! > executor.pid
             for i in $(seq 100); do grep -q 'listening on' executor2.log && break; sleep 0.1; done
"
        ),
    )
    .await;
    let again = get(format!("{base}/api/v1/runs/{}/log", run["id"])).await;
    assert_eq!(again["log"], log["log"], "the same log after the restart");
    let cli = sh(&dir, &format!("{bin} runs log {}", run["id"])).await;
    let cli: Vec<&str> = cli.lines().collect();
    assert_eq!(cli, lines, "the command line prints the stored lines");

    if let Ok(pid) = std::fs::read_to_string(dir.join("executor.pid")) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", pid.trim()])
            .status();
    }
    let _ = server.kill().await;
    let _ = std::fs::remove_dir_all(&dir);
}
