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
    /// The OpenAI `code`, where the status alone does not say it.
    pub code: Option<&'static str>,
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
            code: None,
        }
    }

    /// An error with any status.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            param: None,
            code: None,
        }
    }

    /// The OpenAI `type` of this error.
    fn kind(&self) -> &'static str {
        match self.status.as_u16() {
            400 | 401 | 408 | 413 | 422 => "invalid_request_error",
            403 => "permission_error",
            404 => "not_found_error",
            405 => "invalid_request_error",
            429 => "rate_limit_error",
            503 => "service_unavailable",
            500 => "server_error",
            _ => "server_error",
        }
    }

    /// The OpenAI `code` of this error.
    fn code(&self) -> Value {
        if let Some(code) = self.code {
            return json!(code);
        }
        match self.status.as_u16() {
            408 => json!("body_timeout"),
            413 => json!("request_too_large"),
            429 => json!("queue_full"),
            503 => json!("shutting_down"),
            401 => json!("invalid_api_key"),
            403 => json!("origin_not_allowed"),
            404 => json!("not_found"),
            405 => json!("method_not_allowed"),
            504 => json!("request_timeout"),
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

/// The status of an engine error: the request's fault (400), the server's capacity
/// now (429, 503), or the server's own failure (500). Exhaustive over this crate's
/// errors, so a new variant must choose; the wrapped errors of other crates are
/// matched variant by variant too, with a 500 fallback for variants they add later.
fn status_of(e: &RuntimeError) -> StatusCode {
    match e {
        RuntimeError::EmptyPrompt
        | RuntimeError::TokenOutOfVocab { .. }
        | RuntimeError::PromptPastContext { .. }
        | RuntimeError::ReusePointOutsidePrompt { .. }
        | RuntimeError::TooManyLogprobs { .. }
        | RuntimeError::ToolsNotArray
        | RuntimeError::NoToolFunctions
        | RuntimeError::TooManyTools { .. }
        | RuntimeError::UnknownTool { .. }
        | RuntimeError::ToolGrammarDeadEnd
        | RuntimeError::MessagesNotArray
        | RuntimeError::ToolCallArguments { .. }
        | RuntimeError::UnknownValue { .. }
        | RuntimeError::ExceedsCache { .. }
        | RuntimeError::Template(_)
        | RuntimeError::Tokenizer(_) => StatusCode::BAD_REQUEST,
        RuntimeError::QueueFull { .. } => StatusCode::TOO_MANY_REQUESTS,
        RuntimeError::ShutDown => StatusCode::SERVICE_UNAVAILABLE,
        RuntimeError::Cache(c) => cache_status(c),
        RuntimeError::Model(m) => model_status(m),
        RuntimeError::Spec(s) => spec_status(s),
        // A step's failure is never the request's input (admission checked it): the
        // cache running short is capacity, anything else (a device error) ours.
        RuntimeError::Forward(m) => match &**m {
            edge_model::ModelError::Cache(
                edge_kvcache::KvCacheError::OverBudget { .. }
                | edge_kvcache::KvCacheError::TooManySequences { .. },
            ) => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        },
        RuntimeError::InvalidConfig { .. }
        | RuntimeError::Demo(_)
        | RuntimeError::Server(_)
        | RuntimeError::Core(_)
        | RuntimeError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// A model error: bad input (a token, position or batch the model cannot run) is the
/// request's; the rest (a checkpoint, an operation the backend lacks, a broken plan, a
/// device) ours.
fn model_status(e: &edge_model::ModelError) -> StatusCode {
    use edge_model::ModelError;
    match e {
        ModelError::EmptyBatch
        | ModelError::TokenOutOfVocab { .. }
        | ModelError::PastContext { .. }
        | ModelError::PositionGap { .. }
        | ModelError::MalformedBatch { .. }
        | ModelError::NoMtpHead
        | ModelError::UnknownValue { .. }
        | ModelError::NoCalibrationPrompts => StatusCode::BAD_REQUEST,
        ModelError::Cache(c) => cache_status(c),
        ModelError::Io { .. }
        | ModelError::Json { .. }
        | ModelError::Config { .. }
        | ModelError::Checkpoint { .. }
        | ModelError::MissingTensor { .. }
        | ModelError::TensorShape { .. }
        | ModelError::TensorDType { .. }
        | ModelError::Nvfp4Width { .. }
        | ModelError::Unsupported { .. }
        | ModelError::OperandLength { .. }
        | ModelError::RowWidth { .. }
        | ModelError::IndexOutOfRange { .. }
        | ModelError::OperandMismatch { .. }
        | ModelError::ExceedsU32 { .. }
        | ModelError::InvalidPlan { .. }
        | ModelError::Quant(_)
        | ModelError::Core(_) => StatusCode::INTERNAL_SERVER_ERROR,
        // Variants added to edge-model later (the enum is `#[non_exhaustive]`).
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// A speculation error: bad sampling parameters or tools whose grammar cannot go on
/// are the request's; a configuration, a malformed draft or nothing to sample (NaN
/// logits) ours.
fn spec_status(e: &edge_spec::SpecError) -> StatusCode {
    use edge_spec::SpecError;
    match e {
        SpecError::InvalidSampling { .. } | SpecError::ConstraintDeadEnd => StatusCode::BAD_REQUEST,
        SpecError::Model(m) => model_status(m),
        SpecError::Cache(c) => cache_status(c),
        SpecError::InvalidConfig { .. }
        | SpecError::NoMtpHead
        | SpecError::MalformedTree { .. }
        | SpecError::NothingToSample { .. }
        | SpecError::CandidateMismatch { .. }
        | SpecError::NeedsFullRow
        | SpecError::NotStarted
        | SpecError::Core(_) => StatusCode::INTERNAL_SERVER_ERROR,
        // Variants added to edge-spec later (the enum is `#[non_exhaustive]`).
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// A cache error: a request larger than the whole budget can never run (400); one
/// that does not fit beside the others now, or past the sequence limit, meets the
/// server's capacity (503, try again); the rest are the server's own failures.
fn cache_status(e: &edge_kvcache::KvCacheError) -> StatusCode {
    use edge_kvcache::KvCacheError;
    match e {
        KvCacheError::OverBudget { needed, budget, .. } if needed > budget => {
            StatusCode::BAD_REQUEST
        }
        KvCacheError::OverBudget { .. } | KvCacheError::TooManySequences { .. } => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<RuntimeError> for ApiError {
    fn from(e: RuntimeError) -> Self {
        let status = status_of(&e);
        let mut err = ApiError::new(status, e.to_string());
        if status == StatusCode::SERVICE_UNAVAILABLE && !matches!(e, RuntimeError::ShutDown) {
            err.code = Some("server_busy");
        }
        err
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
        let bad = ApiError::from(RuntimeError::EmptyPrompt);
        assert_eq!(bad.status, StatusCode::BAD_REQUEST);
        assert!(bad.body()["error"]["param"].is_null());
    }

    /// Input errors are 400, capacity 503 (`server_busy`), the server's own failures
    /// (a device error in a step, a broken invariant) 500, through every wrapper.
    #[test]
    fn causes_choose_the_status() {
        use edge_kvcache::KvCacheError;
        use edge_model::ModelError;
        use std::sync::Arc;
        let over = |needed| KvCacheError::OverBudget {
            needed,
            budget: 100,
            pinned: 60,
        };
        let device = || ModelError::Cache(KvCacheError::Memory("device out of memory".into()));
        let cases = [
            (RuntimeError::Cache(over(50)), 503),
            (RuntimeError::Cache(over(500)), 400),
            (
                RuntimeError::Cache(KvCacheError::TooManySequences { max: 4 }),
                503,
            ),
            (
                RuntimeError::Model(ModelError::TokenOutOfVocab { token: 9, vocab: 8 }),
                400,
            ),
            (RuntimeError::Model(ModelError::Cache(over(50))), 503),
            (RuntimeError::Model(device()), 500),
            (RuntimeError::Forward(Arc::new(device())), 500),
            (
                RuntimeError::Forward(Arc::new(ModelError::Cache(over(50)))),
                503,
            ),
            (RuntimeError::Forward(Arc::new(ModelError::EmptyBatch)), 500),
            (
                RuntimeError::Spec(edge_spec::SpecError::InvalidSampling {
                    param: "top_p",
                    value: 0.0,
                    expected: "in (0, 1]",
                }),
                400,
            ),
            (
                RuntimeError::Spec(edge_spec::SpecError::Model(device())),
                500,
            ),
            (RuntimeError::Internal("no logits".into()), 500),
            // The request's input, by cause.
            (RuntimeError::EmptyPrompt, 400),
            (
                RuntimeError::TokenOutOfVocab {
                    token: 300,
                    vocab: 265,
                },
                400,
            ),
            (
                RuntimeError::PromptPastContext {
                    len: 10,
                    context: 10,
                },
                400,
            ),
            (
                RuntimeError::ReusePointOutsidePrompt { point: 0, len: 4 },
                400,
            ),
            (
                RuntimeError::TooManyLogprobs {
                    requested: 30,
                    max: 20,
                },
                400,
            ),
            (RuntimeError::UnknownTool { name: "x".into() }, 400),
            (RuntimeError::ToolGrammarDeadEnd, 400),
            (
                RuntimeError::ExceedsCache {
                    rows: 100,
                    max_rows: 10,
                },
                400,
            ),
            (
                RuntimeError::Model(ModelError::PastContext {
                    tokens: 4,
                    first: 8,
                    end: 12,
                    context: 10,
                }),
                400,
            ),
            (
                RuntimeError::Spec(edge_spec::SpecError::ConstraintDeadEnd),
                400,
            ),
            // The server's own setup or failure.
            (RuntimeError::InvalidConfig { reason: "x".into() }, 500),
            (
                RuntimeError::Model(ModelError::InvalidPlan {
                    op: "gdn rows",
                    reason: "x".into(),
                }),
                500,
            ),
            (
                RuntimeError::Model(ModelError::Unsupported {
                    backend: "cuda",
                    what: "x".into(),
                }),
                500,
            ),
            (
                RuntimeError::Spec(edge_spec::SpecError::NothingToSample {
                    reason: "every logit is NaN",
                }),
                500,
            ),
            (
                RuntimeError::Forward(Arc::new(ModelError::Core(
                    edge_core::CoreError::DeviceUnavailable("lost".into()),
                ))),
                500,
            ),
        ];
        for (e, status) in cases {
            let text = e.to_string();
            let api = ApiError::from(e);
            assert_eq!(api.status.as_u16(), status, "{text}");
            let code = &api.body()["error"]["code"];
            match status {
                503 => assert_eq!(code, "server_busy", "{text}"),
                500 => assert_eq!(api.body()["error"]["type"], "server_error", "{text}"),
                _ => {}
            }
        }
    }
}
