//! A job's id.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

/// Longest job id, in characters.
pub const MAX_JOB_ID_LEN: usize = 200;

/// A job's id: 1 to 200 characters of `[A-Za-z0-9._:-]`. Cheap to clone.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct JobId(Arc<str>);

impl JobId {
    /// Validates and wraps an id: 1-[`MAX_JOB_ID_LEN`] of `[A-Za-z0-9._:-]`, not
    /// only dots (so every id is one path segment of the admin API's URLs).
    /// Errors: [`Error::Invalid`] on `job.id`.
    pub fn new(id: impl AsRef<str>) -> Result<Self> {
        let id = id.as_ref();
        if id.is_empty() || id.len() > MAX_JOB_ID_LEN {
            return Err(Error::invalid(
                "job.id",
                id,
                format!("must be 1-{MAX_JOB_ID_LEN} characters, found {}", id.len()),
            ));
        }
        if let Some(c) = id
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
        {
            return Err(Error::invalid(
                "job.id",
                id,
                format!("character {c:?} is not allowed; use [A-Za-z0-9._:-]"),
            ));
        }
        if id.bytes().all(|b| b == b'.') {
            // `.` and `..` are dot-segments: a URL normalizes them away (`%2E` too),
            // so no API path, console page or command could address such a job.
            return Err(Error::invalid(
                "job.id",
                id,
                "must not be only dots: `.` and `..` cannot be a URL path segment",
            ));
        }
        Ok(JobId(id.into()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl Borrow<str> for JobId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for JobId {
    type Error = Error;
    fn try_from(s: String) -> Result<Self> {
        JobId::new(s)
    }
}

impl TryFrom<&str> for JobId {
    type Error = Error;
    fn try_from(s: &str) -> Result<Self> {
        JobId::new(s)
    }
}

impl From<JobId> for String {
    fn from(id: JobId) -> String {
        id.0.to_string()
    }
}

/// A job id: 1-200 characters of `[A-Za-z0-9._:-]`.
#[cfg(feature = "openapi")]
impl schemars::JsonSchema for JobId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "JobId".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^[A-Za-z0-9._:-]+$",
            "description": "A job id: letters, digits, `.`, `_`, `:` and `-`.",
        })
    }
}
