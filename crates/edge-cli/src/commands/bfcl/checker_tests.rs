//! The checker's rules, one small case each.

use super::*;
use serde_json::json;

fn entry(category: Category, functions: Value, truth: Value) -> Entry {
    Entry {
        id: "t_0".into(),
        category,
        question: vec![vec![json!({"role": "user", "content": "q"})]],
        functions: functions.as_array().unwrap().clone(),
        ground_truth: truth.as_array().cloned(),
    }
}

fn call(name: &str, args: Value) -> ModelCall {
    ModelCall {
        name: name.into(),
        arguments: args,
    }
}

/// `math.area(shape: string, size: float, unit: string optional, tags: array of
/// string optional, opts: dict optional, count: integer optional, flag: boolean
/// optional)`.
fn simple(truth_params: Value) -> Entry {
    let f = json!([{
        "name": "math.area",
        "description": "",
        "parameters": {"type": "dict", "properties": {
            "shape": {"type": "string"},
            "size": {"type": "float"},
            "unit": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "opts": {"type": "dict", "properties": {}},
            "rows": {"type": "array", "items": {"type": "dict"}},
            "count": {"type": "integer"},
            "flag": {"type": "boolean"}
        }, "required": ["shape", "size"]}
    }]);
    entry(
        Category::SimplePython,
        f,
        json!([{"math.area": truth_params}]),
    )
}

fn verdict(e: &Entry, args: Value) -> Result<(), Mismatch> {
    check(e, &[call("math_area", args)])
}

#[test]
fn name_must_be_underscored_and_count_one() {
    let e = simple(json!({"shape": ["circle"], "size": [2.0]}));
    assert_eq!(verdict(&e, json!({"shape": "circle", "size": 2.0})), Ok(()));
    let dotted = check(
        &e,
        &[call("math.area", json!({"shape": "circle", "size": 2.0}))],
    );
    assert!(matches!(dotted, Err(Mismatch::WrongName { .. })));
    let two = vec![call("math_area", json!({})); 2];
    assert_eq!(
        check(&e, &two),
        Err(Mismatch::WrongCount {
            expected: 1,
            got: 2
        })
    );
    assert_eq!(
        check(&e, &[]),
        Err(Mismatch::WrongCount {
            expected: 1,
            got: 0
        })
    );
}

#[test]
fn required_unexpected_and_optional_params() {
    let e = simple(json!({"shape": ["circle"], "size": [2.0], "unit": ["cm", ""], "count": [3]}));
    assert_eq!(
        verdict(&e, json!({"shape": "circle"})),
        Err(Mismatch::MissingRequired("size".into()))
    );
    // In the schema but not in the answer, or in neither: both unexpected.
    let extra = verdict(&e, json!({"shape": "circle", "size": 2, "flag": true}));
    assert_eq!(extra, Err(Mismatch::UnexpectedParam("flag".into())));
    let unknown = verdict(&e, json!({"shape": "circle", "size": 2, "color": "red"}));
    assert_eq!(unknown, Err(Mismatch::UnexpectedParam("color".into())));
    // `unit` may be omitted (its answers hold ""), `count` may not.
    assert_eq!(
        verdict(&e, json!({"shape": "circle", "size": 2.0})),
        Err(Mismatch::MissingOptional("count".into()))
    );
    assert_eq!(
        verdict(&e, json!({"shape": "circle", "size": 2.0, "count": 3})),
        Ok(())
    );
}

#[test]
fn python_type_rules() {
    let e =
        simple(json!({"shape": ["circle"], "size": [2.0], "count": [3, ""], "flag": [true, ""]}));
    // An int is accepted for a float.
    assert_eq!(verdict(&e, json!({"shape": "circle", "size": 2})), Ok(()));
    // A float is not an int, a bool is not an int, an int is not a bool.
    let float_for_int = verdict(&e, json!({"shape": "circle", "size": 2, "count": 3.0}));
    assert!(matches!(
        float_for_int,
        Err(Mismatch::WrongType { got: "float", .. })
    ));
    let bool_for_int = verdict(&e, json!({"shape": "circle", "size": 2, "count": true}));
    assert!(matches!(
        bool_for_int,
        Err(Mismatch::WrongType { got: "bool", .. })
    ));
    let int_for_bool = verdict(&e, json!({"shape": "circle", "size": 2, "flag": 1}));
    assert!(matches!(
        int_for_bool,
        Err(Mismatch::WrongType { got: "int", .. })
    ));
    let str_for_float = verdict(&e, json!({"shape": "circle", "size": "2"}));
    assert!(matches!(str_for_float, Err(Mismatch::WrongType { .. })));
    // Values compare as Python numbers: 3 == 3.0 in the answers.
    let e = simple(json!({"shape": ["circle"], "size": [2], "count": [3.0]}));
    assert_eq!(
        verdict(&e, json!({"shape": "circle", "size": 2.0, "count": 3})),
        Ok(())
    );
    let wrong = verdict(&e, json!({"shape": "circle", "size": 2.5, "count": 3}));
    assert!(matches!(wrong, Err(Mismatch::WrongValue { .. })));
}

#[test]
fn variable_answers_compare_exactly() {
    // An answer of another type than the schema's is a "variable": its own type is
    // accepted and compared without normalisation.
    let e = simple(json!({"shape": ["circle"], "size": ["radius"]}));
    assert_eq!(
        verdict(&e, json!({"shape": "circle", "size": "radius"})),
        Ok(())
    );
    let case = verdict(&e, json!({"shape": "circle", "size": "Radius"}));
    assert!(matches!(case, Err(Mismatch::WrongValue { .. })));
}

#[test]
fn strings_are_normalised() {
    let e = simple(json!({"shape": ["New York, NY"], "size": [1.0]}));
    assert_eq!(
        verdict(&e, json!({"shape": "new_york ny.", "size": 1})),
        Ok(())
    );
    let other = verdict(&e, json!({"shape": "New Jersey", "size": 1}));
    assert!(matches!(other, Err(Mismatch::WrongValue { .. })));
}

#[test]
fn lists_are_ordered_normalised_and_element_typed() {
    let e = simple(json!({"shape": ["c"], "size": [1.0], "tags": [["Red Sea", "blue"], ""]}));
    assert_eq!(
        verdict(
            &e,
            json!({"shape": "c", "size": 1, "tags": ["red-sea", "BLUE"]})
        ),
        Ok(())
    );
    let order = verdict(
        &e,
        json!({"shape": "c", "size": 1, "tags": ["blue", "red sea"]}),
    );
    assert!(matches!(order, Err(Mismatch::WrongValue { .. })));
    // An empty list matches the "" answer, as in bfcl.
    assert_eq!(
        verdict(&e, json!({"shape": "c", "size": 1, "tags": []})),
        Ok(())
    );
    let e = simple(json!({"shape": ["c"], "size": [1.0], "tags": [["a", "b"]]}));
    let typed = verdict(&e, json!({"shape": "c", "size": 1, "tags": ["a", 2]}));
    assert!(matches!(typed, Err(Mismatch::NestedType { .. })));
}

#[test]
fn dicts_and_lists_of_dicts() {
    let e = simple(json!({"shape": ["c"], "size": [1.0], "opts": [{"a": [1], "b": ["X y", ""]}]}));
    let base = |opts: Value| verdict(&e, json!({"shape": "c", "size": 1, "opts": opts}));
    assert_eq!(base(json!({"a": 1})), Ok(()));
    assert_eq!(base(json!({"a": 1.0, "b": "x_y"})), Ok(()));
    assert!(matches!(
        base(json!({"a": 1, "c": 2})),
        Err(Mismatch::UnexpectedDictKey { .. })
    ));
    assert!(matches!(
        base(json!({"b": "xy"})),
        Err(Mismatch::MissingDictKey { .. })
    ));
    assert!(matches!(
        base(json!({"a": 2})),
        Err(Mismatch::WrongDictValue { .. })
    ));
    let e = simple(json!({"shape": ["c"], "size": [1.0], "rows": [[{"k": ["v"]}, {"k": ["w"]}]]}));
    let rows = |rows: Value| verdict(&e, json!({"shape": "c", "size": 1, "rows": rows}));
    assert_eq!(rows(json!([{"k": "V"}, {"k": "w"}])), Ok(()));
    assert!(matches!(
        rows(json!([{"k": "v"}])),
        Err(Mismatch::WrongDictCount { .. })
    ));
    assert!(matches!(
        rows(json!([{"k": "w"}, {"k": "v"}])),
        Err(Mismatch::WrongDictValue { .. })
    ));
}

fn two_functions(category: Category, truth: Value) -> Entry {
    let f = json!([
        {"name": "a.f", "parameters": {"type": "dict", "properties": {"x": {"type": "integer"}}, "required": ["x"]}},
        {"name": "g", "parameters": {"type": "dict", "properties": {"y": {"type": "string"}}, "required": ["y"]}}
    ]);
    entry(category, f, truth)
}

#[test]
fn multiple_checks_the_answers_function() {
    let e = two_functions(Category::Multiple, json!([{"g": {"y": ["hi"]}}]));
    assert_eq!(check(&e, &[call("g", json!({"y": "HI"}))]), Ok(()));
    assert!(matches!(
        check(&e, &[call("a_f", json!({"x": 1}))]),
        Err(Mismatch::WrongName { .. })
    ));
}

#[test]
fn parallel_matches_in_any_order() {
    let truth = json!([{"a.f": {"x": [1]}}, {"a.f": {"x": [2]}}, {"g": {"y": ["z"]}}]);
    let e = two_functions(Category::ParallelMultiple, truth);
    let calls = [
        call("g", json!({"y": "z"})),
        call("a_f", json!({"x": 2})),
        call("a_f", json!({"x": 1})),
    ];
    assert_eq!(check(&e, &calls), Ok(()));
    let twice = [
        call("a_f", json!({"x": 1})),
        call("a_f", json!({"x": 1})),
        call("g", json!({"y": "z"})),
    ];
    assert!(matches!(
        check(&e, &twice),
        Err(Mismatch::NoMatch { index: 1, .. })
    ));
    assert!(matches!(
        check(&e, &calls[..2]),
        Err(Mismatch::WrongCount {
            expected: 3,
            got: 2
        })
    ));
}

#[test]
fn irrelevance_and_relevance() {
    let mut e = two_functions(Category::Irrelevance, json!(null));
    assert_eq!(check(&e, &[]), Ok(()));
    assert_eq!(
        check(&e, &[call("g", json!({}))]),
        Err(Mismatch::UnwantedCall(1))
    );
    e.category = Category::LiveRelevance;
    assert_eq!(check(&e, &[]), Err(Mismatch::NoCall));
    assert_eq!(check(&e, &[call("g", json!({"y": 1}))]), Ok(()));
}

#[test]
fn malformed_arguments_count_as_empty() {
    let none =
        json!([{"name": "now", "parameters": {"type": "dict", "properties": {}, "required": []}}]);
    let e = entry(Category::SimplePython, none, json!([{"now": {}}]));
    assert_eq!(check(&e, &[ModelCall::from_wire("now", "")]), Ok(()));
    assert!(matches!(
        check(&e, &[call("now", json!([1]))]),
        Err(Mismatch::MalformedArguments { .. })
    ));
    let e = simple(json!({"shape": ["c"], "size": [1.0]}));
    let bad = check(&e, &[ModelCall::from_wire("math_area", "{\"shape\": ")]);
    assert!(matches!(bad, Err(Mismatch::MalformedArguments { .. })));
    let good = ModelCall::from_wire("math_area", r#"{"shape": "c", "size": 1}"#);
    assert_eq!(check(&e, &[good]), Ok(()));
}

#[test]
fn java_and_javascript_values_are_source_text() {
    let f = json!([{"name": "C.m", "parameters": {"type": "dict", "properties": {
        "n": {"type": "integer"}, "big": {"type": "long"}, "on": {"type": "boolean"},
        "xs": {"type": "Array", "items": {"type": "integer"}}
    }, "required": ["n"]}}]);
    let truth = json!([{"C.m": {"n": [5], "big": [7, ""], "on": [true, ""], "xs": [[1, 2], ""]}}]);
    let e = entry(Category::SimpleJava, f, truth);
    let j = |args: Value| check(&e, &[call("C_m", args)]);
    assert_eq!(
        j(json!({"n": "5", "big": "7L", "on": "true", "xs": "new int[]{1, 2}"})),
        Ok(())
    );
    assert!(matches!(
        j(json!({"n": 5})),
        Err(Mismatch::NotAString { .. })
    ));
    assert!(matches!(
        j(json!({"n": "5", "big": "7"})),
        Err(Mismatch::WrongType { .. })
    ));
    let f = json!([{"name": "f", "parameters": {"type": "dict", "properties": {
        "a": {"type": "array", "items": {"type": "integer"}}, "s": {"type": "String"}
    }, "required": ["a"]}}]);
    let e = entry(
        Category::SimpleJavascript,
        f,
        json!([{"f": {"a": [[3, 1]], "s": ["x", ""]}}]),
    );
    assert_eq!(
        check(&e, &[call("f", json!({"a": "[3, 1]", "s": "'X'"}))]),
        Ok(())
    );
    assert!(matches!(
        check(&e, &[call("f", json!({"a": "[1, 3]"}))]),
        Err(Mismatch::WrongValue { .. })
    ));
}
