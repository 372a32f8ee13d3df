//! The model's layers, each a plain struct of weights with a `forward` over f32 rows.

pub mod attention;
pub(crate) mod attention_block;
pub mod gdn;
#[cfg(target_arch = "x86_64")]
mod matmul_x86;
pub mod mlp;
pub mod norm;
pub mod rope;
pub mod scratch;
pub(crate) mod simd;
