//! The request MLPerf's harness sends for an entry: bfcl's `convert_to_tool(…,
//! GORILLA_TO_OPENAPI, OPENAI_COMPLETIONS)` for the tools, the question's messages
//! with no system prompt, and `tool_choice: auto`.

use super::data::Entry;
use serde_json::{Map, Value, json};

/// bfcl's `GORILLA_TO_OPENAPI`: Gorilla (Python, Java, JavaScript) type names to
/// JSON-schema types; anything else becomes `string`.
fn openapi_type(gorilla: &str) -> Option<&'static str> {
    Some(match gorilla {
        "integer" | "byte" | "short" | "long" | "Bigint" => "integer",
        "number" | "float" | "double" => "number",
        "string" | "any" | "char" | "Any" | "String" => "string",
        "boolean" | "bool" => "boolean",
        "array" | "list" | "tuple" | "ArrayList" | "Array" | "Queue" | "Stack" => "array",
        "dict" | "object" | "HashMap" | "Hashtable" => "object",
        _ => return None,
    })
}

/// The mapped type of an `items` schema (bfcl indexes its table there, so an
/// unknown name is an error in Python; it becomes `string` here).
fn map_items_type(schema: &mut Value) {
    let mapped = schema["type"]
        .as_str()
        .map(|t| openapi_type(t).unwrap_or("string"));
    if let (Some(mapped), Some(obj)) = (mapped, schema.as_object_mut()) {
        obj.insert("type".into(), Value::from(mapped));
    }
}

/// bfcl's `_cast_to_openai_type` over a `properties` map, in place.
fn cast_properties(properties: &mut Map<String, Value>) {
    for prop in properties.values_mut() {
        let Some(prop) = prop.as_object_mut() else {
            continue;
        };
        let gorilla = prop.get("type").and_then(Value::as_str).map(str::to_string);
        let mapped = match gorilla.as_deref() {
            None => "string",
            Some(t) => {
                if t == "float" {
                    // bfcl marks floats for OpenAI-style schemas (key order kept:
                    // `format` lands after the existing keys, as in a Python dict).
                    prop.insert("format".into(), Value::from("float"));
                    let desc = prop
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    let desc = format!("{desc} This is a float type value.");
                    prop.insert("description".into(), Value::from(desc));
                }
                openapi_type(t).unwrap_or("string")
            }
        };
        prop.insert("type".into(), Value::from(mapped));
        if mapped != "array" && mapped != "object" {
            continue;
        }
        if let Some(Value::Object(inner)) = prop.get_mut("properties") {
            cast_properties(inner);
        } else if let Some(items) = prop.get_mut("items") {
            map_items_type(items);
            if items["type"] == "array" && items.get("items").is_some() {
                map_items_type(&mut items["items"]);
            } else if items["type"] == "object"
                && let Some(Value::Object(inner)) = items.get_mut("properties")
            {
                cast_properties(inner);
            }
        }
    }
}

/// One BFCL function description as an OpenAI tool: dots in the name become
/// underscores, `parameters.type` becomes `object`, property types are mapped.
pub fn convert_function(function: &Value) -> Value {
    let mut f = function.clone();
    if let Some(name) = f["name"].as_str() {
        let name = name.replace('.', "_");
        f["name"] = Value::from(name);
    }
    if let Some(params) = f.get_mut("parameters").and_then(Value::as_object_mut) {
        params.insert("type".into(), Value::from("object"));
        if let Some(Value::Object(props)) = params.get_mut("properties") {
            cast_properties(props);
        }
    }
    json!({"type": "function", "function": f})
}

/// An entry's tools.
pub fn tools(entry: &Entry) -> Vec<Value> {
    entry.functions.iter().map(convert_function).collect()
}

/// The question's messages, flattened over turns: `{role, content}` with a null or
/// missing content sent as `""` (as the harness does, for servers that reject null).
pub fn messages(entry: &Entry) -> Vec<Value> {
    entry
        .question
        .iter()
        .flatten()
        .map(|m| {
            let content = match &m["content"] {
                Value::Null => Value::from(""),
                Value::String(s) if s.is_empty() => Value::from(""),
                other => other.clone(),
            };
            json!({"role": m["role"], "content": content})
        })
        .collect()
}

/// Generation settings of a request.
#[derive(Debug, Clone)]
pub struct RequestOptions {
    /// The `model` field (servers may ignore it).
    pub model: String,
    /// `max_completion_tokens`.
    pub max_completion_tokens: u32,
}

/// The chat-completions request body for an entry, as MLPerf's harness sends it:
/// greedy (`temperature: 0`, `seed: 42`), streamed, tools with `tool_choice: auto`.
pub fn request_body(entry: &Entry, opts: &RequestOptions) -> Value {
    json!({
        "model": opts.model,
        "messages": messages(entry),
        "tools": tools(entry),
        "tool_choice": "auto",
        "temperature": 0,
        "seed": 42,
        "max_completion_tokens": opts.max_completion_tokens,
        "stream": true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_names_and_types() {
        let f = json!({
            "name": "math.hypot",
            "description": "d",
            "parameters": {"type": "dict", "properties": {
                "x": {"type": "float", "description": "x"},
                "v": {"type": "array", "items": {"type": "float"}, "description": "v"},
                "m": {"type": "dict", "properties": {"k": {"type": "tuple", "items": {"type": "integer"}}}},
                "a": {"type": "any"},
                "l": {"type": "long"},
                "n": {"description": "no type"},
                "rows": {"type": "array", "items": {"type": "dict", "properties": {"f": {"type": "float", "description": ""}}}}
            }, "required": ["x"]}
        });
        let t = convert_function(&f);
        let func = &t["function"];
        assert_eq!(t["type"], "function");
        assert_eq!(func["name"], "math_hypot");
        let p = &func["parameters"];
        assert_eq!(p["type"], "object");
        assert_eq!(p["properties"]["x"]["type"], "number");
        assert_eq!(p["properties"]["x"]["format"], "float");
        assert_eq!(
            p["properties"]["x"]["description"],
            "x This is a float type value."
        );
        // Items are mapped but not marked as floats.
        assert_eq!(p["properties"]["v"]["items"], json!({"type": "number"}));
        assert_eq!(p["properties"]["m"]["type"], "object");
        assert_eq!(p["properties"]["m"]["properties"]["k"]["type"], "array");
        assert_eq!(
            p["properties"]["m"]["properties"]["k"]["items"]["type"],
            "integer"
        );
        assert_eq!(p["properties"]["a"]["type"], "string");
        assert_eq!(p["properties"]["l"]["type"], "integer");
        assert_eq!(p["properties"]["n"]["type"], "string");
        let row = &p["properties"]["rows"]["items"];
        assert_eq!(row["type"], "object");
        assert_eq!(row["properties"]["f"]["type"], "number");
        assert_eq!(row["properties"]["f"]["format"], "float");
        // The description keeps its place; `format` is appended.
        let keys: Vec<&String> = p["properties"]["x"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["type", "description", "format"]);
        assert_eq!(p["required"], json!(["x"]));
    }
}
