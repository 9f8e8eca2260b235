//! The admin API's errors: a status and a JSON body
//! `{"error": code, "message": text, "field": name?, "value": text?}`.

use crate::error::Error;
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// A refused or failed request.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[schemars(rename = "Error")]
pub struct ApiError {
    #[serde(skip)]
    status: StatusCode,
    /// A stable code scripts can match on (`invalid`, `not_found`, `forbidden`,
    /// `unauthenticated`, `csrf`, `read_only`, `conflict`, `too_large`, `unavailable`,
    /// `internal` …).
    error: &'static str,
    /// What happened, for people.
    message: String,
    /// For `invalid`: the field refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<String>,
    /// For `invalid`: the value refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<String>,
}

impl ApiError {
    /// An error with `status`, `code` and `message`.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            error: code,
            message: message.into(),
            field: None,
            value: None,
        }
    }

    /// 400 `invalid` naming `field` and `value`.
    pub fn invalid(field: &str, value: impl std::fmt::Display, reason: &str) -> Self {
        let value = value.to_string();
        ApiError {
            status: StatusCode::BAD_REQUEST,
            error: "invalid",
            message: format!("invalid {field} {value:?}: {reason}"),
            field: Some(field.to_string()),
            value: Some(value),
        }
    }

    /// 400 `invalid` naming `field` (a body that is not the JSON expected).
    pub fn invalid_field(field: &str, reason: &str) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            error: "invalid",
            message: format!("invalid {field}: {reason}"),
            field: Some(field.to_string()),
            value: None,
        }
    }

    /// 401 with `code`.
    pub fn unauthorized(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, code, message)
    }

    /// 403 `forbidden`.
    pub fn forbidden(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// 404 `not_found` for `what` `id`.
    pub fn not_found(what: &str, id: impl std::fmt::Display) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("{what} {id} not found"),
        )
    }

    /// The status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The stable code (`invalid`, `not_found` …).
    pub fn code(&self) -> &'static str {
        self.error
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        match &e {
            Error::Invalid { field, value, .. } => ApiError {
                status: StatusCode::BAD_REQUEST,
                error: "invalid",
                message: e.to_string(),
                field: Some(field.to_string()),
                value: Some(value.clone()),
            },
            Error::NotFound { .. } => {
                ApiError::new(StatusCode::NOT_FOUND, "not_found", e.to_string())
            }
            Error::Conflict { .. } => {
                ApiError::new(StatusCode::CONFLICT, "conflict", e.to_string())
            }
            Error::Forbidden { reason } => ApiError::forbidden(reason.clone()),
            Error::UnknownHandler { .. } | Error::UnknownGroup { .. } => {
                ApiError::new(StatusCode::BAD_REQUEST, "invalid", e.to_string())
            }
            Error::Backend {
                temporary: true, ..
            } => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                e.to_string(),
            ),
            _ => {
                tracing::error!(error = %e, "admin API request failed");
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
            }
        }
    }
}

/// The code of a refusal, kept on its response for the request log.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RefusalCode(pub(crate) &'static str);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status, Json(&self)).into_response();
        r.extensions_mut().insert(RefusalCode(self.error));
        r
    }
}
