//! The request's `tools` (OpenAI function schemas) and the conversion of XML parameter
//! text to the JSON types they declare.

use super::types::{JsonType, declared_types, type_names};
use super::{Warning, WarningKind};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// What one function's schema declares.
#[derive(Clone, Debug, Default)]
struct FunctionSchema {
    /// `parameters.properties`, when given.
    properties: Option<Map<String, Value>>,
    /// `parameters.required`.
    required: Vec<String>,
}

/// The functions of a request's `tools`, by name.
#[derive(Clone, Debug, Default)]
pub struct ToolSchemas {
    /// Whether `tools` were given at all (without them, names are not checked).
    given: bool,
    functions: HashMap<String, FunctionSchema>,
}

impl ToolSchemas {
    /// Reads OpenAI `tools`: `[{"type": "function", "function": {"name", "parameters":
    /// {"type": "object", "properties": {...}, "required": [...]}}}]` (entries without
    /// the `function` wrapper are read too; entries without a name are skipped).
    /// `None` (or a value that is not an array) means no schema: names are not checked
    /// and every value is converted as if its type were unknown.
    pub fn new(tools: Option<&Value>) -> ToolSchemas {
        let Some(list) = tools.and_then(Value::as_array) else {
            return ToolSchemas::default();
        };
        let mut functions = HashMap::new();
        for tool in list {
            let f = tool.get("function").unwrap_or(tool);
            let Some(name) = f.get("name").and_then(Value::as_str) else {
                continue;
            };
            let params = f.get("parameters");
            let schema = FunctionSchema {
                properties: params
                    .and_then(|p| p.get("properties"))
                    .and_then(Value::as_object)
                    .cloned(),
                required: params
                    .and_then(|p| p.get("required"))
                    .and_then(Value::as_array)
                    .map(|r| {
                        r.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
            };
            functions.insert(name.to_string(), schema);
        }
        ToolSchemas {
            given: true,
            functions,
        }
    }

    /// Whether `name` is one of the tools (always true when no tools were given).
    pub fn knows_function(&self, name: &str) -> bool {
        !self.given || self.functions.contains_key(name)
    }

    /// The schema of `function`'s parameter `param`, when the tools declare it.
    fn property(&self, function: &str, param: &str) -> Option<&Value> {
        self.functions
            .get(function)?
            .properties
            .as_ref()?
            .get(param)
    }

    /// Whether `function`'s parameter `param` declares `string` and nothing else, so
    /// [`ToolSchemas::convert_value`] keeps its text verbatim whatever it turns out to
    /// be (and a streamed call can send it as it is written).
    pub fn keeps_verbatim(&self, function: &str, param: &str) -> bool {
        self.property(function, param)
            .and_then(declared_types)
            .is_some_and(|types| types == [JsonType::String])
    }

    /// Converts one XML parameter's text (the `\n`s of the format already removed) to
    /// the JSON type its schema declares. `string` keeps the text verbatim; `integer`,
    /// `number`, `object`, `array` and `null` parse it as JSON; `boolean` parses JSON
    /// `true`/`false` in any letter case. A union takes the first reading its types
    /// allow, the text verbatim when it allows strings. With no schema (or one not
    /// understood) the text is parsed as JSON if it is JSON other than a string, else
    /// kept verbatim. A value that fits none of the declared types is kept as a string,
    /// with a [`WarningKind::TypeMismatch`] warning.
    pub fn convert_value(
        &self,
        function: &str,
        param: &str,
        text: &str,
    ) -> (Value, Option<Warning>) {
        let verbatim = || Value::String(text.to_string());
        let types = self.property(function, param).and_then(declared_types);
        let Some(types) = types else {
            return match serde_json::from_str::<Value>(text) {
                Ok(v) if !v.is_string() => (v, None),
                _ => (verbatim(), None),
            };
        };
        if types == [JsonType::String] {
            return (verbatim(), None);
        }
        let parsed = match serde_json::from_str::<Value>(text) {
            Ok(v) => Some(v),
            Err(_) if types.contains(&JsonType::Boolean) => {
                let t = text.trim();
                if t.eq_ignore_ascii_case("true") {
                    Some(Value::Bool(true))
                } else if t.eq_ignore_ascii_case("false") {
                    Some(Value::Bool(false))
                } else {
                    None
                }
            }
            Err(_) => None,
        };
        if let Some(v) = parsed.filter(|v| !v.is_string() && types.iter().any(|t| t.matches(v))) {
            return (v, None);
        }
        if types.contains(&JsonType::String) {
            return (verbatim(), None);
        }
        let warning = Warning::new(
            WarningKind::TypeMismatch,
            format!(
                "{function}.{param}: {:?} is not of the declared type {}; kept as a string",
                shorten(text),
                type_names(&types)
            ),
        );
        (verbatim(), Some(warning))
    }

    /// Converts the parameters of an XML call (name, text pairs in order) into its
    /// arguments object, with warnings for an unknown function, unknown parameters,
    /// type mismatches, parameters given twice (the last one is kept) and missing
    /// required parameters.
    pub fn convert_xml_arguments(
        &self,
        function: &str,
        params: &[(String, String)],
    ) -> (Map<String, Value>, Vec<Warning>) {
        let mut warnings = self.name_warnings(function);
        let mut args = Map::new();
        for (name, text) in params {
            let (value, w) = self.convert_value(function, name, text);
            warnings.extend(w);
            if args.insert(name.clone(), value).is_some() {
                warnings.push(Warning::new(
                    WarningKind::DuplicateParameter,
                    format!("{function}.{name} is given more than once; the last value is kept"),
                ));
            }
        }
        warnings.extend(self.param_warnings(function, &args));
        (args, warnings)
    }

    /// Checks the arguments of a JSON call against the schema: warnings for an unknown
    /// function, unknown parameters, values not of their declared type and missing
    /// required parameters. The values are kept as they are.
    pub fn check_json_arguments(&self, function: &str, args: &Map<String, Value>) -> Vec<Warning> {
        let mut warnings = self.name_warnings(function);
        for (name, v) in args {
            let types = self.property(function, name).and_then(declared_types);
            if let Some(types) = types.filter(|ts| !ts.iter().any(|t| t.matches(v))) {
                warnings.push(Warning::new(
                    WarningKind::TypeMismatch,
                    format!(
                        "{function}.{name}: {} is not of the declared type {}",
                        shorten(&v.to_string()),
                        type_names(&types)
                    ),
                ));
            }
        }
        warnings.extend(self.param_warnings(function, args));
        warnings
    }

    fn name_warnings(&self, function: &str) -> Vec<Warning> {
        if self.knows_function(function) {
            Vec::new()
        } else {
            vec![Warning::new(
                WarningKind::UnknownFunction,
                format!("the tools have no function {function:?}; the call is kept"),
            )]
        }
    }

    /// Unknown and missing parameters of a known function with declared properties.
    fn param_warnings(&self, function: &str, args: &Map<String, Value>) -> Vec<Warning> {
        let mut warnings = Vec::new();
        let Some(f) = self.functions.get(function) else {
            return warnings;
        };
        if let Some(props) = &f.properties {
            for name in args.keys().filter(|n| !props.contains_key(n.as_str())) {
                warnings.push(Warning::new(
                    WarningKind::UnknownParameter,
                    format!("{function} has no parameter {name:?}; it is kept"),
                ));
            }
        }
        for name in f.required.iter().filter(|n| !args.contains_key(n.as_str())) {
            warnings.push(Warning::new(
                WarningKind::MissingRequired,
                format!("{function} requires {name:?}, which the call does not give"),
            ));
        }
        warnings
    }
}

/// At most 60 characters of `text`, for messages.
fn shorten(text: &str) -> String {
    match text.char_indices().nth(60) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools() -> Value {
        json!([{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object",
            "properties": {
                "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"},
                "b": {"type": "boolean"}, "o": {"type": "object"}, "a": {"type": "array"},
                "z": {"type": "null"}, "u": {"type": ["integer", "string"]},
                "x": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                "d": {"type": "date"}
            },
            "required": ["s"]
        }}}])
    }

    #[test]
    fn every_declared_type() {
        let t = tools();
        let s = ToolSchemas::new(Some(&t));
        let conv = |p: &str, text: &str| s.convert_value("f", p, text);
        assert_eq!(conv("s", "123"), (json!("123"), None));
        assert_eq!(conv("s", "\"q\""), (json!("\"q\""), None));
        assert_eq!(conv("i", "42"), (json!(42), None));
        assert_eq!(conv("i", " -7 "), (json!(-7), None));
        assert_eq!(conv("n", "1.5"), (json!(1.5), None));
        assert_eq!(conv("n", "3"), (json!(3), None));
        assert_eq!(conv("b", "true"), (json!(true), None));
        assert_eq!(conv("b", "False"), (json!(false), None));
        assert_eq!(conv("o", "{\"k\": [1]}"), (json!({"k": [1]}), None));
        assert_eq!(conv("a", "[1, \"x\"]"), (json!([1, "x"]), None));
        assert_eq!(conv("z", "null"), (json!(null), None));
        assert_eq!(conv("u", "5"), (json!(5), None));
        assert_eq!(conv("u", "five"), (json!("five"), None));
        assert_eq!(conv("x", "null"), (json!(null), None));
        // An unknown type name counts as no schema.
        assert_eq!(conv("d", "2024"), (json!(2024), None));
        assert_eq!(conv("d", "2024-01-01"), (json!("2024-01-01"), None));
    }

    #[test]
    fn mismatches_stay_strings_with_a_warning() {
        let t = tools();
        let s = ToolSchemas::new(Some(&t));
        for (p, text) in [
            ("i", "4.5"),
            ("i", "four"),
            ("n", "x"),
            ("b", "yes"),
            ("o", "[1]"),
            ("a", "{"),
            ("z", "0"),
            ("x", "\"7\""),
        ] {
            let (v, w) = s.convert_value("f", p, text);
            assert_eq!(v, json!(text), "{p}");
            assert_eq!(w.map(|w| w.kind), Some(WarningKind::TypeMismatch), "{p}");
        }
    }

    #[test]
    fn without_schema_json_else_string() {
        let s = ToolSchemas::new(None);
        assert!(s.knows_function("anything"));
        assert_eq!(s.convert_value("g", "p", "[1]").0, json!([1]));
        assert_eq!(
            s.convert_value("g", "p", "\"quoted\"").0,
            json!("\"quoted\"")
        );
        assert_eq!(s.convert_value("g", "p", "a < b").0, json!("a < b"));
        assert_eq!(s.convert_value("g", "p", "").0, json!(""));
    }

    #[test]
    fn names_checked() {
        let t = tools();
        let s = ToolSchemas::new(Some(&t));
        let params = vec![
            ("s".to_string(), "a".to_string()),
            ("extra".to_string(), "1".to_string()),
            ("s".to_string(), "b".to_string()),
        ];
        let (args, w) = s.convert_xml_arguments("f", &params);
        assert_eq!(Value::Object(args), json!({"s": "b", "extra": 1}));
        let kinds: Vec<_> = w.iter().map(|w| w.kind).collect();
        assert_eq!(
            kinds,
            [
                WarningKind::DuplicateParameter,
                WarningKind::UnknownParameter
            ]
        );
        let (args, w) = s.convert_xml_arguments("nope", &params[..1]);
        assert_eq!(Value::Object(args), json!({"s": "a"}));
        assert_eq!(w[0].kind, WarningKind::UnknownFunction);
        let (_, w) = s.convert_xml_arguments("f", &[]);
        assert_eq!(w[0].kind, WarningKind::MissingRequired);
        let args = json!({"s": 1, "i": 2})
            .as_object()
            .cloned()
            .unwrap_or_default();
        let w = s.check_json_arguments("f", &args);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].kind, WarningKind::TypeMismatch);
    }
}
