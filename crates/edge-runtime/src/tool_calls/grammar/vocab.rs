//! The grammar applied to a vocabulary: each token's bytes, and the mask of the tokens
//! a [`GrammarState`] allows next.

use super::{GrammarState, ToolCallGrammar, is_plain};
use crate::tool_calls::prompt_opens_reasoning;
use crate::{Result, Tokenizer};
use edge_spec::RowFilter;
use serde_json::Value;
use std::sync::Arc;

/// The bytes every token id stands for, stored flat (a 248K vocabulary is about 2 MB),
/// with the ids grouped by first byte and the plain ones marked, so a mask need not
/// read every token.
#[derive(Clone, Debug, Default)]
pub struct TokenBytes {
    bytes: Vec<u8>,
    /// `ends[i]`: where token `i`'s bytes end in `bytes`.
    ends: Vec<u32>,
    /// The ids of the non-empty tokens by their first byte.
    by_first: Vec<Vec<u32>>,
    /// Whether token `i` is plain text ([`is_plain`]).
    plain: Vec<bool>,
    /// The ids of the tokens without bytes.
    empty: Vec<u32>,
}

impl TokenBytes {
    /// From each token's bytes, in id order.
    pub fn new<I, B>(tokens: I) -> TokenBytes
    where
        I: IntoIterator<Item = B>,
        B: AsRef<[u8]>,
    {
        let mut t = TokenBytes {
            by_first: vec![Vec::new(); 256],
            ..TokenBytes::default()
        };
        for b in tokens {
            let b = b.as_ref();
            let id = t.ends.len() as u32;
            match b.first() {
                Some(&first) => t.by_first[first as usize].push(id),
                None => t.empty.push(id),
            }
            t.plain.push(is_plain(b));
            t.bytes.extend_from_slice(b);
            t.ends.push(t.bytes.len() as u32);
        }
        t
    }

    /// From a tokenizer: see [`Tokenizer::token_bytes`].
    pub fn from_tokenizer(tokenizer: &Tokenizer) -> TokenBytes {
        TokenBytes::new(tokenizer.token_bytes())
    }

    /// Tokens known.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether no token is known.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Token `id`'s bytes (`None` past the vocabulary).
    pub fn get(&self, id: u32) -> Option<&[u8]> {
        let i = id as usize;
        let end = *self.ends.get(i)? as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        Some(&self.bytes[start..end])
    }
}

/// A request's constrained tool calls: the grammar of its tools over a vocabulary.
/// Cheap to clone (both parts are shared).
#[derive(Clone, Debug)]
pub struct ToolConstraint {
    grammar: Arc<ToolCallGrammar>,
    vocab: Arc<TokenBytes>,
    in_reasoning: bool,
    must_call: bool,
}

impl ToolConstraint {
    /// `in_reasoning` when the prompt leaves the reply inside `<think>`.
    pub fn new(
        grammar: Arc<ToolCallGrammar>,
        vocab: Arc<TokenBytes>,
        in_reasoning: bool,
    ) -> ToolConstraint {
        ToolConstraint {
            grammar,
            vocab,
            in_reasoning,
            must_call: false,
        }
    }

    /// The grammar of `tools` (see [`ToolCallGrammar::new`]) over `vocab`, for a reply
    /// to `prompt` (the rendered text: whether it leaves the reply inside `<think>`).
    pub fn for_prompt(tools: &Value, vocab: Arc<TokenBytes>, prompt: &str) -> Result<Self> {
        let grammar = Arc::new(ToolCallGrammar::new(tools)?);
        Ok(ToolConstraint::new(
            grammar,
            vocab,
            prompt_opens_reasoning(prompt),
        ))
    }

    /// The same constraint, and the reply must open with a call (after its reasoning;
    /// OpenAI's `tool_choice` `required` or a named function).
    pub fn requiring_call(self) -> ToolConstraint {
        ToolConstraint {
            must_call: true,
            ..self
        }
    }

    /// The grammar.
    pub fn grammar(&self) -> &ToolCallGrammar {
        &self.grammar
    }

    /// The state before the reply.
    pub fn start(&self) -> GrammarState {
        self.grammar.start(self.in_reasoning, self.must_call)
    }

    /// The state after `token`, or `None` when the grammar rejects it. Inside a call,
    /// `stops` (the request's stop tokens) and ids past the vocabulary are rejected:
    /// the reply may not end with a call open.
    pub fn accept(&self, state: GrammarState, token: u32, stops: &[u32]) -> Option<GrammarState> {
        let bytes = self.vocab.get(token).unwrap_or_default();
        if state.in_call() && (bytes.is_empty() || stops.contains(&token)) {
            // Nor an empty token: it would let a call go on without end.
            return None;
        }
        self.grammar.accept(state, bytes)
    }

    /// Sets the logits of the tokens the grammar rejects after `state` to −∞; returns
    /// how many tokens stay allowed. The same as trying [`ToolConstraint::accept`] on
    /// every id, faster: a first byte the grammar rejects rules out all its tokens at
    /// once, and where every plain token fits (inside a string value, outside calls)
    /// plain tokens are allowed without reading them.
    pub fn mask(&self, state: GrammarState, logits: &mut [f32], stops: &[u32]) -> usize {
        let (in_call, n) = (state.in_call(), logits.len());
        // Which ids stay, decided bucket by bucket (a rejected first byte leaves its
        // whole bucket out untouched), then one sequential pass over the row.
        let mut keep = vec![false; n];
        // Ids without bytes change nothing outside calls, and are never allowed in one.
        let past = self.vocab.len().min(n)..n;
        for i in (self.vocab.empty.iter().map(|&id| id as usize)).chain(past) {
            if i < n {
                keep[i] = !in_call;
            }
        }
        let plain_fits = self.grammar.accepts_plain(state);
        for (first, ids) in self.vocab.by_first.iter().enumerate() {
            let Some(after) = self.grammar.accept(state, &[first as u8]) else {
                continue;
            };
            for i in ids.iter().map(|&id| id as usize).filter(|&i| i < n) {
                keep[i] = !(in_call && stops.contains(&(i as u32)))
                    && ((plain_fits && self.vocab.plain[i])
                        || (self.vocab.get(i as u32))
                            .is_some_and(|b| self.grammar.accept(after, &b[1..]).is_some()));
            }
        }
        for (l, &k) in logits.iter_mut().zip(&keep) {
            *l = if k { *l } else { f32::NEG_INFINITY };
        }
        keep.iter().filter(|&&k| k).count()
    }
}

/// A constraint seen from one state, as speculative verification asks it: whether a
/// token may follow a path of drafted tokens after that state, and the mask there.
pub struct PathFilter<'a> {
    /// The request's constraint.
    pub constraint: &'a ToolConstraint,
    /// The state the paths start from (after the step's root token).
    pub state: GrammarState,
    /// The request's stop tokens.
    pub stops: &'a [u32],
}

impl PathFilter<'_> {
    fn after(&self, path: &[u32]) -> Option<GrammarState> {
        (path.iter()).try_fold(self.state, |s, &t| self.constraint.accept(s, t, self.stops))
    }
}

impl RowFilter for PathFilter<'_> {
    fn allows(&mut self, path: &[u32], token: u32) -> bool {
        (self.after(path)).is_some_and(|s| self.constraint.accept(s, token, self.stops).is_some())
    }

    fn mask(&mut self, path: &[u32], row: &mut [f32]) -> usize {
        match self.after(path) {
            Some(s) => self.constraint.mask(s, row, self.stops),
            None => {
                row.fill(f32::NEG_INFINITY);
                0
            }
        }
    }
}
