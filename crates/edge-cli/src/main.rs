//! `edge-llm`: the command line of edge-llm.
//!
//! Commands and flags are a stable interface other tools script against.

mod agent;
mod bundle;
mod cli_error;
mod commands;

use clap::{Parser, Subcommand};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use cli_error::CliError;

#[derive(Parser, Debug)]
#[command(
    name = "edge-llm",
    version,
    about = "Run Qwen3.5/Qwen3.6 hybrid models on the edge"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Generate tokens from a prompt.
    Generate(commands::generate::GenerateArgs),
    /// Teacher-forced logits for every position of a prompt.
    Score(commands::score::ScoreArgs),
    /// Describe a model directory: architecture, tensors, quantization, state sizes.
    Inspect(commands::inspect::InspectArgs),
    /// Write a ModelOpt-layout NVFP4 or FP8 checkpoint.
    Quantize(commands::quantize::QuantizeArgs),
    /// Serve an OpenAI-compatible HTTP API (chat and text completions, tool calls,
    /// streaming) on 127.0.0.1:8000 by default.
    Serve(commands::serve::ServeArgs),
    /// Benchmarks: prefill/decode speed against the memory-bandwidth bound, and the
    /// MLPerf Edge Agentic replay.
    #[command(subcommand)]
    Bench(commands::bench::BenchCommand),
    /// CUDA kernels: `check` compiles every kernel with NVRTC for each architecture.
    #[command(subcommand)]
    Kernels(commands::kernels::KernelsCommand),
}

/// mimalloc returns freed memory to the OS shortly after a free ("purging"). A prompt's
/// forward pass frees and reallocates multi-MB activation buffers layer after layer, so
/// each reallocation page-faulted and zeroed its pages afresh: on a 512-token prompt of
/// the 0.53B benchmark model, 50k page faults against 6k without purging, and prefill
/// 88–91 against 95–100 tok/s (3 alternating runs each). The cost is that the process
/// keeps its peak memory committed.
fn keep_freed_memory() {
    // `mi_option_purge_delay` of mimalloc.h (at this position in both its v2 and v3
    // enums; the Rust bindings name no constant for it).
    const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    // SAFETY: `mi_option_set` only stores an option value (thread-safe, valid at any
    // time); −1 means "never purge".
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
}

fn main() {
    keep_freed_memory();
    let cli = Cli::parse();
    let result: Result<(), CliError> = match cli.command {
        Command::Generate(a) => commands::generate::run(a),
        Command::Score(a) => commands::score::run(a),
        Command::Inspect(a) => commands::inspect::run(a),
        Command::Quantize(a) => commands::quantize::run(a),
        Command::Serve(a) => commands::serve::run(a),
        Command::Bench(c) => commands::bench::run(c),
        Command::Kernels(c) => commands::kernels::run(c),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
