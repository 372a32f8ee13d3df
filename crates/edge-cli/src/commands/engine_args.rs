//! The engine and cache flags `generate`, `serve` and `bench decode` share, applied
//! over [`EngineBuilder`]'s defaults.

use clap::Args;
use edge_kvcache::KvDType;
use edge_model::{ActivationMode, Cpu, Qwen35Model};
use edge_runtime::{EngineBuilder, ReusePolicy};
use edge_spec::SpecConfig;
use std::sync::Arc;

/// Flags that configure the engine and its paged cache. A flag left out keeps
/// [`EngineBuilder`]'s default.
#[derive(Args, Debug, Clone)]
pub struct EngineArgs {
    /// The device: cpu (default), cuda:N (an NVIDIA GPU) or cuda-emu (the CUDA
    /// backend's own kernels emulated on the CPU: for verification and debugging, not
    /// speed). On both CUDA devices `--act-quant auto` means bf16 activations.
    #[arg(long)]
    pub device: Option<edge_core::Device>,
    /// KV page element type: f32 (default), bf16, or fp8 (E4M3 with the checkpoint's
    /// k_scale/v_scale, 1.0 where absent; one byte per element).
    #[arg(long)]
    pub kv_dtype: Option<KvDType>,
    /// Byte budget of the cache (pages, state slots and prefix snapshots), e.g.
    /// 4294967296, 4GiB (default) or 512MiB.
    #[arg(long, value_parser = parse_bytes)]
    pub kv_budget: Option<usize>,
    /// Tokens per KV page (default 32).
    #[arg(long)]
    pub block_size: Option<usize>,
    /// Tokens per prefill pass (default 512).
    #[arg(long)]
    pub prefill_chunk: Option<usize>,
    /// Tokens reserved for a request's decoding when it starts (default 256); past
    /// them its pages grow as it decodes, and when the cache budget runs short the
    /// newest request is preempted and later resumes by recomputation.
    #[arg(long)]
    pub decode_reserve: Option<usize>,
    /// Keep a prefix snapshot every N prefill chunks (default 0: only at prompt ends
    /// and reuse points).
    #[arg(long)]
    pub snapshot_stride: Option<usize>,
    /// Turn prefix reuse across requests off.
    #[arg(long)]
    pub no_prefix_cache: bool,
    /// Which cached prefixes a request resumes from: exact (default; output
    /// bit-identical to no cache) or longest (also unmarked earlier prompt ends).
    #[arg(long)]
    pub reuse: Option<ReusePolicy>,
    /// MTP speculative decoding: auto (the mode measured fastest on the CPU for the
    /// model's size: off for cache-resident models like the demo, else linear), off,
    /// linear (a chain of drafts) or tree (a token tree verified in one forward).
    /// Lossless: greedy output is identical to `off`, sampled output has the same
    /// distribution. Models without an MTP head decode token by token.
    #[arg(long, value_enum, default_value_t = SpecMode::Auto)]
    pub spec: SpecMode,
    /// Draft depth (default: 3 for linear, 4 for tree).
    #[arg(long)]
    pub draft_steps: Option<usize>,
    /// Tree: children proposed per expanded node, and nodes expanded per depth.
    #[arg(long, default_value_t = 4)]
    pub tree_top_k: usize,
    /// Tree: nodes verified per target forward, the root included.
    #[arg(long, default_value_t = 16)]
    pub tree_nodes: usize,
}

/// The `--spec` modes.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecMode {
    /// [`SpecConfig::fastest_on_cpu`] for the model (the builder's default).
    Auto,
    /// One target forward per token.
    Off,
    /// A chain of MTP drafts.
    Linear,
    /// A tree of MTP drafts.
    Tree,
}

impl EngineArgs {
    /// `mode` as the model should load for this device ([`ActivationMode::on_device`]).
    pub fn activations(&self, mode: ActivationMode) -> ActivationMode {
        mode.on_device(self.device.unwrap_or_default())
    }

    /// An [`EngineBuilder`] for `model` with these flags over its defaults.
    pub fn builder(&self, model: Arc<Qwen35Model<Cpu>>) -> EngineBuilder {
        let mut b = EngineBuilder::from_model(model.clone());
        if let Some(d) = self.device {
            b = b.device(d);
        }
        if let Some(d) = self.kv_dtype {
            b = b.kv_dtype(d);
        }
        if let Some(n) = self.kv_budget {
            b = b.kv_budget(n);
        }
        if let Some(n) = self.block_size {
            b = b.block_size(n);
        }
        if let Some(n) = self.prefill_chunk {
            b = b.prefill_chunk(n);
        }
        if let Some(n) = self.decode_reserve {
            b = b.decode_reserve(n);
        }
        if let Some(n) = self.snapshot_stride {
            b = b.snapshot_stride(n);
        }
        if self.no_prefix_cache {
            b = b.prefix_cache(false);
        }
        if let Some(r) = self.reuse {
            b = b.reuse(r);
        }
        match self.spec {
            SpecMode::Auto => b,
            _ => b.speculation(self.spec_config().filter(|_| model.mtp().is_some())),
        }
    }

    /// The speculation `--spec linear|tree` asks for (`None` for off and auto).
    pub fn spec_config(&self) -> Option<SpecConfig> {
        match self.spec {
            SpecMode::Auto | SpecMode::Off => None,
            SpecMode::Linear => Some(SpecConfig::linear(self.draft_steps.unwrap_or(3))),
            SpecMode::Tree => Some(SpecConfig::tree(
                self.draft_steps.unwrap_or(4),
                self.tree_top_k,
                self.tree_nodes,
            )),
        }
    }
}

/// A byte count: digits, optionally followed by K, M, G (powers of 1000) or KiB, MiB,
/// GiB (powers of 1024).
pub fn parse_bytes(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: usize = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a byte count (e.g. 4GiB, 512MiB, 1000000)"))?;
    let scale: usize = match unit.trim() {
        "" | "B" => 1,
        "K" | "KB" => 1_000,
        "M" | "MB" => 1_000_000,
        "G" | "GB" => 1_000_000_000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => return Err(format!("unknown byte unit `{other}` in `{text}`")),
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("`{text}` is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts() {
        assert_eq!(parse_bytes("4GiB"), Ok(4 << 30));
        assert_eq!(parse_bytes("512MiB"), Ok(512 << 20));
        assert_eq!(parse_bytes("3M"), Ok(3_000_000));
        assert_eq!(parse_bytes("1234"), Ok(1234));
        // clap shows the message as it is: each names what was wrong.
        for (bad, says) in [
            ("lots", "is not a byte count"),
            ("99999999999999999999GiB", "is not a byte count"),
            ("4TB", "unknown byte unit `TB`"),
            ("20000000000GiB", "is too large"),
        ] {
            let err = parse_bytes(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
