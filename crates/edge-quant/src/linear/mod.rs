//! CPU linear layers `y = x·Wᵀ` over f32, bf16, FP8 and NVFP4 weights.
//!
//! `x` is `[tokens, in]` f32 row-major, `W` is `[out, in]` (checkpoint layout) and
//! `y` is `[tokens, out]` f32 row-major. There are two implementations:
//!
//! - [`Linear::forward_reference`] is the oracle: it dequantizes one weight row at a
//!   time with the tensor types' own dequantizers and takes dot products in f64. It is
//!   slow and obviously right.
//! - [`Linear::forward`] is the fast path: rayon over output rows, and SIMD kernels
//!   chosen at run time by the level of [`edge_core::simd`] ([`simd_level`]): AVX-512
//!   (F/BW/VL/VNNI) or AVX2+FMA+F16C on x86-64, NEON on aarch64, and a portable
//!   fallback everywhere. Weights are decoded in registers / a small L1-resident buffer
//!   and products are accumulated in f32. Tests and benchmarks run a lower level with
//!   [`edge_core::simd::with_level`].
//!
//! # Numerics
//!
//! - **F32 / BF16 / FP8 weights**: `y = Σ_k x_k·w_k` with `w` the exact dequantized
//!   weight (bf16 widening is exact; FP8 `e4m3(q)` is exact and the per-tensor scale is
//!   applied once per output).
//! - **NVFP4, W4A16** ([`ActivationQuant::None`]): f32 activations times the dequantized
//!   NVFP4 weights `E2M1[q]·SF·weight_scale_2`.
//! - **bf16 activations** ([`ActivationQuant::Bf16`], any weight format): as above with
//!   every activation first rounded to bf16 (nearest even). Several tokens with bf16,
//!   FP8 or NVFP4 weights take a packed bf16 GEMM; it multiplies the same values.
//! - **NVFP4, W4A4 emulation** ([`ActivationQuant::Nvfp4`]): each activation row is first
//!   quantized to NVFP4 exactly as a Blackwell kernel does
//!   ([`crate::nvfp4::activation::quantize_activation_row`]), then
//!   `y = alpha · Σ_blocks (SFa·SFw) · Σ_k E2M1[qa]·E2M1[qw]` with
//!   `alpha = input_scale · weight_scale_2`. The fast path computes each 8-element
//!   partial sum exactly in integers (twice an E2M1 value is an integer).
//! - **NVFP4, W4A8** ([`ActivationQuant::Int8`]): each activation row is first quantized
//!   to int8 with one scale per 256 elements ([`crate::int8::quantize_row`]), then
//!   `y = Σ_k x̂_k·ŵ_k` with `x̂ = q·s` the dequantized activation. The fast path takes
//!   the same integer dot products as W4A4 (8-bit activations, exact 32-bit sums per
//!   8 or 16 elements), so it needs far fewer instructions per weight than W4A16; the
//!   AVX2 prompt GEMM also applies the weight block scales in integers.
//!
//! # Tolerance
//!
//! The fast path and the reference agree to within
//! [`FAST_PATH_REL_TOLERANCE`]` · Σ_k |x̂_k·ŵ_k|` per output, where `x̂` is the
//! activation as used (the f32 input, or its NVFP4 dequantization for W4A4) and `ŵ`
//! the dequantized weight. The only differences are f32 summation order and where the
//! scales are multiplied in. NaN weights propagate to NaN outputs on both paths.

mod fast;
mod observer;
mod reference;
#[cfg(test)]
mod tests;

pub use fast::{SimdLevel, simd_level};
pub use observer::AmaxObserver;

use crate::error::{QuantError, Result, check_len};
use crate::{Fp8Tensor, Nvfp4Tensor};
use edge_core::Bytes;

/// Bound on `|forward − forward_reference|` relative to `Σ_k |x̂_k·ŵ_k|` (see the module
/// docs). It covers f32 accumulation over up to ~10⁴ products per output with the
/// blocked summation order the kernels use; measured errors are far smaller.
pub const FAST_PATH_REL_TOLERANCE: f64 = 2e-5;

/// The weight of a linear layer, `[out, in]` row-major, in one of the storage formats
/// edge-llm loads from checkpoints.
#[derive(Clone, Debug, PartialEq)]
pub enum LinearWeight {
    /// Plain f32 values.
    F32(Vec<f32>),
    /// Little-endian bfloat16 values. The bytes may be borrowed from a memory map and
    /// need not be 2-byte aligned.
    Bf16(Bytes),
    /// FP8 E4M3 values with a per-tensor scale (ModelOpt `quant_algo: "FP8"`).
    Fp8(Fp8Tensor),
    /// NVFP4: packed E2M1 codes, E4M3 block scales per 16 inputs, f32 global scale.
    Nvfp4(Nvfp4Tensor),
}

impl LinearWeight {
    /// A short name of the storage format (`"f32"`, `"bf16"`, `"fp8"`, `"nvfp4"`).
    pub fn format_name(&self) -> &'static str {
        match self {
            LinearWeight::F32(_) => "f32",
            LinearWeight::Bf16(_) => "bf16",
            LinearWeight::Fp8(_) => "fp8",
            LinearWeight::Nvfp4(_) => "nvfp4",
        }
    }

    /// Bytes of weight storage read by one full pass (codes and block scales; the few
    /// bytes of per-tensor scalars are not counted).
    pub fn storage_bytes(&self) -> usize {
        match self {
            LinearWeight::F32(w) => w.len() * 4,
            LinearWeight::Bf16(b) => b.len(),
            LinearWeight::Fp8(t) => t.codes().len(),
            LinearWeight::Nvfp4(t) => t.storage_bytes(),
        }
    }
}

/// How activations are treated before the product.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum ActivationQuant {
    /// Activations stay f32 (W32/W16/W8/W4 weights × f32 activations).
    #[default]
    None,
    /// Activations are rounded to bf16 (nearest even) before the product, as a GPU
    /// kernel with 16-bit activations computes it (W16A16, W8A16, W4A16). Products
    /// stay exact and sums f32. With several tokens and bf16, FP8 or NVFP4 weights this
    /// runs a register-blocked bf16 GEMM (AVX-512 BF16 or AVX2 micro-kernels), the fast
    /// path for prompts.
    Bf16,
    /// W4A4 emulation: activations are quantized to NVFP4 at run time with the layer's
    /// calibrated `input_scale` (ModelOpt's dequantization multiplier, `amax/(6·448)`).
    /// Only valid with [`LinearWeight::Nvfp4`] weights.
    Nvfp4 {
        /// The checkpoint's `input_scale` (finite, > 0).
        input_scale: f32,
    },
    /// W4A8: activations are quantized to int8 at run time, one f32 scale per 256
    /// elements taken from the block's own maximum ([`crate::int8`]); no calibration.
    /// Only valid with [`LinearWeight::Nvfp4`] weights. The fastest CPU mode for NVFP4
    /// weights, decode steps and prompts alike (integer dot products; on AVX2 a
    /// register-tiled integer GEMM from 5 tokens), at an activation error of at most
    /// 0.4% of each block's largest value.
    Int8,
}

/// A linear layer `y = x·Wᵀ` without bias.
#[derive(Clone, Debug, PartialEq)]
pub struct Linear {
    out_features: usize,
    in_features: usize,
    weight: LinearWeight,
    act: ActivationQuant,
    observer: Option<std::sync::Arc<AmaxObserver>>,
}

impl Linear {
    /// Builds a layer, checking that `weight` holds `[out_features, in_features]`.
    /// Both dimensions must be non-zero.
    pub fn new(out_features: usize, in_features: usize, weight: LinearWeight) -> Result<Self> {
        let mismatch = |detail: String| QuantError::ShapeMismatch {
            op: "Linear::new",
            detail,
        };
        if out_features == 0 || in_features == 0 {
            return Err(mismatch(format!(
                "dimensions must be non-zero, got [{out_features}, {in_features}]"
            )));
        }
        let elems = out_features
            .checked_mul(in_features)
            .filter(|n| n.checked_mul(4).is_some())
            .ok_or_else(|| mismatch(format!("[{out_features}, {in_features}] overflows")))?;
        match &weight {
            LinearWeight::F32(w) => check_len("f32 linear weight", elems, w.len())?,
            LinearWeight::Bf16(b) => check_len("bf16 linear weight (bytes)", elems * 2, b.len())?,
            LinearWeight::Fp8(t) => check_dims(t.rows(), t.cols(), out_features, in_features)?,
            LinearWeight::Nvfp4(t) => check_dims(t.rows(), t.cols(), out_features, in_features)?,
        }
        Ok(Linear {
            out_features,
            in_features,
            weight,
            act: ActivationQuant::None,
            observer: None,
        })
    }

    /// Sets the activation treatment. [`ActivationQuant::Nvfp4`] and
    /// [`ActivationQuant::Int8`] need NVFP4 weights; [`ActivationQuant::Nvfp4`] also a
    /// finite, positive `input_scale` whose reciprocal is finite.
    pub fn with_activation_quant(mut self, act: ActivationQuant) -> Result<Self> {
        let mode = match act {
            ActivationQuant::Nvfp4 { input_scale } => {
                crate::nvfp4::activation::check_input_scale(input_scale)?;
                Some("NVFP4 activation quantization (W4A4)")
            }
            ActivationQuant::Int8 => Some("int8 activation quantization (W4A8)"),
            ActivationQuant::None | ActivationQuant::Bf16 => None,
        };
        if let Some(mode) = mode
            && !matches!(self.weight, LinearWeight::Nvfp4(_))
        {
            return Err(QuantError::Unsupported(format!(
                "{mode} needs NVFP4 weights, not {}",
                self.weight.format_name()
            )));
        }
        self.act = act;
        Ok(self)
    }

    /// Records the amax of every input this layer sees into `observer` (calibration);
    /// `None` stops recording.
    pub fn set_input_observer(&mut self, observer: Option<std::sync::Arc<AmaxObserver>>) {
        self.observer = observer;
    }

    /// Number of inputs per token.
    pub fn in_features(&self) -> usize {
        self.in_features
    }

    /// Number of outputs per token.
    pub fn out_features(&self) -> usize {
        self.out_features
    }

    /// The weight.
    pub fn weight(&self) -> &LinearWeight {
        &self.weight
    }

    /// The activation treatment.
    pub fn activation_quant(&self) -> ActivationQuant {
        self.act
    }

    /// Bytes of weight storage one forward pass reads (see
    /// [`LinearWeight::storage_bytes`]); divide by the time of a forward pass for the
    /// effective weight bandwidth.
    pub fn weight_bytes(&self) -> usize {
        self.weight.storage_bytes()
    }

    /// Fast path: `out = x·Wᵀ` for `tokens` rows of `x` (`[tokens, in]`), writing
    /// `out` (`[tokens, out]`). Uses the current rayon pool and the SIMD level of
    /// [`simd_level`] (run it inside [`edge_core::simd::with_level`] to force one).
    pub fn forward(&self, x: &[f32], tokens: usize, out: &mut [f32]) -> Result<()> {
        self.check_io(x, tokens, out)?;
        if let Some(o) = &self.observer {
            o.observe(x);
        }
        fast::forward(self, simd_level(), x, tokens, out)
    }

    /// Runs several layers on the same input: `outs[i] = x·Wᵢᵀ` for `layers[i]`, exactly
    /// what [`Linear::forward`] on each gives. Layers that take the bf16 GEMM share one
    /// packing of `x` and one parallel loop (the q/k/v, gate/up and GDN input
    /// projections of a prompt); the others (decode steps) share one parallel loop over
    /// all their output rows, so small projections do not each pay a fork-join. All
    /// layers must have the same `in_features`.
    pub fn forward_shared(
        layers: &[&Linear],
        x: &[f32],
        tokens: usize,
        outs: &mut [&mut [f32]],
    ) -> Result<()> {
        if layers.len() != outs.len() {
            return Err(QuantError::ShapeMismatch {
                op: "Linear::forward_shared",
                detail: format!("{} layers but {} outputs", layers.len(), outs.len()),
            });
        }
        for (lin, out) in layers.iter().zip(outs.iter_mut()) {
            lin.check_io(x, tokens, out)?;
            if let Some(o) = &lin.observer {
                o.observe(x);
            }
        }
        fast::forward_group(layers, simd_level(), x, tokens, outs)
    }

    /// Reference path: scalar, f64 dot products of dequantized rows. Same contract as
    /// [`Linear::forward`].
    pub fn forward_reference(&self, x: &[f32], tokens: usize, out: &mut [f32]) -> Result<()> {
        self.check_io(x, tokens, out)?;
        reference::forward(self, x, tokens, out)
    }

    fn check_io(&self, x: &[f32], tokens: usize, out: &mut [f32]) -> Result<()> {
        let n_x = tokens.checked_mul(self.in_features);
        let n_y = tokens.checked_mul(self.out_features);
        check_len("linear input x", n_x.unwrap_or(usize::MAX), x.len())?;
        check_len("linear output", n_y.unwrap_or(usize::MAX), out.len())
    }
}

fn check_dims(rows: usize, cols: usize, out_features: usize, in_features: usize) -> Result<()> {
    if (rows, cols) == (out_features, in_features) {
        Ok(())
    } else {
        Err(QuantError::ShapeMismatch {
            op: "Linear::new",
            detail: format!(
                "weight tensor is [{rows}, {cols}], layer is [{out_features}, {in_features}]"
            ),
        })
    }
}
