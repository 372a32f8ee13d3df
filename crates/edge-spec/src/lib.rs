//! `edge-spec`: speculative decoding with the model's built-in MTP head.
//!
//! Today: greedy chain speculation ([`ChainSpeculator`]): the MTP head drafts `k`
//! tokens, the target verifies them in one forward, the longest matching prefix plus
//! one token of the target's own is kept, and the hybrid model's recurrent state is
//! rolled back to the last accepted token (by re-running the accepted prefix). It is
//! one decode step of `edge_runtime::Engine`, the single generation driver. Token
//! trees with a tree attention mask, and a commit without re-running, are the next
//! step; their verification is here already: [`accept`] keeps a drafted tree's path
//! greedily or, at temperature > 0, by recursive rejection sampling against the
//! [`Sampler`]'s own [`Distribution`], so sampling stays lossless.

mod accept;
mod chain;
mod error;
pub mod sampling;

pub use accept::{Acceptance, DraftTree, accept};
pub use chain::{ChainSpeculator, SpecConfig, SpecStats};
pub use error::{Result, SpecError};
pub use sampling::{Distribution, Sampler, SamplingParams};
