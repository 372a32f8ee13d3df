//! Token sampling: greedy, or temperature with optional top-k / top-p, driven by a
//! seeded generator so runs are reproducible. It lives in [`edge_spec::sampling`],
//! where speculative verification accepts drafts against the same distribution;
//! this module re-exports it (and [`argmax`]) under the runtime's paths.

pub use edge_model::argmax;
pub use edge_spec::sampling::*;
