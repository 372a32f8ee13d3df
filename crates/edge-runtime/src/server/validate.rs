//! Request checks beyond parsing: fields this server does not implement, and tool and
//! parameter names a tool call could not carry.

use super::errors::ApiError;
use serde_json::{Map, Value};

/// OpenAI fields that change what a reply means and that this server does not do: a
/// 400 naming the field rather than a reply that silently ignores it. Each is allowed
/// at its neutral value (`response_format` of type `text`, `best_of` 1, `echo` false,
/// an empty `suffix`).
pub fn unsupported_fields(body: &Map<String, Value>) -> Result<(), ApiError> {
    let neutral = |key: &str, v: &Value| match key {
        "response_format" => v.get("type").and_then(Value::as_str) == Some("text"),
        "best_of" => v.as_u64() == Some(1),
        "echo" => v.as_bool() == Some(false),
        "suffix" => v.as_str() == Some(""),
        _ => false,
    };
    for key in ["response_format", "best_of", "echo", "suffix"] {
        match body.get(key) {
            None | Some(Value::Null) => {}
            Some(v) if neutral(key, v) => {}
            Some(v) => {
                return Err(ApiError::bad_request(
                    format!("`{key}` = {v} is not supported by this server"),
                    Some(key),
                ));
            }
        }
    }
    Ok(())
}

/// The request's `model`, when given, must be one of the names the server answers to
/// (its served name and aliases): 404 `model_not_found` otherwise, as OpenAI and vLLM
/// answer, rather than a reply from a model the client did not ask for.
pub fn served_model<'a>(
    mut names: impl Iterator<Item = &'a str>,
    body: &Map<String, Value>,
) -> Result<(), ApiError> {
    match body.get("model") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(m)) if names.any(|n| n == m) => Ok(()),
        Some(Value::String(m)) => {
            let mut e = ApiError::new(
                axum::http::StatusCode::NOT_FOUND,
                format!(
                    "the model `{m}` does not exist on this server (GET /v1/models lists its names)"
                ),
            );
            e.param = Some("model".into());
            e.code = Some("model_not_found");
            Err(e)
        }
        Some(_) => Err(ApiError::bad_request(
            "`model` must be a string",
            Some("model"),
        )),
    }
}

/// The most characters of a function name (OpenAI's limit).
const MAX_NAME_LEN: usize = 64;

/// Whether `name` can name a function: 1 to 64 ASCII letters, digits, `_`, `-` or `.`
/// (OpenAI's rule, plus the dots of BFCL's dotted names). Anything else (markup,
/// spaces, an empty name) could not be written inside a tool call and read back.
fn is_function_name(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Whether `name` can name a parameter: not empty, and no markup, `=`, whitespace or
/// control characters (the tool-call formats write it inside `<parameter=…>` or as a
/// JSON key).
fn is_parameter_name(name: &str) -> bool {
    !name.is_empty()
        && !name
            .chars()
            .any(|c| matches!(c, '<' | '>' | '=' | '"') || c.is_whitespace() || c.is_control())
}

/// Checks every tool's function name and its parameters' names.
pub fn tool_names(tools: &[Value]) -> Result<(), ApiError> {
    for (i, tool) in tools.iter().enumerate() {
        let function = tool.get("function");
        let name = function.and_then(|f| f.get("name")).and_then(Value::as_str);
        let Some(name) = name else {
            return Err(ApiError::bad_request(
                format!("tools[{i}] has no function.name"),
                Some("tools"),
            ));
        };
        if !is_function_name(name) {
            return Err(ApiError::bad_request(
                format!(
                    "tools[{i}].function.name {name:?} is not a function name (1 to \
                     {MAX_NAME_LEN} letters, digits, `_`, `-` or `.`)"
                ),
                Some("tools"),
            ));
        }
        let properties = function
            .and_then(|f| f.get("parameters"))
            .and_then(|p| p.get("properties"))
            .and_then(Value::as_object);
        for key in properties.into_iter().flat_map(Map::keys) {
            if !is_parameter_name(key) {
                return Err(ApiError::bad_request(
                    format!(
                        "tools[{i}] ({name}) has a parameter named {key:?}: names must be \
                         non-empty, without markup, `=`, quotes or whitespace"
                    ),
                    Some("tools"),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for good in [
            "bash",
            "get_weather",
            "math.factorial",
            "a-b",
            &"x".repeat(64),
        ] {
            assert!(is_function_name(good), "{good}");
        }
        for bad in ["", "<b>", "a b", "f=1", "名前", &"x".repeat(65)] {
            assert!(!is_function_name(bad), "{bad}");
        }
        for good in ["location", "base-currency", "x.y", "日付"] {
            assert!(is_parameter_name(good), "{good}");
        }
        for bad in ["", "a>b", "<p", "a=b", "a b", "a\nb", "a\"b"] {
            assert!(!is_parameter_name(bad), "{bad}");
        }
    }
}
