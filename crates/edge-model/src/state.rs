//! The per-sequence state of the hybrid model: attention KV for full-attention layers,
//! conv and recurrent state for Gated DeltaNet layers.
//!
//! It is an explicit value: cloning it is a snapshot, [`AttentionState::truncate`]
//! rolls attention back, and restoring a clone rolls the recurrent state back. A later
//! paged implementation (edge-kvcache) keeps this interface.

use crate::config::{LayerType, Qwen35Config};

/// Keys and values of one attention layer, `[len, kv_heads, head_dim]` each, in f32.
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionState {
    kv_width: usize,
    keys: Vec<f32>,
    values: Vec<f32>,
}

impl AttentionState {
    /// An empty cache for `kv_heads × head_dim` keys and values per token.
    pub fn new(kv_heads: usize, head_dim: usize) -> Self {
        AttentionState {
            kv_width: kv_heads * head_dim,
            keys: Vec::new(),
            values: Vec::new(),
        }
    }

    /// Cached tokens.
    pub fn len(&self) -> usize {
        self.keys.len() / self.kv_width
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Appends keys and values of whole tokens.
    pub fn append(&mut self, keys: &[f32], values: &[f32]) {
        debug_assert_eq!(keys.len() % self.kv_width, 0);
        self.keys.extend_from_slice(keys);
        self.values.extend_from_slice(values);
    }

    /// All cached keys.
    pub fn keys(&self) -> &[f32] {
        &self.keys
    }

    /// All cached values.
    pub fn values(&self) -> &[f32] {
        &self.values
    }

    /// Drops tokens from `len` on.
    pub fn truncate(&mut self, len: usize) {
        self.keys.truncate(len * self.kv_width);
        self.values.truncate(len * self.kv_width);
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        (self.keys.len() + self.values.len()) * 4
    }
}

/// The Gated DeltaNet state of one layer.
#[derive(Clone, Debug, PartialEq)]
pub struct GdnState {
    /// The last `kernel − 1` pre-conv q/k/v rows, oldest first, `[kernel − 1, channels]`.
    pub conv: Vec<f32>,
    /// The recurrent state, `[value_heads, key_dim, value_dim]`, f32.
    pub recurrent: Vec<f32>,
}

/// The state of one decoder layer.
#[derive(Clone, Debug, PartialEq)]
pub enum LayerState {
    /// A full-attention layer's KV cache.
    Attention(AttentionState),
    /// A Gated DeltaNet layer's conv and recurrent state.
    Gdn(GdnState),
}

/// Everything a sequence carries between forward passes.
#[derive(Clone, Debug, PartialEq)]
pub struct SequenceState {
    /// One entry per decoder layer.
    pub layers: Vec<LayerState>,
    /// Tokens processed so far (the position of the next token).
    pub position: usize,
}

impl SequenceState {
    /// A fresh state for `config`.
    pub fn new(config: &Qwen35Config) -> Self {
        let layers = config
            .layer_types
            .iter()
            .map(|t| match t {
                LayerType::FullAttention => LayerState::Attention(AttentionState::new(
                    config.num_key_value_heads,
                    config.head_dim,
                )),
                LayerType::LinearAttention => LayerState::Gdn(GdnState {
                    conv: vec![
                        0.0;
                        (config.linear_conv_kernel_dim - 1) * config.linear_conv_channels()
                    ],
                    recurrent: vec![
                        0.0;
                        config.linear_num_value_heads
                            * config.linear_key_head_dim
                            * config.linear_value_head_dim
                    ],
                }),
            })
            .collect();
        SequenceState {
            layers,
            position: 0,
        }
    }

    /// Captures what a rollback needs: the recurrent (GDN) states, which cannot be
    /// truncated, and the attention cache lengths, which can. Its size does not grow
    /// with the context.
    pub fn checkpoint(&self) -> StateCheckpoint {
        StateCheckpoint {
            position: self.position,
            layers: self
                .layers
                .iter()
                .map(|l| match l {
                    LayerState::Attention(a) => CheckpointLayer::AttentionLen(a.len()),
                    LayerState::Gdn(g) => CheckpointLayer::Gdn(g.clone()),
                })
                .collect(),
        }
    }

    /// Returns to a checkpoint taken from this state earlier (tokens appended since are
    /// dropped). Errors if the checkpoint belongs to another state shape.
    pub fn rollback(&mut self, cp: &StateCheckpoint) -> crate::Result<()> {
        if cp.layers.len() != self.layers.len() || cp.position > self.position {
            return Err(crate::ModelError::InvalidInput(
                "checkpoint does not belong to this sequence state".into(),
            ));
        }
        for (layer, saved) in self.layers.iter_mut().zip(&cp.layers) {
            match (layer, saved) {
                (LayerState::Attention(a), CheckpointLayer::AttentionLen(n)) => a.truncate(*n),
                (LayerState::Gdn(g), CheckpointLayer::Gdn(s)) => g.clone_from(s),
                _ => {
                    return Err(crate::ModelError::InvalidInput(
                        "checkpoint layer pattern differs from the state's".into(),
                    ));
                }
            }
        }
        self.position = cp.position;
        Ok(())
    }

    /// Bytes held by the KV caches and recurrent states.
    pub fn bytes(&self) -> usize {
        self.layers
            .iter()
            .map(|l| match l {
                LayerState::Attention(a) => a.bytes(),
                LayerState::Gdn(g) => (g.conv.len() + g.recurrent.len()) * 4,
            })
            .sum()
    }
}

/// A rollback point of a [`SequenceState`] (see [`SequenceState::checkpoint`]).
#[derive(Clone, Debug, PartialEq)]
pub struct StateCheckpoint {
    position: usize,
    layers: Vec<CheckpointLayer>,
}

#[derive(Clone, Debug, PartialEq)]
enum CheckpointLayer {
    AttentionLen(usize),
    Gdn(GdnState),
}
