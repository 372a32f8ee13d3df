//! The committed fixture (`tests/data/bfcl/`: entries copied from bfcl-eval's data,
//! a few per category) through loading, request building and checking.

use super::*;
use data::Group;
use serde_json::json;
use std::path::Path;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/bfcl")
}

fn entries() -> Vec<Entry> {
    load(&fixture(), &Category::ALL, Selection::All).unwrap()
}

fn opts() -> RequestOptions {
    RequestOptions {
        model: "m".into(),
        max_completion_tokens: 64,
    }
}

fn run_with(entries: &[Entry], f: impl Fn(&Entry) -> Vec<ModelCall>) -> BfclReport {
    run(entries, &opts(), &mut |e, _| Ok::<_, String>(f(e)))
}

#[test]
fn every_category_loads_with_its_ground_truth() {
    let entries = entries();
    for c in Category::ALL {
        let of: Vec<&Entry> = entries.iter().filter(|e| e.category == c).collect();
        assert!(!of.is_empty(), "{} missing from the fixture", c.name());
        assert!(
            of.iter()
                .all(|e| e.ground_truth.is_some() == c.has_ground_truth())
        );
    }
    let limited = load(&fixture(), &[Category::SimplePython], Selection::Limit(2)).unwrap();
    assert_eq!(limited.len(), 2);
    assert_eq!(limited[0].id, "simple_python_94");
}

#[test]
fn ground_truth_answers_score_everything() {
    let entries = entries();
    let report = run_with(&entries, selfcheck::ground_truth_calls);
    for s in &report.samples {
        let expected = s.category != Category::LiveRelevance;
        assert_eq!(
            s.correct(),
            expected,
            "{}: {:?} {:?}",
            s.id,
            s.mismatch,
            s.calls
        );
    }
    assert_eq!(report.group(Group::NonLive), Some(1.0));
    assert_eq!(report.group(Group::Live), Some(1.0));
    assert_eq!(report.group(Group::Hallucination), Some(1.0));
}

/// Runs one perturbation over the entries with ground truth; returns each failure's
/// kind.
fn perturbed(f: impl Fn(&Entry, &mut Vec<ModelCall>) -> bool) -> Vec<(String, &'static str)> {
    let entries: Vec<Entry> = entries()
        .into_iter()
        .filter(|e| e.category.has_ground_truth())
        .collect();
    let report = run_with(&entries, |e| {
        let mut calls = selfcheck::ground_truth_calls(e);
        assert!(f(e, &mut calls), "{}: perturbation does not apply", e.id);
        calls
    });
    assert_eq!(report.samples.len(), entries.len());
    report
        .samples
        .iter()
        .map(|s| {
            let m = s
                .mismatch
                .as_ref()
                .unwrap_or_else(|| panic!("{} passed: {:?}", s.id, s.calls));
            // In a parallel category the perturbed call matches no expected one; the
            // reason is that of the last call tried, whichever it was.
            (s.id.clone(), m.kind())
        })
        .collect()
}

fn first_args(calls: &mut [ModelCall]) -> &mut serde_json::Map<String, Value> {
    calls[0].arguments.as_object_mut().unwrap()
}

fn assert_all(kinds: Vec<(String, &'static str)>, expected: &[&str]) {
    for (id, kind) in kinds {
        let ok =
            expected.contains(&kind) || (id.contains("parallel") && kind == "cannot_find_match");
        assert!(ok, "{id}: {kind}, expected one of {expected:?}");
    }
}

#[test]
fn wrong_name_fails() {
    let kinds = perturbed(|_, calls| {
        calls[0].name.push_str("_x");
        true
    });
    assert_all(kinds, &["wrong_func_name"]);
}

#[test]
fn missing_required_fails() {
    let kinds = perturbed(|e, calls| {
        let name = calls[0].name.clone();
        let desc = e
            .functions
            .iter()
            .find(|f| f["name"].as_str().unwrap().replace('.', "_") == name);
        let required = desc.unwrap()["parameters"]["required"][0]
            .as_str()
            .unwrap()
            .to_string();
        first_args(calls).shift_remove(&required).is_some()
    });
    assert_all(kinds, &["missing_required"]);
}

#[test]
fn unexpected_param_fails() {
    let kinds = perturbed(|_, calls| {
        first_args(calls).insert("zz_unexpected".into(), json!(1));
        true
    });
    assert_all(kinds, &["unexpected_param"]);
}

#[test]
fn wrong_type_fails() {
    let kinds = perturbed(|_, calls| {
        let args = first_args(calls);
        let (_, v) = args.iter_mut().next().unwrap();
        *v = match v {
            Value::String(_) => json!(["not", "a", "string"]),
            _ => json!({"not": "this type"}),
        };
        true
    });
    assert_all(kinds, &["type_error", "type_error:not_string"]);
}

#[test]
fn wrong_value_fails() {
    let kinds = perturbed(|e, calls| {
        let args = first_args(calls);
        let (_, v) = args.iter_mut().next().unwrap();
        *v = match (&*v, e.category.language()) {
            (Value::String(s), data::Language::Python) => json!(format!("{s} zz")),
            // Java/JS literals: a different number or list, still well-formed.
            (Value::String(s), _) if s.contains(|c: char| c.is_ascii_digit()) => {
                json!(s.replace(|c: char| c.is_ascii_digit(), "9"))
            }
            (Value::String(s), _) => json!(format!("{s}zz")),
            (Value::Number(n), _) => match n.as_i64() {
                Some(i) => json!(i + 1),
                None => json!(n.as_f64().unwrap() + 1.5),
            },
            (Value::Array(a), _) => json!([a.clone(), a.clone()].concat()),
            (other, _) => panic!("{}: no wrong value for {other}", e.id),
        };
        true
    });
    assert_all(kinds, &["value_error"]);
}

#[test]
fn extra_call_fails() {
    let kinds = perturbed(|_, calls| {
        calls.push(calls[0].clone());
        true
    });
    assert_all(kinds, &["wrong_count"]);
}

#[test]
fn hallucination_fails_on_a_call() {
    let entries: Vec<Entry> = entries()
        .into_iter()
        .filter(|e| e.category.group() == Group::Hallucination)
        .collect();
    let report = run_with(&entries, |_| vec![ModelCall::from_wire("anything", "{}")]);
    assert!(
        report
            .samples
            .iter()
            .all(|s| matches!(s.mismatch, Some(Mismatch::UnwantedCall(1))))
    );
}

#[test]
fn backend_errors_are_failures_of_their_entry() {
    let entries = entries();
    let report = run(&entries[..2], &opts(), &mut |_, _| {
        Err("connection refused")
    });
    assert!(
        report.samples.iter().all(
            |s| matches!(&s.mismatch, Some(Mismatch::NoAnswer(m)) if m == "connection refused")
        )
    );
}

#[test]
fn request_body_is_the_harness_one() {
    let entries = load(&fixture(), &[Category::ParallelMultiple], Selection::All).unwrap();
    let mut seen = None;
    run(&entries, &opts(), &mut |_, body| {
        seen = Some(body.clone());
        Ok::<_, String>(Vec::new())
    });
    let body = seen.unwrap();
    assert_eq!(body["tool_choice"], "auto");
    assert_eq!(body["temperature"], 0);
    assert_eq!(body["seed"], 42);
    assert_eq!(body["stream"], true);
    assert_eq!(body["max_completion_tokens"], 64);
    assert_eq!(body["messages"].as_array().unwrap().len(), 1);
    assert_eq!(body["messages"][0]["role"], "user");
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"note_conversion_indian"), "{names:?}");
    assert_eq!(body["tools"][0]["function"]["parameters"]["type"], "object");
}

#[test]
fn malformed_data_names_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("possible_answer")).unwrap();
    std::fs::write(
        dir.join("BFCL_v4_irrelevance.json"),
        "{\"id\": \"irrelevance_0\", \"question\": [[]], \"function\": []}\n{broken\n",
    )
    .unwrap();
    let err = load(dir, &[Category::Irrelevance], Selection::All).unwrap_err();
    assert!(
        err.to_string().contains("BFCL_v4_irrelevance.json:2"),
        "{err}"
    );
    let err = load(dir, &[Category::Multiple], Selection::All).unwrap_err();
    assert!(matches!(err, BfclError::Read { .. }), "{err}");
    assert!(matches!(
        parse_categories(&["nope".into()]),
        Err(BfclError::UnknownCategory(_))
    ));
}
