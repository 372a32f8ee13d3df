//! The Qwen3.5/3.6 text model: embedding, hybrid decoder stack, final norm, lm_head;
//! its forward pass over a [`StepBatch`] and a [`SequenceCache`], on any [`Backend`].

use crate::backend::{Backend, ForwardPlan, GdnKept, LinearShape, SpanPlan, TreePlan};
use crate::batch::StepBatch;
use crate::config::{LayerType, Qwen35Config};
use crate::layers::attention::GatedAttention;
use crate::layers::gdn::GatedDeltaNet;
use crate::layers::mlp::Mlp;
use crate::mtp::MtpHead;
use crate::tree::TreeInputs;
use crate::{ModelError, Result};
use edge_kvcache::{
    AttentionLayerSpec, CacheConfig, CacheMemory, CacheSpec, RecurrentLayerSpec, SequenceCache,
};

/// A layer's token mixer.
#[derive(Debug)]
pub enum Mixer<B: Backend> {
    /// Gated DeltaNet.
    Gdn(Box<GatedDeltaNet<B>>),
    /// Gated full attention.
    Attention(Box<GatedAttention<B>>),
}

/// One pre-norm decoder block.
#[derive(Debug)]
pub struct DecoderLayer<B: Backend> {
    /// `input_layernorm` (zero-centred).
    pub(crate) input_norm: B::Vector,
    /// `post_attention_layernorm` (zero-centred).
    pub(crate) post_norm: B::Vector,
    /// The mixer.
    pub(crate) mixer: Mixer<B>,
    /// The MLP.
    pub(crate) mlp: Mlp<B>,
    /// Index of the mixer's layer in the cache: among the attention layers of
    /// [`CacheSpec::attention`] or the recurrent layers of [`CacheSpec::recurrent`].
    pub(crate) cache_layer: usize,
}

impl<B: Backend> DecoderLayer<B> {
    /// Applies the block to the rows of the residual stream `x` as `plan` places them,
    /// in place. A Gated DeltaNet block of a pass with token trees returns what a commit
    /// needs.
    pub fn forward(
        &self,
        be: &mut B,
        x: &mut B::Buf,
        plan: &ForwardPlan,
        memory: &mut B::Memory,
        eps: f32,
        width: usize,
    ) -> Result<Option<GdnKept<B>>> {
        let t = plan.tokens();
        let (mut normed, mut delta) = (be.alloc(t * width)?, be.alloc(t * width)?);
        be.rms_norm(x, &self.input_norm, eps, &mut normed)?;
        let kept = match &self.mixer {
            Mixer::Gdn(m) => {
                let state = memory.recurrent_mut(self.cache_layer);
                m.forward(be, &normed, plan, state, &mut delta)?
            }
            Mixer::Attention(m) => {
                let kv = memory.kv_mut(self.cache_layer);
                m.forward(be, &normed, plan, kv, &mut delta)?;
                None
            }
        };
        be.add(x, &delta)?;
        be.rms_norm(x, &self.post_norm, eps, &mut normed)?;
        self.mlp.forward(be, &normed, t, &mut delta)?;
        be.add(x, &delta)?;
        be.free(normed);
        be.free(delta);
        Ok(kept)
    }
}

/// A pass's logits rows, greedy tokens and top tokens ([`StepOutput`]'s).
type Outputs = (Vec<f32>, Vec<u32>, Vec<crate::TopLogits>);

/// What a forward pass returns.
#[derive(Debug)]
pub struct StepOutput<B: Backend> {
    /// `[rows, vocab]` logits of the batch's logit rows, in their order.
    pub logits: Vec<f32>,
    /// The greedy token of each of the batch's greedy rows ([`crate::LogitRows::Greedy`]), in
    /// their order.
    pub greedy: Vec<u32>,
    /// The most likely tokens of each of the batch's top rows ([`crate::LogitRows::Top`]), in
    /// their order.
    pub top: Vec<crate::TopLogits>,
    /// `[tokens, hidden]` final-normed hidden states of every row (the MTP head's
    /// input), on the device.
    pub hidden: B::Buf,
    /// For a pass with token trees: what [`Qwen35Model::commit_tree`] needs to keep
    /// an accepted path (give it back with [`TreeInputs::free`] otherwise).
    pub tree: Option<TreeInputs<B>>,
}

/// The loaded model, its weights in backend `B`'s form.
#[derive(Debug)]
pub struct Qwen35Model<B: Backend> {
    pub(crate) config: Qwen35Config,
    pub(crate) embed: B::Embedding,
    pub(crate) layers: Vec<DecoderLayer<B>>,
    pub(crate) norm: B::Vector,
    pub(crate) lm_head: B::Linear,
    pub(crate) mtp: Option<MtpHead<B>>,
}

/// Whether a pass appends to its sequences (the main model) or writes rows of the
/// MTP head, which may sit before or past the committed end.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rows {
    Append,
    Side,
}

impl<B: Backend> Qwen35Model<B> {
    /// The configuration.
    pub fn config(&self) -> &Qwen35Config {
        &self.config
    }

    /// The decoder layers.
    #[cfg(test)]
    pub(crate) fn layers(&self) -> &[DecoderLayer<B>] {
        &self.layers
    }

    /// The output projection.
    pub fn lm_head(&self) -> &B::Linear {
        &self.lm_head
    }

    /// The embedding table.
    pub fn embedding(&self) -> &B::Embedding {
        &self.embed
    }

    /// The MTP head, when the checkpoint has one.
    pub fn mtp(&self) -> Option<&MtpHead<B>> {
        self.mtp.as_ref()
    }

    /// What a cache for this model holds, with the page size and element type of
    /// `config`: every attention layer (the MTP head's last, when there is one) with its
    /// FP8 scales, and every Gated DeltaNet layer's conv window and state.
    pub fn cache_spec(&self, config: &CacheConfig) -> CacheSpec {
        let c = &self.config;
        let attention_spec = |a: &GatedAttention<B>| AttentionLayerSpec {
            kv_heads: a.shape.kv_heads,
            head_dim: a.shape.head_dim,
            k_scale: a.kv_scales.k_scale,
            v_scale: a.kv_scales.v_scale,
        };
        let mut attention = Vec::new();
        let mut recurrent = Vec::new();
        for l in &self.layers {
            match &l.mixer {
                Mixer::Attention(a) => attention.push(attention_spec(a)),
                Mixer::Gdn(_) => recurrent.push(RecurrentLayerSpec {
                    conv: (c.linear_conv_kernel_dim - 1) * c.linear_conv_channels(),
                    state: c.linear_num_value_heads
                        * c.linear_key_head_dim
                        * c.linear_value_head_dim,
                }),
            }
        }
        if let Some(m) = &self.mtp {
            attention.push(attention_spec(m.attention()));
        }
        CacheSpec {
            block_size: config.block_size,
            kv_dtype: config.kv_dtype,
            attention,
            recurrent,
        }
    }

    /// Weight bytes one decode step reads: every decoder-layer linear plus `lm_head`
    /// (the memory traffic that bounds decode speed).
    pub fn weight_bytes_per_token(&self) -> usize {
        let layers: usize = (self.layers.iter())
            .map(|l| {
                let mixer: usize = match &l.mixer {
                    Mixer::Gdn(m) => [
                        &m.in_proj_qkv,
                        &m.in_proj_z,
                        &m.in_proj_b,
                        &m.in_proj_a,
                        &m.out_proj,
                    ]
                    .iter()
                    .map(|x| x.weight_bytes())
                    .sum(),
                    Mixer::Attention(m) => [&m.q_proj, &m.k_proj, &m.v_proj, &m.o_proj]
                        .iter()
                        .map(|x| x.weight_bytes())
                        .sum(),
                };
                mixer
                    + l.mlp.gate.weight_bytes()
                    + l.mlp.up.weight_bytes()
                    + l.mlp.down.weight_bytes()
            })
            .sum();
        layers + self.lm_head.weight_bytes()
    }

    /// Runs `batch`, appending each span's tokens to its sequence in `cache`: every
    /// span must start at its sequence's committed length. Returns the logits of the
    /// batch's logit rows and every row's final hidden state.
    ///
    /// A token-tree span ([`StepBatch::push_tree`]) is provisional: its rows are
    /// stored past the sequence's end and its length and recurrent state stay as they
    /// were until [`Qwen35Model::commit_tree`] keeps an accepted path.
    ///
    /// Input errors (empty input, an id outside the vocabulary, positions past the
    /// context or not at a sequence's end, an unknown sequence, a malformed tree, a
    /// budget that cannot hold the rows) are found before any layer runs and change no
    /// sequence's committed rows or state.
    pub fn forward<C>(&self, be: &mut B, batch: &StepBatch, cache: &mut C) -> Result<StepOutput<B>>
    where
        C: SequenceCache<Memory = B::Memory> + Send,
    {
        let ctx = self.config.max_position_embeddings;
        batch.validate(self.config.vocab_size, ctx, true)?;
        let plan = self.plan(batch, cache, Rows::Append)?;
        let memory = cache.memory_mut();
        let mut out = be.pass(batch.len(), |be| self.run(be, batch, &plan, memory))?;
        for (span, p) in batch.spans().iter().zip(&plan.spans) {
            if p.tree.is_none() {
                cache.set_len(span.seq, p.first + p.len())?;
            }
        }
        if let Some(tree) = out.tree.as_mut() {
            tree.plan = plan;
        }
        Ok(out)
    }

    fn run(
        &self,
        be: &mut B,
        batch: &StepBatch,
        plan: &ForwardPlan,
        memory: &mut B::Memory,
    ) -> Result<StepOutput<B>> {
        let (h, t) = (self.config.hidden_size, batch.len());
        let eps = self.config.rms_norm_eps;
        let mut x = be.alloc(t * h)?;
        be.embed(&self.embed, batch.tokens(), &mut x)?;
        let mut kept = Vec::new();
        for layer in &self.layers {
            kept.extend(layer.forward(be, &mut x, plan, memory, eps, h)?);
        }
        let mut hidden = be.alloc(t * h)?;
        be.rms_norm(&x, &self.norm, eps, &mut hidden)?;
        be.free(x);
        let (logits, greedy, top) = self.outputs(be, &hidden, batch)?;
        let tree = plan.has_trees().then(|| TreeInputs {
            plan: plan.clone(),
            gdn: kept,
        });
        Ok(StepOutput {
            logits,
            greedy,
            top,
            hidden,
            tree,
        })
    }

    /// The batch's logit rows, greedy tokens and top tokens from the `[tokens, hidden]`
    /// final hidden states. Reading `lm_head` is most of the vocabulary projection's
    /// cost, so it runs once over all output rows, whatever mix of kinds they ask for.
    fn outputs(&self, be: &mut B, hidden: &B::Buf, batch: &StepBatch) -> Result<Outputs> {
        let full = batch.logit_rows();
        let greedy = batch.greedy_rows();
        let (top, ks): (Vec<usize>, Vec<usize>) = batch.top_rows().iter().copied().unzip();
        if greedy.is_empty() && top.is_empty() {
            return Ok((self.logits(be, hidden, full)?, Vec::new(), Vec::new()));
        }
        // A span asks for one kind, so the three lists are disjoint.
        let mut rows = [full, greedy, top.as_slice()].concat();
        rows.sort_unstable();
        let projected = self.project(be, hidden, &rows)?;
        let vocab = self.config.vocab_size;
        let most = ks.iter().copied().max().unwrap_or(0);
        let outputs = Self::sub_rows(be, &projected, vocab, &rows, full, |be, l| be.download(l))
            .and_then(|logits| {
                let greedy = Self::sub_rows(be, &projected, vocab, &rows, greedy, |be, l| {
                    be.argmax_rows(l, vocab)
                })?;
                let top = Self::sub_rows(be, &projected, vocab, &rows, &top, |be, l| {
                    be.top_logits_rows(l, vocab, most)
                })?;
                Ok((logits, greedy, top))
            });
        be.free(projected);
        let (logits, greedy, mut top) = outputs?;
        for (row, &k) in top.iter_mut().zip(&ks) {
            row.ids.truncate(k);
            row.logits.truncate(k);
        }
        Ok((logits, greedy, top))
    }

    /// The `[rows, vocab]` logits of `rows` of the final hidden states, on the backend.
    fn project(&self, be: &mut B, hidden: &B::Buf, rows: &[usize]) -> Result<B::Buf> {
        let selected = be.gather_rows(hidden, self.config.hidden_size, rows)?;
        let projected = be
            .alloc(rows.len() * self.config.vocab_size)
            .and_then(|mut out| {
                match be.linear(&[&self.lm_head], &selected, rows.len(), &mut [&mut out]) {
                    Ok(()) => Ok(out),
                    Err(e) => {
                        be.free(out);
                        Err(e)
                    }
                }
            });
        be.free(selected);
        projected
    }

    /// `reduce` of the rows `want` (ascending, a subset of `all`) of `projected`, the
    /// `vocab`-wide rows of `all`; nothing for no rows.
    fn sub_rows<T>(
        be: &mut B,
        projected: &B::Buf,
        vocab: usize,
        all: &[usize],
        want: &[usize],
        reduce: impl FnOnce(&mut B, &B::Buf) -> Result<Vec<T>>,
    ) -> Result<Vec<T>> {
        if want.is_empty() {
            return Ok(Vec::new());
        }
        if want.len() == all.len() {
            return reduce(be, projected);
        }
        let at: Vec<usize> = want
            .iter()
            .map(|r| all.partition_point(|a| a < r))
            .collect();
        let rows = be.gather_rows(projected, vocab, &at)?;
        let reduced = reduce(be, &rows);
        be.free(rows);
        reduced
    }

    /// Logits of `rows` of the `[tokens, hidden]` final hidden states.
    pub(crate) fn logits(&self, be: &mut B, hidden: &B::Buf, rows: &[usize]) -> Result<Vec<f32>> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let selected = be.gather_rows(hidden, self.config.hidden_size, rows)?;
        let logits = be.logits(&self.lm_head, &selected, rows.len());
        be.free(selected);
        logits
    }

    /// Runs the MTP head over `batch`: row `i` pairs `hidden` row `i` (the final hidden
    /// state at position `p`) with `batch`'s token `i` (the token at `p + 1`), and
    /// writes the head's keys and values at cache row `p` of its own attention layer.
    /// Rows may rewrite the head's rows before the committed end or run past it
    /// (drafts); the sequence's committed length does not change.
    pub fn mtp_forward<C>(
        &self,
        be: &mut B,
        batch: &StepBatch,
        hidden: &B::Buf,
        cache: &mut C,
    ) -> Result<StepOutput<B>>
    where
        C: SequenceCache<Memory = B::Memory> + Send,
    {
        let head = self.mtp.as_ref().ok_or(ModelError::NoMtpHead)?;
        batch.validate(
            self.config.vocab_size,
            self.config.max_position_embeddings,
            false,
        )?;
        let plan = self.plan(batch, cache, Rows::Side)?;
        let memory = cache.memory_mut();
        be.pass(batch.len(), |be| {
            let x = head.forward(be, self, batch, &plan, hidden, memory)?;
            let (logits, greedy, top) = self.outputs(be, &x, batch)?;
            Ok(StepOutput {
                logits,
                greedy,
                top,
                hidden: x,
                tree: None,
            })
        })
    }

    /// Checks each span against its sequence and makes its rows writable.
    pub(crate) fn plan<C: SequenceCache>(
        &self,
        batch: &StepBatch,
        cache: &mut C,
        rows: Rows,
    ) -> Result<ForwardPlan> {
        let mut spans = Vec::with_capacity(batch.spans().len());
        let mut row = 0;
        for (i, span) in batch.spans().iter().enumerate() {
            let view = cache.sequence(span.seq)?;
            let range = row..row + span.len;
            let tree = batch.tree(i).map(|t| TreePlan {
                slots: t.slots.clone(),
                visible: t.visible.clone(),
                parents: batch.parents()[range.clone()].to_vec(),
            });
            let first = match batch.tree(i) {
                Some(t) => t.base,
                None => batch.positions()[row] as usize,
            };
            if (rows == Rows::Append || tree.is_some()) && first != view.len {
                return Err(ModelError::PositionGap {
                    seq: span.seq,
                    len: view.len,
                    first,
                });
            }
            spans.push((span.seq, first, range, tree));
            row += span.len;
        }
        for (seq, first, r, tree) in &spans {
            let extent = tree.as_ref().map_or(r.len(), TreePlan::extent);
            cache.prepare_rows(*seq, *first..*first + extent)?;
        }
        let spans = (spans.into_iter())
            .map(|(seq, first, rows, tree)| {
                let view = cache.sequence(seq)?;
                Ok(SpanPlan {
                    rows,
                    first,
                    pages: view.pages.to_vec(),
                    slot: view.slot,
                    tree,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(ForwardPlan {
            spans,
            positions: batch.positions().to_vec(),
            block_size: cache.spec().block_size,
        })
    }

    /// The index of each layer's mixer in the cache (see [`DecoderLayer::cache_layer`]).
    pub(crate) fn assign_cache_layers(types: &[LayerType]) -> Vec<usize> {
        let (mut attention, mut recurrent) = (0, 0);
        types
            .iter()
            .map(|t| {
                let counter = match t {
                    LayerType::FullAttention => &mut attention,
                    LayerType::LinearAttention => &mut recurrent,
                };
                *counter += 1;
                *counter - 1
            })
            .collect()
    }
}
