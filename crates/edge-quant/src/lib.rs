//! `edge-quant`: the number formats edge-llm runs on, bit-exact with NVIDIA ModelOpt.
//!
//! - [`formats`]: the E2M1, E4M3 and E5M2 element formats (round-to-nearest-even,
//!   saturation and NaN rules as ModelOpt and PyTorch apply them).
//!
//! Every operation has a CPU reference implementation that is the oracle for the fast
//! CPU and CUDA paths.

pub mod formats;
