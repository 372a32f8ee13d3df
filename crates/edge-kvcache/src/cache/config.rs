//! How a cache is configured, and what it reports.

use crate::KvDType;

/// How a cache is sized and what it keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheConfig {
    /// Tokens per KV page.
    pub block_size: usize,
    /// Element type of KV pages.
    pub kv_dtype: KvDType,
    /// Bytes for pages, live state slots and snapshots together.
    pub budget_bytes: usize,
    /// Keep prefix snapshots for reuse across requests.
    pub prefix_cache: bool,
    /// The most sequences alive at once, where the user knows it (an engine's
    /// concurrency limit): [`crate::PagedCache::new_sequence`] refuses more, and a
    /// device memory sizes its state-slot pool for exactly these instead of for the
    /// whole budget ([`crate::PoolCapacity::for_config`]). `None`: no limit but the
    /// budget.
    pub max_sequences: Option<usize>,
}

impl Default for CacheConfig {
    /// 32-token f32 pages, a 4 GiB budget, prefix reuse on, no sequence limit.
    fn default() -> Self {
        CacheConfig {
            block_size: 32,
            kv_dtype: KvDType::F32,
            budget_bytes: 4 << 30,
            prefix_cache: true,
            max_sequences: None,
        }
    }
}

/// Counters since the cache was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Prefix lookups.
    pub lookups: u64,
    /// Lookups that restored a snapshot.
    pub hits: u64,
    /// Tokens restored from snapshots.
    pub hit_tokens: u64,
    /// Snapshots stored.
    pub snapshots: u64,
    /// Snapshots not stored because the budget had no room for them.
    pub snapshots_skipped: u64,
    /// Snapshots evicted to make room.
    pub evictions: u64,
    /// Partly filled shared pages copied before a write.
    pub copy_on_write: u64,
}

/// Bytes the cache holds, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheUsage {
    /// The budget.
    pub budget: usize,
    /// Pages referenced by a sequence or a snapshot.
    pub pages_in_use: usize,
    /// Pages kept allocated for reuse (no references).
    pub pages_free: usize,
    /// Recurrent-state slots of live sequences.
    pub state_slots: usize,
    /// Slots kept allocated for reuse.
    pub slots_free: usize,
    /// Snapshots' states, logits and hidden rows.
    pub snapshots: usize,
    /// Bytes live sequences hold or have reserved (never evicted).
    pub pinned: usize,
    /// Live sequences.
    pub sequences: usize,
    /// Snapshots in the prefix index.
    pub entries: usize,
}

impl CacheUsage {
    /// Everything allocated.
    pub fn total(&self) -> usize {
        self.pages_in_use + self.pages_free + self.state_slots + self.slots_free + self.snapshots
    }
}
