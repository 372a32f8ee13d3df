/// Errors raised by `edge-runtime`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// A request with an empty prompt.
    #[error("the prompt is empty")]
    EmptyPrompt,
    /// A prompt token at or past the vocabulary.
    #[error("token id {token} is outside the vocabulary of {vocab}")]
    TokenOutOfVocab {
        /// The offending id.
        token: u32,
        /// The vocabulary size.
        vocab: usize,
    },
    /// A prompt that fills the model's context, leaving no room to generate.
    #[error(
        "the prompt has {len} tokens; the model's context is {context}, leaving no room to generate"
    )]
    PromptPastContext {
        /// Prompt tokens.
        len: usize,
        /// The model's context.
        context: usize,
    },
    /// A reuse point (a prefix length to snapshot) outside `1..=len` of the prompt.
    #[error("reuse point {point} is outside the prompt of {len} tokens")]
    ReusePointOutsidePrompt {
        /// The reuse point.
        point: usize,
        /// Prompt tokens.
        len: usize,
    },
    /// More top log-probabilities per token than the engine reports.
    #[error("at most {max} alternatives per token, not {requested}")]
    TooManyLogprobs {
        /// Alternatives asked for.
        requested: usize,
        /// The most the engine reports ([`crate::engine::MAX_TOP_LOGPROBS`]).
        max: usize,
    },
    /// `tools` that are not an array of function schemas.
    #[error("`tools` must be an array of function schemas")]
    ToolsNotArray,
    /// `tools` naming no function to constrain calls to.
    #[error("`tools` names no function to constrain calls to")]
    NoToolFunctions,
    /// More tools than the tool-call grammar follows.
    #[error("{count} tools are more than the grammar follows ({max})")]
    TooManyTools {
        /// Functions given.
        count: usize,
        /// The most the grammar follows.
        max: usize,
    },
    /// A `tool_choice` naming a function that is not among the tools.
    #[error("`tool_choice` names {name:?}, which is not among the tools")]
    UnknownTool {
        /// The name.
        name: String,
    },
    /// No token of the vocabulary continues the tool call the request's tools allow.
    #[error("no token of the vocabulary continues the tool call the grammar allows")]
    ToolGrammarDeadEnd,
    /// Chat `messages` that are not an array.
    #[error("messages must be an array")]
    MessagesNotArray,
    /// A tool call in the chat history whose arguments are not a JSON object.
    #[error("messages[{message}].tool_calls[{call}]: arguments {reason}")]
    ToolCallArguments {
        /// The message.
        message: usize,
        /// The call in it.
        call: usize,
        /// What is wrong (not JSON, with the parser's error; not an object).
        reason: String,
    },
    /// A name (of a policy or mode) that is not one of the accepted values.
    #[error("unknown {what} `{value}` (expected {expected})")]
    UnknownValue {
        /// What was named (e.g. `"reuse policy"`).
        what: &'static str,
        /// The name given.
        value: String,
        /// The accepted names.
        expected: &'static str,
    },
    /// An engine configuration that cannot run (the server's or caller's setup, not a
    /// request).
    #[error("engine configuration: {reason}")]
    InvalidConfig {
        /// What is wrong.
        reason: String,
    },
    /// The engine's request queue is full; try again later.
    #[error("the engine's queue of {capacity} requests is full")]
    QueueFull {
        /// Requests the queue holds.
        capacity: usize,
    },
    /// A request whose prompt and `max_new_tokens` need more rows than the cache
    /// budget holds for one sequence alone: it could never run (unlike one that only
    /// waits for room beside others).
    #[error(
        "the request needs {rows} cache rows (prompt, max_new_tokens and speculation's \
         lookahead), but the KV cache budget holds at most {max_rows} for one request"
    )]
    ExceedsCache {
        /// Rows the request would need.
        rows: usize,
        /// Rows the budget holds for one sequence ([`edge_kvcache::PagedCache::max_rows`]).
        max_rows: usize,
    },
    /// The engine has shut down.
    #[error("the engine has shut down")]
    ShutDown,
    /// The chat template could not be compiled or rendered.
    #[error("chat template: {0}")]
    Template(String),
    /// The tokenizer could not be loaded or failed.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// An error from the cache (e.g. a request its budget cannot hold).
    #[error(transparent)]
    Cache(#[from] edge_kvcache::KvCacheError),
    /// An error from speculative decoding.
    #[error(transparent)]
    Spec(#[from] edge_spec::SpecError),
    /// An error from the model.
    #[error(transparent)]
    Model(#[from] edge_model::ModelError),
    /// A file compiled into the binary with the demo model is broken (a build
    /// defect, not a user error).
    #[error("embedded demo model: {0}")]
    Demo(String),
    /// The HTTP server could not start or failed.
    #[error("server: {0}")]
    Server(String),
    /// An error from the foundation crate.
    #[error(transparent)]
    Core(#[from] edge_core::CoreError),
    /// A forward pass of a running step failed (a device or cache failure, not the
    /// request's input, which admission has checked): the requests of that step end
    /// with it. Shared, since one failure ends every request in the step.
    #[error("a forward pass failed: {0}")]
    Forward(#[source] std::sync::Arc<edge_model::ModelError>),
    /// An invariant of the engine did not hold (a bug, not a bad request).
    #[error("internal error: {0}")]
    Internal(String),
}

/// Result alias for `edge-runtime`.
pub type Result<T> = std::result::Result<T, RuntimeError>;
