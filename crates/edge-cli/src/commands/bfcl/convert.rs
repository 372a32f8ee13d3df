//! bfcl's Java and JavaScript value converters (`eval_checker/ast_eval/
//! type_convertor/`): the model gives every Java/JS argument as a string of source
//! text, which is turned into a Python value before the usual checks. Their regular
//! expressions and fall-backs ("default to string") are reproduced as written,
//! quirks included (a Java `char` always stays a string; a JS dict stops at its
//! first `}`).

use regex::Regex;
use serde_json::{Map, Value};
use std::sync::LazyLock;

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("static pattern")
}

static INT: LazyLock<Regex> = LazyLock::new(|| re(r"^-?\d+$"));
static JAVA_FLOAT: LazyLock<Regex> = LazyLock::new(|| re(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?[fF]$"));
static JAVA_DOUBLE: LazyLock<Regex> = LazyLock::new(|| re(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$"));
static JAVA_LONG: LazyLock<Regex> = LazyLock::new(|| re(r"^-?\d+[lL]$"));
static AS_LIST: LazyLock<Regex> =
    LazyLock::new(|| re(r"new\s+ArrayList<\w*>\(Arrays\.asList\((.+?)\)\)"));
static ADD_BLOCK: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?s)new\s+ArrayList<\w*>\(\)\s*\{\{\s*(.+?)\s*\}\}"));
static ADD_CALL: LazyLock<Regex> = LazyLock::new(|| re(r"add\((.+?)\)"));
static EMPTY_LIST: LazyLock<Regex> = LazyLock::new(|| re(r"new\s+ArrayList<\w*>\(\)"));
static ARRAY: LazyLock<Regex> = LazyLock::new(|| re(r"new\s+\w+\[\]\s*\{(.*?)\}"));
static HASHMAP: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?s)new\s+HashMap<.*?>\s*\(\)\s*\{\s*\{?\s*(.*?)\s*\}?\s*\}"));
static PUT: LazyLock<Regex> = LazyLock::new(|| re(r#"put\("(.*?)",\s*(.*?)\)"#));
static EMPTY_MAP: LazyLock<Regex> = LazyLock::new(|| re(r"new\s+HashMap<.*?>\s*\(\)"));
static JS_FLOAT: LazyLock<Regex> = LazyLock::new(|| re(r"^-?\d+(\.\d+)?$"));
static JS_BIGINT: LazyLock<Regex> = LazyLock::new(|| re(r"^-?\d+n$"));
static JS_ARRAY_2D: LazyLock<Regex> = LazyLock::new(|| {
    re(r"^(?:\[\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\]|\bnew\s+Array\(\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\))")
});
static JS_INNER: LazyLock<Regex> = LazyLock::new(|| re(r"\[(.*?)\]"));
static JS_ARRAY: LazyLock<Regex> = LazyLock::new(|| re(r"^(?:\[(.*?)\]|\bnew\s+Array\((.*?)\))"));
static JS_DICT: LazyLock<Regex> = LazyLock::new(|| re(r"^\{(.*?)\}"));

/// Python's `int(text)` result as JSON, when it fits.
fn int_value(text: &str) -> Option<Value> {
    let t = text.trim();
    t.parse::<i64>()
        .map(Value::from)
        .or_else(|_| t.parse::<u64>().map(Value::from))
        .ok()
}

/// Python's `float(text)` as JSON (non-finite values have no JSON form).
fn float_value(text: &str) -> Option<Value> {
    let f = text.trim().parse::<f64>().ok()?;
    serde_json::Number::from_f64(f).map(Value::Number)
}

/// Python's `s[1:-1]`.
fn strip_ends(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    match chars.len() {
        0..=2 => String::new(),
        n => chars[1..n - 1].iter().collect(),
    }
}

fn string(s: &str) -> Value {
    Value::String(s.to_string())
}

/// `java_type_converter(value, expected_type, nested_type)`; `Err` where bfcl raises.
pub fn java(value: &str, expected: &str, nested: Option<&str>) -> Result<Value, String> {
    Ok(match expected {
        "byte" | "short" | "integer" => match INT.is_match(value) {
            true => int_value(value).unwrap_or_else(|| string(value)),
            false => string(value),
        },
        "float" => match JAVA_FLOAT.is_match(value) {
            true => float_value(&value[..value.len() - 1]).unwrap_or_else(|| string(value)),
            false => string(value),
        },
        "double" => match JAVA_DOUBLE.is_match(value) {
            true => float_value(value).unwrap_or_else(|| string(value)),
            false => string(value),
        },
        "long" => match JAVA_LONG.is_match(value) {
            true => int_value(&value[..value.len() - 1]).unwrap_or_else(|| string(value)),
            false => string(value),
        },
        "boolean" => match value {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => string(value),
        },
        // bfcl's char pattern (`^\'.$\'`) can never match: a char stays as given.
        "char" | "String" | "any" => string(value),
        "ArrayList" => java_arraylist(value, nested)?,
        "Array" => java_array(value, nested)?,
        "HashMap" => java_hashmap(value),
        other => return Err(format!("Java type `{other}` has no converter in bfcl")),
    })
}

/// An element of a Java collection: quotes dropped for char/String, else converted.
fn java_element(text: &str, nested: Option<&str>) -> Result<Value, String> {
    match nested {
        Some("char" | "String") => Ok(Value::String(strip_ends(text))),
        Some(t) => java(text, t, None),
        None => Ok(java_value(text)),
    }
}

fn java_arraylist(text: &str, nested: Option<&str>) -> Result<Value, String> {
    if let Some(c) = AS_LIST.captures(text) {
        let items = c[1].split(',').map(|e| java_element(e.trim(), nested));
        return items.collect::<Result<Vec<_>, _>>().map(Value::Array);
    }
    if let Some(c) = ADD_BLOCK.captures(text) {
        let items = ADD_CALL
            .captures_iter(&c[1])
            .map(|m| java_element(m[1].trim(), nested));
        return items.collect::<Result<Vec<_>, _>>().map(Value::Array);
    }
    if EMPTY_LIST.is_match(text) {
        return Ok(Value::Array(Vec::new()));
    }
    Ok(string(text))
}

fn java_array(text: &str, nested: Option<&str>) -> Result<Value, String> {
    let Some(c) = ARRAY.captures(text) else {
        return Ok(string(text));
    };
    let items = c[1]
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| match nested {
            Some(t) => java(x, t, None),
            None => Ok(java_value(x)),
        });
    items.collect::<Result<Vec<_>, _>>().map(Value::Array)
}

fn java_hashmap(text: &str) -> Value {
    if let Some(c) = HASHMAP.captures(text) {
        let mut map = Map::new();
        if !c[1].trim().is_empty() {
            for m in PUT.captures_iter(&c[1]) {
                map.insert(m[1].to_string(), java_value(m[2].trim()));
            }
        }
        return Value::Object(map);
    }
    if EMPTY_MAP.is_match(text) {
        return Value::Object(Map::new());
    }
    string(text)
}

/// `parse_java_value`: a literal of unknown type.
fn java_value(text: &str) -> Value {
    match text {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        _ => {}
    }
    if text.len() >= 2 && text.starts_with('"') && text.ends_with('"') {
        return Value::String(strip_ends(text));
    }
    if JAVA_LONG.is_match(text)
        && let Some(v) = int_value(&text[..text.len() - 1])
    {
        return v;
    }
    if JAVA_FLOAT.is_match(text)
        && let Some(v) = float_value(&text[..text.len() - 1])
    {
        return v;
    }
    int_value(text)
        .or_else(|| float_value(text))
        .unwrap_or_else(|| string(text))
}

fn quoted(s: &str) -> bool {
    (s.starts_with('"') && s.ends_with('"')) || (s.starts_with('\'') && s.ends_with('\''))
}

/// `js_type_converter(value, expected_type, nested_type)`; `Err` where bfcl raises.
pub fn javascript(value: &str, expected: &str, nested: Option<&str>) -> Result<Value, String> {
    Ok(match expected {
        "String" => match quoted(value) {
            true => Value::String(strip_ends(value)),
            false => string(value),
        },
        "integer" => match INT.is_match(value) {
            true => int_value(value).unwrap_or_else(|| string(value)),
            false => string(value),
        },
        "float" => match JS_FLOAT.is_match(value) {
            true => float_value(value).unwrap_or_else(|| string(value)),
            false => string(value),
        },
        "Bigint" => match JS_BIGINT.is_match(value) {
            true => int_value(&value[..value.len() - 1]).unwrap_or_else(|| string(value)),
            false => string(value),
        },
        "Boolean" => match value {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => string(value),
        },
        "array" => js_array(value, nested),
        "dict" => js_dict(value),
        "any" => string(value),
        other => {
            return Err(format!(
                "JavaScript type `{other}` has no converter in bfcl"
            ));
        }
    })
}

/// `parse_js_collection(code, "array", nested)`; any error gives the code back as a
/// string, as bfcl's bare `except`.
fn js_array(code: &str, nested: Option<&str>) -> Value {
    let code = code.trim();
    if let Some(m) = JS_ARRAY_2D.find(code) {
        let rows = JS_INNER
            .captures_iter(m.as_str())
            .enumerate()
            .map(|(i, c)| {
                let mut row = c[1].trim();
                if i == 0 && row.starts_with('[') {
                    row = &row[1..];
                }
                Value::Array(row.split(',').map(|e| js_value(e.trim())).collect())
            });
        return Value::Array(rows.collect());
    }
    let Some(c) = JS_ARRAY.captures(code) else {
        return string(code);
    };
    let inner = c
        .get(1)
        .or_else(|| c.get(2))
        .map_or("", |m| m.as_str())
        .trim();
    let elements: Vec<&str> = match inner.is_empty() {
        true => Vec::new(),
        false => inner.split(',').collect(),
    };
    let converted: Result<Vec<Value>, String> = elements
        .iter()
        .map(|e| {
            let e = e.trim();
            match nested {
                Some(t) if e.starts_with('\'') || e.starts_with('"') => {
                    javascript(e, t, Some("String"))
                }
                Some(t) => javascript(e, t, None),
                None => Ok(js_value(e)),
            }
        })
        .collect();
    converted.map(Value::Array).unwrap_or_else(|_| string(code))
}

/// `parse_js_collection(code, "dict")`.
fn js_dict(code: &str) -> Value {
    let code = code.trim();
    if code == "{}" {
        return Value::Object(Map::new());
    }
    let Some(c) = JS_DICT.captures(code) else {
        return string(code);
    };
    let mut map = Map::new();
    for (key, value) in js_pairs(&c[1]) {
        let key = key.trim().trim_matches(['\'', '"']);
        let value = value.trim();
        let parsed = if value.starts_with('[') && value.ends_with(']') {
            js_array(value, None)
        } else if value.starts_with('{') && value.ends_with('}') {
            js_dict(value)
        } else {
            js_value(value.trim_matches(['\'', '"']))
        };
        map.insert(key.to_string(), parsed);
    }
    Value::Object(map)
}

/// `re.findall(r"([^:]+):\s*(.*?)(?:,\s*(?=[^,]+:)|$)", content)`, written out
/// because the `regex` crate has no look-ahead. A value ends at the first comma
/// after which a colon comes before any further comma, or at the end.
fn js_pairs(content: &str) -> Vec<(&str, &str)> {
    let s = content.as_bytes();
    let mut out = Vec::new();
    let mut p = 0;
    while p < s.len() {
        // The key runs to the first colon and must not be empty.
        let Some(colon) = s[p..].iter().position(|&b| b == b':').map(|i| p + i) else {
            break;
        };
        if colon == p {
            p += 1;
            continue;
        }
        let mut v = colon + 1;
        while v < s.len() && is_space(s[v]) {
            v += 1;
        }
        let mut end = s.len();
        let mut next = s.len();
        for e in v..s.len() {
            if s[e] == b',' && colon_before_comma(s, e + 1) {
                end = e;
                next = e + 1;
                while next < s.len() && is_space(s[next]) {
                    next += 1;
                }
                break;
            }
        }
        out.push((&content[p..colon], &content[v..end]));
        p = next;
    }
    out
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// Whether a colon sits at or after `from + 1` with no comma in `from..colon`.
fn colon_before_comma(s: &[u8], from: usize) -> bool {
    for (i, &b) in s.iter().enumerate().skip(from) {
        match b {
            b',' => return false,
            b':' if i > from => return true,
            _ => {}
        }
    }
    false
}

/// `parse_js_value`.
fn js_value(text: &str) -> Value {
    let t = text.trim();
    match t {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ if quoted(t) => Value::String(strip_ends(t)),
        _ => int_value(t)
            .or_else(|| float_value(t))
            .unwrap_or_else(|| string(t)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn java_scalars_and_collections() {
        assert_eq!(java("123", "integer", None).unwrap(), json!(123));
        assert_eq!(java("12a", "integer", None).unwrap(), json!("12a"));
        assert_eq!(java("3.5f", "float", None).unwrap(), json!(3.5));
        assert_eq!(java("3.5", "float", None).unwrap(), json!("3.5"));
        assert_eq!(java("-2L", "long", None).unwrap(), json!(-2));
        assert_eq!(java("true", "boolean", None).unwrap(), json!(true));
        assert_eq!(java("'a'", "char", None).unwrap(), json!("'a'"));
        assert_eq!(
            java("new int[] {1, 2, 3}", "Array", Some("integer")).unwrap(),
            json!([1, 2, 3])
        );
        assert_eq!(
            java(
                r#"new ArrayList<>(Arrays.asList("a", "b"))"#,
                "ArrayList",
                Some("String")
            )
            .unwrap(),
            json!(["a", "b"])
        );
        assert_eq!(
            java(
                r#"new HashMap<String, Object>() {{ put("k1", 1); put("k2", "v"); }}"#,
                "HashMap",
                None
            )
            .unwrap(),
            json!({"k1": 1, "k2": "v"})
        );
        assert_eq!(java("new HashMap<>()", "HashMap", None).unwrap(), json!({}));
        let err = java("x", "Set", None).unwrap_err();
        assert!(err.contains("Set"), "{err}");
    }

    #[test]
    fn javascript_values() {
        assert_eq!(javascript("'abc'", "String", None).unwrap(), json!("abc"));
        assert_eq!(javascript("abc", "String", None).unwrap(), json!("abc"));
        assert_eq!(javascript("\"", "String", None).unwrap(), json!(""));
        assert_eq!(javascript("10n", "Bigint", None).unwrap(), json!(10));
        assert_eq!(javascript("1.5", "float", None).unwrap(), json!(1.5));
        assert_eq!(
            javascript("[1, 'a', true]", "array", None).unwrap(),
            json!([1, "a", true])
        );
        assert_eq!(
            javascript("['a', \"b\"]", "array", Some("String")).unwrap(),
            json!(["a", "b"])
        );
        assert_eq!(
            javascript("[[1, 2], [3]]", "array", None).unwrap(),
            json!([[1, 2], [3]])
        );
        assert_eq!(
            javascript("{a: 1, 'b': 'x, y', c: [1, 2]}", "dict", None).unwrap(),
            json!({"a": 1, "b": "x, y", "c": [1, 2]})
        );
        assert_eq!(javascript("{}", "dict", None).unwrap(), json!({}));
        assert_eq!(javascript("nope", "dict", None).unwrap(), json!("nope"));
    }
}
