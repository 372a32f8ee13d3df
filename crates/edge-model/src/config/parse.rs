//! JSON field readers with errors that name the field.

use super::{LayerType, Qwen35Config};
use crate::{ModelError, Result};
use serde_json::Value;
use std::path::Path;

pub(super) fn read_json(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).map_err(|source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| ModelError::Json {
        path: path.to_path_buf(),
        source,
    })
}

/// A JSON object plus the path prefix used in error messages.
struct Fields<'a> {
    obj: &'a serde_json::Map<String, Value>,
    prefix: &'static str,
}

impl Fields<'_> {
    fn name(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    fn get(&self, key: &str) -> Option<&Value> {
        self.obj.get(key).filter(|v| !v.is_null())
    }

    fn usize_or(&self, key: &str, default: Option<usize>) -> Result<usize> {
        match self.get(key) {
            Some(v) => v.as_u64().map(|n| n as usize).ok_or_else(|| {
                ModelError::config(
                    self.name(key),
                    format!("expected a non-negative integer, got {v}"),
                )
            }),
            None => default.ok_or_else(|| ModelError::config(self.name(key), "is missing")),
        }
    }

    fn f32_or(&self, key: &str, default: f32) -> Result<f32> {
        match self.get(key) {
            Some(v) => v.as_f64().map(|n| n as f32).ok_or_else(|| {
                ModelError::config(self.name(key), format!("expected a number, got {v}"))
            }),
            None => Ok(default),
        }
    }

    fn bool_or(&self, key: &str, default: bool) -> Result<bool> {
        match self.get(key) {
            Some(v) => v.as_bool().ok_or_else(|| {
                ModelError::config(self.name(key), format!("expected true or false, got {v}"))
            }),
            None => Ok(default),
        }
    }
}

fn object<'a>(v: &'a Value, prefix: &'static str, what: &str) -> Result<Fields<'a>> {
    v.as_object()
        .map(|obj| Fields { obj, prefix })
        .ok_or_else(|| ModelError::config(what, "expected a JSON object"))
}

pub(super) fn parse(root: &Value, generation: Option<&Value>) -> Result<Qwen35Config> {
    let root_fields = object(root, "", "config.json")?;
    // The VL wrapper (the published checkpoints) keeps the text model in `text_config`.
    let f = match root_fields.get("text_config") {
        Some(tc) => object(tc, "text_config.", "text_config")?,
        None => root_fields,
    };
    let root_fields = object(root, "", "config.json")?;

    let num_hidden_layers = f.usize_or("num_hidden_layers", None)?;
    let layer_types = parse_layer_types(&f, num_hidden_layers)?;
    let (rope_theta, partial_rotary_factor) = parse_rope(&f)?;
    let tie = match f.get("tie_word_embeddings") {
        Some(_) => f.bool_or("tie_word_embeddings", false)?,
        None => root_fields.bool_or("tie_word_embeddings", false)?,
    };
    let vocab_size = f.usize_or("vocab_size", None)?;

    let mut eos = Vec::new();
    if let Some(g) = generation {
        let g = object(g, "generation_config.", "generation_config.json")?;
        eos = token_ids(&g, "eos_token_id")?;
    }
    if eos.is_empty() {
        eos = token_ids(&f, "eos_token_id")?;
    }

    Ok(Qwen35Config {
        hidden_size: f.usize_or("hidden_size", None)?,
        num_hidden_layers,
        intermediate_size: f.usize_or("intermediate_size", None)?,
        num_attention_heads: f.usize_or("num_attention_heads", None)?,
        num_key_value_heads: f.usize_or("num_key_value_heads", None)?,
        head_dim: f.usize_or("head_dim", Some(256))?,
        linear_num_key_heads: f.usize_or("linear_num_key_heads", Some(16))?,
        linear_num_value_heads: f.usize_or("linear_num_value_heads", Some(32))?,
        linear_key_head_dim: f.usize_or("linear_key_head_dim", Some(128))?,
        linear_value_head_dim: f.usize_or("linear_value_head_dim", Some(128))?,
        linear_conv_kernel_dim: f.usize_or("linear_conv_kernel_dim", Some(4))?,
        layer_types,
        rms_norm_eps: f.f32_or("rms_norm_eps", 1e-6)?,
        vocab_size,
        max_position_embeddings: f.usize_or("max_position_embeddings", Some(32768))?,
        rope_theta,
        partial_rotary_factor,
        tie_word_embeddings: tie,
        mtp_num_hidden_layers: f.usize_or("mtp_num_hidden_layers", Some(0))?,
        eos_token_ids: eos,
    })
}

fn parse_layer_types(f: &Fields, layers: usize) -> Result<Vec<LayerType>> {
    if let Some(v) = f.get("layer_types") {
        let list = v.as_array().ok_or_else(|| {
            ModelError::config(f.name("layer_types"), "expected an array of strings")
        })?;
        return list
            .iter()
            .enumerate()
            .map(|(i, t)| match t.as_str() {
                Some("linear_attention") => Ok(LayerType::LinearAttention),
                Some("full_attention") => Ok(LayerType::FullAttention),
                _ => Err(ModelError::config(
                    format!("{}[{i}]", f.name("layer_types")),
                    format!("unknown layer type {t} (expected \"linear_attention\" or \"full_attention\")"),
                )),
            })
            .collect();
    }
    let interval = f.usize_or("full_attention_interval", Some(4))?;
    if interval == 0 {
        return Err(ModelError::config(
            f.name("full_attention_interval"),
            "must be greater than 0",
        ));
    }
    Ok((0..layers)
        .map(|i| {
            if (i + 1) % interval == 0 {
                LayerType::FullAttention
            } else {
                LayerType::LinearAttention
            }
        })
        .collect())
}

/// `rope_parameters` (current form) or legacy top-level `rope_theta` /
/// `partial_rotary_factor`; defaults 10000 and 0.25 as in HF.
fn parse_rope(f: &Fields) -> Result<(f32, f32)> {
    let mut theta = f.f32_or("rope_theta", 10000.0)?;
    let mut partial = f.f32_or("partial_rotary_factor", 0.25)?;
    for key in ["rope_parameters", "rope_scaling"] {
        if let Some(v) = f.get(key) {
            let rp = v
                .as_object()
                .map(|obj| Fields {
                    obj,
                    prefix: "rope_parameters.",
                })
                .ok_or_else(|| ModelError::config(f.name(key), "expected a JSON object"))?;
            if let Some(kind) = rp.get("rope_type").or_else(|| rp.get("type")) {
                let kind = kind.as_str().unwrap_or_default();
                if !matches!(kind, "default" | "mrope" | "") {
                    return Err(ModelError::config(
                        f.name(key),
                        format!(
                            "rope_type `{kind}` is not supported (only default RoPE / text-only M-RoPE)"
                        ),
                    ));
                }
            }
            theta = rp.f32_or("rope_theta", theta)?;
            partial = rp.f32_or("partial_rotary_factor", partial)?;
        }
    }
    Ok((theta, partial))
}

fn token_ids(f: &Fields, key: &str) -> Result<Vec<u32>> {
    let bad = |v: &Value| {
        ModelError::config(
            f.name(key),
            format!("expected a token id or a list of them, got {v}"),
        )
    };
    match f.get(key) {
        None => Ok(Vec::new()),
        Some(Value::Array(list)) => list
            .iter()
            .map(|v| v.as_u64().map(|n| n as u32).ok_or_else(|| bad(v)))
            .collect(),
        Some(v) => v.as_u64().map(|n| vec![n as u32]).ok_or_else(|| bad(v)),
    }
}
