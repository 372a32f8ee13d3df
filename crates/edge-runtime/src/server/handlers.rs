//! The route handlers.

use super::ServerState;
use super::chat::{self, GenParams, Prompt};
use super::errors::ApiError;
use super::stream::{self, ReplyMeta};
use super::worker::{self, Piece};
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use std::sync::atomic::Ordering;

/// The request body as a JSON object.
fn parse_body(body: Result<Bytes, BytesRejection>) -> Result<Map<String, Value>, ApiError> {
    let bytes = body.map_err(|e| ApiError::new(e.status(), e.body_text()))?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(ApiError::bad_request(
            "the request body must be a JSON object",
            None,
        )),
        Err(e) => Err(ApiError::bad_request(
            format!("the request body is not valid JSON: {e}"),
            None,
        )),
    }
}

/// Runs a prompt and answers with one JSON body or a stream of events.
async fn generate(
    state: ServerState,
    prompt: Prompt,
    params: GenParams,
) -> Result<Response, ApiError> {
    let chat = prompt.chat;
    let n = state.inner.next_request.load(Ordering::Relaxed);
    let meta = ReplyMeta {
        id: format!(
            "{}-{:x}{n:x}",
            if chat { "chatcmpl" } else { "cmpl" },
            super::unix_now()
        ),
        created: super::unix_now(),
        model: state.inner.model_name.clone(),
        chat,
    };
    let mut rx = worker::start(&state, prompt, &params)?;
    let first = rx.recv().await.ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the engine stopped before the request started",
        )
    })?;
    if let Piece::Error(e) = first {
        return Err(e);
    }
    if params.stream {
        Ok(stream::sse(meta, params.include_usage, first, rx))
    } else {
        Ok(Json(stream::collect(meta, first, rx).await?).into_response())
    }
}

/// `POST /v1/chat/completions`.
pub async fn chat_completions(
    State(state): State<ServerState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = parse_body(body)?;
    let params = chat::gen_params(&body)?;
    let prompt = chat::chat_prompt(&state, &body)?;
    tracing::debug!(
        prompt_tokens = prompt.ids.len(),
        stream = params.stream,
        "chat completion"
    );
    generate(state, prompt, params).await
}

/// `POST /v1/completions`: the prompt string as is, no chat template.
pub async fn completions(
    State(state): State<ServerState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = parse_body(body)?;
    let params = chat::gen_params(&body)?;
    let prompt = chat::text_prompt(&state, &body)?;
    generate(state, prompt, params).await
}

/// `GET /v1/models`: the served name first, then its aliases.
pub async fn models(State(state): State<ServerState>) -> Json<Value> {
    let data: Vec<Value> = (state.served_names())
        .map(|name| {
            json!({
                "id": name,
                "object": "model",
                "created": state.inner.created,
                "owned_by": "edge-llm",
                "context_length": state.inner.context_len,
            })
        })
        .collect();
    Json(json!({"object": "list", "data": data}))
}

/// The engine's status, asked off the async threads (it waits for a step).
async fn engine_status(state: &ServerState) -> Result<crate::EngineStatus, ApiError> {
    let handle = state.inner.handle.clone();
    tokio::task::spawn_blocking(move || handle.status())
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
        .map_err(ApiError::from)
}

/// `GET /health`: the engine's state (200 while it answers, whether or not it takes
/// new work: see `ready` for that).
pub async fn health(State(state): State<ServerState>) -> Result<Json<Value>, ApiError> {
    let s = engine_status(&state).await?;
    let ready = state.readiness();
    Ok(Json(json!({
        "status": if s.refcounts_ok { "ok" } else { "degraded" },
        "in_flight": s.in_flight,
        "waiting": s.waiting,
        "queued": ready.queued,
        "queue_capacity": ready.capacity,
        "ready": ready.ready(),
        "preemptions": s.stats.preemptions,
        "sequences": s.cache.sequences,
        "refcounts_ok": s.refcounts_ok,
        "requests": s.stats.requests,
    })))
}

/// `GET /ready`: 200 while the server takes new work; 503 while it drains, while its
/// engine queue is at the readiness limit, or once its engine has stopped. The body
/// says which ([`super::Readiness::body`]). Never waits for an engine step.
pub async fn ready(State(state): State<ServerState>) -> Response {
    let r = state.readiness();
    let status = match r.ready() {
        true => StatusCode::OK,
        false => StatusCode::SERVICE_UNAVAILABLE,
    };
    (status, Json(r.body())).into_response()
}

/// `GET /metrics`: Prometheus text.
pub async fn metrics(State(state): State<ServerState>) -> Response {
    let status = engine_status(&state).await.ok();
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        (state.inner.metrics).render(status.as_ref(), &state.readiness()),
    )
        .into_response()
}

/// Any other route.
pub async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!("no route for {}", uri.path()),
    )
}

/// A known route with the wrong method: 405 with an OpenAI body (axum's own is empty).
pub async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{} does not take {method}", uri.path()),
    )
}
