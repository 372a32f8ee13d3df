//! bfcl's AST checker (`bfcl_eval/eval_checker/ast_eval/ast_checker.py`), as MLPerf
//! calls it: model name `gpt-4o-2024-11-20-FC`, so a dotted function name is expected
//! with underscores. Python semantics are kept where they decide a verdict: strict
//! `type(v) == T` checks (a bool is not an int), int accepted for float, `==` across
//! int/float, "variable" answers, one level of nested type checks, and string
//! normalisation.

use super::convert;
use super::data::{Category, Entry, Language};
pub use super::mismatch::Mismatch;
use super::pyvalue::{
    PyType, accepts_omission, py_in, py_items, py_type, standardize, standardize_value,
};
use serde_json::{Map, Value};

/// One tool call the model made.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCall {
    /// The function name as called (underscored, as in the tools sent).
    pub name: String,
    /// The arguments: a JSON object when well-formed. The raw text of unparseable
    /// arguments is kept as a JSON string and checked as `{}` (as MLPerf's scorer
    /// does); any other non-object value is a malformed call.
    pub arguments: Value,
}

impl ModelCall {
    /// A call from the wire form: `arguments` is the JSON text the model produced.
    pub fn from_wire(name: impl Into<String>, arguments: &str) -> ModelCall {
        let arguments = serde_json::from_str(arguments)
            .unwrap_or_else(|_| Value::String(arguments.to_string()));
        ModelCall {
            name: name.into(),
            arguments,
        }
    }
}

/// Checks the model's calls for an entry; `Ok` when correct.
pub fn check(entry: &Entry, calls: &[ModelCall]) -> Result<(), Mismatch> {
    let truth = match (&entry.ground_truth, entry.category) {
        (_, Category::Irrelevance | Category::LiveIrrelevance) => {
            return match calls.len() {
                0 => Ok(()),
                n => Err(Mismatch::UnwantedCall(n)),
            };
        }
        (_, Category::LiveRelevance) => {
            return match calls.is_empty() {
                true => Err(Mismatch::NoCall),
                false => Ok(()),
            };
        }
        (Some(t), _) => t,
        (None, _) => return Err(Mismatch::Unsupported("entry has no ground truth".into())),
    };
    let lang = entry.category.language();
    let name = entry.category.name();
    // bfcl dispatches on substrings of the category name.
    if name.contains("parallel") {
        parallel_no_order(&entry.functions, calls, truth, lang)
    } else if name.contains("multiple") {
        if calls.len() != truth.len() {
            return Err(wrong_count(truth.len(), calls.len()));
        }
        let answer = truth
            .first()
            .ok_or_else(|| Mismatch::Unsupported("empty ground truth".into()))?;
        let desc = find_description(&entry.functions, answer_name(answer)?)?;
        check_call(desc, &calls[0], answer, lang)
    } else {
        if calls.len() != 1 {
            return Err(wrong_count(1, calls.len()));
        }
        let desc = entry
            .functions
            .first()
            .ok_or_else(|| Mismatch::Unsupported("entry has no function".into()))?;
        let answer = truth
            .first()
            .ok_or_else(|| Mismatch::Unsupported("empty ground truth".into()))?;
        check_call(desc, &calls[0], answer, lang)
    }
}

fn wrong_count(expected: usize, got: usize) -> Mismatch {
    Mismatch::WrongCount { expected, got }
}

/// The function name of a ground-truth call `{name: {...}}`.
fn answer_name(answer: &Value) -> Result<&str, Mismatch> {
    answer
        .as_object()
        .and_then(|m| m.keys().next())
        .map(String::as_str)
        .ok_or_else(|| Mismatch::Unsupported("malformed ground-truth call".into()))
}

fn find_description<'a>(functions: &'a [Value], name: &str) -> Result<&'a Value, Mismatch> {
    functions
        .iter()
        .find(|f| f["name"] == name)
        .ok_or_else(|| Mismatch::Unsupported(format!("no description of `{name}`")))
}

/// Greedy matching in ground-truth order, as bfcl: each expected call takes the first
/// unmatched model call that passes.
fn parallel_no_order(
    functions: &[Value],
    calls: &[ModelCall],
    truth: &[Value],
    lang: Language,
) -> Result<(), Mismatch> {
    if calls.len() != truth.len() {
        return Err(wrong_count(truth.len(), calls.len()));
    }
    let mut matched = vec![false; calls.len()];
    for (i, answer) in truth.iter().enumerate() {
        let expected = answer_name(answer)?;
        let desc = find_description(functions, expected)?;
        let mut last = None;
        for (j, call) in calls.iter().enumerate() {
            if matched[j] {
                continue;
            }
            match check_call(desc, call, answer, lang) {
                Ok(()) => {
                    matched[j] = true;
                    last = None;
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        if let Some(e) = last {
            return Err(Mismatch::NoMatch {
                index: i,
                function: expected.to_string(),
                last: Box::new(e),
            });
        }
    }
    Ok(())
}

/// bfcl's `simple_function_checker`: one call against one description and answer.
pub fn check_call(
    desc: &Value,
    call: &ModelCall,
    answer: &Value,
    lang: Language,
) -> Result<(), Mismatch> {
    let unsupported = |what: &str| Mismatch::Unsupported(what.to_string());
    let possible = answer
        .as_object()
        .and_then(|m| m.values().next())
        .and_then(Value::as_object)
        .ok_or_else(|| unsupported("malformed ground-truth call"))?;
    let func_name = desc["name"].as_str().unwrap_or_default().replace('.', "_");
    if call.name != func_name {
        return Err(Mismatch::WrongName {
            expected: func_name,
            got: call.name.clone(),
        });
    }
    let malformed = || Mismatch::MalformedArguments {
        function: call.name.clone(),
        arguments: match &call.arguments {
            Value::String(s) => s.clone(),
            v => v.to_string(),
        },
    };
    let no_args = Map::new();
    let args = match &call.arguments {
        Value::Object(args) => args,
        // MLPerf's scorer reads unparseable arguments as `{}`: a call to a function
        // with nothing to pass still scores, anything else fails as malformed.
        Value::String(_) => &no_args,
        _ => return Err(malformed()),
    };
    let verdict = check_args(desc, args, possible, lang);
    match (&call.arguments, verdict) {
        (Value::String(_), Err(_)) => Err(malformed()),
        (_, verdict) => verdict,
    }
}

/// The parameter checks of [`check_call`], over well-formed arguments.
fn check_args(
    desc: &Value,
    args: &Map<String, Value>,
    possible: &Map<String, Value>,
    lang: Language,
) -> Result<(), Mismatch> {
    let unsupported = |what: &str| Mismatch::Unsupported(what.to_string());
    let properties = desc["parameters"]["properties"]
        .as_object()
        .ok_or_else(|| unsupported("function has no properties"))?;
    let required = desc["parameters"]["required"]
        .as_array()
        .ok_or_else(|| unsupported("function has no `required` list"))?;
    for param in required {
        let param = param.as_str().unwrap_or_default();
        if !args.contains_key(param) {
            return Err(Mismatch::MissingRequired(param.to_string()));
        }
    }
    for (param, value) in args {
        let (Some(details), Some(acceptable)) = (properties.get(param), possible.get(param)) else {
            return Err(Mismatch::UnexpectedParam(param.clone()));
        };
        let acceptable = acceptable
            .as_array()
            .ok_or_else(|| unsupported("acceptable values are not a list"))?;
        check_param(param, value, details, acceptable, lang)?;
    }
    for (param, acceptable) in possible {
        if !args.contains_key(param) && !accepts_omission(acceptable) {
            return Err(Mismatch::MissingOptional(param.clone()));
        }
    }
    Ok(())
}

/// The Python type a schema type name is checked as, per language.
fn expected_type(lang: Language, desc: &str) -> Option<PyType> {
    use PyType as T;
    Some(match (lang, desc) {
        (Language::Python, "string" | "any") => T::Str,
        (Language::Python, "integer") => T::Int,
        (Language::Python, "float") => T::Float,
        (Language::Python, "boolean") => T::Bool,
        (Language::Python, "array" | "tuple") => T::List,
        (Language::Python, "dict") => T::Dict,
        (Language::Java, "byte" | "short" | "integer" | "long") => T::Int,
        (Language::Java, "float" | "double") => T::Float,
        (Language::Java, "boolean") => T::Bool,
        (Language::Java, "char" | "String" | "any") => T::Str,
        (Language::Java, "Array" | "ArrayList" | "Queue" | "Stack") => T::List,
        (Language::Java, "HashMap" | "Hashtable") => T::Dict,
        (Language::JavaScript, "String" | "any") => T::Str,
        (Language::JavaScript, "integer" | "Bigint") => T::Int,
        (Language::JavaScript, "float") => T::Float,
        (Language::JavaScript, "Boolean") => T::Bool,
        (Language::JavaScript, "dict") => T::Dict,
        (Language::JavaScript, "array") => T::List,
        _ => return None,
    })
}

/// Type and value checks of one parameter.
fn check_param(
    param: &str,
    value: &Value,
    details: &Value,
    acceptable: &[Value],
    lang: Language,
) -> Result<(), Mismatch> {
    let desc = details["type"]
        .as_str()
        .ok_or_else(|| Mismatch::Unsupported(format!("parameter `{param}` has no type")))?;
    let expected = expected_type(lang, desc)
        .ok_or_else(|| Mismatch::Unsupported(format!("type `{desc}` of `{param}`")))?;
    let items_type = || {
        details["items"]["type"]
            .as_str()
            .ok_or_else(|| Mismatch::Unsupported(format!("array `{param}` has no item type")))
    };
    let mut nested = None;
    let mut value = value.clone();
    match lang {
        Language::Python => {
            if desc == "array" || desc == "tuple" {
                let inner = items_type()?;
                nested = Some(expected_type(lang, inner).ok_or_else(|| {
                    Mismatch::Unsupported(format!("item type `{inner}` of `{param}`"))
                })?);
            }
            // Python promotes an int to float for a float parameter.
            if desc == "float" && py_type(&value) == PyType::Int {
                value = Value::from(value.as_f64().unwrap_or_default());
            }
        }
        Language::Java | Language::JavaScript => {
            let Value::String(text) = &value else {
                return Err(Mismatch::NotAString {
                    param: param.to_string(),
                    language: match lang {
                        Language::Java => "Java",
                        _ => "JavaScript",
                    },
                    got: py_type(&value).name(),
                });
            };
            let mut inner_desc = None;
            if matches!(desc, "Array" | "ArrayList" | "array") {
                let inner = items_type()?;
                nested = Some(expected_type(lang, inner).ok_or_else(|| {
                    Mismatch::Unsupported(format!("item type `{inner}` of `{param}`"))
                })?);
                inner_desc = Some(inner);
            }
            value = match lang {
                Language::Java => convert::java(text, desc, inner_desc),
                _ => convert::javascript(text, desc, inner_desc),
            }
            .map_err(Mismatch::Unsupported)?;
        }
    }
    let is_variable = type_check(param, &value, acceptable, desc, expected, nested)?;
    if !is_variable {
        let special = match expected {
            PyType::Dict => Some(dict_checker(param, &value, acceptable)),
            PyType::List if nested == Some(PyType::Dict) => {
                Some(list_dict_checker(param, &value, acceptable))
            }
            PyType::Str => Some(string_checker(param, &value, acceptable)),
            PyType::List => Some(list_checker(param, &value, acceptable)),
            _ => None,
        };
        if let Some(result) = special {
            return result;
        }
    }
    if !py_in(&value, acceptable) {
        return Err(wrong_value(param, &value));
    }
    Ok(())
}

fn wrong_value(param: &str, value: &Value) -> Mismatch {
    Mismatch::WrongValue {
        param: param.to_string(),
        value: value.to_string(),
    }
}

/// The type of the first acceptable value that is not `""`.
fn answer_type(acceptable: &[Value]) -> Option<PyType> {
    acceptable
        .iter()
        .find(|v| v.as_str() != Some(""))
        .map(py_type)
}

/// bfcl's `type_checker`; `Ok(is_variable)` where the answer's own type differs from
/// the schema's (a "variable" answer, compared by plain equality afterwards).
fn type_check(
    param: &str,
    value: &Value,
    acceptable: &[Value],
    desc: &str,
    expected: PyType,
    nested: Option<PyType>,
) -> Result<bool, Mismatch> {
    let answer_ty = answer_type(acceptable);
    let is_variable = answer_ty.is_some_and(|t| t != expected);
    let actual = py_type(value);
    if actual == expected {
        let Some(inner) = nested else {
            return Ok(is_variable);
        };
        // Each acceptable list must type-check element-wise; a non-list acceptable
        // value (such as "") passes vacuously, as in bfcl.
        let items = value.as_array().map(Vec::as_slice).unwrap_or_default();
        for option in acceptable {
            let ok = match option {
                Value::Array(opt) => items
                    .iter()
                    .all(|v| type_check(param, v, opt, inner.name(), inner, None).is_ok()),
                _ => true,
            };
            if ok {
                return Ok(is_variable);
            }
        }
        return Err(Mismatch::NestedType {
            param: param.to_string(),
            inner: inner.name().to_string(),
        });
    }
    if answer_ty == Some(actual) {
        return Ok(true);
    }
    Err(Mismatch::WrongType {
        param: param.to_string(),
        expected: desc.to_string(),
        got: actual.name(),
    })
}

fn string_checker(param: &str, value: &Value, acceptable: &[Value]) -> Result<(), Mismatch> {
    let given = standardize(value.as_str().unwrap_or_default());
    let ok = acceptable
        .iter()
        .filter_map(Value::as_str)
        .any(|a| standardize(a) == given);
    match ok {
        true => Ok(()),
        false => Err(wrong_value(param, value)),
    }
}

fn list_checker(param: &str, value: &Value, acceptable: &[Value]) -> Result<(), Mismatch> {
    let given: Vec<Value> = value
        .as_array()
        .map(|v| v.iter().map(standardize_value).collect())
        .unwrap_or_default();
    let given = Value::Array(given);
    let ok = acceptable.iter().any(|option| {
        py_items(option).is_some_and(|items| {
            let items = Value::Array(items.iter().map(standardize_value).collect());
            super::pyvalue::py_eq(&given, &items)
        })
    });
    match ok {
        true => Ok(()),
        false => Err(wrong_value(param, value)),
    }
}

/// One dict against one acceptable dict (`{key: [acceptable values]}`).
fn dict_matches(param: &str, given: &Map<String, Value>, option: &Value) -> Result<(), Mismatch> {
    let Value::Object(option) = option else {
        return Err(Mismatch::Unsupported(format!(
            "acceptable value of `{param}` is not a dict"
        )));
    };
    for (key, value) in given {
        let Some(accepted) = option.get(key) else {
            return Err(Mismatch::UnexpectedDictKey {
                param: param.to_string(),
                key: key.clone(),
            });
        };
        let accepted: Vec<Value> = py_items(accepted)
            .unwrap_or_default()
            .iter()
            .map(standardize_value)
            .collect();
        if !py_in(&standardize_value(value), &accepted) {
            return Err(Mismatch::WrongDictValue {
                param: param.to_string(),
                key: key.clone(),
            });
        }
    }
    for (key, accepted) in option {
        if !given.contains_key(key) && !accepts_omission(accepted) {
            return Err(Mismatch::MissingDictKey {
                param: param.to_string(),
                key: key.clone(),
            });
        }
    }
    Ok(())
}

fn dict_checker(param: &str, value: &Value, acceptable: &[Value]) -> Result<(), Mismatch> {
    let Value::Object(given) = value else {
        return Err(wrong_value(param, value));
    };
    let mut last = Mismatch::NoAcceptableDict {
        param: param.to_string(),
    };
    for option in acceptable.iter().filter(|v| v.as_str() != Some("")) {
        match dict_matches(param, given, option) {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
    }
    Err(last)
}

fn list_dict_checker(param: &str, value: &Value, acceptable: &[Value]) -> Result<(), Mismatch> {
    let given = value.as_array().map(Vec::as_slice).unwrap_or_default();
    let mut last = Mismatch::NoAcceptableDict {
        param: param.to_string(),
    };
    for option in acceptable {
        let Some(option) = py_items(option) else {
            last = Mismatch::Unsupported(format!("acceptable value of `{param}` is not a list"));
            continue;
        };
        if option.len() != given.len() {
            last = Mismatch::WrongDictCount {
                param: param.to_string(),
            };
            continue;
        }
        let all = given.iter().zip(&option).try_for_each(|(g, o)| match g {
            Value::Object(g) => dict_matches(param, g, o),
            _ => Err(wrong_value(param, g)),
        });
        match all {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
    }
    Err(last)
}

#[cfg(test)]
#[path = "checker_tests.rs"]
mod tests;
