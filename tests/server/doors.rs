//! Every change through every door. The library (a `Scheduler` on the store), the
//! admin API over HTTP, the command line against the store (reading its
//! `jobwheel.toml`) and the command line through a server each run every operation on
//! a store of their own, seeded alike; each must leave the same stored state, write
//! the same audit entry (actor aside) and refuse the same bad input the same way
//! (a payload over the configured limit, an unknown job, a paused job, a run nothing
//! runs). A trigger through the API of a server that polls every 30 s runs at once.

use crate::support;
use jobwheel::store::JobsExt as _;

use jobwheel::admin::new_token;
use jobwheel::admin::{Server, ServerConfig};
use jobwheel::ops::Actor;
use jobwheel::store::{AlarmChange, FinishRun, StartRun};
use jobwheel::{
    AlarmEvent, AlarmId, AlarmKind, AuditQuery, Error, Job, JobId, JobStore, RunId, RunStatus,
    Schedule, Scheduler, Timestamp, TriggerKind,
};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;
use support::admin::{GROUP_SECRET, Who, serve};

/// The payload limit every door is configured with.
const LIMIT: usize = 2048;

/// The doors a change comes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Door {
    Library,
    Api,
    CliStore,
    CliServer,
}

/// One door's rig: its store, and what the door needs to reach it.
struct Rig {
    door: Door,
    store: Arc<dyn JobStore>,
    dir: PathBuf,
    scheduler: Option<Scheduler>,
    server: Option<(Server, support::admin::Api, String)>,
}

/// What an operation did, as the test compares it across doors.
#[derive(Debug, PartialEq)]
enum Seen {
    /// Done: the job's state after it (definition, next fire; a manual fire without
    /// its instant), and the last audit entry (actor aside).
    Done { state: Value, audit: Value },
    /// Refused: the kind of refusal, and the field named for an invalid input.
    Refused {
        kind: &'static str,
        field: Option<String>,
    },
}

fn job(id: &str) -> Job {
    Job::builder(id, "noop", Schedule::cron("0 0 9 * * ?", "UTC").unwrap())
        .payload(json!({"n": 1}))
        .build()
        .unwrap()
}

fn definition(id: &str, expr: &str, payload: Value) -> Value {
    json!({
        "id": id,
        "handler": "noop",
        "schedule": {"kind": "cron", "expr": expr, "zone": "UTC"},
        "payload": payload,
    })
}

/// The configuration text a server or command line of the test reads; with `group`,
/// the executor group `billing` (a server then runs a scheduler node for it).
fn config_text(store: &str, token_sha: &str, group: bool) -> String {
    let mut text = format!(
        "listen = \"127.0.0.1:0\"\nstore = \"{store}\"\nsession_secret = \"{}\"\nmax_payload_bytes = {LIMIT}\n\
         [[tokens]]\nname = \"ci\"\nsha256 = \"{token_sha}\"\nrole = \"admin\"\n",
        "s".repeat(40)
    );
    if group {
        text.push_str(&format!(
            "[[groups]]\nname = \"billing\"\nsecret = \"{GROUP_SECRET}\"\n"
        ));
    }
    text
}

impl Rig {
    async fn new(door: Door) -> Rig {
        let dir = std::env::temp_dir().join(format!("jobwheel-doors-{}", fastrand::u64(..)));
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.join("jobs.db").display());
        let (token, sha) = new_token();
        std::fs::write(dir.join("jobwheel.toml"), config_text(&url, &sha, true)).unwrap();
        let backend = jobwheel::connect(&url).await.unwrap();
        let store = backend.store.clone();
        let (mut scheduler, mut server) = (None, None);
        match door {
            Door::Library => {
                let config = jobwheel::SchedulerConfig::default().max_payload_bytes(LIMIT);
                scheduler = Some(
                    Scheduler::builder()
                        .backend(backend)
                        .handler("noop", |_ctx: jobwheel::JobContext| async { Ok(()) })
                        .config(config)
                        .build()
                        .unwrap(),
                );
            }
            Door::Api | Door::CliServer => {
                // No executor group: the server runs no scheduler node, so nothing but
                // the test changes the store (a node would deliver the alarm event).
                let config = ServerConfig::from_toml(&config_text(&url, &sha, false)).unwrap();
                let s = serve(config).await;
                let api = support::admin::Api::new(&s);
                server = Some((s, api, token));
            }
            Door::CliStore => {}
        }
        Rig {
            door,
            store,
            dir,
            scheduler,
            server,
        }
    }

    /// Seeds the store alike for every door, unaudited: job `j`, its run 1 running,
    /// and a pending alarm event of job `a`.
    async fn seed(&self) {
        let s = &self.store;
        let now = s.now().await.unwrap();
        let j = job("j");
        let next = j.schedule().first_fire(now);
        s.upsert(&j, next).await.unwrap();
        let a = job("a");
        s.upsert(&a, next).await.unwrap();
        let start = |id: &str| StartRun {
            job_id: JobId::new(id).unwrap(),
            fire_at: next.unwrap(),
            version: 1,
            token: 1,
            node: "elsewhere".into(),
            attempt: 1,
            trigger: TriggerKind::Schedule,
            covers: None,
            context: Default::default(),
        };
        s.start_runs(&[start("j"), start("a")]).await.unwrap();
        let event = AlarmEvent {
            kind: AlarmKind::FinalFailure,
            job_id: JobId::new("a").unwrap(),
            handler: "noop".into(),
            run_id: Some(RunId(2)),
            fire_at: next.unwrap(),
            zone: "UTC".into(),
            attempt: 1,
            max_attempts: 1,
            node: "elsewhere".into(),
            duration_ms: None,
            error: Some("boom".into()),
            will_retry: false,
            next_fire_at: None,
            recipients: Vec::new(),
            occurred_at: now,
            suppressed: 0,
            covers: None,
            blocked: Vec::new(),
            waiting_for: Vec::new(),
        };
        let finish = FinishRun {
            run_id: RunId(2),
            job_id: JobId::new("a").unwrap(),
            token: 1,
            takeover: false,
            status: RunStatus::Failed,
            error: Some("boom".into()),
            will_retry: false,
            executor: None,
            version: 1,
            next: None,
            alarms: vec![event],
            releases: vec![],
            lease: jobwheel::store::LeaseEnd::Untouched,
        };
        s.finish_runs(&[finish]).await.unwrap();
    }

    /// The command line, as a process: against the store (in the directory of its
    /// `jobwheel.toml`, with no `--url`) or through the server with its token.
    async fn cli(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_jobwheel"));
        cmd.env_remove("JOBWHEEL_URL")
            .env_remove("JOBWHEEL_CONFIG")
            .env("USER", "tester")
            .current_dir(&self.dir);
        if let (Door::CliServer, Some((_, api, token))) = (self.door, &self.server) {
            cmd.args(["--server", &api.base, "--token", token]);
        }
        cmd.args(args);
        tokio::task::spawn_blocking(move || cmd.output().expect("jobwheel runs"))
            .await
            .unwrap()
    }
}

/// An operation, as each door spells it.
#[derive(Clone, Copy, Debug)]
enum Op {
    Create,
    CreateOversized,
    Update,
    Copy,
    Pause,
    PauseUnknown,
    Resume,
    Trigger,
    TriggerWithPayload,
    TriggerOversized,
    TriggerPaused,
    Remove,
    KillNotRunnable,
    AlarmRetry,
    AlarmDiscard,
}

/// The job an operation changes (its state is compared).
fn target(op: Op) -> &'static str {
    match op {
        Op::Create | Op::CreateOversized => "k",
        Op::Copy => "j2",
        Op::AlarmRetry | Op::AlarmDiscard => "a",
        _ => "j",
    }
}

fn big() -> Value {
    json!({"text": "x".repeat(LIMIT + 10)})
}

/// Runs `op` through the library and maps its outcome.
async fn by_library(s: &Scheduler, op: Op) -> Result<(), Error> {
    let ops = s.ops();
    let me = Actor::library();
    let id = |s: &str| JobId::new(s).unwrap();
    let from_json = |v: Value| Job::from_json(&v.to_string());
    match op {
        Op::Create => s
            .create(from_json(definition("k", "0 0 8 * * ?", json!({"k": 1})))?)
            .await
            .map(drop),
        Op::CreateOversized => s
            .create(from_json(definition("k", "0 0 8 * * ?", big()))?)
            .await
            .map(drop),
        Op::Update => ops
            .update(
                &me,
                &id("j"),
                from_json(definition("j", "0 0 7 * * ?", json!({"n": 2})))?,
            )
            .await
            .map(drop),
        Op::Copy => ops.copy(&me, &id("j"), "j2").await.map(drop),
        Op::Pause => s.pause("j").await,
        Op::PauseUnknown => s.pause("nope").await,
        Op::Resume => s.resume("j").await,
        Op::Trigger => s.trigger_now("j").await,
        Op::TriggerWithPayload => s.trigger_now_with("j", json!({"once": true})).await,
        Op::TriggerOversized => s.trigger_now_with("j", big()).await,
        Op::TriggerPaused => s.trigger_now("j").await,
        Op::Remove => s.remove("j").await.map(drop),
        Op::KillNotRunnable => s.kill(RunId(1)).await.map(drop),
        Op::AlarmRetry => s.alarm_change(AlarmChange::Retry(AlarmId(1))).await,
        Op::AlarmDiscard => s.alarm_change(AlarmChange::Discard(AlarmId(1))).await,
    }
}

/// The HTTP request of `op`: method, documented path, path, body.
fn request(op: Op) -> (&'static str, &'static str, String, Option<Value>) {
    match op {
        Op::Create => (
            "POST",
            "/api/v1/jobs",
            "/api/v1/jobs".into(),
            Some(definition("k", "0 0 8 * * ?", json!({"k": 1}))),
        ),
        Op::CreateOversized => (
            "POST",
            "/api/v1/jobs",
            "/api/v1/jobs".into(),
            Some(definition("k", "0 0 8 * * ?", big())),
        ),
        Op::Update => (
            "PUT",
            "/api/v1/jobs/{id}",
            "/api/v1/jobs/j".into(),
            Some(definition("j", "0 0 7 * * ?", json!({"n": 2}))),
        ),
        Op::Copy => (
            "POST",
            "/api/v1/jobs/{id}/copy",
            "/api/v1/jobs/j/copy".into(),
            Some(json!({"id": "j2"})),
        ),
        Op::Pause => (
            "POST",
            "/api/v1/jobs/{id}/pause",
            "/api/v1/jobs/j/pause".into(),
            None,
        ),
        Op::PauseUnknown => (
            "POST",
            "/api/v1/jobs/{id}/pause",
            "/api/v1/jobs/nope/pause".into(),
            None,
        ),
        Op::Resume => (
            "POST",
            "/api/v1/jobs/{id}/resume",
            "/api/v1/jobs/j/resume".into(),
            None,
        ),
        Op::Trigger | Op::TriggerPaused => (
            "POST",
            "/api/v1/jobs/{id}/trigger",
            "/api/v1/jobs/j/trigger".into(),
            None,
        ),
        Op::TriggerWithPayload => (
            "POST",
            "/api/v1/jobs/{id}/trigger",
            "/api/v1/jobs/j/trigger".into(),
            Some(json!({"payload": {"once": true}})),
        ),
        Op::TriggerOversized => (
            "POST",
            "/api/v1/jobs/{id}/trigger",
            "/api/v1/jobs/j/trigger".into(),
            Some(json!({"payload": big()})),
        ),
        Op::Remove => ("DELETE", "/api/v1/jobs/{id}", "/api/v1/jobs/j".into(), None),
        Op::KillNotRunnable => (
            "POST",
            "/api/v1/runs/{id}/kill",
            "/api/v1/runs/1/kill".into(),
            None,
        ),
        Op::AlarmRetry => (
            "POST",
            "/api/v1/alarms/{id}/retry",
            "/api/v1/alarms/1/retry".into(),
            None,
        ),
        Op::AlarmDiscard => (
            "POST",
            "/api/v1/alarms/{id}/discard",
            "/api/v1/alarms/1/discard".into(),
            None,
        ),
    }
}

/// The command line's arguments for `op` (a definition goes through a file in `dir`).
fn arguments(op: Op, dir: &std::path::Path) -> Vec<String> {
    let file = |def: Value| {
        let path = dir.join(format!("def-{}.json", fastrand::u32(..)));
        std::fs::write(&path, def.to_string()).unwrap();
        path.display().to_string()
    };
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match op {
        Op::Create => v(&[
            "jobs",
            "add",
            "--file",
            &file(definition("k", "0 0 8 * * ?", json!({"k": 1}))),
        ]),
        Op::CreateOversized => v(&[
            "jobs",
            "add",
            "--file",
            &file(definition("k", "0 0 8 * * ?", big())),
        ]),
        Op::Update => v(&[
            "jobs",
            "edit",
            "j",
            "--file",
            &file(definition("j", "0 0 7 * * ?", json!({"n": 2}))),
        ]),
        Op::Copy => v(&["jobs", "copy", "j", "--to", "j2"]),
        Op::Pause => v(&["jobs", "pause", "j"]),
        Op::PauseUnknown => v(&["jobs", "pause", "nope"]),
        Op::Resume => v(&["jobs", "resume", "j"]),
        Op::Trigger | Op::TriggerPaused => v(&["jobs", "trigger", "j"]),
        Op::TriggerWithPayload => v(&["jobs", "trigger", "j", "--payload", r#"{"once":true}"#]),
        Op::TriggerOversized => v(&["jobs", "trigger", "j", "--payload", &big().to_string()]),
        Op::Remove => v(&["jobs", "rm", "j"]),
        Op::KillNotRunnable => v(&["runs", "kill", "1"]),
        Op::AlarmRetry => v(&["alarms", "retry", "1"]),
        Op::AlarmDiscard => v(&["alarms", "discard", "1"]),
    }
}

/// A refusal's kind from a library error.
fn refusal_of(e: &Error) -> Seen {
    let (kind, field) = match e {
        Error::Invalid { field, .. } => ("invalid", Some(field.to_string())),
        Error::NotFound { .. } => ("not_found", None),
        Error::Conflict { .. } => ("conflict", None),
        other => panic!("an unexpected error: {other}"),
    };
    Seen::Refused { kind, field }
}

/// A refusal's kind from the command line: its exit code, and the field its message
/// names (`invalid FIELD …`).
fn refusal_of_cli(out: &Output) -> Seen {
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let kind = match out.status.code() {
        Some(2) => "invalid",
        Some(3) => "not_found",
        Some(1) => "conflict",
        other => panic!("exit {other:?}: {stderr}"),
    };
    let field = (kind == "invalid").then(|| {
        let rest = stderr.split("invalid ").nth(1).unwrap_or_default();
        rest.split([' ', ':'])
            .next()
            .unwrap_or_default()
            .to_string()
    });
    Seen::Refused { kind, field }
}

/// Runs `op` through `rig`'s door; `Ok` when it was done, or how it was refused.
async fn through(rig: &Rig, op: Op) -> Result<(), Seen> {
    match rig.door {
        Door::Library => by_library(rig.scheduler.as_ref().unwrap(), op)
            .await
            .map_err(|e| refusal_of(&e)),
        Door::Api => {
            let (_, api, token) = rig.server.as_ref().unwrap();
            let who = Who::Token(token.clone());
            let (method, doc, path, body) = request(op);
            let a = match body {
                Some(b) => api.send(&who, method, doc, &path, b).await,
                None => api.call(&who, method, doc, &path, None).await,
            };
            if (200..300).contains(&a.status) {
                return Ok(());
            }
            let kind = match a.status {
                400 => "invalid",
                404 => "not_found",
                409 => "conflict",
                s => panic!("{op:?}: {s} {}", a.body),
            };
            Err(Seen::Refused {
                kind,
                field: a.body["field"].as_str().map(str::to_string),
            })
        }
        Door::CliStore | Door::CliServer => {
            let args = arguments(op, &rig.dir);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = rig.cli(&args).await;
            if out.status.success() {
                Ok(())
            } else {
                Err(refusal_of_cli(&out))
            }
        }
    }
}

/// What `op` left: the target job's state and the newest audit entry, actor aside.
async fn seen(rig: &Rig, op: Op, done: Result<(), Seen>) -> Seen {
    if let Err(refused) = done {
        return refused;
    }
    let id = target(op);
    let rec = rig.store.get(&JobId::new(id).unwrap()).await.unwrap();
    // A manual fire is due at the store's now when it was triggered: its instant
    // differs from door to door.
    let mask = |mut v: Value| {
        if v["next"]["trigger"] == "manual" {
            v["next"]["at"] = json!("(now)");
        }
        v
    };
    let state = mask(
        rec.map(|r| serde_json::to_value(jobwheel::ops::JobSnapshot::of(&r)).unwrap())
            .unwrap_or(Value::Null),
    );
    let last = rig.store.audit(&AuditQuery::new(1)).await.unwrap();
    let mut audit = last
        .first()
        .map(|r| serde_json::to_value(&r.entry).unwrap())
        .unwrap_or(Value::Null);
    audit["actor"] = json!("(door)");
    for side in ["before", "after"] {
        let masked_side = mask(audit[side].clone());
        audit[side] = masked_side;
    }
    Seen::Done { state, audit }
}

/// The operations in the order they run on each door's store; the state each
/// leaves is where the next starts.
const SCRIPT: &[Op] = &[
    Op::CreateOversized,
    Op::Create,
    Op::Update,
    Op::Copy,
    Op::PauseUnknown,
    Op::TriggerOversized,
    Op::Trigger,
    Op::TriggerWithPayload,
    Op::Pause,
    Op::TriggerPaused,
    Op::Resume,
    Op::KillNotRunnable,
    Op::AlarmRetry,
    Op::AlarmDiscard,
    Op::Remove,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_is_the_same_through_every_door() {
    let mut results: Vec<(Door, Vec<Seen>)> = Vec::new();
    for door in [Door::Library, Door::Api, Door::CliStore, Door::CliServer] {
        let rig = Rig::new(door).await;
        rig.seed().await;
        let mut seen_here = Vec::new();
        for op in SCRIPT {
            let done = through(&rig, *op).await;
            seen_here.push(seen(&rig, *op, done).await);
        }
        // Every change was audited by this door's actor.
        let actors: std::collections::BTreeSet<String> = rig
            .store
            .audit(&AuditQuery::new(100))
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.entry.actor)
            .collect();
        let want = match door {
            Door::Library => "library",
            Door::Api | Door::CliServer => "token:ci",
            Door::CliStore => "cli:tester",
        };
        assert_eq!(actors.into_iter().collect::<Vec<_>>(), [want], "{door:?}");
        if let Some((server, ..)) = rig.server {
            server.shutdown().await;
        }
        let _ = std::fs::remove_dir_all(&rig.dir);
        results.push((door, seen_here));
    }
    let (_, library) = &results[0];
    // The refusals are the ones the script sets out to meet.
    let refusals: Vec<(&Op, &Seen)> = SCRIPT
        .iter()
        .zip(library)
        .filter(|(_, s)| matches!(s, Seen::Refused { .. }))
        .collect();
    let kinds: Vec<String> = refusals
        .iter()
        .map(|(op, s)| match s {
            Seen::Refused { kind, field } => {
                format!("{op:?}: {kind} {}", field.as_deref().unwrap_or(""))
            }
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "CreateOversized: invalid job.payload",
            "PauseUnknown: not_found ",
            "TriggerOversized: invalid payload",
            "TriggerPaused: conflict ",
            "KillNotRunnable: conflict ",
        ]
    );
    for (door, seen_there) in &results[1..] {
        for ((op, want), got) in SCRIPT.iter().zip(library).zip(seen_there) {
            assert_eq!(
                got, want,
                "{op:?} through {door:?} differs from the library"
            );
        }
    }
}

/// A trigger through the API of a server whose node polls every 30 s starts its run
/// within a second: the change woke the serving node's poller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trigger_through_the_api_wakes_the_serving_node() {
    use support::remote::{Seen as Ran, instance_builder};
    let dir = std::env::temp_dir().join(format!("jobwheel-wake-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.join("jobs.db").display());
    let (token, sha) = new_token();
    let mut config = ServerConfig::from_toml(&config_text(&url, &sha, true)).unwrap();
    config.poll_interval = Duration::from_secs(30);
    let server = serve(config).await;
    let api = support::admin::Api::new(&server);
    let who = Who::Token(token);
    let ran = Ran::default();
    let instance = instance_builder("i-1", &ran)
        .register_at(&api.base)
        .beat_every(Duration::from_millis(200))
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    let job = json!({
        "id": "woken",
        "handler": "echo",
        "schedule": {"kind": "cron", "expr": "0 0 0 1 1 ? 2099", "zone": "UTC"},
        "remote": {"group": "billing"},
    });
    let a = api
        .send(&who, "POST", "/api/v1/jobs", "/api/v1/jobs", job)
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
    // The node knows the instance (its registry refreshes on its own).
    for _ in 0..100 {
        let a = api
            .call(&who, "GET", "/api/v1/executors", "/api/v1/executors", None)
            .await;
        if !a.body["items"].as_array().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let asked = Timestamp::now();
    let a = api
        .call(
            &who,
            "POST",
            "/api/v1/jobs/{id}/trigger",
            "/api/v1/jobs/woken/trigger",
            None,
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let mut started = None;
    for _ in 0..50 {
        let runs = server
            .store()
            .runs(&jobwheel::RunQuery::new().job(JobId::new("woken").unwrap()))
            .await
            .unwrap();
        if let Some(r) = runs.first() {
            started = Some(r.started_at);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let started = started.expect("the triggered run started");
    let waited = started.duration_since(asked);
    println!(
        "WAKE: the triggered run started {} ms after the trigger",
        waited.as_millis()
    );
    assert!(
        waited < Duration::from_secs(1),
        "started {waited:?} after the trigger (the poll interval is 30 s)"
    );
    instance.shutdown().await;
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
