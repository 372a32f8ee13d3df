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
    /// Benchmarks: prefill/decode speed against the memory-bandwidth bound.
    #[command(subcommand)]
    Bench(commands::bench::BenchCommand),
}

fn main() {
    let cli = Cli::parse();
    let result: Result<(), CliError> = match cli.command {
        Command::Generate(a) => commands::generate::run(a),
        Command::Score(a) => commands::score::run(a),
        Command::Inspect(a) => commands::inspect::run(a),
        Command::Quantize(a) => commands::quantize::run(a),
        Command::Bench(c) => commands::bench::run(c),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
