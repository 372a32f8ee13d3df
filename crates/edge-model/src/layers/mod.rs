//! The model's layers: plain structs of weights (in a [`crate::Backend`]'s form) whose
//! `forward` is the layer's orchestration, written once over the backend's operations.

pub mod attention;
pub mod gdn;
pub mod mlp;
