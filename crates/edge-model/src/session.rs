//! [`Session`]: one sequence over its own cache, the simplest way to run the model
//! (scoring a prompt, tests, examples). Generation with sampling, prefix reuse and
//! speculation is `edge_runtime::Engine`'s job.

use crate::Result;
use crate::backend::Backend;
use crate::batch::{LogitRows, StepBatch};
use crate::model::{Qwen35Model, StepOutput};
use edge_kvcache::{CacheConfig, PagedCache, SeqId, SequenceCache};

/// One sequence of a model with a cache and a backend of its own.
#[derive(Debug)]
pub struct Session<'m, B: Backend> {
    model: &'m Qwen35Model<B>,
    backend: B,
    cache: PagedCache<B::Memory>,
    seq: SeqId,
}

impl<'m, B: Backend> Session<'m, B> {
    /// A session on `backend`.
    pub fn with_backend(
        model: &'m Qwen35Model<B>,
        mut backend: B,
        mut config: CacheConfig,
    ) -> Result<Self> {
        // One sequence, so a device memory needs one state slot.
        config.max_sequences.get_or_insert(1);
        let memory = backend.cache_memory(&model.cache_spec(&config), &config)?;
        let mut cache = PagedCache::with_memory(memory, config)?;
        let seq = cache.new_sequence(0)?;
        Ok(Session {
            model,
            backend,
            cache,
            seq,
        })
    }

    /// Runs `tokens` after what the session holds and returns the logits of `logits`
    /// rows and the final hidden states.
    pub fn forward(&mut self, tokens: &[u32], logits: LogitRows) -> Result<StepOutput<B>> {
        let batch = StepBatch::single(self.seq, tokens, self.len(), logits);
        self.model
            .forward(&mut self.backend, &batch, &mut self.cache)
    }

    /// Runs the MTP head on `next` tokens paired with `hidden` rows, for positions
    /// from `first` (see [`Qwen35Model::mtp_forward`]).
    pub fn mtp_forward(
        &mut self,
        next: &[u32],
        hidden: &B::Buf,
        first: usize,
        logits: LogitRows,
    ) -> Result<StepOutput<B>> {
        let batch = StepBatch::single(self.seq, next, first, logits);
        (self.model).mtp_forward(&mut self.backend, &batch, hidden, &mut self.cache)
    }

    /// Tokens the session holds.
    pub fn len(&self) -> usize {
        self.cache.sequence(self.seq).map_or(0, |v| v.len)
    }

    /// True before the first forward.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Its sequence in the cache.
    pub fn sequence(&self) -> SeqId {
        self.seq
    }

    /// The cache.
    pub fn cache(&self) -> &PagedCache<B::Memory> {
        &self.cache
    }

    /// The cache, to save and restore the sequence's state.
    pub fn cache_mut(&mut self) -> &mut PagedCache<B::Memory> {
        &mut self.cache
    }

    /// The backend (e.g. to download a buffer).
    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }
}
