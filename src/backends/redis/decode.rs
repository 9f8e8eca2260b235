//! Reading the store's hashes back into records, and JSON for definitions and events.

use super::NAME;
use crate::error::{Error, Result};
use crate::job::{Job, JobId};
use crate::record::*;
use crate::time::Timestamp;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// A hash as `HGETALL` returns it.
pub(super) type Fields = HashMap<String, String>;

pub(super) fn corrupt(what: &'static str, detail: impl fmt::Display) -> Error {
    Error::backend(NAME, what, false, detail.to_string())
}

pub(super) fn field<'a>(h: &'a Fields, name: &str, what: &'static str) -> Result<&'a str> {
    h.get(name)
        .map(String::as_str)
        .ok_or_else(|| corrupt(what, format!("field {name} missing")))
}

pub(super) fn int(h: &Fields, name: &str, what: &'static str) -> Result<i64> {
    parse_int(field(h, name, what)?, what)
}

pub(super) fn parse_int(s: &str, what: &'static str) -> Result<i64> {
    s.parse()
        .map_err(|_| corrupt(what, format!("not an integer: {s:?}")))
}

pub(super) fn opt_int(h: &Fields, name: &str, what: &'static str) -> Result<Option<i64>> {
    match h.get(name).map(String::as_str) {
        None | Some("") => Ok(None),
        Some(s) => parse_int(s, what).map(Some),
    }
}

pub(super) fn opt_text(h: &Fields, name: &str) -> Option<String> {
    h.get(name).filter(|s| !s.is_empty()).cloned()
}

pub(super) fn decode<T: serde::de::DeserializeOwned>(text: &str, what: &'static str) -> Result<T> {
    serde_json::from_str(text).map_err(|e| Error::backend(NAME, what, false, e))
}

pub(super) fn encode<T: serde::Serialize>(v: &T) -> Result<String> {
    serde_json::to_string(v).map_err(|e| Error::backend(NAME, "encode", false, e))
}

/// A fire context kept under `field` (JSON, or empty for none); a hash written
/// before contexts existed keeps the payload override alone under `legacy`.
fn context(h: &Fields, field: &str, legacy: &str) -> Result<FireContext> {
    match h.get(field) {
        Some(text) => FireContext::from_stored(Some(text)),
        None => match h.get(legacy).filter(|t| !t.is_empty()) {
            Some(payload) => Ok(FireContext::with_payload(Some(decode(
                payload,
                "decode payload",
            )?))),
            None => Ok(FireContext::default()),
        },
    }
}

/// A job hash. A definition that cannot be read, or a field of the wrong shape, is
/// [`Error::Corrupt`]; the definition is read leniently ([`Job::from_stored`]).
pub(super) fn job_record(id: &str, h: &Fields) -> Result<JobRecord> {
    let bad = |e: &dyn fmt::Display| Error::Corrupt {
        what: "job",
        id: id.to_string(),
        reason: e.to_string(),
    };
    let w = "decode job";
    let job = Job::from_stored(field(h, "def", w).map_err(|e| bad(&e))?).map_err(|e| bad(&e))?;
    let int = |name: &str| int(h, name, w).map_err(|e| bad(&e));
    let opt = |name: &str| opt_int(h, name, w).map_err(|e| bad(&e));
    Ok(JobRecord {
        job: Arc::new(job),
        version: int("version")? as u64,
        next: match opt("next")? {
            None => None,
            Some(at) => Some(FireState {
                at: Timestamp::from_millis(at),
                trigger: TriggerKind::parse(field(h, "trigger", w).map_err(|e| bad(&e))?)
                    .unwrap_or_default(),
                attempt: int("attempt")?.max(0) as u32,
                resume_after: opt("resume")?.map(Timestamp::from_millis),
                context: context(h, "nctx", "npayload").map_err(|e| bad(&e))?,
            }),
        },
        last_token: int("token")? as u64,
        running: opt("running")?.map(RunId),
        created_at: Timestamp::from_millis(int("created")?),
        updated_at: Timestamp::from_millis(int("updated")?),
    })
}

pub(super) fn run_record(id: &str, h: &Fields) -> Result<RunRecord> {
    let w = "decode run";
    let status = field(h, "status", w)?;
    let fire_at = Timestamp::from_millis(int(h, "fire", w)?);
    let covers = FireSpan::from_stored(
        fire_at,
        opt_int(h, "cfires", w)?,
        opt_int(h, "cthrough", w)?,
    );
    Ok(RunRecord {
        id: RunId(parse_int(id, w)?),
        job_id: JobId::new(field(h, "job", w)?)?,
        fire_at,
        trigger: TriggerKind::parse(field(h, "trigger", w)?).unwrap_or_default(),
        node: field(h, "node", w)?.to_string(),
        attempt: int(h, "attempt", w)? as u32,
        token: int(h, "token", w)? as u64,
        status: RunStatus::parse(status)
            .ok_or_else(|| corrupt(w, format!("unknown status {status:?}")))?,
        started_at: Timestamp::from_millis(int(h, "started", w)?),
        ended_at: opt_int(h, "ended", w)?.map(Timestamp::from_millis),
        error: (h.get("has_error").map(String::as_str) == Some("1"))
            .then(|| h.get("error").cloned().unwrap_or_default()),
        will_retry: h.get("retry").map(String::as_str) == Some("1"),
        executor: h.get("executor").filter(|e| !e.is_empty()).cloned(),
        covers,
        context: context(h, "ctx", "payload")?,
    })
}

pub(super) fn decode_alarm(id: &str, h: &Fields) -> Result<AlarmRecord> {
    let w = "decode alarm";
    let status = field(h, "status", w)?;
    Ok(AlarmRecord {
        id: AlarmId(parse_int(id, w)?),
        event: decode(field(h, "event", w)?, w)?,
        status: AlarmStatus::parse(status)
            .ok_or_else(|| corrupt(w, format!("unknown status {status:?}")))?,
        attempts: int(h, "attempts", w)? as u32,
        next_attempt_at: opt_int(h, "next", w)?.map(Timestamp::from_millis),
        claimed_by: opt_text(h, "claimed_by"),
        claim_until: opt_int(h, "claim_until", w)?.map(Timestamp::from_millis),
        last_error: opt_text(h, "last_error"),
        created_at: Timestamp::from_millis(int(h, "created", w)?),
    })
}

/// A node hash, or why it cannot be read.
pub(super) fn decode_node(h: &Fields) -> std::result::Result<NodeRecord, String> {
    let w = "decode node";
    Ok(NodeRecord {
        info: decode(field(h, "info", w).map_err(|e| e.to_string())?, w)
            .map_err(|e| e.to_string())?,
        last_beat: Timestamp::from_millis(int(h, "beat", w).map_err(|e| e.to_string())?),
    })
}

/// Decodes an executor instance's hash.
pub(super) fn decode_executor(h: &Fields) -> std::result::Result<ExecutorRecord, String> {
    let w = "decode executor";
    let beat = |f| int(h, f, w).map_err(|e| e.to_string());
    Ok(ExecutorRecord {
        info: decode(field(h, "info", w).map_err(|e| e.to_string())?, w)
            .map_err(|e| e.to_string())?,
        registered_at: Timestamp::from_millis(beat("registered")?),
        last_beat: Timestamp::from_millis(beat("beat")?),
    })
}

/// The sorted-set member of an executor instance: `<group length>:<group><address>`,
/// which no two `(group, address)` pairs share.
pub(super) fn executor_member(group: &str, address: &str) -> String {
    format!("{}:{group}{address}", group.len())
}

/// The `(group, address)` of a member made by [`executor_member`].
pub(super) fn executor_key(member: &str) -> Option<(String, String)> {
    let (len, rest) = member.split_once(':')?;
    let len: usize = len.parse().ok()?;
    let group = rest.get(..len)?;
    Some((group.to_string(), rest[len..].to_string()))
}
