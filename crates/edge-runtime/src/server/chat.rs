//! Request parsing: the sampling parameters both endpoints share, the chat messages,
//! tools and `tool_choice`, and the prompt they render to.
//!
//! `tool_choice` `"required"` or a named function renders the prompt with the tools
//! (a named function: with that tool only). The model is forced to call one only when
//! the server constrains tool calls ([`super::ServerState::with_constrained_tool_calls`]).

use super::ServerState;
use super::errors::ApiError;
use super::validate;
use crate::SamplingParams;
use serde_json::{Map, Value};

/// What the generation of one request needs besides its prompt.
#[derive(Clone, Debug)]
pub struct GenParams {
    /// Most tokens to generate.
    pub max_tokens: Option<usize>,
    /// Sampling.
    pub sampling: SamplingParams,
    /// Strings that end the reply (the text is cut before the first one).
    pub stop: Vec<String>,
    /// Stream the reply as server-sent events.
    pub stream: bool,
    /// Send a usage chunk before `[DONE]`.
    pub include_usage: bool,
    /// Report each token's log-probability with this many alternatives (`None`: no
    /// log-probabilities).
    pub logprobs: Option<usize>,
    /// Generate past the end-of-turn tokens (vLLM's `ignore_eos`, for benchmarks that
    /// need replies of a fixed length).
    pub ignore_eos: bool,
}

/// A prompt ready for the engine.
#[derive(Clone, Debug)]
pub struct Prompt {
    /// The rendered text.
    pub text: String,
    /// Its token ids.
    pub ids: Vec<u32>,
    /// Where earlier messages end (points a later request may resume from).
    pub reuse_points: Vec<usize>,
    /// The tools offered (for the tool-call parser); `None` for plain completions.
    pub tools: Option<Value>,
    /// Whether to parse tool calls and reasoning from the reply.
    pub chat: bool,
    /// Whether `tool_choice` asks for a call (`required` or a named function).
    pub must_call: bool,
}

fn number(body: &Map<String, Value>, key: &str) -> Result<Option<f64>, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .map(Some)
            .ok_or_else(|| ApiError::bad_request(format!("`{key}` must be a number"), Some(key))),
    }
}

fn integer(body: &Map<String, Value>, key: &str) -> Result<Option<u64>, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| {
            ApiError::bad_request(format!("`{key}` must be a non-negative integer"), Some(key))
        }),
    }
}

/// `max_completion_tokens` (chat's newer name, first) or `max_tokens`, with the key
/// it came from; 0 is an error.
fn max_tokens(body: &Map<String, Value>) -> Result<Option<(u64, &'static str)>, ApiError> {
    let max_tokens = match integer(body, "max_completion_tokens")? {
        Some(m) => Some((m, "max_completion_tokens")),
        None => integer(body, "max_tokens")?.map(|m| (m, "max_tokens")),
    };
    if let Some((0, key)) = max_tokens {
        return Err(ApiError::bad_request(
            format!("{key} must be at least 1"),
            Some(key),
        ));
    }
    Ok(max_tokens)
}

/// The parameters shared by chat and text completions.
pub fn gen_params(body: &Map<String, Value>) -> Result<GenParams, ApiError> {
    validate::unsupported_fields(body)?;
    let temperature = number(body, "temperature")?.unwrap_or(1.0);
    if !(0.0..=2.0).contains(&temperature) {
        return Err(ApiError::bad_request(
            format!("temperature must be between 0 and 2, got {temperature}"),
            Some("temperature"),
        ));
    }
    let top_p = number(body, "top_p")?.unwrap_or(1.0);
    if !(top_p > 0.0 && top_p <= 1.0) {
        return Err(ApiError::bad_request(
            format!("top_p must be in (0, 1], got {top_p}"),
            Some("top_p"),
        ));
    }
    if let Some(n) = integer(body, "n")?
        && n != 1
    {
        return Err(ApiError::bad_request(
            format!("only n = 1 is supported, got {n}"),
            Some("n"),
        ));
    }
    let max_tokens = max_tokens(body)?;
    let seed = match body.get("seed") {
        None | Some(Value::Null) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
        Some(v) => v
            .as_i64()
            .map(|s| s as u64)
            .or_else(|| v.as_u64())
            .ok_or_else(|| ApiError::bad_request("`seed` must be an integer", Some("seed")))?,
    };
    let top_k = integer(body, "top_k")?.unwrap_or(0) as usize;
    let stop = match body.get("stop") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .map(|s| s.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                ApiError::bad_request(
                    "`stop` must be a string or an array of strings",
                    Some("stop"),
                )
            })?,
        Some(_) => {
            return Err(ApiError::bad_request(
                "`stop` must be a string or an array of strings",
                Some("stop"),
            ));
        }
    };
    let stop = stop.into_iter().filter(|s| !s.is_empty()).collect();
    let flag = |key: &str| match body.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ApiError::bad_request(
            format!("`{key}` must be true or false"),
            Some(key),
        )),
    };
    let stream = flag("stream")?;
    let ignore_eos = flag("ignore_eos")?;
    let include_usage = body
        .get("stream_options")
        .and_then(|o| o.get("include_usage"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let penalty = |key: &str, default: f64| -> Result<f32, ApiError> {
        Ok(number(body, key)?.unwrap_or(default) as f32)
    };
    let sampling = SamplingParams {
        temperature: temperature as f32,
        top_k,
        top_p: top_p as f32,
        seed,
        min_p: penalty("min_p", 0.0)?,
        presence_penalty: penalty("presence_penalty", 0.0)?,
        frequency_penalty: penalty("frequency_penalty", 0.0)?,
        repetition_penalty: penalty("repetition_penalty", 1.0)?,
    };
    // The ranges (penalties −2..2, min_p 0..1, repetition > 0), as a 400 here rather
    // than a failed request later.
    sampling
        .validate()
        .map_err(|e| ApiError::bad_request(e.to_string(), None))?;
    Ok(GenParams {
        max_tokens: max_tokens.map(|(m, _)| m as usize),
        sampling,
        stop,
        stream,
        include_usage,
        logprobs: logprobs(body)?,
        ignore_eos,
    })
}

/// The most alternatives per token OpenAI allows (`top_logprobs` ≤ 20; the engine's
/// own limit is the same).
const MAX_TOP_LOGPROBS: u64 = crate::engine::MAX_TOP_LOGPROBS as u64;

/// `logprobs` in either API's form: chat's `logprobs: true` with `top_logprobs: N`,
/// or text completions' `logprobs: N` (an integer).
fn logprobs(body: &Map<String, Value>) -> Result<Option<usize>, ApiError> {
    let top = integer(body, "top_logprobs")?;
    let top = match body.get("logprobs") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => {
            if top.is_some_and(|n| n > 0) {
                return Err(ApiError::bad_request(
                    "`top_logprobs` needs `logprobs: true`",
                    Some("top_logprobs"),
                ));
            }
            return Ok(None);
        }
        Some(Value::Bool(true)) => top.unwrap_or(0),
        Some(v) => v.as_u64().ok_or_else(|| {
            ApiError::bad_request(
                "`logprobs` must be a boolean (chat) or a non-negative integer (completions)",
                Some("logprobs"),
            )
        })?,
    };
    if top > MAX_TOP_LOGPROBS {
        return Err(ApiError::bad_request(
            format!("at most {MAX_TOP_LOGPROBS} alternatives per token, got {top}"),
            Some(if body.contains_key("top_logprobs") {
                "top_logprobs"
            } else {
                "logprobs"
            }),
        ));
    }
    Ok(Some(top as usize))
}

/// Message content as text: a string, null, or an array of `{"type": "text"}` parts.
fn content_text(content: Option<&Value>, index: usize) -> Result<Value, ApiError> {
    match content {
        None | Some(Value::Null) => Ok(Value::String(String::new())),
        Some(Value::String(s)) => Ok(Value::String(s.clone())),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for p in parts {
                match p.get("text").and_then(Value::as_str) {
                    Some(t) => text.push_str(t),
                    None => {
                        return Err(ApiError::bad_request(
                            format!("messages[{index}].content: only text parts are supported"),
                            Some("messages"),
                        ));
                    }
                }
            }
            Ok(Value::String(text))
        }
        Some(_) => Err(ApiError::bad_request(
            format!("messages[{index}].content must be a string or an array of text parts"),
            Some("messages"),
        )),
    }
}

/// Checks the messages and normalises their content to strings.
pub fn messages(body: &Map<String, Value>) -> Result<Value, ApiError> {
    let list = body
        .get("messages")
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty())
        .ok_or_else(|| {
            ApiError::bad_request("`messages` must be a non-empty array", Some("messages"))
        })?;
    let mut out = Vec::with_capacity(list.len());
    // Whether the last non-tool message was an assistant's with tool calls.
    let mut calls_open = false;
    for (i, m) in list.iter().enumerate() {
        let obj = m.as_object().ok_or_else(|| {
            ApiError::bad_request(format!("messages[{i}] must be an object"), Some("messages"))
        })?;
        let role = obj.get("role").and_then(Value::as_str).unwrap_or("");
        let mut msg = obj.clone();
        match role {
            "system" | "developer" | "user" => {
                msg.insert(
                    "role".into(),
                    Value::String(role.replace("developer", "system")),
                );
                calls_open = false;
            }
            "assistant" => {
                calls_open = match obj.get("tool_calls") {
                    None | Some(Value::Null) => false,
                    Some(Value::Array(calls)) => !calls.is_empty(),
                    Some(_) => {
                        return Err(ApiError::bad_request(
                            format!("messages[{i}].tool_calls must be an array"),
                            Some("messages"),
                        ));
                    }
                };
            }
            "tool" => {
                if !calls_open {
                    return Err(ApiError::bad_request(
                        format!(
                            "messages[{i}] is a tool result with no preceding assistant message \
                             with tool_calls"
                        ),
                        Some("messages"),
                    ));
                }
            }
            other => {
                return Err(ApiError::bad_request(
                    format!(
                        "messages[{i}] has unknown role `{other}` (expected system, user, \
                         assistant or tool)"
                    ),
                    Some("messages"),
                ));
            }
        }
        msg.insert("content".into(), content_text(obj.get("content"), i)?);
        out.push(Value::Object(msg));
    }
    Ok(Value::Array(out))
}

/// The tools to render, after `tool_choice`, and whether `tool_choice` asks for a call
/// (`required` or a named function).
pub fn tools(body: &Map<String, Value>) -> Result<(Option<Value>, bool), ApiError> {
    let no_tools = || match body.get("tool_choice") {
        Some(Value::String(s)) if s == "required" => Err(ApiError::bad_request(
            "tool_choice `required` needs `tools`",
            Some("tool_choice"),
        )),
        Some(Value::Object(_)) => Err(ApiError::bad_request(
            "tool_choice names a function, but the request has no `tools`",
            Some("tool_choice"),
        )),
        _ => Ok((None, false)),
    };
    let tools = match body.get("tools") {
        None | Some(Value::Null) => return no_tools(),
        Some(Value::Array(t)) if t.is_empty() => return no_tools(),
        Some(Value::Array(t)) => t.clone(),
        Some(_) => {
            return Err(ApiError::bad_request(
                "`tools` must be an array",
                Some("tools"),
            ));
        }
    };
    let name_of = |t: &Value| {
        t.get("function")
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    validate::tool_names(&tools)?;
    match body.get("tool_choice") {
        None | Some(Value::Null) => Ok((Some(Value::Array(tools)), false)),
        Some(Value::String(s)) => match s.as_str() {
            "auto" => Ok((Some(Value::Array(tools)), false)),
            "required" => Ok((Some(Value::Array(tools)), true)),
            "none" => Ok((None, false)),
            other => Err(ApiError::bad_request(
                format!(
                    "unknown tool_choice `{other}` (expected auto, none, required or a function)"
                ),
                Some("tool_choice"),
            )),
        },
        Some(choice) => {
            let name = choice
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    ApiError::bad_request("tool_choice has no function.name", Some("tool_choice"))
                })?;
            let chosen: Vec<Value> = tools
                .into_iter()
                .filter(|t| name_of(t).as_deref() == Some(name))
                .collect();
            if chosen.is_empty() {
                return Err(ApiError::bad_request(
                    format!("tool_choice names `{name}`, which is not among the tools"),
                    Some("tool_choice"),
                ));
            }
            Ok((Some(Value::Array(chosen)), true))
        }
    }
}

/// The chat request's prompt: messages rendered through the template (message ends
/// marked as reuse points) and tokenized.
pub fn chat_prompt(state: &ServerState, body: &Map<String, Value>) -> Result<Prompt, ApiError> {
    validate::served_model(state.served_names(), body)?;
    let messages = messages(body)?;
    let (tools, must_call) = tools(body)?;
    let thinking = body
        .get("chat_template_kwargs")
        .and_then(|k| k.get("enable_thinking"))
        .or_else(|| body.get("enable_thinking"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let (text, ends) =
        state
            .inner
            .template
            .render_marked(&messages, tools.as_ref(), true, thinking)?;
    let (ids, reuse_points) = state.inner.tokenizer.encode_marked(&text, &ends)?;
    check_context(state, body, ids.len(), "messages")?;
    Ok(Prompt {
        text,
        ids,
        reuse_points,
        tools,
        chat: true,
        must_call,
    })
}

/// A text completion's prompt: a string tokenized as is, or token ids (a list of
/// integers), as OpenAI and vLLM accept; either may come as a one-element list.
pub fn text_prompt(state: &ServerState, body: &Map<String, Value>) -> Result<Prompt, ApiError> {
    validate::served_model(state.served_names(), body)?;
    let bad = |message: &str| Err(ApiError::bad_request(message, Some("prompt")));
    let prompt = match body.get("prompt") {
        Some(Value::Array(a)) if a.len() == 1 && (a[0].is_string() || a[0].is_array()) => &a[0],
        Some(p) => p,
        None => return bad("`prompt` is required"),
    };
    let (text, ids) = match prompt {
        Value::String(s) => (s.clone(), state.inner.tokenizer.encode(s)?),
        Value::Array(items) if items.iter().all(Value::is_number) => {
            let ids = items
                .iter()
                .map(|x| x.as_u64().and_then(|n| u32::try_from(n).ok()))
                .collect::<Option<Vec<u32>>>();
            let Some(ids) = ids else {
                return bad("`prompt` token ids must be non-negative integers");
            };
            (state.inner.tokenizer.decode(&ids)?, ids)
        }
        Value::Array(_) => {
            return bad("`prompt` must be one string or one list of token ids per request");
        }
        _ => return bad("`prompt` must be a string or a list of token ids"),
    };
    if ids.is_empty() {
        return bad("`prompt` is empty");
    }
    check_context(state, body, ids.len(), "prompt")?;
    Ok(Prompt {
        text,
        ids,
        reuse_points: Vec::new(),
        tools: None,
        chat: false,
        must_call: false,
    })
}

/// The prompt (from the field `prompt_field`) must leave room in the context, and the
/// requested tokens must fit after it: a 400, not a silently shorter reply. The limit
/// is the model's context, or what the KV cache budget holds for one request when
/// that is less.
fn check_context(
    state: &ServerState,
    body: &Map<String, Value>,
    prompt_len: usize,
    prompt_field: &str,
) -> Result<(), ApiError> {
    let context = state.inner.context_len;
    let limit = state.request_limit();
    let window = match limit < context {
        true => format!("the server's KV cache holds at most {limit} tokens per request"),
        false => format!("the model's context window is {context} tokens"),
    };
    if prompt_len >= limit {
        return Err(ApiError::bad_request(
            format!("the prompt has {prompt_len} tokens, which leaves no room: {window}"),
            Some(prompt_field),
        ));
    }
    if let Some((wanted, key)) = max_tokens(body)?
        && wanted > (limit - prompt_len) as u64
    {
        return Err(ApiError::bad_request(
            format!(
                "{key} = {wanted} does not fit: the prompt has {prompt_len} tokens and \
                 {window}, which leaves {}",
                limit - prompt_len
            ),
            Some(key),
        ));
    }
    Ok(())
}
