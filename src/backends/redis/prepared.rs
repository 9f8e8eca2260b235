//! The Redis store's scripts, each compiled once per store and sent by SHA after its
//! first use, and how their arguments are written and their answers read.

use super::decode::corrupt;
use super::scripts::{self, source};
use super::{lease_scripts, registry_scripts};
use crate::error::Result;
use crate::record::{FireContext, FireSpan, FireState, TriggerKind};
use crate::time::Timestamp;
use redis::Script;

/// A script and its source: sent by hash, and on `NOSCRIPT` by source to the node
/// that serves its keys (see [`conn::eval`](super::conn::eval)).
pub(super) struct Lua {
    pub(super) script: Script,
    pub(super) code: String,
}

/// One call of a script: its arguments as the server will see them (`ARGV`).
pub(super) struct Call<'a> {
    pub(super) lua: &'a Lua,
    pub(super) args: Vec<Vec<u8>>,
}

impl Call<'_> {
    /// Appends `value` to the arguments.
    pub(super) fn arg<T: redis::ToRedisArgs>(&mut self, value: T) -> &mut Self {
        value.write_redis_args(&mut self.args);
        self
    }
}

/// The scripts, compiled once per store (each is sent by SHA after its first use).
pub(super) struct Scripts {
    pub(super) upsert: Lua,
    pub(super) remove: Lua,
    pub(super) set_enabled: Lua,
    pub(super) trigger: Lua,
    pub(super) due: Lua,
    pub(super) start: Lua,
    pub(super) finish: Lua,
    pub(super) claim: Lua,
    pub(super) acquire_jobs: Lua,
    pub(super) renew_or_release_jobs: Lua,
    pub(super) take_releases: Lua,
    pub(super) queue_releases: Lua,
    pub(super) drop_releases: Lua,
    pub(super) releases: Lua,
    pub(super) alarm_waiting: Lua,
    pub(super) accept_forwards: Lua,
    pub(super) purge: Lua,
    pub(super) append_lines: Lua,
    pub(super) heartbeat: Lua,
    pub(super) reap: Lua,
    pub(super) deregister: Lua,
    pub(super) orphaned: Lua,
    pub(super) orphaned_among: Lua,
    pub(super) executor_beat: Lua,
    pub(super) reap_executors: Lua,
    pub(super) deregister_executor: Lua,
    pub(super) purge_alarms: Lua,
    pub(super) claim_alarms: Lua,
    pub(super) complete_alarm: Lua,
    pub(super) apply_alarm: Lua,
    pub(super) append_audit: Lua,
    pub(super) purge_audit: Lua,
    pub(super) add_credential: Lua,
    pub(super) remove_credential: Lua,
}

impl Scripts {
    pub(super) fn new() -> Self {
        let s = |body| {
            let code = source(body);
            Lua {
                script: Script::new(&code),
                code,
            }
        };
        Scripts {
            upsert: s(scripts::UPSERT),
            remove: s(scripts::REMOVE),
            set_enabled: s(scripts::SET_ENABLED),
            trigger: s(scripts::TRIGGER),
            due: s(scripts::DUE),
            start: s(scripts::START),
            finish: s(scripts::FINISH),
            claim: s(lease_scripts::CLAIM),
            acquire_jobs: s(lease_scripts::ACQUIRE_JOBS),
            renew_or_release_jobs: s(lease_scripts::RENEW_OR_RELEASE_JOBS),
            take_releases: s(super::release_scripts::TAKE_RELEASES),
            queue_releases: s(super::release_scripts::QUEUE_RELEASES),
            drop_releases: s(super::release_scripts::DROP_RELEASES),
            releases: s(super::release_scripts::RELEASES),
            alarm_waiting: s(super::release_scripts::ALARM_WAITING),
            accept_forwards: s(super::release_scripts::ACCEPT_FORWARDS),
            purge: s(scripts::PURGE),
            append_lines: s(scripts::APPEND_LINES),
            heartbeat: s(registry_scripts::HEARTBEAT),
            reap: s(registry_scripts::REAP),
            deregister: s(registry_scripts::DEREGISTER),
            orphaned: s(registry_scripts::ORPHANED),
            orphaned_among: s(registry_scripts::ORPHANED_AMONG),
            executor_beat: s(registry_scripts::EXECUTOR_BEAT),
            reap_executors: s(registry_scripts::REAP_EXECUTORS),
            deregister_executor: s(registry_scripts::DEREGISTER_EXECUTOR),
            purge_alarms: s(registry_scripts::PURGE_ALARMS),
            claim_alarms: s(registry_scripts::CLAIM_ALARMS),
            complete_alarm: s(registry_scripts::COMPLETE_ALARM),
            apply_alarm: s(registry_scripts::APPLY_ALARM),
            append_audit: s(registry_scripts::APPEND_AUDIT),
            purge_audit: s(registry_scripts::PURGE_AUDIT),
            add_credential: s(registry_scripts::ADD_CREDENTIAL),
            remove_credential: s(registry_scripts::REMOVE_CREDENTIAL),
        }
    }
}

/// An optional instant as a script argument (empty when absent).
pub(super) fn flag_ms(t: Option<Timestamp>) -> String {
    ms(t)
}

pub(super) fn ms(t: Option<Timestamp>) -> String {
    t.map(|t| t.as_millis().to_string()).unwrap_or_default()
}

/// Reads the `(code, a, b)` triples that the start and finish scripts return.
pub(super) fn triples(out: Vec<String>, n: usize, what: &'static str) -> Result<Vec<[String; 3]>> {
    if out.len() != 3 * n {
        return Err(corrupt(what, format!("{} values for {n} items", out.len())));
    }
    let mut it = out.into_iter();
    Ok((0..n)
        .map(|_| {
            [
                it.next().unwrap_or_default(),
                it.next().unwrap_or_default(),
                it.next().unwrap_or_default(),
            ]
        })
        .collect())
}

/// The arguments of a run being started, as the start and claim scripts read them:
/// node, attempt, trigger, the covered fires and through when (both empty without a
/// span), the context (JSON, or empty).
pub(super) fn push_run(
    call: &mut Call<'_>,
    node: &str,
    attempt: u32,
    trigger: TriggerKind,
    covers: Option<FireSpan>,
    context: &FireContext,
) {
    call.arg(node)
        .arg(attempt)
        .arg(trigger.as_str())
        .arg(covers.map_or(String::new(), |c| c.fires.to_string()))
        .arg(covers.map_or(String::new(), |c| c.through.as_millis().to_string()))
        .arg(context.to_stored().unwrap_or_default());
}

pub(super) fn flag(b: bool) -> &'static str {
    if b { "1" } else { "0" }
}

/// The fields of a job's next fire as script arguments (`None`: nothing to fire):
/// at, trigger, attempt, resume, context.
pub(super) fn push_fire(call: &mut Call<'_>, fire: Option<&FireState>) {
    match fire {
        Some(f) => call
            .arg(f.at.as_millis())
            .arg(f.trigger.as_str())
            .arg(f.attempt)
            .arg(ms(f.resume_after))
            .arg(f.context.to_stored().unwrap_or_default()),
        None => call.arg("").arg("schedule").arg(0).arg("").arg(""),
    };
}
