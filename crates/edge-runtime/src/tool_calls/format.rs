//! Which form of tool call a chat template teaches the model.

use super::CALL_OPEN;

/// How far after a `<tool_call>` the JSON form's markers are looked for, in bytes.
const JSON_WINDOW: usize = 512;

/// The body of a `<tool_call>` block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ToolCallFormat {
    /// Qwen3.5/3.6: `<function=NAME>` with `<parameter=ARG>` elements.
    Xml,
    /// Qwen3 / Hermes: `{"name": NAME, "arguments": {...}}`.
    Json,
}

impl ToolCallFormat {
    /// The format a chat template's source renders tool calls in, or `None` when it
    /// renders no `<tool_call>` at all.
    ///
    /// The rule: the template must contain `<tool_call>`. It is [`ToolCallFormat::Xml`]
    /// if it also contains `<function=`; else [`ToolCallFormat::Json`] if, within 512
    /// bytes after some `<tool_call>`, it contains `"name` (a quoted, possibly escaped,
    /// `name` key), `arguments` and `tojson` (the template writing the arguments
    /// object); else `None`.
    pub fn from_template(source: &str) -> Option<ToolCallFormat> {
        if !source.contains(CALL_OPEN) {
            return None;
        }
        if source.contains("<function=") {
            return Some(ToolCallFormat::Xml);
        }
        for (at, _) in source.match_indices(CALL_OPEN) {
            let mut end = (at + JSON_WINDOW).min(source.len());
            while !source.is_char_boundary(end) {
                end -= 1;
            }
            let window = &source[at..end];
            if window.contains("\"name")
                && window.contains("arguments")
                && window.contains("tojson")
            {
                return Some(ToolCallFormat::Json);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tool-call part of Qwen3's template.
    const QWEN3: &str = r#"{%- for tool_call in message.tool_calls %}
    {%- if tool_call.function %}
        {%- set tool_call = tool_call.function %}
    {%- endif %}
    {{- '<tool_call>\n{"name": "' }}
    {{- tool_call.name }}
    {{- '", "arguments": ' }}
    {%- if tool_call.arguments is string %}
        {{- tool_call.arguments }}
    {%- else %}
        {{- tool_call.arguments | tojson }}
    {%- endif %}
    {{- '}\n</tool_call>' }}
{%- endfor %}"#;

    #[test]
    fn small_templates() {
        assert_eq!(
            ToolCallFormat::from_template(
                "{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}"
            ),
            Some(ToolCallFormat::Xml)
        );
        assert_eq!(
            ToolCallFormat::from_template(QWEN3),
            Some(ToolCallFormat::Json)
        );
        // Llama 3.1's custom tool format: `<function=` but no `<tool_call>`.
        assert_eq!(
            ToolCallFormat::from_template("{{ '<function=' + name + '>' }}"),
            None
        );
        assert_eq!(
            ToolCallFormat::from_template("{{ messages[0].content }}"),
            None
        );
        // `<tool_call>` with no JSON object near it.
        assert_eq!(
            ToolCallFormat::from_template("{{ '<tool_call>' + x + '</tool_call>' }}"),
            None
        );
        // The markers must be near a `<tool_call>`.
        let far = format!("<tool_call>{}\"name\" arguments tojson", " ".repeat(600));
        assert_eq!(ToolCallFormat::from_template(&far), None);
        // Multi-byte text at the window's edge.
        let edge = format!("<tool_call>{}", "é".repeat(400));
        assert_eq!(ToolCallFormat::from_template(&edge), None);
    }

    #[test]
    fn demo_template_is_xml() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../models/demo/tokenizer_config.json"
        );
        let cfg: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("demo config"))
                .expect("JSON");
        let src = cfg["chat_template"].as_str().expect("chat_template");
        assert_eq!(
            ToolCallFormat::from_template(src),
            Some(ToolCallFormat::Xml)
        );
    }
}
