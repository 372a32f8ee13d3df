//! `edge-llm bench bfcl` end to end on the committed fixture (real BFCL v4 entries).

use std::path::PathBuf;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_edge-llm"))
}

fn data() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/bfcl")
        .display()
        .to_string()
}

/// Reads a written report and removes its file.
fn take_report(path: &std::path::Path) -> serde_json::Value {
    let r = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    std::fs::remove_file(path).unwrap();
    r
}

#[test]
fn self_check_scores_the_fixture_fully() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("self.json");
    let o = bin()
        .args([
            "bench",
            "bfcl",
            "--data",
            &data(),
            "--self-check",
            "--report",
        ])
        .arg(&report)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("normalized"), "{table}");
    let r = take_report(&report);
    // The default categories: all but live_relevance (one fixture entry).
    assert_eq!(r["total_samples"], 17);
    assert_eq!(r["overall_accuracy"], 100.0);
    assert_eq!(r["normalized_single_turn_score"], 100.0);
    assert_eq!(r["categories"]["simple_python"]["total"], 3);
}

#[test]
fn recorded_answers_are_scored_with_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let answers = dir.path().join("answers.jsonl");
    let report = dir.path().join("answers.json");
    let lines = [
        // Right: an int for a float, arguments as JSON text.
        r#"{"id": "simple_python_88", "tool_calls": [{"name": "calculate_BMI", "arguments": "{\"weight_kg\": 70, \"height_m\": 1.75}"}]}"#,
        // The dotted name sent as is: wrong.
        r#"{"id": "multiple_73", "tool_calls": [{"name": "religion.get_origin", "arguments": {"religion": "buddhism"}}]}"#,
        // A call where none fits.
        r#"{"id": "irrelevance_8", "tool_calls": [{"name": "str_to_int", "arguments": "{}"}]}"#,
    ];
    std::fs::write(&answers, lines.join("\n")).unwrap();
    let o = bin()
        .args(["bench", "bfcl", "--data", &data(), "--categories"])
        .args(["simple_python,multiple,irrelevance", "--answers"])
        .arg(&answers)
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = take_report(&report);
    std::fs::remove_file(&answers).unwrap();
    let kind = |id: &str| {
        let s = r["samples"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id)
            .unwrap();
        s["kind"].as_str().unwrap_or("correct").to_string()
    };
    assert_eq!(kind("simple_python_88"), "correct");
    assert_eq!(kind("simple_python_94"), "no_answer");
    assert_eq!(kind("multiple_73"), "wrong_func_name");
    assert_eq!(kind("irrelevance_8"), "irrelevance:made_call");
    assert_eq!(r["categories"]["simple_python"]["correct"], 1);
}

#[test]
fn unreachable_endpoints_and_bad_data_are_errors() {
    let o = bin()
        .args([
            "bench",
            "bfcl",
            "--data",
            &data(),
            "--endpoint",
            "http://127.0.0.1:9",
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot reach"));
    let o = bin()
        .args([
            "bench",
            "bfcl",
            "--data",
            "/nonexistent-bfcl",
            "--self-check",
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("BFCL_v4_simple_python.json"));
}

#[test]
fn the_embedded_model_answers_in_process() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("model.json");
    let o = bin()
        .args(["bench", "bfcl", "--data", &data(), "--categories"])
        .args([
            "simple_python,irrelevance",
            "--limit",
            "2",
            "--max-new-tokens",
            "48",
        ])
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = take_report(&report);
    assert_eq!(r["total_samples"], 4);
    // Every entry got an answer from the model (right or wrong), none a backend error.
    for s in r["samples"].as_array().unwrap() {
        assert_ne!(s["kind"], "no_answer", "{s}");
    }
}
