//! The Redis store's scripts, each compiled once per store and sent by SHA after its
//! first use.

use super::scripts::{self, source};
use redis::Script;

/// The scripts, compiled once per store (each is sent by SHA after its first use).
pub(super) struct Scripts {
    pub(super) upsert: Script,
    pub(super) remove: Script,
    pub(super) set_enabled: Script,
    pub(super) trigger: Script,
    pub(super) due: Script,
    pub(super) start: Script,
    pub(super) finish: Script,
    pub(super) take_releases: Script,
    pub(super) queue_releases: Script,
    pub(super) drop_releases: Script,
    pub(super) releases: Script,
    pub(super) alarm_waiting: Script,
    pub(super) purge: Script,
    pub(super) append_lines: Script,
    pub(super) heartbeat: Script,
    pub(super) reap: Script,
    pub(super) deregister: Script,
    pub(super) orphaned: Script,
    pub(super) executor_beat: Script,
    pub(super) reap_executors: Script,
    pub(super) deregister_executor: Script,
    pub(super) purge_alarms: Script,
    pub(super) claim_alarms: Script,
    pub(super) complete_alarm: Script,
    pub(super) apply_alarm: Script,
    pub(super) append_audit: Script,
    pub(super) purge_audit: Script,
    pub(super) add_credential: Script,
    pub(super) remove_credential: Script,
}

impl Scripts {
    pub(super) fn new() -> Self {
        let s = |body| Script::new(&source(body));
        Scripts {
            upsert: s(scripts::UPSERT),
            remove: s(scripts::REMOVE),
            set_enabled: s(scripts::SET_ENABLED),
            trigger: s(scripts::TRIGGER),
            due: s(scripts::DUE),
            start: s(scripts::START),
            finish: s(scripts::FINISH),
            take_releases: s(super::release_scripts::TAKE_RELEASES),
            queue_releases: s(super::release_scripts::QUEUE_RELEASES),
            drop_releases: s(super::release_scripts::DROP_RELEASES),
            releases: s(super::release_scripts::RELEASES),
            alarm_waiting: s(super::release_scripts::ALARM_WAITING),
            purge: s(scripts::PURGE),
            append_lines: s(scripts::APPEND_LINES),
            heartbeat: s(scripts::HEARTBEAT),
            reap: s(scripts::REAP),
            deregister: s(scripts::DEREGISTER),
            orphaned: s(scripts::ORPHANED),
            executor_beat: s(scripts::EXECUTOR_BEAT),
            reap_executors: s(scripts::REAP_EXECUTORS),
            deregister_executor: s(scripts::DEREGISTER_EXECUTOR),
            purge_alarms: s(scripts::PURGE_ALARMS),
            claim_alarms: s(scripts::CLAIM_ALARMS),
            complete_alarm: s(scripts::COMPLETE_ALARM),
            apply_alarm: s(scripts::APPLY_ALARM),
            append_audit: s(scripts::APPEND_AUDIT),
            purge_audit: s(scripts::PURGE_AUDIT),
            add_credential: s(scripts::ADD_CREDENTIAL),
            remove_credential: s(scripts::REMOVE_CREDENTIAL),
        }
    }
}
