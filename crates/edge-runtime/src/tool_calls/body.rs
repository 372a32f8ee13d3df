//! The body of one `<tool_call>` block (the text between the tags), in either form.

use super::stream_call::Tag;
use super::{ToolCallFormat, ToolSchemas, Warning, WarningKind};
use serde_json::{Map, Value};

/// A call body that parsed.
#[derive(Debug)]
pub(super) struct ParsedBody {
    pub name: String,
    pub arguments: Map<String, Value>,
    pub warnings: Vec<Warning>,
}

/// Parses a call body in `format`, or in the other form when the body plainly is one
/// (a `{` or `<function=` first), with a warning. `Err` carries why it is malformed.
pub(super) fn parse_body(
    format: ToolCallFormat,
    body: &str,
    schemas: &ToolSchemas,
) -> Result<ParsedBody, String> {
    let head = body.trim_start();
    let found = if head.starts_with('{') {
        ToolCallFormat::Json
    } else if head.starts_with(FUNCTION_OPEN) {
        ToolCallFormat::Xml
    } else {
        format
    };
    let mut parsed = match found {
        ToolCallFormat::Xml => {
            let (name, params) = parse_xml(body)?;
            let (arguments, warnings) = schemas.convert_xml_arguments(&name, &params);
            ParsedBody {
                name,
                arguments,
                warnings,
            }
        }
        ToolCallFormat::Json => {
            let (name, arguments) = parse_json(body)?;
            let warnings = schemas.check_json_arguments(&name, &arguments);
            ParsedBody {
                name,
                arguments,
                warnings,
            }
        }
    };
    if found != format {
        parsed.warnings.insert(
            0,
            Warning::new(
                WarningKind::FormatMismatch,
                format!("expected a {format:?} tool call, found the {found:?} form"),
            ),
        );
    }
    Ok(parsed)
}

const FUNCTION_OPEN: &str = "<function=";
const FUNCTION_CLOSE: &str = "</function>";
const PARAM_OPEN: &str = "<parameter=";
const PARAM_CLOSE: &str = "</parameter>";

/// `<function=NAME>` (`<parameter=ARG>\nVALUE\n</parameter>`)* `</function>`, with only
/// whitespace around the elements. Returns the name and the (name, value) pairs.
fn parse_xml(body: &str) -> Result<(String, Vec<(String, String)>), String> {
    let rest = body.trim_start();
    let rest = rest
        .strip_prefix(FUNCTION_OPEN)
        .ok_or("no <function=...> at the start of the call")?;
    let (name, mut rest) = tag_name(rest, "function")?;
    let mut params = Vec::new();
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix(FUNCTION_CLOSE) {
            if !after.trim().is_empty() {
                return Err(format!(
                    "text after </function>: {:?}",
                    preview(after.trim())
                ));
            }
            return Ok((name, params));
        }
        let Some(after) = rest.strip_prefix(PARAM_OPEN) else {
            return Err(if rest.is_empty() {
                "no </function>".to_string()
            } else {
                format!("unexpected text in the call: {:?}", preview(rest))
            });
        };
        let (key, after) = tag_name(after, "parameter")?;
        let end = after
            .find(PARAM_CLOSE)
            .ok_or_else(|| format!("parameter {key:?} has no </parameter>"))?;
        let raw = &after[..end];
        let value = raw.strip_prefix('\n').unwrap_or(raw);
        let value = value.strip_suffix('\n').unwrap_or(value);
        params.push((key, value.to_string()));
        rest = &after[end + PARAM_CLOSE.len()..];
    }
}

/// The `NAME>` after `<function=` or `<parameter=`: the trimmed name, non-empty and
/// on one line, and the text after the `>`.
fn tag_name<'a>(text: &'a str, what: &str) -> Result<(String, &'a str), String> {
    match super::stream_call::tag_name(text) {
        Tag::Name(name, used) => Ok((name, &text[used..])),
        Tag::Bad if text.contains('>') => {
            let name = text[..text.find('>').unwrap_or(0)].trim();
            Err(format!("bad {what} name {:?}", preview(name)))
        }
        _ => Err(format!("<{what}=...> has no closing '>'")),
    }
}

/// `{"name": NAME, "arguments": {...}}`; `arguments` may be a string holding a JSON
/// object, and a missing one is `{}`.
fn parse_json(body: &str) -> Result<(String, Map<String, Value>), String> {
    let v: Value =
        serde_json::from_str(body.trim()).map_err(|e| format!("the call is not JSON: {e}"))?;
    let Value::Object(mut obj) = v else {
        return Err("the call is not a JSON object".into());
    };
    let name = match obj.remove("name") {
        Some(Value::String(n)) if !n.trim().is_empty() => n.trim().to_string(),
        _ => return Err("the call has no \"name\" string".into()),
    };
    let arguments = match obj.remove("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(Value::String(s)) => match serde_json::from_str::<Value>(&s) {
            Ok(Value::Object(m)) => m,
            _ => return Err("\"arguments\" is a string that is not a JSON object".into()),
        },
        Some(_) => return Err("\"arguments\" is not an object".into()),
    };
    Ok((name, arguments))
}

pub(super) fn preview(text: &str) -> &str {
    match text.char_indices().nth(40) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn xml(body: &str) -> Result<ParsedBody, String> {
        parse_body(ToolCallFormat::Xml, body, &ToolSchemas::new(None))
    }

    #[test]
    fn xml_bodies() {
        let p = xml("\n<function=f>\n<parameter=a>\nx\ny\n</parameter>\n<parameter=b>\n\n2\n\n</parameter>\n</function>\n")
            .expect("parses");
        assert_eq!(p.name, "f");
        assert_eq!(Value::Object(p.arguments), json!({"a": "x\ny", "b": 2}));
        assert!(p.warnings.is_empty());
        // No parameters, no newlines.
        let p = xml("<function=g></function>").expect("parses");
        assert_eq!((p.name.as_str(), p.arguments.len()), ("g", 0));
        // A value with tags inside it.
        let p = xml(
            "<function=f>\n<parameter=a>\n<function=x> <parameter=y>\n</parameter>\n</function>",
        )
        .expect("parses");
        assert_eq!(p.arguments["a"], json!("<function=x> <parameter=y>"));
    }

    #[test]
    fn malformed_xml() {
        // Each with the reason the parser gives (its errors are messages for the log).
        for (body, says) in [
            ("", "no <function=...> at the start"),
            ("\n", "no <function=...> at the start"),
            ("hello", "no <function=...> at the start"),
            (
                "<parameter=a>\n1\n</parameter>",
                "no <function=...> at the start",
            ),
            ("<function=f>", "no </function>"),
            (
                "<function=f>\n<parameter=a>\n1\n</function>",
                "parameter \"a\" has no </parameter>",
            ),
            (
                "<function=f>\ngarbage\n</function>",
                "unexpected text in the call",
            ),
            (
                "<function=f>\n</function>\ntrailing",
                "text after </function>",
            ),
            ("<function=>\n</function>", "bad function name"),
            ("<function=f\n</function>", "bad function name"),
            (
                "<function=f>\n<parameter=>\n1\n</parameter>\n</function>",
                "bad parameter name",
            ),
        ] {
            let err = xml(body).expect_err(body);
            assert!(err.contains(says), "{body:?}: {err}");
        }
    }

    #[test]
    fn json_bodies() {
        let s = ToolSchemas::new(None);
        let p = parse_body(
            ToolCallFormat::Json,
            "\n{\"name\": \"f\", \"arguments\": {\"a\": [1]}}\n",
            &s,
        )
        .expect("parses");
        assert_eq!(
            (p.name.as_str(), Value::Object(p.arguments)),
            ("f", json!({"a": [1]}))
        );
        let p = parse_body(
            ToolCallFormat::Json,
            "{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}",
            &s,
        )
        .expect("parses");
        assert_eq!(Value::Object(p.arguments), json!({"a": 1}));
        let p = parse_body(ToolCallFormat::Json, "{\"name\": \"f\"}", &s).expect("parses");
        assert!(p.arguments.is_empty());
        for body in [
            "{\"name\": \"f\", \"arguments\": {",
            "[1]",
            "{\"arguments\": {}}",
            "{\"name\": 3}",
            "{\"name\": \"f\", \"arguments\": [1]}",
            "{\"name\": \"f\", \"arguments\": \"nope\"}",
            "not json",
        ] {
            assert!(
                parse_body(ToolCallFormat::Json, body, &s).is_err(),
                "{body:?}"
            );
        }
    }

    #[test]
    fn other_form_accepted_with_a_warning() {
        let p = xml("\n{\"name\": \"f\", \"arguments\": {}}\n").expect("parses");
        assert_eq!(p.warnings[0].kind, WarningKind::FormatMismatch);
        let p = parse_body(
            ToolCallFormat::Json,
            "<function=f>\n</function>",
            &ToolSchemas::new(None),
        )
        .expect("parses");
        assert_eq!(p.warnings[0].kind, WarningKind::FormatMismatch);
    }
}
