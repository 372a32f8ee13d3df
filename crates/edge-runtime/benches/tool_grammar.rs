//! Cost of constrained tool calls per generated token, on a vocabulary of Qwen3.6's size
//! (248,320 tokens of 1–10 bytes, drawn with a fixed seed; mostly letters, as in a BPE
//! vocabulary):
//!
//! - `mask/*`: the full mask of the vocabulary in a grammar state (what a sampled token
//!   inside a call costs, a greedy one whose first choice the grammar rejects, and a
//!   speculative verification per visited node that needs it);
//! - `accept_one`: one token tried (a greedy token the grammar allows).
//!
//! Run: `cargo bench -p edge-runtime --bench tool_grammar`.

use criterion::{Criterion, criterion_group, criterion_main};
use edge_core::rng::SeededRng;
use edge_runtime::tool_calls::{GrammarState, TokenBytes, ToolConstraint};
use serde_json::json;
use std::hint::black_box;
use std::sync::Arc;

const VOCAB: usize = 248_320;

fn vocab() -> TokenBytes {
    let mut rng = SeededRng::from_seed(1);
    let tags = [
        "<tool_call>",
        "</tool_call>",
        "<|im_end|>",
        "\n",
        "<parameter=",
        "</parameter>",
    ];
    let mut tokens: Vec<Vec<u8>> = tags.iter().map(|t| t.as_bytes().to_vec()).collect();
    while tokens.len() < VOCAB {
        let len = 1 + rng.below(10);
        let token = (0..len)
            .map(|i| match rng.below(10) {
                0 if i == 0 => b' ',
                0..=6 => b'a' + rng.below(26) as u8,
                _ => b' ' + rng.below(95) as u8,
            })
            .collect();
        tokens.push(token);
    }
    TokenBytes::new(tokens)
}

fn tools() -> serde_json::Value {
    json!([
        {"type": "function", "function": {"name": "convert_currency", "parameters": {
            "type": "object", "properties": {
                "amount": {"type": "number"},
                "from_currency": {"type": "string"},
                "to_currency": {"type": "string"},
                "options": {"type": "object", "properties": {
                    "round": {"type": "integer"}, "source": {"type": "string"}
                }}
            }, "required": ["amount", "from_currency", "to_currency"]}}},
        {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}}}}
    ])
}

fn state(c: &ToolConstraint, text: &str) -> GrammarState {
    c.grammar()
        .accept(c.start(), text.as_bytes())
        .expect("a prefix the grammar allows")
}

fn bench(c: &mut Criterion) {
    let vocab = Arc::new(vocab());
    let constraint = ToolConstraint::for_prompt(&tools(), vocab, "").unwrap();
    let head = "<tool_call>\n<function=";
    let states = [
        ("outside_call", "I will look that up.".to_string()),
        ("function_name", head.to_string()),
        (
            "string_value",
            format!("{head}convert_currency>\n<parameter=from_currency>\nEu"),
        ),
        (
            "json_value",
            format!("{head}convert_currency>\n<parameter=options>\n{{\"ro"),
        ),
    ];
    let mut logits = vec![0.0f32; VOCAB];
    for (name, text) in &states {
        let s = state(&constraint, text);
        c.bench_function(&format!("mask/{name}"), |b| {
            b.iter(|| black_box(constraint.mask(s, &mut logits, &[2])))
        });
    }
    let s = state(&constraint, &states[2].1);
    c.bench_function("accept_one", |b| {
        b.iter(|| black_box(constraint.accept(s, black_box(7), &[2])))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
