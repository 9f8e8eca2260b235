//! `--profile`: where the CPU of a drain goes. Reads `utime + stime` of the database
//! server's processes and of this process from `/proc/<pid>/stat` before and after the
//! drain, and for Redis resets `INFO commandstats` after the setup and prints the
//! commands the drain ran per run. Linux only; on other systems it prints nothing.

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
    /// Takes the snapshot (and resets Redis's command statistics).
    pub fn start(backend: &str) -> Profile {
        if backend.contains("redis") {
            redis_cli(&["config", "resetstat"]);
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
