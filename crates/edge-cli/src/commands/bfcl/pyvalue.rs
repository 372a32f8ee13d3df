//! Python semantics of JSON values, as bfcl's checker sees them after `json.loads`:
//! the type a value has (`type(v)`), equality (`==`, where `1 == 1.0 == True`) and
//! its string normalisation.

use serde_json::Value;

/// The Python type of a JSON value after `json.loads`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PyType {
    /// `None`.
    None,
    /// `bool` (not an `int` for `type(v) == int`).
    Bool,
    /// `int` (a JSON number without fraction or exponent).
    Int,
    /// `float`.
    Float,
    /// `str`.
    Str,
    /// `list`.
    List,
    /// `dict`.
    Dict,
}

impl PyType {
    /// Python's name of the type, for messages.
    pub fn name(self) -> &'static str {
        match self {
            PyType::None => "NoneType",
            PyType::Bool => "bool",
            PyType::Int => "int",
            PyType::Float => "float",
            PyType::Str => "str",
            PyType::List => "list",
            PyType::Dict => "dict",
        }
    }
}

/// `type(v)`.
pub fn py_type(v: &Value) -> PyType {
    match v {
        Value::Null => PyType::None,
        Value::Bool(_) => PyType::Bool,
        // serde_json keeps `5` as an integer and `5.0` / `5e0` as a float, as json.loads.
        Value::Number(n) if n.is_f64() => PyType::Float,
        Value::Number(_) => PyType::Int,
        Value::String(_) => PyType::Str,
        Value::Array(_) => PyType::List,
        Value::Object(_) => PyType::Dict,
    }
}

/// A number as Python's numeric tower sees it (`True` is 1).
enum Num {
    Int(i128),
    Float(f64),
}

fn as_num(v: &Value) -> Option<Num> {
    match v {
        Value::Bool(b) => Some(Num::Int(i128::from(*b))),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Some(Num::Int(i128::from(i)))
            } else if let Some(u) = n.as_u64() {
                Some(Num::Int(i128::from(u)))
            } else {
                n.as_f64().map(Num::Float)
            }
        }
        _ => None,
    }
}

/// Python `a == b` on JSON-loaded values.
pub fn py_eq(a: &Value, b: &Value) -> bool {
    if let (Some(x), Some(y)) = (as_num(a), as_num(b)) {
        return match (x, y) {
            (Num::Int(x), Num::Int(y)) => x == y,
            (Num::Float(x), Num::Float(y)) => x == y,
            // Python compares int and float exactly; every int in the data fits f64's
            // integer range, where the cast is exact.
            (Num::Int(i), Num::Float(f)) | (Num::Float(f), Num::Int(i)) => i as f64 == f,
        };
    }
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| py_eq(v, w)))
        }
        _ => false,
    }
}

/// Python `v in list`.
pub fn py_in(v: &Value, list: &[Value]) -> bool {
    list.iter().any(|x| py_eq(v, x))
}

/// `"" in values`, where `values` is a parameter's list of acceptable values (a
/// string is searched as Python does: `"" in "abc"` holds).
pub fn accepts_omission(values: &Value) -> bool {
    match values {
        Value::Array(items) => py_in(&Value::String(String::new()), items),
        Value::String(_) => true,
        _ => false,
    }
}

/// bfcl's `standardize_string`: drop spaces and `,./-_*^`, lower-case, and turn
/// single quotes into double quotes.
pub fn standardize(s: &str) -> String {
    let kept: String = s
        .chars()
        .filter(|c| !matches!(c, ' ' | ',' | '.' | '/' | '-' | '_' | '*' | '^'))
        .collect();
    kept.to_lowercase().replace('\'', "\"")
}

/// A value with its top-level string standardised (lists and dicts are left as they
/// are, as bfcl does).
pub fn standardize_value(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(standardize(s)),
        other => other.clone(),
    }
}

/// The items Python's `for i in range(len(v)): v[i]` visits: a list's elements or a
/// string's characters; `None` where Python would raise.
pub fn py_items(v: &Value) -> Option<Vec<Value>> {
    match v {
        Value::Array(items) => Some(items.clone()),
        Value::String(s) => Some(s.chars().map(|c| Value::String(c.to_string())).collect()),
        Value::Object(m) if m.is_empty() => Some(Vec::new()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn types_follow_json_loads() {
        assert_eq!(py_type(&json!(5)), PyType::Int);
        assert_eq!(py_type(&json!(5.0)), PyType::Float);
        assert_eq!(
            py_type(&serde_json::from_str::<Value>("1e3").unwrap()),
            PyType::Float
        );
        assert_eq!(py_type(&json!(true)), PyType::Bool);
        assert_eq!(py_type(&json!(null)), PyType::None);
    }

    #[test]
    fn equality_is_pythons() {
        assert!(py_eq(&json!(1), &json!(1.0)));
        assert!(py_eq(&json!(true), &json!(1)));
        assert!(!py_eq(&json!("1"), &json!(1)));
        assert!(py_eq(&json!([1, 2.0]), &json!([1.0, 2])));
        assert!(!py_eq(&json!([1, 2]), &json!([2, 1])));
        assert!(py_eq(
            &json!({"a": 1, "b": [true]}),
            &json!({"b": [1], "a": 1.0})
        ));
        assert!(!py_eq(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
    }

    #[test]
    fn standardize_drops_punctuation_and_case() {
        assert_eq!(standardize("April 1, 2024"), "april12024");
        assert_eq!(standardize("New_York-City/NY.*^"), "newyorkcityny");
        assert_eq!(standardize("it's"), "it\"s");
        assert_eq!(standardize("tab\tstays"), "tab\tstays");
    }

    #[test]
    fn omission_needs_an_empty_string() {
        assert!(accepts_omission(&json!(["x", ""])));
        assert!(!accepts_omission(&json!(["x"])));
        assert!(!accepts_omission(&json!([0])));
    }
}
