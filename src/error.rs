//! The crate's one error type.
//!
//! Every fallible operation in jobwheel returns [`Error`]. Backends keep their own
//! error types private and convert into the contract variants here, so the engine can
//! decide what to do from the variant alone (retry a [`Error::Backend`] marked
//! temporary, refuse an [`Error::Invalid`] at the edge, and so on).

use std::fmt::Display;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Boxed source error carried by [`Error::Backend`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can go wrong in jobwheel.
///
/// The variants are contracts: a backend must report "this id does not exist" as
/// [`Error::NotFound`], an input it will not store as [`Error::Invalid`], and a failure
/// of its server or driver as [`Error::Backend`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Input refused at the edge: the named field held a value that is not allowed.
    /// Nothing was stored.
    #[error("invalid {field} {value:?}: {reason}")]
    Invalid {
        /// Dotted name of the offending field, e.g. `job.id` or `schedule.cron`.
        field: &'static str,
        /// The refused value, rendered as text (truncated when very long).
        value: String,
        /// Why it was refused.
        reason: String,
    },
    /// The named object does not exist in the store.
    #[error("{what} {id:?} not found")]
    NotFound {
        /// Kind of object, e.g. `job`.
        what: &'static str,
        /// Its id.
        id: String,
    },
    /// The change conflicts with the object's state (a job with that id exists, a
    /// run is not running, an alarm event is not pending or failed). Nothing was
    /// written.
    #[error("{what} {id}: {reason}")]
    Conflict {
        /// Kind of object, e.g. `job`.
        what: &'static str,
        /// Its id.
        id: String,
        /// What conflicts.
        reason: String,
    },
    /// The caller may not make this change (a job in an executor group it is not
    /// limited to). Nothing was written.
    #[error("forbidden: {reason}")]
    Forbidden {
        /// Why.
        reason: String,
    },
    /// The job names a handler that is not registered on this scheduler. Nothing was
    /// stored.
    #[error("no handler {handler:?} is registered on this scheduler")]
    UnknownHandler {
        /// The handler name the job asked for.
        handler: String,
    },
    /// The job runs on a remote executor group this scheduler does not dispatch to.
    /// Nothing was stored.
    #[error("no executor group {group:?} is registered on this scheduler")]
    UnknownGroup {
        /// The group the job asked for.
        group: String,
    },
    /// `start` was called on a scheduler that is already running (or has run).
    #[error("scheduler {node:?} is already started")]
    AlreadyStarted {
        /// The node id of the scheduler.
        node: String,
    },
    /// The scheduler has stopped (or is stopping): the call was not carried out.
    #[error("the scheduler is stopped")]
    Stopped,
    /// A stored row could not be decoded. Calls that read many rows skip such rows
    /// and report them instead ([`Page::corrupt`](crate::store::Page::corrupt)); a
    /// call for that one row fails with this.
    #[error("stored {what} {id:?} cannot be read: {reason}")]
    Corrupt {
        /// Kind of row, e.g. `job`.
        what: &'static str,
        /// Its id, as stored.
        id: String,
        /// What failed to decode.
        reason: String,
    },
    /// The store's schema was migrated by a newer version of jobwheel than this one:
    /// running against it could misread or damage what that version wrote.
    #[error(
        "{backend} schema is at version {found}, newer than this jobwheel knows ({known}); upgrade jobwheel"
    )]
    SchemaTooNew {
        /// Backend name.
        backend: &'static str,
        /// The newest migration recorded in the store.
        found: i64,
        /// The newest migration this code has.
        known: i64,
    },
    /// The backend's server or driver failed. When `temporary` is true the same call
    /// may succeed later (connection loss, timeout, deadlock); the engine retries it
    /// with backoff.
    #[error("{backend} failed in {operation}: {source}")]
    Backend {
        /// Backend name.
        backend: &'static str,
        /// Operation that failed.
        operation: &'static str,
        /// Whether retrying may help.
        temporary: bool,
        /// The underlying error.
        #[source]
        source: BoxError,
    },
}

impl Error {
    /// Builds an [`Error::Invalid`]; long values are cut to 200 characters.
    pub fn invalid(field: &'static str, value: impl Display, reason: impl Into<String>) -> Self {
        let mut value = value.to_string();
        if value.len() > 200 {
            let mut cut = 200;
            while !value.is_char_boundary(cut) {
                cut -= 1;
            }
            value.truncate(cut);
            value.push('…');
        }
        Error::Invalid {
            field,
            value,
            reason: reason.into(),
        }
    }

    /// Builds an [`Error::NotFound`].
    pub fn not_found(what: &'static str, id: impl Display) -> Self {
        Error::NotFound {
            what,
            id: id.to_string(),
        }
    }

    /// Builds an [`Error::Backend`].
    pub fn backend(
        backend: &'static str,
        operation: &'static str,
        temporary: bool,
        source: impl Into<BoxError>,
    ) -> Self {
        Error::Backend {
            backend,
            operation,
            temporary,
            source: source.into(),
        }
    }

    /// True when retrying the same call later may succeed.
    pub fn is_temporary(&self) -> bool {
        matches!(
            self,
            Error::Backend {
                temporary: true,
                ..
            }
        )
    }

    /// The field named by an [`Error::Invalid`], if this is one.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            Error::Invalid { field, .. } => Some(field),
            _ => None,
        }
    }
}

/// `url` with any password (and user) replaced by `***`, for messages and logs.
pub(crate) fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let url = match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://***{}", &rest[at..]),
        None => url.to_string(),
    };
    redact_query_password(&url)
}

/// `url` with the value of every `password=` query parameter replaced by `***`.
fn redact_query_password(url: &str) -> String {
    let Some((head, query)) = url.split_once('?') else {
        return url.to_string();
    };
    let params: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
            _ => p.to_string(),
        })
        .collect();
    format!("{head}?{}", params.join("&"))
}

#[cfg(test)]
mod tests {
    use super::redact_url as redact;

    #[test]
    fn redact_hides_user_information_only() {
        assert_eq!(
            redact("redis://:s3cr3tpw@127.0.0.1:notaport/9"),
            "redis://***@127.0.0.1:notaport/9"
        );
        assert_eq!(
            redact("postgres://app:pw@db/app?x=a@b"),
            "postgres://***@db/app?x=a@b"
        );
        assert_eq!(redact("postgres://db/app"), "postgres://db/app");
        assert_eq!(
            redact("postgres://db/app?user=a&password=s3cr3t&sslmode=off"),
            "postgres://db/app?user=a&password=***&sslmode=off"
        );
        assert_eq!(redact("sqlite::memory:"), "sqlite::memory:");
        assert_eq!(
            redact("redis+cluster://:pw@10.0.0.1:7000,10.0.0.2:7000"),
            "redis+cluster://***@10.0.0.1:7000,10.0.0.2:7000"
        );
    }
}
