//! Hugging Face chat templates (`chat_template` in `tokenizer_config.json`), rendered
//! with minijinja plus Python string-method compatibility.

use crate::{Result, RuntimeError};
use serde_json::Value;

/// A compiled chat template.
pub struct ChatTemplate {
    env: minijinja::Environment<'static>,
    /// The tool-call form the template writes (read from its source).
    tool_calls: Option<crate::tool_calls::ToolCallFormat>,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChatTemplate")
    }
}

const NAME: &str = "chat_template";

impl ChatTemplate {
    /// Compiles a template source.
    pub fn new(source: &str) -> Result<Self> {
        let mut env = minijinja::Environment::new();
        // transformers compiles chat templates with trim_blocks and lstrip_blocks.
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |msg: String| -> std::result::Result<String, minijinja::Error> {
                Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    msg,
                ))
            },
        );
        env.add_filter("tojson", python_tojson);
        env.add_template_owned(NAME, source.to_string())
            .map_err(|e| {
                RuntimeError::Template(format!("cannot compile the chat template: {e}"))
            })?;
        let tool_calls = crate::tool_calls::ToolCallFormat::from_template(source);
        Ok(ChatTemplate { env, tool_calls })
    }

    /// The tool-call form this template renders calls in (and so the one the model
    /// writes), `None` when it renders none.
    pub fn tool_call_format(&self) -> Option<crate::tool_calls::ToolCallFormat> {
        self.tool_calls
    }

    /// Reads `chat_template` from the text of a `tokenizer_config.json`.
    pub fn from_tokenizer_config(json: &str) -> Result<Self> {
        let v: Value = serde_json::from_str(json).map_err(|e| {
            RuntimeError::Template(format!("tokenizer_config.json is not JSON: {e}"))
        })?;
        let src = v
            .get("chat_template")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                RuntimeError::Template("tokenizer_config.json has no chat_template string".into())
            })?;
        Self::new(src)
    }

    /// Renders `messages` (OpenAI-style objects with `role`, `content`, optional
    /// `tool_calls`), with optional `tools` (JSON schemas). Tool-call `arguments` given
    /// as a JSON string (the OpenAI wire form) are parsed to the object the template
    /// renders; a string that is not a JSON object is an error naming the call.
    pub fn render(
        &self,
        messages: &Value,
        tools: Option<&Value>,
        add_generation_prompt: bool,
        enable_thinking: bool,
    ) -> Result<String> {
        if !messages.is_array() {
            return Err(RuntimeError::MessagesNotArray);
        }
        let tmpl = self
            .env
            .get_template(NAME)
            .map_err(|e| RuntimeError::Template(e.to_string()))?;
        let messages = arguments_as_objects(messages)?;
        let ctx = minijinja::context! {
            messages => minijinja::Value::from_serialize(&messages),
            tools => tools.map(minijinja::Value::from_serialize),
            add_generation_prompt => add_generation_prompt,
            enable_thinking => enable_thinking,
        };
        tmpl.render(ctx)
            .map_err(|e| RuntimeError::Template(format!("rendering the chat template failed: {e}")))
    }

    /// [`ChatTemplate::render`], plus the byte offset in the result where each message
    /// ends: the end of the template's rendering of `messages[..=i]` without a
    /// generation prompt, where that rendering is a prefix of the whole (a template that
    /// renders a message differently once more follow gets no offset for it). These are
    /// the points a later request of the same conversation can resume from.
    pub fn render_marked(
        &self,
        messages: &Value,
        tools: Option<&Value>,
        add_generation_prompt: bool,
        enable_thinking: bool,
    ) -> Result<(String, Vec<usize>)> {
        let text = self.render(messages, tools, add_generation_prompt, enable_thinking)?;
        let list = messages.as_array().map(Vec::as_slice).unwrap_or_default();
        let mut ends = Vec::with_capacity(list.len());
        for i in 0..list.len() {
            let prefix = Value::Array(list[..=i].to_vec());
            let part = self.render(&prefix, tools, false, enable_thinking)?;
            if text.starts_with(&part) && ends.last() != Some(&part.len()) {
                ends.push(part.len());
            }
        }
        Ok((text, ends))
    }

    /// A single user turn, ready for the assistant's reply.
    pub fn render_user_prompt(&self, text: &str, enable_thinking: bool) -> Result<String> {
        let messages = serde_json::json!([{"role": "user", "content": text}]);
        self.render(&messages, None, true, enable_thinking)
    }
}

/// `messages` with every tool call's string `arguments` parsed to a JSON object (a
/// borrowed copy only where something changes).
fn arguments_as_objects(messages: &Value) -> Result<std::borrow::Cow<'_, Value>> {
    let has_string_arguments = |m: &Value| {
        (m["tool_calls"].as_array().into_iter().flatten())
            .any(|c| c["function"]["arguments"].is_string() || c["arguments"].is_string())
    };
    let list = messages.as_array().map(Vec::as_slice).unwrap_or_default();
    if !list.iter().any(has_string_arguments) {
        return Ok(std::borrow::Cow::Borrowed(messages));
    }
    let mut owned = messages.clone();
    for (i, m) in owned.as_array_mut().into_iter().flatten().enumerate() {
        for (j, call) in m["tool_calls"]
            .as_array_mut()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let slot = match call.get_mut("function") {
                Some(f) if f.is_object() => f,
                _ => call,
            };
            let Some(text) = slot.get("arguments").and_then(Value::as_str) else {
                continue;
            };
            let parsed: Value =
                serde_json::from_str(text).map_err(|e| RuntimeError::ToolCallArguments {
                    message: i,
                    call: j,
                    reason: format!("are not valid JSON ({e})"),
                })?;
            if !parsed.is_object() {
                return Err(RuntimeError::ToolCallArguments {
                    message: i,
                    call: j,
                    reason: "must be a JSON object".into(),
                });
            }
            slot["arguments"] = parsed;
        }
    }
    Ok(std::borrow::Cow::Owned(owned))
}

/// `tojson` as transformers defines it: Python's `json.dumps` with `", "` and `": "`
/// separators, keys in insertion order, non-ASCII kept, optional `indent`.
fn python_tojson(
    value: minijinja::Value,
    indent: Option<usize>,
) -> std::result::Result<minijinja::Value, minijinja::Error> {
    let json: Value = serde_json::to_value(&value).map_err(|e| {
        minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, e.to_string())
    })?;
    let mut out = Vec::new();
    let mut ser =
        serde_json::Serializer::with_formatter(&mut out, PythonFormatter { indent, depth: 0 });
    serde::Serialize::serialize(&json, &mut ser).map_err(|e| {
        minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, e.to_string())
    })?;
    Ok(minijinja::Value::from_safe_string(
        String::from_utf8_lossy(&out).into_owned(),
    ))
}

/// serde_json formatter reproducing Python's `json.dumps` layout.
struct PythonFormatter {
    indent: Option<usize>,
    depth: usize,
}

impl PythonFormatter {
    fn newline<W: ?Sized + std::io::Write>(&self, w: &mut W) -> std::io::Result<()> {
        if let Some(n) = self.indent {
            w.write_all(b"\n")?;
            w.write_all(" ".repeat(n * self.depth).as_bytes())?;
        }
        Ok(())
    }

    fn open<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        bracket: &[u8],
    ) -> std::io::Result<()> {
        self.depth += 1;
        w.write_all(bracket)
    }

    fn close<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        bracket: &[u8],
    ) -> std::io::Result<()> {
        self.depth -= 1;
        self.newline(w)?;
        w.write_all(bracket)
    }

    /// Python puts `", "` between items, or `","` plus a newline when indenting.
    fn item<W: ?Sized + std::io::Write>(&self, w: &mut W, first: bool) -> std::io::Result<()> {
        if !first {
            w.write_all(if self.indent.is_some() { b"," } else { b", " })?;
        }
        self.newline(w)
    }
}

impl serde_json::ser::Formatter for PythonFormatter {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"[")
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"]")
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.item(w, first)
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"{")
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"}")
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.item(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QWEN_LIKE: &str = "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}\
{%- if add_generation_prompt %}<|im_start|>assistant\n{{- '<think>\n\n</think>\n\n' if enable_thinking is false }}{%- endif %}";

    #[test]
    fn renders_messages_and_generation_prompt() {
        let t = ChatTemplate::new(QWEN_LIKE).unwrap();
        let out = t.render_user_prompt("hi", false).unwrap();
        assert_eq!(
            out,
            "<|im_start|>user\nhi<|im_end|><|im_start|>assistant<think>\n\n</think>\n\n"
        );
    }

    #[test]
    fn message_ends_are_marked_where_the_prefix_renders_the_same() {
        let t = ChatTemplate::new(QWEN_LIKE).unwrap();
        let messages = serde_json::json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "yo"},
            {"role": "user", "content": "ls"},
        ]);
        let (text, ends) = t.render_marked(&messages, None, true, false).unwrap();
        assert_eq!(text, t.render(&messages, None, true, false).unwrap());
        assert_eq!(ends.len(), 3, "{text:?} {ends:?}");
        assert_eq!(&text[..ends[0]], "<|im_start|>user\nhi<|im_end|>");
        assert!(ends.windows(2).all(|w| w[0] < w[1]) && ends[2] < text.len());
    }

    #[test]
    fn python_string_methods_work() {
        let t = ChatTemplate::new(
            "{{ messages[0].content.startswith('<a>') }}|{{ messages[0].content.split('/')[-1] }}",
        )
        .unwrap();
        let out = t
            .render(
                &serde_json::json!([{"role": "user", "content": "<a>x/y"}]),
                None,
                false,
                false,
            )
            .unwrap();
        assert_eq!(out, "True|y");
    }

    #[test]
    fn tojson_matches_python_json_dumps() {
        let t = ChatTemplate::new("{{ messages[0] | tojson }}").unwrap();
        let msgs = serde_json::json!([{"b": 1, "a": [1, "é", {"x": null}]}]);
        let out = t.render(&msgs, None, false, false).unwrap();
        assert_eq!(out, r#"{"b": 1, "a": [1, "é", {"x": null}]}"#);
        // Empty containers print as Python prints them.
        let t = ChatTemplate::new("{{ messages | tojson }}").unwrap();
        assert_eq!(
            t.render(&serde_json::json!([]), None, false, false)
                .unwrap(),
            "[]"
        );
    }

    #[test]
    fn errors_are_typed() {
        assert!(matches!(
            ChatTemplate::new("{% for %}"),
            Err(crate::RuntimeError::Template(_))
        ));
        let t = ChatTemplate::new("{{ raise_exception('bad role') }}").unwrap();
        let e = t
            .render(&serde_json::json!([]), None, false, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("bad role"), "{e}");
        assert!(
            t.render(&serde_json::json!({}), None, false, false)
                .is_err()
        );
        assert!(matches!(
            ChatTemplate::from_tokenizer_config("{}"),
            Err(crate::RuntimeError::Template(_))
        ));
    }
}
