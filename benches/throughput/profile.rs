//! `--profile`: where the CPU of a drain goes. Reads `utime + stime` of the database
//! server's processes and of this process from `/proc/<pid>/stat` before and after the
//! drain; for Redis resets `INFO commandstats` after the setup and prints the commands
//! the drain ran per run; for PostgreSQL, with `pg_stat_statements` loaded, resets it
//! after the setup and prints each statement's calls, rows, execution time, WAL
//! records and bytes, and blocks dirtied per run. Linux only; on other systems it
//! prints nothing.

use std::collections::HashMap;

/// The process names whose CPU counts as the server's for a backend.
fn server_names(backend: &str) -> &'static [&'static str] {
    match backend {
        "postgres" => &["postgres"],
        "postgres+redis" => &["postgres", "redis-server"],
        "mysql" => &["mariadbd", "mysqld"],
        "redis" => &["redis-server"],
        _ => &[],
    }
}

/// CPU clock ticks (user + system) per process id, for processes named `names`.
fn ticks(names: &[&str]) -> HashMap<u32, u64> {
    let mut out = HashMap::new();
    if names.is_empty() {
        return out;
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some(t) = parse_stat(&stat, names) {
            out.insert(pid, t);
        }
    }
    out
}

/// `utime + stime` from one `/proc/<pid>/stat` line when the command is in `names`.
fn parse_stat(stat: &str, names: &[&str]) -> Option<u64> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = &stat[open + 1..close];
    // An empty list accepts any command: it is used for this process's own line.
    if !names.is_empty() && !names.contains(&comm) {
        return None;
    }
    let fields: Vec<&str> = stat[close + 2..].split_whitespace().collect();
    // After the command: state is field 3 of the line, utime 14 and stime 15.
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

fn own_ticks() -> u64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| parse_stat(&s, &[]))
        .unwrap_or(0)
}

/// A snapshot taken after the setup, before the schedulers start.
pub struct Profile {
    backend: String,
    server: HashMap<u32, u64>,
    own: u64,
}

impl Profile {
    /// Takes the snapshot (and resets Redis's command statistics and PostgreSQL's
    /// statement statistics).
    pub fn start(backend: &str) -> Profile {
        if backend.contains("redis") {
            redis_cli(&["config", "resetstat"]);
        }
        if backend.starts_with("postgres") {
            psql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
            psql("SELECT pg_stat_statements_reset()");
        }
        Profile {
            backend: backend.into(),
            server: ticks(server_names(backend)),
            own: own_ticks(),
        }
    }

    /// Prints the server's and the engines' CPU per run since [`Profile::start`], and
    /// for Redis the commands per run.
    pub fn report(&self, runs: u64, seconds: f64) {
        let hz = 100.0; // USER_HZ on Linux
        let after = ticks(server_names(&self.backend));
        let server: u64 = after
            .iter()
            .map(|(pid, t)| t - self.server.get(pid).copied().unwrap_or(0).min(*t))
            .sum();
        let own = own_ticks() - self.own;
        let per_run = |t: u64| t as f64 / hz / runs.max(1) as f64 * 1e6;
        println!(
            "profile | server CPU {:.2} s ({:.0} µs/run, {:.0} % of one core) | engines CPU {:.2} s ({:.0} µs/run)",
            server as f64 / hz,
            per_run(server),
            server as f64 / hz / seconds * 100.0,
            own as f64 / hz,
            per_run(own),
        );
        if self.backend.starts_with("postgres") {
            statements(runs.max(1));
        }
        if self.backend.contains("redis") {
            let stats = redis_cli(&["info", "commandstats"]);
            let mut rows: Vec<(String, u64, f64)> = stats
                .lines()
                .filter_map(|l| {
                    let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
                    let field = |k: &str| {
                        rest.split(',')
                            .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
                            .and_then(|v| v.parse::<f64>().ok())
                    };
                    Some((name.to_string(), field("calls")? as u64, field("usec")?))
                })
                .collect();
            rows.sort_by(|a, b| b.2.total_cmp(&a.2));
            let total: u64 = rows
                .iter()
                .filter(|r| !r.0.starts_with("eval") && !r.0.starts_with("config"))
                .map(|r| r.1)
                .sum();
            println!(
                "profile | redis commands per run {:.1} (inside scripts included)",
                total as f64 / runs.max(1) as f64
            );
            for (name, calls, usec) in rows.iter().take(8) {
                println!(
                    "profile |   {name:<16} {:>6.2} calls/run {:>7.1} µs/run",
                    *calls as f64 / runs.max(1) as f64,
                    usec / runs.max(1) as f64
                );
            }
        }
    }
}

fn redis_cli(args: &[&str]) -> String {
    std::process::Command::new("redis-cli")
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default()
}

/// Runs `sql` with `psql` on `JOBWHEEL_POSTGRES_URL`; its unaligned output.
fn psql(sql: &str) -> Option<String> {
    let url = std::env::var("JOBWHEEL_POSTGRES_URL").ok()?;
    let out = std::process::Command::new("psql")
        .args([url.as_str(), "-qAtX", "-F", "\t", "-c", sql])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).to_string())
}

/// PostgreSQL's statements of the drain, per run, from `pg_stat_statements`.
fn statements(runs: u64) {
    let Some(rows) = psql(
        "SELECT calls, rows, total_exec_time, wal_records, wal_bytes, shared_blks_dirtied, \
                left(regexp_replace(query, '\\s+', ' ', 'g'), 80) \
         FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
           AND query NOT LIKE '%pg_stat_statements%' ORDER BY total_exec_time DESC",
    ) else {
        println!(
            "profile | pg_stat_statements is not loaded (ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements', then restart PostgreSQL)"
        );
        return;
    };
    let per = |v: f64| v / runs as f64;
    let (mut wal, mut bytes, mut dirtied, mut ms) = (0.0, 0.0, 0.0, 0.0);
    let mut lines = Vec::new();
    for l in rows.lines() {
        let f: Vec<&str> = l.split('\t').collect();
        if f.len() < 7 {
            continue;
        }
        let n = |i: usize| f[i].parse::<f64>().unwrap_or(0.0);
        wal += n(3);
        bytes += n(4);
        dirtied += n(5);
        ms += n(2);
        lines.push(format!(
            "profile |   {:>6.3} calls {:>6.2} rows {:>6.1} µs {:>5.2} WAL rec {:>6.0} WAL B {:>5.2} dirtied | {}",
            per(n(0)),
            per(n(1)),
            per(n(2)) * 1000.0,
            per(n(3)),
            per(n(4)),
            per(n(5)),
            f[6]
        ));
    }
    println!(
        "profile | postgres statements per run: {:.1} µs executing, {:.2} WAL records, {:.0} WAL bytes, {:.2} blocks dirtied",
        per(ms) * 1000.0,
        per(wal),
        per(bytes),
        per(dirtied)
    );
    for l in lines.iter().take(12) {
        println!("{l}");
    }
}
