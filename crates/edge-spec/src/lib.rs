//! `edge-spec`: speculative decoding with the model's built-in MTP head.
//!
//! Its job: build draft token trees from the MTP head, verify them in one target forward
//! with a tree attention mask, accept the longest matching path, and roll the hybrid
//! model's recurrent state back to the last accepted token.

mod error;

pub use error::{Result, SpecError};
