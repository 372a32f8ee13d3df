//! The embedded demo model calls a tool it never saw in training
//! (`tests/data/heldout_tool.json`: its name and parameter names are built from words
//! the training corpus holds out), taking the values from the request, with the CLI's
//! default `--tool-calls auto`, which keeps a call inside the offered tools' schemas.

use std::path::PathBuf;
use std::process::Command;

/// `generate`'s reply text to the held-out tool's request, with `extra` flags.
fn generate(extra: &[&str]) -> String {
    let tools = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/heldout_tool.json");
    let o = Command::new(env!("CARGO_BIN_EXE_edge-llm"))
        .args(["generate", "--tools"])
        .arg(&tools)
        .args([
            "--prompt",
            "Convert the currency: amount 20, from EUR to JPY.",
            "--max-new-tokens",
            "400",
            "--json",
        ])
        .args(extra)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["text"].as_str().unwrap().to_string()
}

/// Issue 23's acceptance test: `generate --tools FILE` with a tool the model never
/// saw prints a call to it, each parameter once, the values from the request. (The
/// model copies the request's closing period into `to_currency`.)
#[test]
fn the_demo_model_calls_a_tool_it_never_saw() {
    let text = generate(&[]);
    assert!(
        text.contains("<tool_call>\n<function=convert_currency>\n"),
        "{text}"
    );
    for param in ["amount", "from_currency", "to_currency"] {
        let tag = format!("<parameter={param}>\n");
        assert_eq!(text.matches(&tag).count(), 1, "{param}: {text}");
    }
    let value = |param: &str| {
        let after = text
            .split(&format!("<parameter={param}>\n"))
            .nth(1)
            .unwrap();
        after.split("\n</parameter>").next().unwrap().to_string()
    };
    assert_eq!(value("amount").parse::<f64>().ok(), Some(20.0), "{text}");
    assert_eq!(value("from_currency"), "EUR", "{text}");
    assert!(value("to_currency").starts_with("JPY"), "{text}");
    assert!(
        text.trim_end().ends_with("</function>\n</tool_call>"),
        "{text}"
    );
}

/// `--tool-calls free` turns the constraint off: the model alone repeats a parameter
/// here, which the default cannot.
#[test]
fn free_tool_calls_are_left_as_written() {
    let free = generate(&["--tool-calls", "free"]);
    assert!(free.contains("<function=convert_currency>"), "{free}");
    let repeats = ["amount", "from_currency", "to_currency"]
        .iter()
        .any(|p| free.matches(&format!("<parameter={p}>\n")).count() > 1);
    assert!(
        repeats,
        "the model alone now writes this call well; pick a harder request: {free}"
    );
    assert_eq!(generate(&["--tool-calls", "constrained"]), generate(&[]));
}
