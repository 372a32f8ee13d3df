//! Which linears a ModelOpt-style export quantizes, how they group, and the metadata
//! it writes — mirroring ModelOpt 0.47's default NVFP4/FP8 recipes for Qwen3.5.

use crate::config::Qwen35Config;
use crate::manifest::{TensorRole, tensor_manifest};

/// Target weight format of an export.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantFormat {
    /// NVFP4 weights (E2M1 + E4M3 block scales per 16 + f32 global scale).
    Nvfp4,
    /// FP8 E4M3 weights with a per-tensor scale.
    Fp8,
}

impl QuantFormat {
    /// ModelOpt's `quant_algo` name.
    pub fn quant_algo(self) -> &'static str {
        match self {
            QuantFormat::Nvfp4 => "NVFP4",
            QuantFormat::Fp8 => "FP8",
        }
    }
}

impl std::str::FromStr for QuantFormat {
    type Err = crate::ModelError;

    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "nvfp4" => Ok(QuantFormat::Nvfp4),
            "fp8" => Ok(QuantFormat::Fp8),
            _ => Err(crate::ModelError::UnknownValue {
                what: "format",
                value: s.to_string(),
                expected: "nvfp4 or fp8",
            }),
        }
    }
}

/// A set of linears that read the same input and so share `input_scale` (and, for
/// NVFP4, `weight_scale_2`): ModelOpt's `preprocess_linear_fusion`.
#[derive(Clone, Debug, PartialEq)]
pub struct FusedGroup {
    /// Module prefixes (without `.weight`).
    pub members: Vec<String>,
}

/// What to quantize and what to leave in its stored dtype.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantizePlan {
    /// Quantized linears, grouped by shared input.
    pub groups: Vec<FusedGroup>,
    /// The `exclude_modules` list written to `hf_quant_config.json`.
    pub exclude_modules: Vec<String>,
}

impl QuantizePlan {
    /// ModelOpt 0.47's default recipe for this architecture: every projection of the
    /// decoder layers is quantized except the GDN `in_proj_a`/`in_proj_b` (and the conv,
    /// which is not a linear); `lm_head`, the embedding and the whole MTP head stay in
    /// their stored dtype. Fused groups: GDN `in_proj_qkv` + `in_proj_z`, attention
    /// q/k/v, MLP gate/up.
    pub fn modelopt_default(c: &Qwen35Config) -> Self {
        let mut groups = Vec::new();
        let mut exclude = vec!["lm_head".to_string(), "model.embed_tokens".to_string()];
        let linears: Vec<String> = tensor_manifest(c)
            .into_iter()
            .filter(|t| t.role == TensorRole::Linear && t.name.starts_with("model.layers."))
            .map(|t| t.name.trim_end_matches(".weight").to_string())
            .collect();
        for layer in 0..c.num_hidden_layers {
            let p = format!("model.layers.{layer}.");
            let mine: Vec<&String> = linears.iter().filter(|n| n.starts_with(&p)).collect();
            let group_of = |suffixes: &[&str]| FusedGroup {
                members: suffixes.iter().map(|s| format!("{p}{s}")).collect(),
            };
            if mine.iter().any(|n| n.contains(".linear_attn.")) {
                for s in ["conv1d", "in_proj_a", "in_proj_b"] {
                    exclude.push(format!("{p}linear_attn.{s}"));
                }
                groups.push(group_of(&[
                    "linear_attn.in_proj_qkv",
                    "linear_attn.in_proj_z",
                ]));
                groups.push(group_of(&["linear_attn.out_proj"]));
            } else {
                groups.push(group_of(&[
                    "self_attn.q_proj",
                    "self_attn.k_proj",
                    "self_attn.v_proj",
                ]));
                groups.push(group_of(&["self_attn.o_proj"]));
            }
            groups.push(group_of(&["mlp.gate_proj", "mlp.up_proj"]));
            groups.push(group_of(&["mlp.down_proj"]));
        }
        if c.mtp_num_hidden_layers > 0 {
            exclude.push("mtp*".to_string());
        }
        QuantizePlan {
            groups,
            exclude_modules: exclude,
        }
    }

    /// True when `prefix` (a module name) is quantized.
    pub fn is_quantized(&self, prefix: &str) -> bool {
        self.groups
            .iter()
            .any(|g| g.members.iter().any(|m| m == prefix))
    }

    /// `hf_quant_config.json` as ModelOpt writes it.
    pub fn hf_quant_config(&self, format: QuantFormat, kv_fp8: bool) -> serde_json::Value {
        let mut q = serde_json::json!({
            "quant_algo": format.quant_algo(),
            "kv_cache_quant_algo": if kv_fp8 { serde_json::json!("FP8") } else { serde_json::Value::Null },
            "exclude_modules": self.exclude_modules,
        });
        if format == QuantFormat::Nvfp4 {
            q["group_size"] = serde_json::json!(16);
        }
        serde_json::json!({
            "producer": {"name": "edge-llm", "version": env!("CARGO_PKG_VERSION")},
            "quantization": q,
        })
    }

    /// The `quantization_config` block added to `config.json`.
    pub fn quantization_config(&self, format: QuantFormat, kv_fp8: bool) -> serde_json::Value {
        let scheme = match format {
            QuantFormat::Nvfp4 => {
                serde_json::json!({"dynamic": false, "num_bits": 4, "type": "float", "group_size": 16})
            }
            QuantFormat::Fp8 => {
                serde_json::json!({"dynamic": false, "num_bits": 8, "type": "float"})
            }
        };
        let mut v = serde_json::json!({
            "quant_method": "modelopt",
            "quant_algo": format.quant_algo(),
            "ignore": self.exclude_modules,
            "config_groups": {"group_0": {"weights": scheme, "input_activations": scheme, "targets": ["Linear"]}},
            "producer": {"name": "edge-llm", "version": env!("CARGO_PKG_VERSION")},
        });
        if kv_fp8 {
            v["kv_cache_scheme"] =
                serde_json::json!({"dynamic": false, "num_bits": 8, "type": "float"});
        }
        v
    }
}
