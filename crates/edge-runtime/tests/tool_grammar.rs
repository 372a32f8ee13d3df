//! Constrained tool calls through the engine, on the committed demo model: a tool the
//! model never saw is called by its name with schema-valid arguments (unconstrained,
//! this model calls a training tool that was not offered), sampled replies stay
//! valid, a required call is made, and speculation under the constraint is lossless.

use edge_model::{ActivationMode, Cpu, Qwen35Model};
use edge_runtime::tool_calls::{
    ParsedReply, TokenBytes, ToolCallFormat, ToolConstraint, parse_complete,
};
use edge_runtime::{
    ChatTemplate, Engine, EngineConfig, GenerateOutput, GenerateRequest, SamplingParams, Tokenizer,
};
use edge_spec::SpecConfig;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

struct Demo {
    model: Arc<Qwen35Model<Cpu>>,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    vocab: Arc<TokenBytes>,
}

fn demo() -> &'static Demo {
    static DEMO: OnceLock<Demo> = OnceLock::new();
    DEMO.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/demo");
        let tokenizer = Tokenizer::from_file(&dir.join("tokenizer.json")).unwrap();
        let config = std::fs::read_to_string(dir.join("tokenizer_config.json")).unwrap();
        Demo {
            model: Arc::new(Qwen35Model::load(&dir, ActivationMode::None).unwrap()),
            template: ChatTemplate::from_tokenizer_config(&config).unwrap(),
            vocab: Arc::new(TokenBytes::from_tokenizer(&tokenizer)),
            tokenizer,
        }
    })
}

fn currency_tool() -> Value {
    json!([{"type": "function", "function": {
        "name": "convert_currency",
        "description": "Convert an amount of money from one currency to another.",
        "parameters": {"type": "object", "properties": {
            "amount": {"type": "number", "description": "The amount"},
            "from_currency": {"type": "string", "description": "Source currency"},
            "to_currency": {"type": "string", "description": "Target currency"}
        }, "required": ["amount", "from_currency", "to_currency"]}
    }}])
}

/// The reply to one user message offering `tools`, parsed against them.
fn reply(
    engine: &mut Engine<Cpu>,
    tools: &Value,
    user: &str,
    sampling: SamplingParams,
    constraint: impl Fn(ToolConstraint) -> Option<ToolConstraint>,
) -> ParsedReply {
    let out = generate(engine, tools, user, sampling, constraint);
    let text = demo().tokenizer.decode(&out.tokens).unwrap();
    let text = text.split("<|im_end|>").next().unwrap_or_default();
    parse_complete(ToolCallFormat::Xml, Some(tools), text, false)
}

/// The engine's output for one user message offering `tools`.
fn generate(
    engine: &mut Engine<Cpu>,
    tools: &Value,
    user: &str,
    sampling: SamplingParams,
    constraint: impl Fn(ToolConstraint) -> Option<ToolConstraint>,
) -> GenerateOutput {
    let d = demo();
    let messages = json!([{"role": "user", "content": user}]);
    let prompt = d
        .template
        .render(&messages, Some(tools), true, false)
        .unwrap();
    let c = ToolConstraint::for_prompt(tools, d.vocab.clone(), &prompt).unwrap();
    let req = GenerateRequest {
        prompt: d.tokenizer.encode(&prompt).unwrap(),
        max_new_tokens: 400,
        sampling,
        stop_tokens: d.model.config().eos_token_ids.clone(),
        tool_constraint: constraint(c),
        ..GenerateRequest::default()
    };
    engine.generate(&req).unwrap()
}

fn engine(spec: Option<SpecConfig>) -> Engine<Cpu> {
    let config = EngineConfig {
        speculation: spec,
        ..EngineConfig::default()
    };
    Engine::new(demo().model.clone(), config).unwrap()
}

fn assert_valid_calls(r: &ParsedReply, name: &str) {
    assert!(!r.tool_calls.is_empty(), "no call: {r:?}");
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    for c in &r.tool_calls {
        assert_eq!(c.name, name);
        assert!(c.arguments["amount"].is_number(), "{:?}", c.arguments);
        assert!(c.arguments["from_currency"].is_string());
        assert!(c.arguments["to_currency"].is_string());
    }
}

#[test]
fn an_unseen_tool_is_called_by_its_schema() {
    let mut e = engine(None);
    let tools = currency_tool();
    let ask = "How much is 20 euros in Japanese yen?";
    let greedy = SamplingParams::default();
    let free = reply(&mut e, &tools, ask, greedy, |_| None);
    let named_right = free.tool_calls.iter().all(|c| c.name == "convert_currency");
    let clean = named_right && !free.tool_calls.is_empty() && free.warnings.is_empty();
    assert!(
        !clean,
        "the model alone now calls the tool well; pick a harder case: {free:?}"
    );
    let constrained = reply(&mut e, &tools, ask, greedy, Some);
    assert_valid_calls(&constrained, "convert_currency");
    // Sampled replies: each call they make fits the schema.
    for seed in 0..4 {
        let sampling = SamplingParams {
            temperature: 1.0,
            seed,
            ..SamplingParams::default()
        };
        let r = reply(&mut e, &tools, ask, sampling, Some);
        if !r.tool_calls.is_empty() {
            assert_valid_calls(&r, "convert_currency");
        }
    }
}

/// A message the model answers without a call gets one, valid, when a call is
/// required (OpenAI's `tool_choice` `required`).
#[test]
fn a_required_call_is_made() {
    let tools = currency_tool();
    let hello = "What can you do?";
    let greedy = SamplingParams::default();
    let unforced = reply(&mut engine(None), &tools, hello, greedy, Some);
    assert!(
        unforced.tool_calls.is_empty(),
        "the model calls on its own here; pick a message that asks for nothing: {unforced:?}"
    );
    let required = |c: ToolConstraint| Some(c.requiring_call());
    let forced = reply(&mut engine(None), &tools, hello, greedy, required);
    assert_valid_calls(&forced, "convert_currency");
    assert!(forced.content.is_empty(), "{forced:?}");
}

/// Speculation verifies each draft against the grammar state its path leads to: greedy
/// replies are token for token those of plain constrained decoding, chain or tree, and
/// drafts are accepted inside calls too; sampled replies stay valid.
#[test]
fn speculation_under_the_constraint_is_lossless() {
    let tools = currency_tool();
    let greedy = SamplingParams::default();
    let asks = [
        "How much is 20 euros in Japanese yen?",
        "Hello! Who are you?",
    ];
    let required = |c: ToolConstraint| Some(c.requiring_call());
    let mut plain = engine(None);
    for spec in [
        SpecConfig::linear(1),
        SpecConfig::linear(3),
        SpecConfig::tree(3, 2, 6),
    ] {
        let mut speculating = engine(Some(spec));
        for ask in asks {
            let want = generate(&mut plain, &tools, ask, greedy, required);
            let got = generate(&mut speculating, &tools, ask, greedy, required);
            assert_eq!(got.tokens, want.tokens, "{spec:?}, {ask}");
            let s = got.speculation.expect("the request speculated");
            assert!(s.accepted > 0, "{spec:?}: {s:?}");
        }
        for seed in 0..3 {
            let sampling = SamplingParams {
                temperature: 0.8,
                seed,
                ..SamplingParams::default()
            };
            let r = reply(&mut speculating, &tools, asks[0], sampling, required);
            assert_valid_calls(&r, "convert_currency");
        }
    }
}

/// Each token's bytes, as the constraint reads them, spell exactly the text it encodes:
/// byte-level symbols, split UTF-8 characters and added tokens alike.
#[test]
fn token_bytes_spell_the_encoded_text() {
    let d = demo();
    let text = "<tool_call>\n<function=café_☕>\n  ünïcode 🚀 tabs\there\n</tool_call><|im_end|>";
    let ids = d.tokenizer.encode(text).unwrap();
    let spelled: Vec<u8> = (ids.iter())
        .flat_map(|&id| d.vocab.get(id).unwrap().to_vec())
        .collect();
    assert_eq!(String::from_utf8(spelled).unwrap(), text);
    assert_eq!(d.vocab.len(), d.tokenizer.token_bytes().len());
}
