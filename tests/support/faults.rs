//! A cluster of `fault_node` processes (examples/fault_node.rs) on one database, and
//! what the fault tests read back: the results rows each handler execution wrote, and
//! the store's run log.

use jobwheel::store::JobsExt as _;
use jobwheel::{
    Job, JobStore, MisfirePolicy, RetryPolicy, RunQuery, RunRecord, RunStatus, Schedule, Timestamp,
};
use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where the nodes keep their state.
#[derive(Clone, Debug)]
pub struct Target {
    /// `postgres`, `mysql`, `postgres+redis` or `redis` (the Redis store; the
    /// results table in PostgreSQL).
    pub backend: &'static str,
    pub url: String,
    pub redis: Option<String>,
}

/// One handler execution, as the node wrote it.
#[derive(Clone, Debug)]
pub struct Row {
    pub job: String,
    pub fire_at: i64,
    pub node: String,
    pub attempt: i32,
    /// The database's clock when the handler started.
    pub started_at: i64,
}

pub enum Db {
    Pg(jobwheel::postgres::PgStore),
    My(jobwheel::mysql::MySqlStore),
    /// The Redis store, and PostgreSQL for the results table.
    Redis(jobwheel::redis::RedisStore, jobwheel::postgres::PgStore),
}

impl Db {
    pub fn store(&self) -> &dyn JobStore {
        match self {
            Db::Pg(s) => s,
            Db::My(s) => s,
            Db::Redis(s, _) => s,
        }
    }

    async fn exec(&self, sql: String) {
        match self {
            Db::Pg(s) | Db::Redis(_, s) => sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(s.pool())
                .await
                .map(|_| ()),
            Db::My(s) => sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(s.pool())
                .await
                .map(|_| ()),
        }
        .unwrap();
    }
}

/// A node process. Its stdout lines are collected.
pub struct Node {
    pub name: String,
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Node {
    pub fn pid(&self) -> String {
        self.child.id().to_string()
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &self.pid()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig} {}", self.name);
    }

    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Waits up to 30 s for the process to end (after a signal); returns its exit
    /// success and the METRICS JSON it printed.
    pub fn stop(&mut self) -> (bool, Option<serde_json::Value>) {
        let end = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(
                Instant::now() < end,
                "{} did not stop within 30 s",
                self.name
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        std::thread::sleep(Duration::from_millis(100));
        let metrics = self
            .lines
            .lock()
            .unwrap()
            .iter()
            .find_map(|l| l.strip_prefix("METRICS "))
            .map(|j| serde_json::from_str(j).unwrap());
        (status.success(), metrics)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The example binary, built by `cargo test` beside the test binaries.
pub fn node_binary() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let bin = dir.join("examples").join("fault_node");
    assert!(
        bin.exists(),
        "{} is missing: cargo test builds it",
        bin.display()
    );
    bin
}

pub struct Cluster {
    pub target: Target,
    pub prefix: String,
    pub db: Db,
    pub nodes: Vec<Node>,
}

impl Cluster {
    /// Migrated tables (and the results table) under a fresh prefix.
    pub async fn new(target: &Target, name: &str) -> Cluster {
        let prefix = format!("f{:06x}_{name}_", fastrand::u32(..0xffffff));
        let db = match target.backend {
            "redis" => {
                let url = target.redis.as_deref().expect("a Redis URL");
                let s = jobwheel::redis::RedisStore::connect_with_prefix(url, &prefix)
                    .await
                    .unwrap();
                s.migrate().await.unwrap();
                let pg = jobwheel::postgres::PgStore::builder(&target.url)
                    .prefix(&prefix)
                    .build()
                    .await
                    .unwrap();
                Db::Redis(s, pg)
            }
            "mysql" => {
                let s = jobwheel::mysql::MySqlStore::builder(&target.url)
                    .prefix(&prefix)
                    .build()
                    .await
                    .unwrap();
                s.migrate().await.unwrap();
                Db::My(s)
            }
            _ => {
                let s = jobwheel::postgres::PgStore::builder(&target.url)
                    .prefix(&prefix)
                    .build()
                    .await
                    .unwrap();
                s.migrate().await.unwrap();
                Db::Pg(s)
            }
        };
        let key = if target.backend == "mysql" {
            "id BIGINT AUTO_INCREMENT PRIMARY KEY"
        } else {
            "id BIGSERIAL PRIMARY KEY"
        };
        db.exec(format!(
            "CREATE TABLE {prefix}results ({key}, job_id VARCHAR(200) NOT NULL, \
             fire_at BIGINT NOT NULL, node VARCHAR(200) NOT NULL, attempt INT NOT NULL, \
             token BIGINT NOT NULL, started_at BIGINT NOT NULL)"
        ))
        .await;
        Cluster {
            target: target.clone(),
            prefix,
            db,
            nodes: Vec::new(),
        }
    }

    /// Starts a node; `skewed` runs it under libfaketime 8 hours ahead (wall clock),
    /// in another time zone. The library is preloaded into the node itself, so the
    /// signals the tests send reach it.
    pub fn spawn(&mut self, name: &str, skewed: bool) {
        self.spawn_with(name, skewed, &[]);
    }

    /// [`spawn`](Self::spawn) with more arguments for `fault_node` (such as
    /// `--handlers`).
    pub fn spawn_with(&mut self, name: &str, skewed: bool, extra: &[&str]) {
        let mut cmd = Command::new(node_binary());
        cmd.args(extra);
        if skewed {
            let lib = super::libfaketime().expect("libfaketime is installed");
            cmd.env("LD_PRELOAD", lib)
                .env("FAKETIME", "+8h")
                .env("TZ", "Asia/Shanghai");
        }
        cmd.args(["--backend", self.target.backend, "--url", &self.target.url])
            .args(["--prefix", &self.prefix, "--node", name])
            .env(
                "RUST_LOG",
                std::env::var("JOBWHEEL_FAULTS_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::piped())
            .stderr(self.log_file(name));
        if let Some(r) = &self.target.redis {
            cmd.args(["--redis", r]);
        }
        let mut child = cmd.spawn().expect("spawn fault_node");
        let lines: Arc<Mutex<Vec<String>>> = Arc::default();
        let out = child.stdout.take().unwrap();
        let l = lines.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                l.lock().unwrap().push(line);
            }
        });
        let end = Instant::now() + Duration::from_secs(30);
        while !lines.lock().unwrap().iter().any(|l| l.starts_with("READY")) {
            assert!(
                Instant::now() < end,
                "node {name} did not start within 30 s"
            );
            assert!(
                child.try_wait().unwrap().is_none(),
                "node {name} exited at start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        self.nodes.push(Node {
            name: name.to_string(),
            child,
            lines,
        });
    }

    /// Where a node's stderr (its `warn` and `error` events) goes: a file per node
    /// under the system's temporary directory, read back by [`Cluster::log_tails`].
    fn log_path(&self, name: &str) -> std::path::PathBuf {
        std::env::temp_dir()
            .join("jobwheel-faults")
            .join(format!("{}{name}.log", self.prefix))
    }

    fn log_file(&self, name: &str) -> std::fs::File {
        let path = self.log_path(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::File::create(&path).unwrap()
    }

    /// The last `n` lines each node logged, for a failure's message.
    pub fn log_tails(&self, n: usize) -> String {
        let mut out = String::new();
        for node in &self.nodes {
            let path = self.log_path(&node.name);
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(n)..];
            out.push_str(&format!(
                "--- {} ({} lines in {}), last {}:\n{}\n",
                node.name,
                lines.len(),
                path.display(),
                tail.len(),
                tail.join("\n")
            ));
        }
        out
    }

    pub fn node(&mut self, name: &str) -> &mut Node {
        self.nodes.iter_mut().find(|n| n.name == name).unwrap()
    }

    /// `n` jobs firing every second from the next whole second + 1 s; handlers sleep
    /// `sleep_ms`; missed fires are caught up one by one, so every fire must run.
    pub async fn add_jobs(&self, n: usize, sleep_ms: u64) -> Timestamp {
        let now = self.db.store().now().await.unwrap();
        let first = Timestamp::from_millis((now.as_millis() / 1000 + 2) * 1000);
        for i in 0..n {
            let job = Job::builder(
                format!("j{i:02}"),
                "work",
                Schedule::every(Duration::from_secs(1)).unwrap(),
            )
            .payload(serde_json::json!({ "sleep_ms": sleep_ms }))
            .retry(RetryPolicy::new(5, Duration::from_millis(500), Duration::from_secs(2)).unwrap())
            .misfire(MisfirePolicy::CatchUp { max: 1000 })
            .build()
            .unwrap();
            self.db.store().upsert(&job, Some(first)).await.unwrap();
        }
        first
    }

    /// The running runs of `nodes` that started within `within` of the store's now.
    async fn started_within(&self, nodes: &[&str], within: Duration) -> Vec<RunRecord> {
        let now = self.db.store().now().await.unwrap();
        let running = self
            .db
            .store()
            .runs(&RunQuery::new().status(RunStatus::Running).limit(1000))
            .await
            .unwrap();
        running
            .into_iter()
            .filter(|r| {
                nodes.contains(&r.node.as_str()) && now.duration_since(r.started_at) < within
            })
            .collect()
    }

    /// Waits until one of `nodes` has a run that started within the last 150 ms (so
    /// it is still inside its handler), up to 10 s; returns that node.
    pub async fn wait_busy(&self, nodes: &[&str]) -> String {
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            let recent = self.started_within(nodes, Duration::from_millis(150)).await;
            if let Some(r) = recent.first() {
                return r.node.clone();
            }
            assert!(Instant::now() < end, "none of {nodes:?} ran anything");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Like [`wait_busy`](Self::wait_busy), for a running run started within the
    /// last 200 ms whose handler's log line the node has already written to the
    /// store; returns that node and run.
    pub async fn wait_logged(&self, nodes: &[&str]) -> (String, jobwheel::RunId) {
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            for r in self.started_within(nodes, Duration::from_millis(200)).await {
                if !self.db.store().lines(r.id, 0, 1).await.unwrap().is_empty() {
                    return (r.node, r.id);
                }
            }
            assert!(
                Instant::now() < end,
                "none of {nodes:?} logged a running run"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub async fn rows(&self) -> Vec<Row> {
        let sql = format!(
            "SELECT job_id, fire_at, node, attempt, started_at FROM {}results ORDER BY id",
            self.prefix
        );
        macro_rules! fetch {
            ($pool:expr) => {
                sqlx::query_as::<_, (String, i64, String, i32, i64)>(sqlx::AssertSqlSafe(sql))
                    .fetch_all($pool)
                    .await
                    .unwrap()
            };
        }
        let raw = match &self.db {
            Db::Pg(s) | Db::Redis(_, s) => fetch!(s.pool()),
            Db::My(s) => fetch!(s.pool()),
        };
        raw.into_iter()
            .map(|(job, fire_at, node, attempt, started_at)| Row {
                job,
                fire_at,
                node,
                attempt,
                started_at,
            })
            .collect()
    }

    pub async fn runs(&self) -> Vec<RunRecord> {
        self.db
            .store()
            .runs(&RunQuery::new().limit(1_000_000))
            .await
            .unwrap()
    }

    /// Stops every node still running (SIGTERM to all, then waits for each); returns
    /// the METRICS of those that printed it, asserting that each exits cleanly.
    pub fn stop_all(&mut self) -> BTreeMap<String, serde_json::Value> {
        for n in &mut self.nodes {
            if n.alive() {
                n.signal("TERM");
            }
        }
        let mut out = BTreeMap::new();
        for n in &mut self.nodes {
            let (ok, metrics) = n.stop();
            if let Some(m) = metrics {
                assert!(ok, "{} exited with an error", n.name);
                out.insert(n.name.clone(), m);
            }
        }
        out
    }

    pub async fn drop_tables(&self) {
        let tables: Vec<String> = super::SQL_TABLES
            .iter()
            .chain(&["results"])
            .map(|t| format!("{}{t}", self.prefix))
            .collect();
        self.db
            .exec(format!("DROP TABLE IF EXISTS {}", tables.join(", ")))
            .await;
        if let (Db::Redis(..), Some(url)) = (&self.db, &self.target.redis) {
            super::redis_keys::drop_keys(url, &self.prefix)
                .await
                .unwrap();
        }
    }
}

/// What the results say about every expected fire in `[from, to]` (whole seconds).
#[derive(Debug)]
pub struct Tally {
    pub expected: usize,
    pub missing: Vec<(String, i64)>,
    /// Executions beyond the first of one fire.
    pub duplicates: usize,
    pub executions: usize,
}

pub fn tally(rows: &[Row], jobs: usize, from: Timestamp, to: Timestamp) -> Tally {
    let mut seen: BTreeMap<(String, i64), usize> = BTreeMap::new();
    for r in rows {
        *seen.entry((r.job.clone(), r.fire_at)).or_default() += 1;
    }
    let mut expected = BTreeSet::new();
    for j in 0..jobs {
        let mut t = from.as_millis();
        while t <= to.as_millis() {
            expected.insert((format!("j{j:02}"), t));
            t += 1000;
        }
    }
    Tally {
        expected: expected.len(),
        missing: expected
            .iter()
            .filter(|k| !seen.contains_key(*k))
            .cloned()
            .collect(),
        duplicates: seen.values().map(|n| n - 1).sum(),
        executions: rows.len(),
    }
}

/// Runs that succeeded more than once for one fire.
pub fn completed_twice(runs: &[RunRecord]) -> Vec<(String, Timestamp)> {
    let mut done: BTreeMap<(String, Timestamp), usize> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.status == RunStatus::Succeeded) {
        *done.entry((r.job_id.to_string(), r.fire_at)).or_default() += 1;
    }
    done.into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(k, _)| k)
        .collect()
}
