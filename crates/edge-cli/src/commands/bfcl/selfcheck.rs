//! Answers built from an entry's own ground truth, to check the checker against the
//! real data: each expected call with, for every parameter, its first acceptable
//! value other than `""`; a parameter is left out where `""` is its only acceptable
//! value, or where the schema does not know it and it may be omitted. Java and JavaScript values are
//! written as the source text bfcl's converters read back.

use super::checker::ModelCall;
use super::data::{Entry, Language};
use super::pyvalue::accepts_omission;
use serde_json::{Map, Value};

/// The first acceptable value other than `""` (a required parameter may list `""`
/// first).
fn first_value(acceptable: &Value) -> Option<&Value> {
    acceptable
        .as_array()?
        .iter()
        .find(|v| v.as_str() != Some(""))
}

/// A value built from an answer: a dict parameter's answer is `{key: [acceptable]}`
/// and becomes `{key: first acceptable}`; a list of such dicts likewise.
fn concrete(value: &Value, details: &Value) -> Value {
    let ty = details["type"].as_str().unwrap_or_default();
    let items = details["items"]["type"].as_str().unwrap_or_default();
    let dict_of_lists = |v: &Value| match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter_map(|(k, vals)| first_value(vals).map(|v| (k.clone(), v.clone())))
                .collect::<Map<_, _>>(),
        ),
        other => other.clone(),
    };
    match (ty, value) {
        ("dict" | "HashMap", Value::Object(_)) => dict_of_lists(value),
        ("array" | "ArrayList" | "Array", Value::Array(list)) if items == "dict" => {
            Value::Array(list.iter().map(dict_of_lists).collect())
        }
        _ => value.clone(),
    }
}

/// A number as Python's `str` writes it (a whole float keeps its `.0`, which an
/// `any`-typed answer such as `"30.0"` needs).
fn number_text(v: &Value) -> String {
    match v.as_f64() {
        Some(f) if v.is_f64() && f.fract() == 0.0 && f.abs() < 1e16 => format!("{f:.1}"),
        Some(f) if v.is_f64() => format!("{f}"),
        _ => v.to_string(),
    }
}

/// A Java literal bfcl's `java_type_converter` reads back as `value`.
fn java_literal(value: &Value, ty: &str, items: Option<&str>) -> String {
    let scalar = |v: &Value, ty: &str| match (ty, v) {
        (_, Value::String(s)) => s.clone(),
        ("long", _) => format!("{}L", number_text(v)),
        ("float", _) => format!("{}f", number_text(v)),
        _ => number_text(v),
    };
    // Elements of a collection of unknown type go through `parse_java_value`.
    let untyped = |v: &Value| match v {
        Value::String(s) => format!("\"{s}\""),
        other => number_text(other),
    };
    match (ty, value) {
        ("Array", Value::Array(list)) => {
            let inner = items.unwrap_or("Object");
            let elems: Vec<String> = list.iter().map(|v| scalar(v, inner)).collect();
            format!("new {inner}[]{{{}}}", elems.join(", "))
        }
        ("ArrayList", Value::Array(list)) if list.is_empty() => "new ArrayList<>()".into(),
        ("ArrayList", Value::Array(list)) => {
            let inner = items.unwrap_or("Object");
            let elems: Vec<String> = list
                .iter()
                .map(|v| match inner {
                    "String" | "char" => format!("\"{}\"", v.as_str().unwrap_or_default()),
                    _ => scalar(v, inner),
                })
                .collect();
            format!("new ArrayList<>(Arrays.asList({}))", elems.join(", "))
        }
        ("HashMap", Value::Object(map)) => {
            let puts: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("put(\"{k}\", {});", untyped(v)))
                .collect();
            format!("new HashMap<String, Object>() {{{{ {} }}}}", puts.join(" "))
        }
        _ => scalar(value, ty),
    }
}

/// A JavaScript literal bfcl's `js_type_converter` reads back as `value`.
fn js_literal(value: &Value, ty: &str) -> String {
    fn element(v: &Value) -> String {
        match v {
            Value::String(s) => format!("\"{s}\""),
            Value::Array(list) => format!(
                "[{}]",
                list.iter().map(element).collect::<Vec<_>>().join(", ")
            ),
            Value::Object(map) => {
                let pairs: Vec<String> = map
                    .iter()
                    .map(|(k, v)| format!("{k}: {}", element(v)))
                    .collect();
                format!("{{{}}}", pairs.join(", "))
            }
            other => number_text(other),
        }
    }
    match (ty, value) {
        (_, Value::String(s)) => s.clone(),
        ("Bigint", _) => format!("{}n", number_text(value)),
        ("array" | "dict", _) => element(value),
        _ => number_text(value),
    }
}

/// The calls the ground truth expects, as a model would send them.
pub fn ground_truth_calls(entry: &Entry) -> Vec<ModelCall> {
    let Some(truth) = &entry.ground_truth else {
        return Vec::new();
    };
    let lang = entry.category.language();
    truth
        .iter()
        .filter_map(Value::as_object)
        .filter_map(|call| call.iter().next())
        .map(|(name, params)| {
            let desc = entry.functions.iter().find(|f| f["name"] == name.as_str());
            let props = desc.map(|d| &d["parameters"]["properties"]);
            let mut args = Map::new();
            for (param, acceptable) in params.as_object().into_iter().flatten() {
                let Some(v) = first_value(acceptable) else {
                    continue;
                };
                let details = props.map(|p| &p[param]).unwrap_or(&Value::Null);
                // A few answers list an optional parameter the schema lacks: passing
                // it could only fail.
                if details.is_null() && accepts_omission(acceptable) {
                    continue;
                }
                let ty = details["type"].as_str().unwrap_or_default();
                let items = details["items"]["type"].as_str();
                let v = concrete(v, details);
                let v = match lang {
                    Language::Python => v,
                    Language::Java => Value::String(java_literal(&v, ty, items)),
                    Language::JavaScript => Value::String(js_literal(&v, ty)),
                };
                args.insert(param.clone(), v);
            }
            ModelCall {
                name: name.replace('.', "_"),
                arguments: Value::Object(args),
            }
        })
        .collect()
}
