//! `edge-kvcache`: the per-sequence state of a hybrid model, made shareable.
//!
//! Its job: paged attention KV storage (with FP8 pages), snapshots of the Gated
//! DeltaNet conv and recurrent state at block boundaries, and a prefix index that lets a
//! new request restore both the KV pages and the recurrent state of a cached prefix.
//! The per-sequence state type itself is defined by `edge-model`; this crate makes it
//! paged and shareable (work of a later issue).

mod error;

pub use error::{KvCacheError, Result};
