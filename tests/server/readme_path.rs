//! The README's server path, run as written: the shell block after the
//! `server-path` marker in README.md, from the repository for its install step and
//! then in a fresh directory of its own (`~/jobwheel-demo` under a temporary home),
//! with the built `jobwheel` on the `PATH` standing for the one `cargo install` puts
//! there and the server on a free port instead of 8080. Terminal 1's `serve` and
//! terminal 2's executor run in the background; terminal 3's commands in turn. It
//! ends as the README says: the run succeeded on the Python executor, and its log, as
//! the console shows it (`GET /api/v1/runs/{id}/log`), ends with `report: finished`
//! and stays after the executor restarts. And the README's `embed-deps` blocks, built
//! as a crate of their own with exactly those dependencies.

use serde_json::Value;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// The body of the first fenced block after `marker` in README.md whose fence
/// opens with `fence`.
fn readme_block_after(marker: &str, fence: &str) -> String {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let start = readme
        .find(marker)
        .unwrap_or_else(|| panic!("README.md marks {marker}"));
    let block = &readme[start..];
    let open = block.find(&format!("```{fence}\n")).unwrap() + fence.len() + 4;
    let close = open + block[open..].find("\n```").unwrap();
    block[open..close].to_string()
}

/// The README's server-path block, line by line.
fn readme_block() -> Vec<String> {
    readme_block_after("<!-- server-path:", "sh")
        .lines()
        .map(str::to_string)
        .collect()
}

/// Runs `script` with `sh` in `dir`, with `home` as `HOME` and `bin` first on the
/// `PATH`; its output, after asserting it succeeded.
async fn sh_in(dir: &Path, home: &Path, bin: &Path, script: &str) -> String {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(dir)
            .env("HOME", home)
            .env("PATH", path)
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
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = std::env::temp_dir().join(format!("jobwheel-readme-{}", fastrand::u64(..)));
    let (home, bin) = (tmp.join("home"), tmp.join("bin"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    // What `cargo install` leaves on the PATH: the built program.
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_jobwheel"), bin.join("jobwheel")).unwrap();
    let lines = readme_block();
    let secret = lines
        .iter()
        .find(|l| l.starts_with("export JOBWHEEL_GROUP_SECRET="))
        .cloned()
        .expect("terminal 2 exports the group's secret");
    let install = "cargo install --locked --path . --features server";
    assert!(
        lines.iter().any(|l| l == install),
        "the install step: {lines:?}"
    );
    let serve = lines
        .iter()
        .position(|l| l == "jobwheel serve")
        .expect("terminal 1 serves");
    let commands = |part: &[String]| -> Vec<String> {
        part.iter()
            .filter(|l| !l.starts_with('#') && l.as_str() != install)
            .cloned()
            .collect()
    };
    // The install step, in the repository; then terminal 1's directory.
    let before = commands(&lines[..serve]);
    let cd = before.last().cloned().unwrap();
    assert_eq!(
        cd, "cd ~/jobwheel-demo",
        "terminal 1 runs in the demo directory"
    );
    sh_in(
        root,
        &home,
        &bin,
        &format!("set -e\n{}\n", before.join("\n")),
    )
    .await;
    let dir = home.join("jobwheel-demo");
    assert!(dir.join("executor.py").exists(), "the executor was copied");

    // Terminal 1.
    let log = std::fs::File::create(tmp.join("serve.log")).unwrap();
    let mut server = Command::new(bin.join("jobwheel"))
        .arg("serve")
        .current_dir(&dir)
        .env("HOME", &home)
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
    let mut script = String::from("set -e\n");
    let mut executor = None;
    for line in commands(&lines[serve + 1..]) {
        let line = line.replace("http://127.0.0.1:8080", &base);
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
    let printed = sh_in(&home, &home, &bin, &script).await;
    assert!(
        printed.contains(r#""items":"#),
        "the token reads the runs through the API: {printed}"
    );
    let sh = |script: String| {
        let (dir, home, bin) = (dir.clone(), home.clone(), bin.clone());
        async move { sh_in(&dir, &home, &bin, &script).await }
    };

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
    // The runs list (the console's Runs page reads it) names the instance.
    let went = lines[0]["[jobwheel] dispatched to ".len()..]
        .split(' ')
        .next()
        .unwrap();
    assert_eq!(run["executor"], went, "{run}");

    // The executor stops and starts again (its memory is gone): the run's log was
    // stored with the run, so the console's API and the command line still show it.
    let pid = std::fs::read_to_string(dir.join("executor.pid")).unwrap();
    sh(format!(
        "kill -TERM {pid}\nfor i in $(seq 100); do kill -0 {pid} 2>/dev/null || exit 0; sleep 0.1; done\nexit 1\n",
        pid = pid.trim()
    ))
    .await;
    let executor = executor.unwrap();
    sh(format!(
        "{secret}\n{executor} > executor2.log 2>&1 &\necho $! > executor.pid\n\
         for i in $(seq 100); do grep -q 'listening on' executor2.log && exit 0; sleep 0.1; done\n\
         cat executor2.log; exit 1\n"
    ))
    .await;
    let again = get(format!("{base}/api/v1/runs/{}/log", run["id"])).await;
    assert_eq!(again["log"], log["log"], "the same log after the restart");
    // This server configures no alarm, and the job names alarm events: doctor says
    // where they go.
    let doctor = sh("jobwheel doctor".to_string()).await;
    assert!(
        doctor.contains("1 job(s) name alarm events; jobwheel.toml configures 0 alarm(s)")
            && doctor.contains("reach nobody"),
        "{doctor}"
    );
    let cli = sh(format!("jobwheel runs log {}", run["id"])).await;
    let cli: Vec<&str> = cli.lines().collect();
    assert_eq!(cli, lines, "the command line prints the stored lines");

    if let Ok(pid) = std::fs::read_to_string(dir.join("executor.pid")) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", pid.trim()])
            .status();
    }
    let _ = server.kill().await;
    let _ = std::fs::remove_dir_all(&tmp);
}

/// The README's `embed-deps` blocks as a crate of their own: its `[dependencies]`
/// exactly as written (jobwheel's path pointed at this repository) and its program as
/// `src/main.rs`, checked by cargo with this repository's `Cargo.lock` (offline), in a
/// target directory kept beside this build's so a later run is quick.
#[test]
fn the_readme_embedding_builds_with_exactly_its_dependencies() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let toml = readme_block_after("<!-- embed-deps:", "toml");
    let code = readme_block_after("<!-- embed-deps:", "rust,no_run");
    let path = r#"path = "../jobwheel""#;
    assert!(toml.contains(path), "{toml}");
    let deps = toml.replace(path, &format!("path = {:?}", root.display().to_string()));
    let target = Path::new(env!("CARGO_BIN_EXE_jobwheel"))
        .ancestors()
        .nth(2)
        .unwrap()
        .join("readme-embed");
    let dir = target.join("crate");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"readme-embed\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n[workspace]\n\n{deps}\n"
        ),
    )
    .unwrap();
    std::fs::write(dir.join("src/main.rs"), code).unwrap();
    std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    let out = std::process::Command::new(env!("CARGO"))
        .args(["check", "--offline", "--quiet"])
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", target.join("target"))
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the README's embedding does not build with its dependencies:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The README's first command, `cargo run --example quickstart`, as the example
/// `cargo test` built: it runs in an empty directory, needs no server, and ends by
/// itself with its run log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_quickstart_runs_and_ends_by_itself() {
    let block = readme_block_after("<!-- quickstart:", "sh");
    assert_eq!(block.trim(), "cargo run --example quickstart");
    let example = Path::new(env!("CARGO_BIN_EXE_jobwheel"))
        .parent()
        .unwrap()
        .join("examples/quickstart");
    if !example.exists() {
        crate::support::skip(
            "the examples are not built (`cargo test` with no --test builds them)",
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("jobwheel-quickstart-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        Command::new(&example).current_dir(&dir).output(),
    )
    .await
    .expect("the quickstart ends by itself within 60 s")
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("stopped (drained"), "{text}");
    assert!(
        text.lines().any(|l| l.contains(" succeeded ")),
        "its run log lists succeeded runs: {text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
