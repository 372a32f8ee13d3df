//! The Qwen3.5/3.6 text configuration: parsed from `config.json` (root or `text_config`)
//! and `generation_config.json`, validated, with HF transformers' defaults where a field
//! is optional.

mod parse;

use crate::{ModelError, Result};
use std::path::Path;

/// The kind of token mixer a decoder layer uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LayerType {
    /// Gated DeltaNet (`linear_attention`).
    LinearAttention,
    /// Gated full attention (`full_attention`).
    FullAttention,
}

impl LayerType {
    /// The name used in `config.json`.
    pub fn name(self) -> &'static str {
        match self {
            LayerType::LinearAttention => "linear_attention",
            LayerType::FullAttention => "full_attention",
        }
    }
}

/// The validated text-model configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Qwen35Config {
    /// Residual width.
    pub hidden_size: usize,
    /// Number of decoder layers.
    pub num_hidden_layers: usize,
    /// SwiGLU inner width.
    pub intermediate_size: usize,
    /// Full-attention query heads.
    pub num_attention_heads: usize,
    /// Full-attention KV heads.
    pub num_key_value_heads: usize,
    /// Full-attention head width.
    pub head_dim: usize,
    /// Gated DeltaNet query/key heads.
    pub linear_num_key_heads: usize,
    /// Gated DeltaNet value heads.
    pub linear_num_value_heads: usize,
    /// Gated DeltaNet key head width.
    pub linear_key_head_dim: usize,
    /// Gated DeltaNet value head width.
    pub linear_value_head_dim: usize,
    /// Depthwise causal conv kernel size.
    pub linear_conv_kernel_dim: usize,
    /// The mixer of each layer.
    pub layer_types: Vec<LayerType>,
    /// Epsilon of every RMSNorm.
    pub rms_norm_eps: f32,
    /// Vocabulary size (rows of the embedding).
    pub vocab_size: usize,
    /// Longest supported sequence.
    pub max_position_embeddings: usize,
    /// RoPE base.
    pub rope_theta: f32,
    /// Fraction of each head that is rotated.
    pub partial_rotary_factor: f32,
    /// Whether `lm_head` is the embedding matrix.
    pub tie_word_embeddings: bool,
    /// Number of MTP layers in the checkpoint (0 when stripped).
    pub mtp_num_hidden_layers: usize,
    /// End-of-sequence token ids (from `generation_config.json` when present).
    pub eos_token_ids: Vec<u32>,
}

impl Qwen35Config {
    /// Reads `config.json` (and `generation_config.json` if present) from a model
    /// directory.
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let config = parse::read_json(&dir.join("config.json"))?;
        let generation_path = dir.join("generation_config.json");
        let generation = if generation_path.exists() {
            Some(parse::read_json(&generation_path)?)
        } else {
            None
        };
        Self::from_json(&config, generation.as_ref())
    }

    /// Parses and validates from already-read JSON values.
    pub fn from_json(
        config: &serde_json::Value,
        generation: Option<&serde_json::Value>,
    ) -> Result<Self> {
        let parsed = parse::parse(config, generation)?;
        parsed.validate()?;
        Ok(parsed)
    }

    /// Rotated dimensions per head (`int(head_dim · partial_rotary_factor)`).
    pub fn rotary_dim(&self) -> usize {
        (self.head_dim as f32 * self.partial_rotary_factor) as usize
    }

    /// Channels of the fused GDN q/k/v projection (2·K + V).
    pub fn linear_conv_channels(&self) -> usize {
        2 * self.linear_key_dim() + self.linear_value_dim()
    }

    /// Total GDN key width (heads × head dim).
    pub fn linear_key_dim(&self) -> usize {
        self.linear_num_key_heads * self.linear_key_head_dim
    }

    /// Total GDN value width (heads × head dim).
    pub fn linear_value_dim(&self) -> usize {
        self.linear_num_value_heads * self.linear_value_head_dim
    }

    /// Number of full-attention layers.
    pub fn num_full_attention_layers(&self) -> usize {
        self.layer_types
            .iter()
            .filter(|t| **t == LayerType::FullAttention)
            .count()
    }

    /// Bytes of KV cache per token at `bytes_per_element` (2 for bf16, 1 for FP8).
    pub fn kv_bytes_per_token(&self, bytes_per_element: usize) -> usize {
        self.num_full_attention_layers()
            * 2
            * self.num_key_value_heads
            * self.head_dim
            * bytes_per_element
    }

    /// Bytes of fixed per-sequence recurrent state (f32 GDN state + conv state in f32).
    pub fn recurrent_state_bytes(&self) -> usize {
        let gdn_layers = self.layer_types.len() - self.num_full_attention_layers();
        let state =
            self.linear_num_value_heads * self.linear_key_head_dim * self.linear_value_head_dim;
        let conv = self.linear_conv_channels() * (self.linear_conv_kernel_dim - 1);
        gdn_layers * (state + conv) * 4
    }

    fn validate(&self) -> Result<()> {
        let positive = [
            ("hidden_size", self.hidden_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("intermediate_size", self.intermediate_size),
            ("num_attention_heads", self.num_attention_heads),
            ("num_key_value_heads", self.num_key_value_heads),
            ("head_dim", self.head_dim),
            ("linear_num_key_heads", self.linear_num_key_heads),
            ("linear_num_value_heads", self.linear_num_value_heads),
            ("linear_key_head_dim", self.linear_key_head_dim),
            ("linear_value_head_dim", self.linear_value_head_dim),
            ("linear_conv_kernel_dim", self.linear_conv_kernel_dim),
            ("vocab_size", self.vocab_size),
            ("max_position_embeddings", self.max_position_embeddings),
        ];
        for (field, v) in positive {
            if v == 0 {
                return Err(ModelError::config(field, "must be greater than 0"));
            }
        }
        if !self
            .num_attention_heads
            .is_multiple_of(self.num_key_value_heads)
        {
            return Err(ModelError::config(
                "num_attention_heads",
                format!(
                    "{} query heads are not a multiple of num_key_value_heads = {}",
                    self.num_attention_heads, self.num_key_value_heads
                ),
            ));
        }
        if !self
            .linear_num_value_heads
            .is_multiple_of(self.linear_num_key_heads)
        {
            return Err(ModelError::config(
                "linear_num_value_heads",
                format!(
                    "{} value heads are not a multiple of linear_num_key_heads = {}",
                    self.linear_num_value_heads, self.linear_num_key_heads
                ),
            ));
        }
        if self.layer_types.len() != self.num_hidden_layers {
            return Err(ModelError::config(
                "layer_types",
                format!(
                    "has {} entries but num_hidden_layers is {}",
                    self.layer_types.len(),
                    self.num_hidden_layers
                ),
            ));
        }
        let rot = self.rotary_dim();
        if !(self.partial_rotary_factor > 0.0 && self.partial_rotary_factor <= 1.0)
            || rot == 0
            || !rot.is_multiple_of(2)
        {
            return Err(ModelError::config(
                "partial_rotary_factor",
                format!(
                    "{} of head_dim {} gives {rot} rotary dims; need an even count > 0",
                    self.partial_rotary_factor, self.head_dim
                ),
            ));
        }
        if !(self.rope_theta.is_finite() && self.rope_theta > 1.0) {
            return Err(ModelError::config("rope_theta", "must be finite and > 1"));
        }
        if !(self.rms_norm_eps.is_finite() && self.rms_norm_eps > 0.0) {
            return Err(ModelError::config("rms_norm_eps", "must be finite and > 0"));
        }
        if self.mtp_num_hidden_layers > 1 {
            return Err(ModelError::config(
                "mtp_num_hidden_layers",
                "only 0 or 1 MTP layers are supported (the published design has one)",
            ));
        }
        if let Some(&bad) = self
            .eos_token_ids
            .iter()
            .find(|&&t| t as usize >= self.vocab_size)
        {
            return Err(ModelError::config(
                "eos_token_id",
                format!("{bad} is outside the vocabulary of {}", self.vocab_size),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
