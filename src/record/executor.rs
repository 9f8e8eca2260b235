//! Executor instances as the registry keeps them: what an instance says about itself
//! when it beats, and when the store last heard it.

use crate::error::{Error, Result};
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

/// What a remote executor instance tells the registry about itself at each beat.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct ExecutorInfo {
    /// The executor group it serves (1-128 bytes, no control characters).
    pub group: String,
    /// Where schedulers reach it: an `http://` or `https://` base URL (at most 255
    /// bytes). With `group`, it identifies the instance.
    pub address: String,
    /// The handlers it serves (at most 1,000 names of 1-128 bytes).
    pub handlers: Vec<String>,
    /// Runs it takes at once (at least 1).
    pub capacity: u32,
    /// Its software version, as it reports it (at most 64 bytes).
    pub version: String,
}

/// Longest group name.
const MAX_GROUP_LEN: usize = 128;
/// Longest instance address.
const MAX_ADDRESS_LEN: usize = 255;
/// Most handlers an instance lists.
const MAX_HANDLERS: usize = 1_000;

impl ExecutorInfo {
    /// Checks every field against the limits in its doc; the error names the field
    /// and the value. Registration refuses an instance that fails it, so nothing
    /// half-valid is stored.
    pub fn validate(&self) -> Result<()> {
        let text = |field: &'static str, value: &str, max: usize| -> Result<()> {
            if value.is_empty() || value.len() > max {
                return Err(Error::invalid(
                    field,
                    value.escape_debug(),
                    format!("must be 1-{max} bytes"),
                ));
            }
            if value.chars().any(char::is_control) {
                return Err(Error::invalid(
                    field,
                    value.escape_debug(),
                    "must not contain control characters",
                ));
            }
            Ok(())
        };
        text("executor.group", &self.group, MAX_GROUP_LEN)?;
        text("executor.address", &self.address, MAX_ADDRESS_LEN)?;
        if !(self.address.starts_with("http://") || self.address.starts_with("https://")) {
            return Err(Error::invalid(
                "executor.address",
                self.address.escape_debug(),
                "must be an http:// or https:// URL",
            ));
        }
        if self.handlers.len() > MAX_HANDLERS {
            return Err(Error::invalid(
                "executor.handlers",
                self.handlers.len(),
                format!("at most {MAX_HANDLERS} handlers"),
            ));
        }
        for h in &self.handlers {
            text("executor.handlers", h, 128)?;
        }
        if self.capacity == 0 {
            return Err(Error::invalid("executor.capacity", 0, "must be at least 1"));
        }
        if self.version.len() > 64 || self.version.chars().any(char::is_control) {
            return Err(Error::invalid(
                "executor.version",
                self.version.escape_debug(),
                "at most 64 bytes, no control characters",
            ));
        }
        Ok(())
    }
}

/// A registered executor instance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct ExecutorRecord {
    /// What the instance said at its last beat.
    pub info: ExecutorInfo,
    /// Its first beat since it was last removed (store clock).
    pub registered_at: Timestamp,
    /// Its last beat (store clock).
    pub last_beat: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> ExecutorInfo {
        ExecutorInfo {
            group: "reports".into(),
            address: "http://127.0.0.1:9999".into(),
            handlers: vec!["daily".into()],
            capacity: 4,
            version: "1.0".into(),
        }
    }

    /// Makes one field bad.
    type Spoil = fn(&mut ExecutorInfo);

    #[test]
    fn a_bad_field_is_named_with_its_value() {
        assert!(info().validate().is_ok());
        let cases: [(&str, Spoil); 7] = [
            ("executor.group", |i| i.group.clear()),
            ("executor.group", |i| i.group = "a\nb".into()),
            ("executor.address", |i| i.address = "ftp://x".into()),
            ("executor.address", |i| {
                i.address = format!("http://{}", "x".repeat(300))
            }),
            ("executor.handlers", |i| i.handlers = vec![String::new()]),
            ("executor.capacity", |i| i.capacity = 0),
            ("executor.version", |i| i.version = "v".repeat(65)),
        ];
        for (field, spoil) in cases {
            let mut i = info();
            spoil(&mut i);
            let e = i.validate().unwrap_err();
            assert_eq!(e.field(), Some(field), "{e}");
        }
    }
}
