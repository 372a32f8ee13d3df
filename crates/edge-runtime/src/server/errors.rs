//! OpenAI-style error responses: `{"error": {"message", "type", "param", "code"}}`.

use crate::RuntimeError;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// An error answered to an HTTP client.
#[derive(Clone, Debug)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What went wrong, for the client.
    pub message: String,
    /// The request field at fault, if one is.
    pub param: Option<String>,
}

impl std::fmt::Display for ApiError {
    /// `message (HTTP status)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (HTTP {})", self.message, self.status.as_u16())
    }
}

impl std::error::Error for ApiError {}

impl ApiError {
    /// A 400 about the request (optionally naming the parameter at fault).
    pub fn bad_request(message: impl Into<String>, param: Option<&str>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            param: param.map(str::to_string),
        }
    }

    /// An error with any status.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            param: None,
        }
    }

    /// The OpenAI `type` of this error.
    fn kind(&self) -> &'static str {
        match self.status.as_u16() {
            400 | 401 | 413 | 422 => "invalid_request_error",
            403 => "permission_error",
            404 => "not_found_error",
            405 => "invalid_request_error",
            429 => "rate_limit_error",
            503 => "service_unavailable",
            _ => "server_error",
        }
    }

    /// The OpenAI `code` of this error.
    fn code(&self) -> Value {
        match self.status.as_u16() {
            413 => json!("request_too_large"),
            429 => json!("queue_full"),
            503 => json!("shutting_down"),
            401 => json!("invalid_api_key"),
            403 => json!("origin_not_allowed"),
            404 => json!("not_found"),
            405 => json!("method_not_allowed"),
            _ => Value::Null,
        }
    }

    /// The error body.
    pub fn body(&self) -> Value {
        json!({"error": {
            "message": self.message,
            "type": self.kind(),
            "param": self.param,
            "code": self.code(),
        }})
    }
}

impl From<RuntimeError> for ApiError {
    fn from(e: RuntimeError) -> Self {
        let status = match &e {
            RuntimeError::InvalidRequest(_)
            | RuntimeError::Template(_)
            | RuntimeError::Tokenizer(_)
            | RuntimeError::Cache(_)
            | RuntimeError::Spec(edge_spec::SpecError::InvalidRequest(_)) => {
                StatusCode::BAD_REQUEST
            }
            RuntimeError::QueueFull { .. } => StatusCode::TOO_MANY_REQUESTS,
            RuntimeError::ShutDown => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut res = (self.status, axum::Json(self.body())).into_response();
        if self.status == StatusCode::PAYLOAD_TOO_LARGE {
            // The body was not read to its end, so the connection cannot carry another
            // request: say so, or a client may reuse it and see a broken pipe.
            res.headers_mut().insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
        }
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_errors_map_to_statuses() {
        let full = ApiError::from(RuntimeError::QueueFull { capacity: 4 });
        assert_eq!(full.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(full.body()["error"]["type"], "rate_limit_error");
        let down = ApiError::from(RuntimeError::ShutDown);
        assert_eq!(down.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(down.body()["error"]["code"], "shutting_down");
        let bad = ApiError::from(RuntimeError::InvalidRequest("x".into()));
        assert_eq!(bad.status, StatusCode::BAD_REQUEST);
        assert!(bad.body()["error"]["param"].is_null());
    }
}
