//! `edge-spec`: speculative decoding with the model's built-in MTP head.
//!
//! Today: greedy chain speculation ([`mtp_chain`]) — the MTP head drafts `k` tokens,
//! the target verifies them in one forward, the longest matching prefix plus one
//! corrected token is kept, and the hybrid model's recurrent state is rolled back to
//! the last accepted token. Token trees with a tree attention mask are the next step.

mod error;
pub mod mtp_chain;

pub use error::{Result, SpecError};
pub use mtp_chain::{SpecConfig, SpecOutput, SpecStats, generate_greedy};
