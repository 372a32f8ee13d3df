//! Random-weight checkpoints of any Qwen3.5 shape, for tests and benchmarks (e.g. the
//! ~0.53B benchmark model), written in the plain safetensors layout. The weights are
//! drawn by [`SeededRng`] from the seed: a seed gives the same checkpoint, byte for
//! byte, on every machine.

use crate::config::Qwen35Config;
use crate::manifest::{TensorRole, tensor_manifest};
use crate::{ModelError, Result};
use edge_core::rng::SeededRng;
use std::path::Path;

pub use crate::export::write_random_nvfp4_checkpoint;

/// Element type of a synthetic checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyntheticDType {
    /// IEEE f32.
    F32,
    /// bfloat16.
    Bf16,
}

/// The config of the benchmark model named in the project's performance targets:
/// hidden 1024, 24 layers in the 3:1 pattern, 8 query / 2 KV heads of 256, GDN 16/16
/// heads of 128, FFN 3584, vocab 32768, tied embeddings (≈0.53B parameters).
pub fn bench_0p5b_config() -> serde_json::Value {
    serde_json::json!({
        "model_type": "qwen3_5_text",
        "hidden_size": 1024, "num_hidden_layers": 24, "intermediate_size": 3584,
        "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
        "linear_num_key_heads": 16, "linear_num_value_heads": 16,
        "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
        "full_attention_interval": 4, "vocab_size": 32768, "max_position_embeddings": 65536,
        "rms_norm_eps": 1e-6, "tie_word_embeddings": true, "eos_token_id": 0,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25}
    })
}

/// The Qwen3.6-27B text config (docs of the architecture, §2): hidden 5120, 64 layers
/// in the 3:1 pattern, 24 query / 4 KV heads of 256 (64 rotary dims, θ 1e7), GDN 16/48
/// heads of 128, FFN 17408, vocab 248320, one MTP layer, untied `lm_head`. Written as
/// NVFP4 by [`write_random_nvfp4_checkpoint`] (≈17 GB), the decode benchmark of a GPU.
pub fn qwen36_27b_config() -> serde_json::Value {
    serde_json::json!({
        "model_type": "qwen3_5_text",
        "hidden_size": 5120, "num_hidden_layers": 64, "intermediate_size": 17408,
        "num_attention_heads": 24, "num_key_value_heads": 4, "head_dim": 256,
        "linear_num_key_heads": 16, "linear_num_value_heads": 48,
        "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
        "full_attention_interval": 4, "vocab_size": 248320, "max_position_embeddings": 262144,
        "rms_norm_eps": 1e-6, "tie_word_embeddings": false, "mtp_num_hidden_layers": 1,
        "bos_token_id": 248044, "eos_token_id": 248044,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25}
    })
}

/// A 4-layer config of the architecture (three Gated DeltaNet layers and one attention
/// layer) with every dimension tiny (hidden 32, vocab 64), for tests: it loads and runs
/// in milliseconds. `max_positions` is its context length.
pub fn tiny_config(max_positions: usize) -> serde_json::Value {
    serde_json::json!({
        "hidden_size": 32, "num_hidden_layers": 4, "intermediate_size": 64,
        "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16,
        "linear_num_key_heads": 1, "linear_num_value_heads": 2,
        "linear_key_head_dim": 16, "linear_value_head_dim": 16,
        "vocab_size": 64, "max_position_embeddings": max_positions, "eos_token_id": 1,
        "tie_word_embeddings": true
    })
}

/// Writes `config.json` and `model.safetensors` with seeded random weights whose scales
/// keep activations well-conditioned through many layers.
pub fn write_random_checkpoint(
    dir: &Path,
    config_json: &serde_json::Value,
    dtype: SyntheticDType,
    seed: u64,
) -> Result<()> {
    write_checkpoint(dir, config_json, dtype, seed, |_, _| {})
}

/// Like [`write_random_checkpoint`], with an MTP head and an untied `lm_head` added to
/// the config, but with weights whose greedy continuation is known: the target
/// predicts token `t + 1` after token `t`, and so does the MTP head, so speculation
/// accepts every draft on the main path. Every layer still does its full work (random
/// weights of the same shapes), only the mixers' and MLPs' writes to the residual
/// stream are scaled down (× 0.01) and `lm_head` is the embedding shifted by one row:
/// the hidden state stays close to the current token's embedding, and row `t + 1` of
/// `lm_head` is that embedding. It makes the cost of verifying long accepted runs and
/// big trees measurable on a random benchmark model.
pub fn write_predictable_checkpoint(
    dir: &Path,
    config_json: &serde_json::Value,
    dtype: SyntheticDType,
    seed: u64,
) -> Result<()> {
    let mut config_json = config_json.clone();
    config_json["mtp_num_hidden_layers"] = 1.into();
    config_json["tie_word_embeddings"] = false.into();
    let config = Qwen35Config::from_json(&config_json, None)?;
    let (h, v) = (config.hidden_size, config.vocab_size);
    write_checkpoint(dir, &config_json, dtype, seed, |tensors, find| {
        for (name, values) in tensors.iter_mut() {
            let residual_write = ["o_proj.weight", "out_proj.weight", "down_proj.weight"];
            if residual_write.iter().any(|s| name.ends_with(s)) {
                values.iter_mut().for_each(|x| *x *= 0.01);
            }
            if name == "mtp.fc.weight" {
                // `[h, 2h]`: the normed embedding half through, the hidden half off.
                values.fill(0.0);
                for i in 0..h {
                    values[i * 2 * h + i] = 1.0;
                }
            }
        }
        let embedding = tensors[find("model.embed_tokens.weight")].1.clone();
        let lm_head = &mut tensors[find("lm_head.weight")].1;
        for t in 0..v {
            let from = (t + v - 1) % v;
            lm_head[t * h..][..h].copy_from_slice(&embedding[from * h..][..h]);
        }
    })
}

/// Named tensor values, in manifest order.
type Tensors = Vec<(String, Vec<f32>)>;

fn write_checkpoint(
    dir: &Path,
    config_json: &serde_json::Value,
    dtype: SyntheticDType,
    seed: u64,
    adjust: impl FnOnce(&mut Tensors, &dyn Fn(&str) -> usize),
) -> Result<()> {
    let config = Qwen35Config::from_json(config_json, None)?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ModelError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let config_path = dir.join("config.json");
    let text = serde_json::to_string_pretty(config_json).unwrap_or_default();
    std::fs::write(&config_path, text).map_err(io(&config_path))?;

    let mut rng = SeededRng::from_seed(seed);
    let manifest = tensor_manifest(&config);
    let mut values: Tensors = Vec::with_capacity(manifest.len());
    for spec in &manifest {
        let values_of = random_values(spec.role, &spec.shape, &mut rng);
        values.push((spec.name.clone(), values_of));
    }
    let names: Vec<String> = values.iter().map(|(n, _)| n.clone()).collect();
    let find = |name: &str| {
        (names.iter())
            .position(|n| n == name)
            .expect("the manifest names the tensor")
    };
    adjust(&mut values, &find);
    let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    for (spec, (_, values)) in manifest.into_iter().zip(values) {
        let bytes = match dtype {
            SyntheticDType::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            SyntheticDType::Bf16 => values
                .iter()
                .flat_map(|v| half::bf16::from_f32(*v).to_le_bytes())
                .collect(),
        };
        tensors.push((spec.name, spec.shape, bytes));
    }
    let st_dtype = match dtype {
        SyntheticDType::F32 => safetensors::Dtype::F32,
        SyntheticDType::Bf16 => safetensors::Dtype::BF16,
    };
    let path = dir.join("model.safetensors");
    let views = tensors
        .iter()
        .map(|(name, shape, bytes)| {
            safetensors::tensor::TensorView::new(st_dtype, shape.clone(), bytes)
                .map(|v| (name.clone(), v))
        })
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| ModelError::Checkpoint {
            path: path.clone(),
            reason: e.to_string(),
        })?;
    safetensors::serialize_to_file(views, None, &path).map_err(|e| ModelError::Checkpoint {
        path: path.clone(),
        reason: e.to_string(),
    })
}

/// Seeded random values for a tensor of `role` and `shape`, scaled so that activations
/// stay well-conditioned through many layers (linears: uniform with variance
/// `1/fan_in`).
pub(crate) fn random_values(role: TensorRole, shape: &[usize], rng: &mut SeededRng) -> Vec<f32> {
    let n: usize = shape.iter().product();
    let fan_in = *shape.last().unwrap_or(&1) as f32;
    let mut next = || rng.uniform(-1.0, 1.0);
    match role {
        TensorRole::Linear => {
            let a = (3.0 / fan_in).sqrt();
            (0..n).map(|_| next() * a).collect()
        }
        TensorRole::Embedding => (0..n).map(|_| next()).collect(),
        TensorRole::ZeroCentredNorm => (0..n).map(|_| next() * 0.1).collect(),
        TensorRole::GatedNorm => (0..n).map(|_| 1.0 + next() * 0.1).collect(),
        TensorRole::Conv => (0..n).map(|_| next() * 0.5).collect(),
        TensorRole::ALog => (0..n).map(|_| (1.0 + 7.5 * (next() + 1.0)).ln()).collect(),
        TensorRole::DtBias => (0..n).map(|_| next() * 0.5).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A seed gives one checkpoint, byte for byte (what benchmarks and tests that
    /// rebuild a model from its seed rely on); another seed gives other weights.
    #[test]
    fn a_seed_gives_the_same_checkpoint() {
        let base = tempfile::tempdir().unwrap();
        let bytes = |name: &str, seed| {
            let dir = base.path().join(name);
            write_random_checkpoint(&dir, &tiny_config(32), SyntheticDType::Bf16, seed).unwrap();
            std::fs::read(dir.join("model.safetensors")).unwrap()
        };
        let (a, b, c) = (bytes("a", 9), bytes("b", 9), bytes("c", 10));
        assert_eq!(a, b);
        assert_eq!(a.len(), c.len());
        assert_ne!(a, c);
    }

    /// Every role's values lie in the range its scale gives: linears within
    /// ±√(3/fan_in), gated norms within 1 ± 0.1, and so on.
    #[test]
    fn values_lie_in_their_roles_ranges() {
        let mut rng = SeededRng::from_seed(1);
        let shape = [8, 48];
        let check = |role, lo: f32, hi: f32, rng: &mut SeededRng| {
            let v = random_values(role, &shape, rng);
            assert_eq!(v.len(), 8 * 48);
            assert!(v.iter().all(|x| (lo..hi).contains(x)), "{role:?}");
        };
        let a = (3.0f32 / 48.0).sqrt();
        check(TensorRole::Linear, -a, a, &mut rng);
        check(TensorRole::Embedding, -1.0, 1.0, &mut rng);
        check(TensorRole::GatedNorm, 0.9, 1.1, &mut rng);
        check(TensorRole::Conv, -0.5, 0.5, &mut rng);
        // A_log = ln(1 + 7.5 · u), u uniform in [0, 2): within [0, ln 16).
        check(TensorRole::ALog, 0.0, 16f32.ln(), &mut rng);
    }
}
