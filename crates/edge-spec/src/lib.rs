//! `edge-spec`: lossless speculative decoding with the model's built-in MTP head.
//!
//! A [`Speculator`] runs one decode step of a sequence: the MTP head drafts a token
//! tree ([`SpecConfig`]: a chain of top-1 drafts, or a tree of top-k children chosen by
//! cumulative log-probability), the target verifies the whole tree in one forward
//! (tree attention mask, Gated DeltaNet rows along their ancestor paths), [`accept`]
//! keeps the longest path the target agrees with plus one token of the target's own
//! (greedily, or at temperature > 0 by recursive rejection sampling against the
//! [`Sampler`]'s own [`Distribution`], so the output distribution is the target's),
//! and the model's commit keeps that path's keys, values and recurrent state without
//! re-running it. It is one decode step of `edge_runtime::Engine`, the single
//! generation driver.

mod accept;
mod config;
mod draft;
mod error;
pub mod sampling;
mod speculator;

pub use accept::{Acceptance, DraftTree, RowFilter, accept, accept_filtered, accept_greedy};
pub use config::{CPU_CACHE_RESIDENT_BYTES, Drafting, SpecConfig, SpecStats};
pub use error::{Result, SpecError};
pub use sampling::{Distribution, Sampler, SamplingParams};
pub use speculator::Speculator;
