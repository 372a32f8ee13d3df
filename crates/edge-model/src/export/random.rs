//! A random-weight NVFP4 checkpoint of any shape, written directly in the ModelOpt
//! layout without a full-precision model first: what benchmarks a 27B-shaped model on a
//! machine that could never hold its bf16 weights (≈54 GB) or quantize them.

use super::plan::{QuantFormat, QuantizePlan};
use super::writer::{Shards, Tensor};
use crate::config::Qwen35Config;
use crate::manifest::{TensorRole, tensor_manifest};
use crate::synthetic::random_values;
use crate::{ModelError, Result};
use edge_core::rng::SeededRng;
use std::path::Path;

/// E4M3 bits of 1.0: every block scale (the global scale carries the magnitude).
const E4M3_ONE: u8 = 0x38;
/// Root mean square of an E2M1 code drawn uniformly from its 16 values.
const E2M1_RMS: f32 = 2.926;
/// Bytes per output file.
const SHARD_BYTES: usize = 4 << 30;

/// Writes `config.json` (with ModelOpt's `quantization_config`), `hf_quant_config.json`
/// and safetensors shards of a random model of `config_json`'s shape: the linears
/// ModelOpt's default recipe quantizes ([`QuantizePlan::modelopt_default`]) as NVFP4
/// with uniformly drawn codes, unit block scales and a global scale giving each
/// weight the variance `1/in_features`; every other tensor as bf16, drawn as
/// [`crate::synthetic::write_random_checkpoint`] draws it.
pub fn write_random_nvfp4_checkpoint(
    dir: &Path,
    config_json: &serde_json::Value,
    seed: u64,
) -> Result<()> {
    let config = Qwen35Config::from_json(config_json, None)?;
    let plan = QuantizePlan::modelopt_default(&config);
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut rng = SeededRng::from_seed(seed);
    let mut shards = Shards::new(dir, SHARD_BYTES);
    for spec in tensor_manifest(&config) {
        let prefix = spec.name.strip_suffix(".weight").unwrap_or(&spec.name);
        let tensors = match (spec.role, &spec.shape[..]) {
            (TensorRole::Linear, &[rows, cols]) if plan.is_quantized(prefix) => {
                nvfp4_tensors(prefix, rows, cols, &mut rng)?
            }
            _ => {
                let values = random_values(spec.role, &spec.shape, &mut rng);
                let bytes = (values.iter())
                    .flat_map(|v| half::bf16::from_f32(*v).to_le_bytes())
                    .collect();
                vec![(
                    spec.name.clone(),
                    safetensors::Dtype::BF16,
                    spec.shape,
                    bytes,
                )]
            }
        };
        shards.push(tensors)?;
    }
    shards.finish()?;
    let mut cfg = config_json.clone();
    cfg["quantization_config"] = plan.quantization_config(QuantFormat::Nvfp4, false);
    write_json(&dir.join("config.json"), &cfg)?;
    let hf = plan.hf_quant_config(QuantFormat::Nvfp4, false);
    write_json(&dir.join("hf_quant_config.json"), &hf)
}

/// The four tensors of an NVFP4 linear: codes, block scales, global and input scales.
fn nvfp4_tensors(
    prefix: &str,
    rows: usize,
    cols: usize,
    rng: &mut SeededRng,
) -> Result<Vec<Tensor>> {
    if !cols.is_multiple_of(16) {
        return Err(ModelError::Nvfp4Width {
            tensor: prefix.to_string(),
            in_features: cols,
        });
    }
    let codes = rng.bytes(rows * cols / 2);
    let global = (1.0 / cols as f32).sqrt() / E2M1_RMS;
    let scalar = |name: String, v: f32| {
        (
            name,
            safetensors::Dtype::F32,
            vec![],
            v.to_le_bytes().to_vec(),
        )
    };
    Ok(vec![
        (
            format!("{prefix}.weight"),
            safetensors::Dtype::U8,
            vec![rows, cols / 2],
            codes,
        ),
        (
            format!("{prefix}.weight_scale"),
            safetensors::Dtype::F8_E4M3,
            vec![rows, cols / 16],
            vec![E4M3_ONE; rows * cols / 16],
        ),
        scalar(format!("{prefix}.weight_scale_2"), global),
        // ModelOpt's activation dequantization multiplier for an amax of 8.
        scalar(format!("{prefix}.input_scale"), 8.0 / (6.0 * 448.0)),
    ])
}

fn write_json(path: &Path, value: &serde_json::Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    std::fs::write(path, text).map_err(io(path))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ModelError {
    let path = path.to_path_buf();
    move |source| ModelError::Io { path, source }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::tiny_config;
    use crate::{ActivationMode, LogitRows, Qwen35Model, Session};
    use edge_kvcache::CacheConfig;
    use edge_quant::linear::LinearWeight;

    /// The checkpoint loads as NVFP4 where ModelOpt quantizes, bf16 elsewhere, and runs
    /// to finite logits of a sane spread.
    #[test]
    fn a_random_nvfp4_checkpoint_loads_and_runs() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let mut cfg = tiny_config(256);
        cfg["mtp_num_hidden_layers"] = 1.into();
        write_random_nvfp4_checkpoint(dir, &cfg, 3).unwrap();
        let model = Qwen35Model::load(dir, ActivationMode::None).unwrap();
        let layer = &model.layers()[0];
        assert!(matches!(layer.mlp.down.weight(), LinearWeight::Nvfp4(_)));
        assert!(matches!(model.lm_head().weight(), LinearWeight::Bf16(_)));
        let mut s = Session::new(&model, CacheConfig::default()).unwrap();
        let out = s.forward(&[1, 5, 9, 12], LogitRows::All).unwrap();
        assert!(out.logits.iter().all(|x| x.is_finite()));
        let spread = out.logits.iter().fold(0f32, |m, x| m.max(x.abs()));
        assert!(spread > 1e-3 && spread < 1e3, "{spread}");
    }

    /// The 27B shape the device check writes parses, and ModelOpt's recipe quantizes
    /// every decoder projection but the GDN `a`/`b` ones: about 13 GB of NVFP4 codes.
    #[test]
    fn the_27b_shape_quantizes_as_modelopt_does() {
        let c = Qwen35Config::from_json(&crate::synthetic::qwen36_27b_config(), None).unwrap();
        assert_eq!(c.num_hidden_layers, 64);
        let plan = QuantizePlan::modelopt_default(&c);
        let codes: usize = (tensor_manifest(&c).iter())
            .filter(|t| plan.is_quantized(t.name.trim_end_matches(".weight")))
            .map(|t| t.shape.iter().product::<usize>() / 2)
            .sum();
        assert!((12.0e9..14.0e9).contains(&(codes as f64)), "{codes}");
    }
}
