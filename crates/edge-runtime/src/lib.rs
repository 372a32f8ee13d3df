//! `edge-runtime`: the engine around the model.
//!
//! Its job: request scheduling with prefix reuse, sampling, the Hugging Face chat
//! template, tool-call parsing (Qwen XML and JSON tool calls, streaming), and an
//! OpenAI-compatible HTTP server for agentic multi-turn workloads.

mod error;

pub use error::{Result, RuntimeError};
pub mod chat_template;
#[cfg(feature = "demo-model")]
pub mod demo;
pub mod engine;
pub mod sampling;
#[cfg(feature = "server")]
pub mod server;
pub mod tokenizer;
pub mod tool_calls;

pub use chat_template::ChatTemplate;
pub use engine::handle::{EngineHandle, EngineStatus, Polled, RequestStream};
pub use engine::{
    Engine, EngineBuilder, EngineConfig, EngineStats, Event, EventSink, GenerateOutput,
    GenerateRequest, RequestId, ReusePolicy, StopReason,
};
pub use sampling::{Sampler, SamplingParams, argmax};
pub use tokenizer::{TextStream, Tokenizer};
