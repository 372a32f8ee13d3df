//! The demo model's chat template rendered by edge-runtime equals transformers'
//! `apply_chat_template` output (cases made by
//! `tools/reference/make_chat_template_cases.py`).

use edge_runtime::ChatTemplate;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn demo_template_matches_transformers() {
    let cfg = std::fs::read_to_string(root().join("models/demo/tokenizer_config.json")).unwrap();
    let t = ChatTemplate::from_tokenizer_config(&cfg).unwrap();
    let cases: Vec<serde_json::Value> = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/fixtures/chat-template/cases.json")).unwrap(),
    )
    .unwrap();
    assert!(cases.len() >= 10);
    for (i, c) in cases.iter().enumerate() {
        let tools = c.get("tools").filter(|t| !t.is_null());
        let gen_prompt = c
            .get("add_generation_prompt")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        let think = c["enable_thinking"].as_bool().unwrap_or(true);
        let got = t.render(&c["messages"], tools, gen_prompt, think).unwrap();
        let want = c["expected"].as_str().unwrap();
        if got != want {
            let at = got
                .chars()
                .zip(want.chars())
                .take_while(|(a, b)| a == b)
                .count();
            let ctx: String = want.chars().skip(at.saturating_sub(40)).take(80).collect();
            let got_ctx: String = got.chars().skip(at.saturating_sub(40)).take(80).collect();
            panic!("case {i}: first difference at char {at}\nwant …{ctx:?}\ngot  …{got_ctx:?}");
        }
    }
}
