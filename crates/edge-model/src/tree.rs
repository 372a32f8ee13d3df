//! Committing a verified token tree: the accepted path's keys and values move to the
//! rows after the committed end, and each Gated DeltaNet layer's conv window and state
//! advance along the path from the inputs the verification pass kept. Nothing of the
//! path's forward runs again.

use crate::backend::{Backend, ForwardPlan, GdnKept};
use crate::model::{Mixer, Qwen35Model};
use crate::{ModelError, Result};
use edge_kvcache::{CacheMemory, SeqId, SequenceCache};

/// What a pass with token trees keeps for [`Qwen35Model::commit_tree`]: its plan and,
/// per Gated DeltaNet layer in order, the recurrent inputs of every row.
pub struct TreeInputs<B: Backend> {
    pub(crate) plan: ForwardPlan,
    pub(crate) gdn: Vec<GdnKept<B>>,
}

impl<B: Backend> std::fmt::Debug for TreeInputs<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TreeInputs")
            .field("plan", &self.plan)
            .field("gdn_layers", &self.gdn.len())
            .finish()
    }
}

impl<B: Backend> TreeInputs<B> {
    /// Gives the kept buffers back to the backend (what a pass whose trees are all
    /// rejected, or whose sequences went away, does instead of committing).
    pub fn free(self, be: &mut B) {
        for kept in self.gdn {
            for buf in [kept.qkv, kept.b, kept.a] {
                be.free(buf);
            }
        }
    }
}

/// One sequence's accepted path through its tree span.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcceptedPath {
    /// The sequence.
    pub seq: SeqId,
    /// Rows of its span, root first, each the child of the one before.
    pub rows: Vec<usize>,
}

impl<B: Backend> Qwen35Model<B> {
    /// Keeps the accepted path of each listed sequence's tree from the pass that
    /// returned `tree`: the sequence grows by the path's length, holding what running
    /// the path's tokens would have stored (the keys and values the tree pass computed
    /// for them, and the recurrent state advanced along the path, equal to decoding's
    /// up to f32 summation order).
    /// Sequences of the pass not listed keep their committed rows and state; their tree
    /// rows are abandoned. Consumes `tree` and frees its buffers.
    ///
    /// A path that is not a root-first chain of the span's rows, a sequence without a
    /// tree span in the pass, or one that changed since, is an error before anything
    /// changes. A device failure during the commit leaves the listed sequences' lengths
    /// unchanged but their recurrent state partly advanced: drop or restore them.
    pub fn commit_tree<C>(
        &self,
        be: &mut B,
        tree: TreeInputs<B>,
        paths: &[AcceptedPath],
        cache: &mut C,
    ) -> Result<()>
    where
        C: SequenceCache<Memory = B::Memory>,
    {
        let checked = self.check_paths(&tree.plan, paths, cache);
        let spans = match checked {
            Ok(spans) => spans,
            Err(e) => {
                tree.free(be);
                return Err(e);
            }
        };
        let memory = cache.memory_mut();
        let rows = paths.iter().map(|p| p.rows.len()).sum();
        // Inside a pass, as a forward: the CPU backend's parallel regions then run on
        // its workers (and a decode-sized commit on its spinning team).
        let committed = be.pass(rows, |be| {
            self.commit_rows(be, &tree, &spans, paths, memory)
        });
        if let Err(e) = committed {
            tree.free(be);
            return Err(e);
        }
        for (&s, path) in spans.iter().zip(paths) {
            cache.set_len(path.seq, tree.plan.spans[s].first + path.rows.len())?;
        }
        tree.free(be);
        Ok(())
    }

    /// Moves each path's keys and values into place and advances its recurrent state.
    fn commit_rows(
        &self,
        be: &mut B,
        tree: &TreeInputs<B>,
        spans: &[usize],
        paths: &[AcceptedPath],
        memory: &mut B::Memory,
    ) -> Result<()> {
        let plan = &tree.plan;
        let mut gdn = tree.gdn.iter();
        for layer in &self.layers {
            match &layer.mixer {
                Mixer::Attention(_) => {
                    let kv = memory.kv_mut(layer.cache_layer);
                    for (&s, path) in spans.iter().zip(paths) {
                        let span = &plan.spans[s];
                        let slots = &span.tree.as_ref().expect("checked").slots;
                        let moves: Vec<(usize, usize)> = (path.rows.iter().enumerate())
                            .map(|(k, &r)| (span.first + slots[r] as usize, span.first + k))
                            .filter(|(from, to)| from != to)
                            .collect();
                        be.copy_kv_rows(kv, plan, span, &moves)?;
                    }
                }
                Mixer::Gdn(m) => {
                    let kept = gdn.next().expect("one kept entry per Gated DeltaNet layer");
                    let state = memory.recurrent_mut(layer.cache_layer);
                    for (&s, path) in spans.iter().zip(paths) {
                        m.commit(be, state, &plan.spans[s], kept, &path.rows)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The span of each path, after checking the path against it and the cache.
    fn check_paths<C: SequenceCache>(
        &self,
        plan: &ForwardPlan,
        paths: &[AcceptedPath],
        cache: &C,
    ) -> Result<Vec<usize>> {
        let bad = |seq: SeqId, what: String| {
            Err(ModelError::InvalidPlan {
                op: "commit_tree",
                reason: format!("sequence {seq:?}: {what}"),
            })
        };
        let mut spans = Vec::with_capacity(paths.len());
        for (i, path) in paths.iter().enumerate() {
            let seq = path.seq;
            if paths[..i].iter().any(|p| p.seq == seq) {
                return bad(seq, "it is listed twice".into());
            }
            let view = cache.sequence(seq)?;
            let found = (plan.spans.iter().enumerate())
                .find(|(_, s)| s.slot == view.slot && s.tree.is_some());
            let Some((s, span)) = found else {
                return bad(seq, "the pass has no tree span of it".into());
            };
            let tree = span.tree.as_ref().expect("found a tree span");
            if view.len != span.first {
                return bad(
                    seq,
                    format!(
                        "it holds {} tokens, not the {} it held",
                        view.len, span.first
                    ),
                );
            }
            let Some(&root) = path.rows.first() else {
                return bad(seq, "the path is empty".into());
            };
            if root >= span.len() || tree.parents[root].is_some() {
                return bad(seq, format!("row {root} is not a root of its tree"));
            }
            for w in path.rows.windows(2) {
                if w[1] >= span.len() || tree.parents[w[1]] != Some(w[0] as u32) {
                    return bad(seq, format!("row {} is not a child of row {}", w[1], w[0]));
                }
            }
            spans.push(s);
        }
        Ok(spans)
    }
}
