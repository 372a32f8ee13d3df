//! The OpenAI-compatible HTTP server (cargo feature `server`).
//!
//! Routes: `POST /v1/chat/completions`, `POST /v1/completions` (both streamed with
//! `stream: true`), `GET /v1/models`, `GET /health`, `GET /ready` (200 while the
//! server takes new work, 503 while it drains or its queue is full: [`Readiness`]),
//! `GET /metrics`. Requests run on the engine thread behind an [`EngineHandle`]; a
//! client that disconnects cancels its request. Errors are OpenAI-style
//! `{"error": {...}}` bodies (400 bad request, 401 missing or wrong API key, 403
//! origin or host not allowed, 404 unknown route, 405 wrong method, 408 body too
//! slow, 413 body too large, 429 queue full, 503 shutting down). Access rules:
//! [`AccessPolicy`]; timeouts and the drain on shutdown: [`Timeouts`], [`serve_on`].
//!
//! [`in_process::chat_completion`] runs a chat request body through the same path
//! without HTTP.
//!
//! `tool_choice` `"required"` or naming a function renders the tools (only the named
//! one) into the prompt; with constrained tool calls
//! ([`ServerState::with_tool_call_policy`], which `edge-llm serve` applies by default)
//! the reply must then open with a call, otherwise the model is only asked to. With
//! `"none"` the tools are left out of the prompt; a call the model writes anyway is
//! still parsed into `tool_calls`.

mod access;
mod chat;
mod connection;
mod errors;
mod handlers;
pub mod in_process;
mod lifecycle;
mod listen;
mod logprobs;
mod metrics;
mod readiness;
mod stream;
mod timeouts;
mod validate;
mod worker;

pub use access::AccessPolicy;
pub use errors::ApiError;
pub use listen::{serve, serve_on};
pub use metrics::Metrics;
pub use readiness::Readiness;
pub use timeouts::Timeouts;
pub use worker::Summary;

use crate::tool_calls::{TokenBytes, ToolCallPolicy, check_constrainable};
use crate::{ChatTemplate, EngineHandle, Result, Tokenizer};
use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::HeaderValue;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use lifecycle::Lifecycle;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Where and how the server listens.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Address to bind (loopback by default).
    pub host: String,
    /// Port to bind (0: any free port).
    pub port: u16,
    /// Largest request body accepted, bytes (larger ones get 413).
    pub body_limit: usize,
}

impl Default for ServerConfig {
    /// `127.0.0.1:8000`, 8 MiB bodies.
    fn default() -> Self {
        ServerConfig {
            host: "127.0.0.1".into(),
            port: 8000,
            body_limit: 8 << 20,
        }
    }
}

/// What the handlers share.
#[derive(Debug)]
pub(crate) struct Inner {
    handle: Arc<EngineHandle>,
    tokenizer: Arc<Tokenizer>,
    template: Arc<ChatTemplate>,
    model_name: String,
    /// Other names requests may use for the model.
    aliases: Vec<String>,
    context_len: usize,
    eos: Vec<u32>,
    metrics: Metrics,
    body_limit: usize,
    /// The vocabulary's bytes when tool calls are constrained to the request's tools.
    tool_vocab: Option<Arc<TokenBytes>>,
    next_request: AtomicU64,
    created: u64,
    access: AccessPolicy,
    /// The longest a request may run, from its arrival (`None`: no limit).
    request_timeout: Option<std::time::Duration>,
    /// Header, body and shutdown timeouts.
    timeouts: Timeouts,
    /// Serving, draining or cancelling; the generations in flight.
    lifecycle: Arc<Lifecycle>,
    /// `/ready` answers 503 once this many requests are queued (`None`: when the
    /// queue is full).
    ready_max_queued: Option<usize>,
}

/// The server's state: the engine handle, tokenizer, chat template and model facts.
/// Cheap to clone.
#[derive(Clone, Debug)]
pub struct ServerState {
    inner: Arc<Inner>,
}

impl ServerState {
    /// State for a model called `model_name` with `context_len` positions, whose
    /// replies end at any of `eos` (the model config's `eos_token_ids`).
    pub fn new(
        handle: Arc<EngineHandle>,
        tokenizer: Arc<Tokenizer>,
        template: Arc<ChatTemplate>,
        model_name: impl Into<String>,
        context_len: usize,
        eos: Vec<u32>,
    ) -> Self {
        ServerState {
            inner: Arc::new(Inner {
                handle,
                tokenizer,
                template,
                model_name: model_name.into(),
                aliases: Vec::new(),
                context_len,
                eos,
                metrics: Metrics::default(),
                body_limit: ServerConfig::default().body_limit,
                tool_vocab: None,
                next_request: AtomicU64::new(1),
                created: unix_now(),
                access: AccessPolicy::default(),
                request_timeout: None,
                timeouts: Timeouts::default(),
                lifecycle: Arc::default(),
                ready_max_queued: None,
            }),
        }
    }

    /// The same state with a different request body limit (bytes; 8 MiB by default).
    /// Meant for a state not yet shared: clones made earlier keep the old limit.
    pub fn with_body_limit(self, bytes: usize) -> Self {
        let mut inner = self.into_inner();
        inner.body_limit = bytes;
        ServerState {
            inner: Arc::new(inner),
        }
    }

    /// The same state, constraining the tool calls of chat requests that offer tools
    /// to those tools ([`crate::tool_calls::grammar`]); `tool_choice` `required` or a
    /// named function then also makes the reply open with a call. Like
    /// [`ServerState::with_body_limit`], meant for a state not yet shared. Errors when
    /// the chat template writes calls in the JSON format (the grammar follows the XML
    /// one).
    pub fn with_constrained_tool_calls(self) -> Result<Self> {
        check_constrainable(&self.inner.template)?;
        let mut inner = self.into_inner();
        inner.tool_vocab = Some(Arc::new(TokenBytes::from_tokenizer(&inner.tokenizer)));
        Ok(ServerState {
            inner: Arc::new(inner),
        })
    }

    /// The same state under `policy`: [`ServerState::with_constrained_tool_calls`]
    /// where the policy constrains with this state's template, else unchanged (so
    /// [`ToolCallPolicy::Auto`] leaves a template that writes JSON calls free, and
    /// [`ToolCallPolicy::Constrained`] makes it an error).
    pub fn with_tool_call_policy(self, policy: ToolCallPolicy) -> Result<Self> {
        match policy.constrains(Some(&self.inner.template))? {
            true => self.with_constrained_tool_calls(),
            false => Ok(self),
        }
    }

    /// The same state under `access` (an API key, allowed browser hosts). Like
    /// [`ServerState::with_body_limit`], meant for a state not yet shared.
    pub fn with_access(self, access: AccessPolicy) -> Self {
        let mut inner = self.into_inner();
        inner.access = access;
        ServerState {
            inner: Arc::new(inner),
        }
    }

    /// The same state with a deadline for every request: one still queued, prefilling
    /// or generating `timeout` after it arrived is cancelled (its pages and queue slot
    /// freed) and answered 504, or, once streaming, ends with an error event. Like
    /// [`ServerState::with_body_limit`], meant for a state not yet shared.
    pub fn with_request_timeout(self, timeout: std::time::Duration) -> Self {
        let mut inner = self.into_inner();
        inner.request_timeout = Some(timeout);
        ServerState {
            inner: Arc::new(inner),
        }
    }

    /// The same state with other header, body and shutdown timeouts
    /// ([`Timeouts::default`] otherwise). Like [`ServerState::with_body_limit`], meant
    /// for a state not yet shared.
    pub fn with_timeouts(self, timeouts: Timeouts) -> Self {
        let mut inner = self.into_inner();
        inner.timeouts = timeouts;
        ServerState {
            inner: Arc::new(inner),
        }
    }

    /// The same state, not ready (`/ready` answers 503) once `n` requests wait in the
    /// engine's queue, before it is full (by default only when it is full: the next
    /// request would get 429). A limit above the queue's capacity is the capacity.
    /// Like [`ServerState::with_body_limit`], meant for a state not yet shared.
    pub fn with_ready_max_queued(self, n: usize) -> Self {
        let mut inner = self.into_inner();
        inner.ready_max_queued = Some(n);
        ServerState {
            inner: Arc::new(inner),
        }
    }

    /// Whether the server takes new work now ([`Readiness`]), from counters only.
    pub fn readiness(&self) -> Readiness {
        let inner = &self.inner;
        let capacity = inner.handle.capacity();
        Readiness {
            draining: inner.lifecycle.draining(),
            engine_running: inner.handle.running(),
            queued: inner.handle.queued(),
            capacity,
            queue_limit: readiness::queue_limit(capacity, inner.ready_max_queued),
        }
    }

    /// The state's own `Inner`, or a copy of the settings (fresh metrics) when shared.
    fn into_inner(self) -> Inner {
        Arc::try_unwrap(self.inner).unwrap_or_else(|a| Inner {
            handle: a.handle.clone(),
            tokenizer: a.tokenizer.clone(),
            template: a.template.clone(),
            model_name: a.model_name.clone(),
            aliases: a.aliases.clone(),
            context_len: a.context_len,
            eos: a.eos.clone(),
            metrics: Metrics::default(),
            body_limit: a.body_limit,
            tool_vocab: a.tool_vocab.clone(),
            next_request: AtomicU64::new(1),
            created: a.created,
            access: a.access.clone(),
            request_timeout: a.request_timeout,
            timeouts: a.timeouts,
            lifecycle: Arc::default(),
            ready_max_queued: a.ready_max_queued,
        })
    }

    /// The engine handle.
    pub fn handle(&self) -> &Arc<EngineHandle> {
        &self.inner.handle
    }

    /// The most tokens (prompt and generated) one request can hold: the model's
    /// context, or less when the KV cache budget holds less for one request.
    fn request_limit(&self) -> usize {
        (self.inner.context_len).min(self.inner.handle.max_request_tokens())
    }

    /// The model name the API reports.
    pub fn model_name(&self) -> &str {
        &self.inner.model_name
    }

    /// The same state answering to `aliases` too: a request's `model` must be the
    /// served name or one of them (404 `model_not_found` otherwise), and
    /// `/v1/models` lists them all. Like [`ServerState::with_body_limit`], meant for a
    /// state not yet shared.
    pub fn with_aliases(self, aliases: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let mut inner = self.into_inner();
        inner.aliases = aliases.into_iter().map(Into::into).collect();
        ServerState {
            inner: Arc::new(inner),
        }
    }

    /// Every name requests may use: the served name, then the aliases.
    pub(crate) fn served_names(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.inner.model_name.as_str())
            .chain(self.inner.aliases.iter().map(String::as_str))
    }
}

/// Seconds since the Unix epoch.
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The server's routes, for [`serve`] or for tests on a listener of their own.
pub fn router(state: ServerState) -> Router {
    let limit = state.inner.body_limit;
    Router::new()
        .route("/v1/chat/completions", post(handlers::chat_completions))
        .route("/v1/completions", post(handlers::completions))
        .route("/v1/models", get(handlers::models))
        .route("/health", get(handlers::health))
        .route("/ready", get(handlers::ready))
        .route("/metrics", get(handlers::metrics))
        .fallback(handlers::not_found)
        .method_not_allowed_fallback(handlers::method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            timeouts::read_body,
        ))
        .layer(middleware::from_fn_with_state(state.clone(), access::guard))
        .layer(middleware::from_fn_with_state(state.clone(), track))
        .with_state(state)
}

/// Gives each request an id (`x-request-id`), logs it with its session
/// (`x-session-id`), status and time, and counts its status code.
async fn track(State(state): State<ServerState>, req: Request, next: Next) -> Response {
    let n = state.inner.next_request.fetch_add(1, Ordering::Relaxed);
    let id = format!("req-{n}");
    let session = req
        .headers()
        .get("x-session-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
        .to_string();
    let (method, path) = (req.method().clone(), req.uri().path().to_string());
    let started = Instant::now();
    let span = tracing::info_span!("request", id = %id, session = %session);
    let mut res = {
        use tracing::Instrument;
        next.run(req).instrument(span.clone()).await
    };
    let status = res.status();
    state.inner.metrics.response(status.as_u16());
    span.in_scope(|| {
        tracing::info!(
            %method, %path, status = status.as_u16(),
            ms = started.elapsed().as_secs_f64() * 1000.0,
            "answered"
        )
    });
    if let Ok(v) = HeaderValue::from_str(&id) {
        res.headers_mut().insert("x-request-id", v);
    }
    res
}
