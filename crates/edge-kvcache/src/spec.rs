//! What the cache stores: the shapes of a model's attention and recurrent layers, the
//! page size and the element type of KV pages.

use crate::{KvCacheError, Result};

/// How KV pages store keys and values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KvDType {
    /// IEEE f32, 4 bytes per element: exact.
    #[default]
    F32,
    /// bfloat16, 2 bytes per element (round to nearest even).
    Bf16,
    /// FP8 E4M3 with a per-layer scale (`x ≈ e4m3 · scale`, saturating), 1 byte per
    /// element, as ModelOpt exports and vLLM/TensorRT apply it.
    Fp8E4M3,
}

impl KvDType {
    /// Bytes one element takes in a page.
    pub fn bytes(self) -> usize {
        match self {
            KvDType::F32 => 4,
            KvDType::Bf16 => 2,
            KvDType::Fp8E4M3 => 1,
        }
    }

    /// The name the CLI uses (`f32`, `bf16`, `fp8`).
    pub fn name(self) -> &'static str {
        match self {
            KvDType::F32 => "f32",
            KvDType::Bf16 => "bf16",
            KvDType::Fp8E4M3 => "fp8",
        }
    }
}

impl std::fmt::Display for KvDType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for KvDType {
    type Err = KvCacheError;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "f32" => Ok(KvDType::F32),
            "bf16" => Ok(KvDType::Bf16),
            "fp8" | "fp8_e4m3" | "e4m3" => Ok(KvDType::Fp8E4M3),
            _ => Err(KvCacheError::Config(format!(
                "unknown KV dtype `{s}` (expected f32, bf16 or fp8)"
            ))),
        }
    }
}

/// One attention layer's cached rows: `kv_heads × head_dim` keys and as many values per
/// token.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionLayerSpec {
    /// Key/value heads.
    pub kv_heads: usize,
    /// Head width.
    pub head_dim: usize,
    /// FP8 dequantization scale of keys (`k = e4m3 · k_scale`); ignored by f32 and
    /// bf16 pages.
    pub k_scale: f32,
    /// FP8 dequantization scale of values.
    pub v_scale: f32,
}

impl AttentionLayerSpec {
    /// Values of one token's keys (and of its values).
    pub fn row_width(&self) -> usize {
        self.kv_heads * self.head_dim
    }
}

/// One recurrent (Gated DeltaNet) layer's per-sequence state, both parts in f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecurrentLayerSpec {
    /// Values of the conv window (`(kernel − 1) × channels`).
    pub conv: usize,
    /// Values of the recurrent state (`value_heads × key_dim × value_dim`).
    pub state: usize,
}

/// The shape of everything a cache holds for one model.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheSpec {
    /// Tokens per KV page.
    pub block_size: usize,
    /// Element type of KV pages.
    pub kv_dtype: KvDType,
    /// The attention layers, in the model's order (the MTP head's layer last, when the
    /// model has one).
    pub attention: Vec<AttentionLayerSpec>,
    /// The recurrent layers, in the model's order.
    pub recurrent: Vec<RecurrentLayerSpec>,
}

impl CacheSpec {
    /// Checks that the spec describes a usable cache.
    pub fn validate(&self) -> Result<()> {
        if self.block_size == 0 {
            return Err(KvCacheError::Config("block size must be at least 1".into()));
        }
        for (i, a) in self.attention.iter().enumerate() {
            if a.kv_heads == 0 || a.head_dim == 0 {
                return Err(KvCacheError::Config(format!(
                    "attention layer {i} has {} KV heads of width {}",
                    a.kv_heads, a.head_dim
                )));
            }
            if self.kv_dtype == KvDType::Fp8E4M3 {
                for (what, s) in [("k_scale", a.k_scale), ("v_scale", a.v_scale)] {
                    if !(s.is_finite() && s > 0.0) {
                        return Err(KvCacheError::Config(format!(
                            "attention layer {i}: FP8 {what} must be finite and > 0, got {s}"
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Bytes of one block: keys and values of `block_size` tokens in every attention
    /// layer.
    pub fn block_bytes(&self) -> usize {
        let width: usize = self.attention.iter().map(|a| a.row_width()).sum();
        2 * width * self.block_size * self.kv_dtype.bytes()
    }

    /// Bytes of one KV row (one token, every attention layer, keys and values).
    pub fn row_bytes(&self) -> usize {
        let width: usize = self.attention.iter().map(|a| a.row_width()).sum();
        2 * width * self.kv_dtype.bytes()
    }

    /// Bytes of one sequence's recurrent state (every recurrent layer's conv window and
    /// state, f32): what a state slot and a snapshot of it take.
    pub fn state_bytes(&self) -> usize {
        self.recurrent.iter().map(|r| (r.conv + r.state) * 4).sum()
    }

    /// Blocks that cover `rows` tokens.
    pub fn blocks_for(&self, rows: usize) -> usize {
        rows.div_ceil(self.block_size)
    }
}

/// How many pages and state slots a memory with fixed pools holds (a device memory
/// that allocates its pools up front).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolCapacity {
    /// KV pages per attention layer.
    pub pages: usize,
    /// State slots per recurrent layer.
    pub slots: usize,
}

impl PoolCapacity {
    /// Pools that can hold whatever a cache of `budget_bytes` can: as many pages as
    /// the budget holds blocks, and as many slots as it holds states (at least one of
    /// each; a model without recurrent layers gets no slots' worth of memory).
    pub fn for_budget(spec: &CacheSpec, budget_bytes: usize) -> Self {
        let per = |bytes: usize| budget_bytes.checked_div(bytes).unwrap_or(1).max(1);
        PoolCapacity {
            pages: per(spec.block_bytes()),
            slots: per(spec.state_bytes()),
        }
    }

    /// Pools for a cache configured as `config`: with
    /// [`crate::CacheConfig::max_sequences`], that many slots and as many pages as the rest of
    /// the budget holds (at least one of each), so the pools together take the budget;
    /// without, [`PoolCapacity::for_budget`].
    pub fn for_config(spec: &CacheSpec, config: &crate::CacheConfig) -> Self {
        let Some(max) = config.max_sequences else {
            return Self::for_budget(spec, config.budget_bytes);
        };
        let slots = max.max(1);
        let rest = (config.budget_bytes).saturating_sub(slots.saturating_mul(spec.state_bytes()));
        PoolCapacity {
            pages: rest.checked_div(spec.block_bytes()).unwrap_or(1).max(1),
            slots,
        }
    }

    /// Device bytes the pools of `spec` take.
    pub fn bytes(&self, spec: &CacheSpec) -> usize {
        self.pages * spec.block_bytes() + self.slots * spec.state_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(dtype: KvDType) -> CacheSpec {
        CacheSpec {
            block_size: 16,
            kv_dtype: dtype,
            attention: vec![
                AttentionLayerSpec {
                    kv_heads: 2,
                    head_dim: 8,
                    k_scale: 1.0,
                    v_scale: 0.5,
                };
                3
            ],
            recurrent: vec![RecurrentLayerSpec { conv: 6, state: 10 }; 2],
        }
    }

    #[test]
    fn sizes_follow_the_dtype() {
        assert_eq!(spec(KvDType::F32).block_bytes(), 2 * 3 * 16 * 16 * 4);
        assert_eq!(spec(KvDType::Bf16).block_bytes(), 2 * 3 * 16 * 16 * 2);
        assert_eq!(spec(KvDType::Fp8E4M3).block_bytes(), 2 * 3 * 16 * 16);
        assert_eq!(spec(KvDType::Fp8E4M3).row_bytes(), 2 * 3 * 16);
        assert_eq!(spec(KvDType::F32).state_bytes(), 2 * 16 * 4);
        assert_eq!(spec(KvDType::F32).blocks_for(33), 3);
    }

    /// With a sequence limit the pools share the budget: that many slots, the rest in
    /// pages; without one each pool could take the whole budget.
    #[test]
    fn pools_follow_the_sequence_limit() {
        let s = spec(KvDType::F32);
        let (block, state) = (s.block_bytes(), s.state_bytes());
        let mut config = crate::CacheConfig {
            budget_bytes: 10 * block + 3 * state,
            ..crate::CacheConfig::default()
        };
        let open = PoolCapacity::for_config(&s, &config);
        assert_eq!(open, PoolCapacity::for_budget(&s, config.budget_bytes));
        assert!(open.bytes(&s) > config.budget_bytes);
        config.max_sequences = Some(3);
        let limited = PoolCapacity::for_config(&s, &config);
        assert_eq!(
            limited,
            PoolCapacity {
                pages: 10,
                slots: 3
            }
        );
        assert_eq!(limited.bytes(&s), config.budget_bytes);
        // A limit the budget cannot hold still gets one page (the cache refuses later).
        config.max_sequences = Some(1000);
        assert_eq!(PoolCapacity::for_config(&s, &config).pages, 1);
    }

    #[test]
    fn bad_specs_are_rejected() {
        let mut s = spec(KvDType::Fp8E4M3);
        s.validate().unwrap();
        s.attention[1].v_scale = 0.0;
        assert!(matches!(s.validate(), Err(crate::KvCacheError::Config(_))));
        let mut s = spec(KvDType::F32);
        s.block_size = 0;
        assert!(matches!(s.validate(), Err(crate::KvCacheError::Config(_))));
        assert_eq!("fp8".parse::<KvDType>().unwrap(), KvDType::Fp8E4M3);
        assert!(matches!(
            "int4".parse::<KvDType>(),
            Err(crate::KvCacheError::Config(_))
        ));
    }

    #[test]
    fn pool_capacity_follows_the_budget() {
        let mut s = CacheSpec {
            block_size: 4,
            kv_dtype: KvDType::F32,
            attention: vec![AttentionLayerSpec {
                kv_heads: 2,
                head_dim: 4,
                k_scale: 1.0,
                v_scale: 1.0,
            }],
            recurrent: vec![RecurrentLayerSpec { conv: 3, state: 5 }],
        };
        let (block, state) = (s.block_bytes(), s.state_bytes());
        let c = PoolCapacity::for_budget(&s, 10 * block + 3);
        assert_eq!(c.pages, 10);
        assert_eq!(c.slots, (10 * block + 3) / state);
        assert_eq!(c.bytes(&s), c.pages * block + c.slots * state);
        // Below one block or one state, the pools still hold one of each.
        let tiny = PoolCapacity::for_budget(&s, 1);
        assert_eq!((tiny.pages, tiny.slots), (1, 1));
        s.recurrent.clear();
        assert_eq!(PoolCapacity::for_budget(&s, 1 << 20).slots, 1);
    }
}
