//! The verbs that read or change jobs, runs, nodes, executors and alarms, through a
//! running server's admin API with a bearer token (`--server`, `--token`) instead
//! of the store: the server checks the token's role and audits each change as
//! `token:<name>`.

use super::jobs::JobsCommand;
use super::store::{AlarmsArgs, AlarmsCommand, ExecutorsArgs, RunsArgs, RunsCommand};
use super::{Failure, Outcome, print_json, table};
use serde_json::Value;

/// A client of one server.
pub(crate) struct Api {
    base: String,
    token: String,
    http: reqwest::Client,
}

pub(crate) fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl Api {
    pub(crate) fn new(server: &str, token: Option<String>) -> Result<Api, Failure> {
        let token = token.ok_or_else(|| {
            Failure::Usage("--server needs a token: --token or JOBWHEEL_TOKEN".into())
        })?;
        let base = server.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(Failure::Usage(format!(
                "invalid --server {server:?}: must be an http(s):// URL"
            )));
        }
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .map_err(|e| Failure::Failed(e.to_string()))?;
        Ok(Api { base, token, http })
    }

    /// Calls `method /api/v1{path}`; the answer's JSON. A refusal maps to the exit
    /// codes: 400 → 2, 404 → 3, anything else → 1, with the server's message.
    pub(crate) async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<String>,
    ) -> Result<Value, Failure> {
        let method = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|e| Failure::Failed(e.to_string()))?;
        let mut r = self
            .http
            .request(method, format!("{}/api/v1{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            r = r.header("content-type", "application/json").body(b);
        }
        let resp = r
            .send()
            .await
            .map_err(|e| Failure::Failed(format!("cannot reach {}: {e}", self.base)))?;
        let status = resp.status().as_u16();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| Failure::Failed(e.to_string()))?;
        let value: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).map_err(|e| {
                Failure::Failed(format!("the server answered {status}, not JSON: {e}"))
            })?
        };
        match status {
            200..=299 => Ok(value),
            _ => {
                let message = value["message"].as_str().unwrap_or("refused").to_string();
                Err(match status {
                    400 => Failure::Usage(message),
                    404 => Failure::NotFound(message),
                    _ => Failure::Failed(format!(
                        "{status} {}: {message}",
                        value["error"].as_str().unwrap_or("")
                    )),
                })
            }
        }
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Prints `items` as a table of the `columns` (JSON pointers), or as JSON.
fn show(items: &Value, columns: &[(&str, &str)], json: bool) -> Outcome {
    if json {
        return print_json(items);
    }
    let rows: Vec<Vec<String>> = items
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|i| {
            columns
                .iter()
                .map(|(_, p)| text(i.pointer(p).unwrap_or(&Value::Null)))
                .collect()
        })
        .collect();
    let head: Vec<&str> = columns.iter().map(|c| c.0).collect();
    table::print(&head, &rows);
    Ok(())
}

const JOB_COLUMNS: &[(&str, &str)] = &[
    ("id", "/job/id"),
    ("handler", "/job/handler"),
    ("group", "/job/remote/group"),
    ("enabled", "/job/enabled"),
    ("next fire", "/next_fire_at"),
    ("running", "/running"),
];

pub(crate) async fn jobs(api: &Api, command: JobsCommand, json: bool) -> Outcome {
    let one = |v: Value| show(&Value::Array(vec![v]), JOB_COLUMNS, json);
    match command {
        JobsCommand::List { limit, after } => {
            let mut path = format!("/jobs?limit={}", limit.min(1000));
            if let Some(a) = after {
                path.push_str(&format!("&after={}", enc(&a)));
            }
            let page = api.call("GET", &path, None).await?;
            if json {
                return print_json(&page);
            }
            show(&page["items"], JOB_COLUMNS, false)
        }
        JobsCommand::Get { id } => one(api
            .call("GET", &format!("/jobs/{}", enc(&id)), None)
            .await?),
        JobsCommand::Deps { id } => {
            let v = api
                .call("GET", &format!("/jobs/{}/dependencies", enc(&id)), None)
                .await?;
            if json {
                return print_json(&v);
            }
            let d: crate::ops::Dependencies = serde_json::from_value(v)
                .map_err(|e| Failure::Failed(format!("unexpected answer: {e}")))?;
            super::jobs::print_dependencies(&d);
            Ok(())
        }
        JobsCommand::Release { id, instant } => {
            let at = super::jobs::instant(&instant)?;
            let body = serde_json::json!({ "fire_at": at }).to_string();
            let v = api
                .call("POST", &format!("/jobs/{}/release", enc(&id)), Some(body))
                .await?;
            if json {
                return print_json(&v);
            }
            let names: Vec<&str> = v["in_place_of"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            super::jobs::print_released(&id, at, &names);
            Ok(())
        }
        JobsCommand::Skip { id, instant } => {
            let at = super::jobs::instant(&instant)?;
            let body = serde_json::json!({ "fire_at": at }).to_string();
            let v = api
                .call("POST", &format!("/jobs/{}/skip", enc(&id)), Some(body))
                .await?;
            if json {
                return print_json(&v);
            }
            println!(
                "skipped {} for {at} ({} releases dropped)",
                table::escape(&id),
                v["dropped"]
            );
            Ok(())
        }
        JobsCommand::Pause { id } => one(api
            .call("POST", &format!("/jobs/{}/pause", enc(&id)), None)
            .await?),
        JobsCommand::Resume { id } => one(api
            .call("POST", &format!("/jobs/{}/resume", enc(&id)), None)
            .await?),
        JobsCommand::Trigger { id, payload } => {
            let body = match payload.as_deref() {
                Some(p) => {
                    let payload = super::jobs::parse_payload(p)?;
                    Some(serde_json::json!({ "payload": payload }).to_string())
                }
                None => None,
            };
            let record = api
                .call("POST", &format!("/jobs/{}/trigger", enc(&id)), body)
                .await?;
            one(record)?;
            if !json {
                println!(
                    "a manual fire; a node starts its run within a poll (`jobwheel runs --job {}` lists it)",
                    super::table::escape(&id)
                );
            }
            Ok(())
        }
        JobsCommand::Rm { id } => {
            let v = api
                .call("DELETE", &format!("/jobs/{}", enc(&id)), None)
                .await?;
            if json {
                print_json(&v)
            } else {
                println!("removed {}", table::escape(&id));
                Ok(())
            }
        }
        JobsCommand::Add { file } => {
            let def = super::jobs::read_definition(&file)?;
            one(api.call("POST", "/jobs", Some(def)).await?)
        }
        JobsCommand::Copy { id, to } => {
            let body = serde_json::json!({ "id": to }).to_string();
            one(api
                .call("POST", &format!("/jobs/{}/copy", enc(&id)), Some(body))
                .await?)
        }
        JobsCommand::Edit { id, file } => {
            let def = super::jobs::read_definition(&file)?;
            one(api
                .call("PUT", &format!("/jobs/{}", enc(&id)), Some(def))
                .await?)
        }
    }
}

pub(crate) async fn runs(api: &Api, args: &RunsArgs, json: bool) -> Outcome {
    if let Some(RunsCommand::Kill { id }) = &args.action {
        let v = api.call("POST", &format!("/runs/{id}/kill"), None).await?;
        if json {
            return print_json(&v);
        }
        println!("killed run {id} on {}", text(&v["killed_on"]));
        return Ok(());
    }
    if let Some(RunsCommand::Log { id, offset }) = &args.action {
        let v = api
            .call("GET", &format!("/runs/{id}/log?offset={offset}"), None)
            .await?;
        if json {
            return print_json(&v);
        }
        if let Some(lines) = v["log"]["lines"].as_array() {
            for l in lines {
                println!("{}", table::escape(l.as_str().unwrap_or_default()));
            }
        }
        return Ok(());
    }
    let mut path = format!("/runs?limit={}", args.limit.min(1000));
    if let Some(j) = &args.job {
        path.push_str(&format!("&job={}", enc(j)));
    }
    if let Some(s) = &args.status {
        path.push_str(&format!("&status={}", enc(s)));
    }
    let page = api.call("GET", &path, None).await?;
    show(
        &page["items"],
        &[
            ("run", "/id"),
            ("job", "/job_id"),
            ("status", "/status"),
            ("trigger", "/trigger"),
            ("attempt", "/attempt"),
            ("started", "/started_at"),
            ("node", "/node"),
            ("executor", "/executor"),
            ("error", "/error"),
        ],
        json,
    )
}

pub(crate) async fn nodes(api: &Api, json: bool) -> Outcome {
    let page = api.call("GET", "/nodes", None).await?;
    show(
        &page["items"],
        &[
            ("node", "/info/node_id"),
            ("host", "/info/host"),
            ("slots", "/info/capacity"),
            ("last beat", "/last_beat"),
        ],
        json,
    )
}

pub(crate) async fn executors(api: &Api, args: &ExecutorsArgs, json: bool) -> Outcome {
    let path = match &args.group {
        Some(g) => format!("/executors?group={}", enc(g)),
        None => "/executors".to_string(),
    };
    let page = api.call("GET", &path, None).await?;
    show(
        &page["items"],
        &[
            ("group", "/info/group"),
            ("address", "/info/address"),
            ("capacity", "/info/capacity"),
            ("last beat", "/last_beat"),
        ],
        json,
    )
}

pub(crate) async fn alarms(api: &Api, args: &AlarmsArgs, json: bool) -> Outcome {
    if let Some(action) = &args.action {
        let (id, verb, done) = match action {
            AlarmsCommand::Retry { id } => (id, "retry", "retried"),
            AlarmsCommand::Discard { id } => (id, "discard", "discarded"),
        };
        let v = api
            .call("POST", &format!("/alarms/{id}/{verb}"), None)
            .await?;
        if json {
            return print_json(&v);
        }
        println!("{done} alarm {id}");
        return Ok(());
    }
    let mut path = format!("/alarms?limit={}", args.limit.min(1000));
    if let Some(s) = &args.status {
        path.push_str(&format!("&status={}", enc(s)));
    }
    let page = api.call("GET", &path, None).await?;
    show(
        &page["items"],
        &[
            ("id", "/id"),
            ("job", "/event/job_id"),
            ("status", "/status"),
            ("attempts", "/attempts"),
            ("created", "/created_at"),
            ("last error", "/last_error"),
        ],
        json,
    )
}
