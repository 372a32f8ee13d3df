//! Embedding edge-llm: build an engine, run it behind an `EngineHandle`, and stream a
//! tool-calling chat: the model's reasoning, text and tool calls arrive as they are
//! generated, with no partial tag in the text.
//!
//! ```sh
//! cargo run --release -p edge-examples --example stream_tool_chat -- \
//!     --prompt "Show me the recent git history."
//! ```
//!
//! The demo model compiled into the binary (`EngineBuilder::demo()`) runs by default,
//! with the `bash` tool of its `agent_defaults.json`; any model directory with a tokenizer and a chat template
//! works with `--model` (and `--tools FILE` for an array of OpenAI tool schemas).

use clap::Parser;
use edge_runtime::tool_calls::{Delta, ToolCallFormat, ToolCallParser, prompt_opens_reasoning};
use edge_runtime::{
    ChatTemplate, EngineBuilder, EngineHandle, Event, GenerateRequest, SamplingParams, Tokenizer,
    demo,
};
use std::io::Write;
use std::path::PathBuf;

#[derive(Parser, Debug)]
struct Args {
    /// Model directory (tokenizer.json, tokenizer_config.json with a chat template).
    #[arg(long)]
    model: Option<PathBuf>,
    /// The user's message.
    #[arg(long, default_value = "Show me the recent git history.")]
    prompt: String,
    /// A JSON file with an array of OpenAI tool schemas (default: the model's
    /// agent_defaults.json tools).
    #[arg(long)]
    tools: Option<PathBuf>,
    /// Let the model reason first.
    #[arg(long)]
    think: bool,
    /// Most tokens to generate.
    #[arg(long, default_value_t = 200)]
    max_new_tokens: usize,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = Args::parse();
    // The engine: the builder's defaults (the fastest documented activation mode,
    // prefix reuse on, speculation as measured fastest), on the demo model compiled
    // into the binary or on a model directory.
    let (builder, tokenizer, template, defaults): (_, _, _, serde_json::Value) = match &a.model {
        None => (
            EngineBuilder::demo(),
            demo::tokenizer()?,
            demo::chat_template()?,
            serde_json::from_str(demo::AGENT_DEFAULTS)?,
        ),
        Some(dir) => (
            EngineBuilder::new(dir),
            Tokenizer::from_file(&dir.join("tokenizer.json"))?,
            ChatTemplate::from_tokenizer_config(&std::fs::read_to_string(
                dir.join("tokenizer_config.json"),
            )?)?,
            std::fs::read_to_string(dir.join("agent_defaults.json"))
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or_default(),
        ),
    };
    let engine = builder.build()?;
    let stop_tokens = engine.model().config().eos_token_ids.clone();
    let tools: serde_json::Value = match &a.tools {
        Some(path) => serde_json::from_str(&std::fs::read_to_string(path)?)?,
        None => defaults["tools"].clone(),
    };
    let tools = Some(&tools).filter(|t| t.is_array());

    // The chat: a system message, the user's, rendered with the tools; every message
    // end is a point a later turn of the same conversation can resume from.
    let mut messages = vec![serde_json::json!({"role": "user", "content": a.prompt})];
    if let Some(system) = defaults["system"].as_str() {
        messages.insert(0, serde_json::json!({"role": "system", "content": system}));
    }
    let (text, ends) =
        template.render_marked(&serde_json::Value::Array(messages), tools, true, a.think)?;
    let (prompt, reuse_points) = tokenizer.encode_marked(&text, &ends)?;

    // The engine runs on its own thread; any thread may submit to the handle.
    let handle = EngineHandle::spawn(engine, 16)?;
    let stream = handle.submit(GenerateRequest {
        prompt,
        reuse_points,
        max_new_tokens: a.max_new_tokens,
        sampling: SamplingParams::default(),
        stop_tokens: stop_tokens.clone(),
        ..GenerateRequest::default()
    })?;

    // Tokens become text (the streaming detokenizer holds a character split over two
    // tokens back until it is whole), and text becomes reasoning, content and tool calls.
    let format = template.tool_call_format().unwrap_or(ToolCallFormat::Xml);
    let mut parser = ToolCallParser::new(format, tools, prompt_opens_reasoning(&text));
    let mut detokenizer = tokenizer.text_stream();
    let mut out = std::io::stdout();
    for event in stream {
        match event {
            Event::Token { id: t, .. } => {
                if stop_tokens.contains(&t) {
                    continue;
                }
                if let Some(piece) = detokenizer.push(t)? {
                    for delta in parser.push(&piece) {
                        print_delta(&mut out, delta)?;
                    }
                }
            }
            Event::Finished(result) => {
                let result = result?;
                let (deltas, warnings) =
                    std::mem::replace(&mut parser, ToolCallParser::new(format, None, false))
                        .finish();
                for delta in deltas {
                    print_delta(&mut out, delta)?;
                }
                for w in warnings {
                    eprintln!("warning: {w}");
                }
                eprintln!(
                    "\n[{} prompt tokens, {} cached, {} generated, stop: {}, first token after {:.0} ms]",
                    result.prompt_tokens,
                    result.cached_tokens,
                    result.tokens.len(),
                    result.stop.name(),
                    result.prefill_ms
                );
            }
            // The stream's iterator never yields the engine's liveness probes.
            Event::Alive => {}
        }
    }
    Ok(())
}

fn print_delta(out: &mut impl Write, delta: Delta) -> std::io::Result<()> {
    match delta {
        Delta::Reasoning(r) => write!(out, "\x1b[2m{r}\x1b[0m")?,
        Delta::Content(c) => write!(out, "{c}")?,
        Delta::ToolCall(call) => writeln!(out, "\n[tool call] {}", call.to_openai())?,
        // Calls streamed as written (a parser with `streaming_calls(true)`, for decoding
        // that follows the tool-call grammar).
        Delta::ToolCallBegin(head) => write!(out, "\n[tool call] {}: ", head.name)?,
        Delta::ToolCallArguments { text, .. } => write!(out, "{text}")?,
        Delta::ToolCallEnd(_) => writeln!(out)?,
    }
    out.flush()
}
