//! The JSON Schema types a parameter declares.

use serde_json::Value;

/// A JSON Schema primitive type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum JsonType {
    String,
    Integer,
    Number,
    Boolean,
    Object,
    Array,
    Null,
}

impl JsonType {
    pub(super) fn from_name(name: &str) -> Option<JsonType> {
        Some(match name {
            "string" => JsonType::String,
            "integer" => JsonType::Integer,
            "number" => JsonType::Number,
            "boolean" => JsonType::Boolean,
            "object" => JsonType::Object,
            "array" => JsonType::Array,
            "null" => JsonType::Null,
            _ => return None,
        })
    }

    pub(super) fn matches(self, v: &Value) -> bool {
        match self {
            JsonType::String => v.is_string(),
            JsonType::Integer => v.is_i64() || v.is_u64(),
            JsonType::Number => v.is_number(),
            JsonType::Boolean => v.is_boolean(),
            JsonType::Object => v.is_object(),
            JsonType::Array => v.is_array(),
            JsonType::Null => v.is_null(),
        }
    }
}

/// The types a parameter's schema allows; `None` means any (no schema, or one this
/// module does not understand).
pub(super) fn declared_types(prop: &Value) -> Option<Vec<JsonType>> {
    match prop.get("type") {
        Some(Value::String(name)) => JsonType::from_name(name).map(|t| vec![t]),
        Some(Value::Array(names)) => {
            let types: Option<Vec<JsonType>> = names
                .iter()
                .map(|n| n.as_str().and_then(JsonType::from_name))
                .collect();
            types.filter(|t| !t.is_empty())
        }
        Some(_) => None,
        None => {
            let alts = prop
                .get("anyOf")
                .or_else(|| prop.get("oneOf"))
                .and_then(Value::as_array)?;
            let mut all = Vec::new();
            for alt in alts {
                all.extend(declared_types(alt)?);
            }
            (!all.is_empty()).then_some(all)
        }
    }
}

/// `integer | string` and the like, for messages.
pub(super) fn type_names(types: &[JsonType]) -> String {
    let names: Vec<String> = types
        .iter()
        .map(|t| format!("{t:?}").to_lowercase())
        .collect();
    names.join(" | ")
}
