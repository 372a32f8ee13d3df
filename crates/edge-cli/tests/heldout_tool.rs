//! The embedded demo model calls a tool it never saw in training
//! (`tests/data/heldout_tool.json`: its name and parameter names are built from words
//! the training corpus holds out), taking the values from the request.

use std::path::PathBuf;
use std::process::Command;

/// Issue 23's acceptance test. The committed demo model fails it (it writes the call's
/// XML but with a name from its training tools), so it is ignored until a retrained
/// model passes: `cargo test --release -p edge-cli --test heldout_tool -- --ignored`.
#[test]
#[ignore = "the committed demo model does not call unseen tools yet (issue 23)"]
fn the_demo_model_calls_a_tool_it_never_saw() {
    let tools = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/heldout_tool.json");
    let o = Command::new(env!("CARGO_BIN_EXE_edge-llm"))
        .args(["generate", "--tools"])
        .arg(&tools)
        .args([
            "--prompt",
            "Convert the currency: amount 20, from EUR to JPY.",
            "--max-new-tokens",
            "80",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let text = v["text"].as_str().unwrap();
    assert!(text.contains("<function=convert_currency>"), "{text}");
    for (param, value) in [
        ("amount", "20"),
        ("from_currency", "EUR"),
        ("to_currency", "JPY"),
    ] {
        let expected = format!("<parameter={param}>\n{value}\n</parameter>");
        assert!(text.contains(&expected), "{param}: {text}");
    }
}
