//! Activation preparation for the row kernels: f32 rows in an ISA's NVFP4 element
//! order, or 8-bit codes with their group scales and offset corrections (W4A4, W4A8).

use super::gemm;
use super::{A4Act, A4Kind, Isa, Perm};
use crate::error::{QuantError, Result};
use crate::formats::{e2m1, e4m3};
use crate::int8;
use crate::linear::{ActivationQuant, Linear, LinearWeight};
use crate::nvfp4::{BLOCK, activation::quantize_activation_row};
use rayon::prelude::*;
use std::borrow::Cow;

/// Activations in the form an ISA's kernels read.
pub(super) enum Act<'a> {
    /// f32 rows `[tokens, in]`, NVFP4-permuted where the weight is NVFP4.
    F32(Cow<'a, [f32]>),
    /// W4A4 or W4A8: 8-bit activations for the integer kernels, and the factor that
    /// turns their sums into outputs (before the weight's global scale).
    A4(A4Act, f32),
}

/// Whether [`prepare`] gives `a` and `b` the same activations from one input: the
/// same activation mode (input scale included), input width and weight family (which
/// decides between integer and f32 activations and their element order).
pub(super) fn same_activations(a: &Linear, b: &Linear) -> bool {
    let nvfp4 = |l: &Linear| matches!(l.weight(), LinearWeight::Nvfp4(_));
    a.activation_quant() == b.activation_quant()
        && a.in_features() == b.in_features()
        && nvfp4(a) == nvfp4(b)
}

/// The activations `lin`'s kernels on `isa` read for `tokens` rows of `x`: typed
/// errors for a mode that does not fit the weight format or for non-finite inputs.
pub(super) fn prepare<'a, I: Isa>(
    isa: I,
    lin: &Linear,
    x: &'a [f32],
    tokens: usize,
) -> Result<Act<'a>> {
    let n_in = lin.in_features();
    match (lin.activation_quant(), lin.weight()) {
        // Products of doubled codes are 4× too large; weight scales carry 2⁻⁸.
        (ActivationQuant::Nvfp4 { input_scale }, LinearWeight::Nvfp4(_)) => Ok(Act::A4(
            prepare_a4(isa, x, tokens, n_in, input_scale)?,
            input_scale * 64.0,
        )),
        // Only the weight codes are doubled here.
        (ActivationQuant::Int8, LinearWeight::Nvfp4(_)) => {
            Ok(Act::A4(prepare_a8(isa, x, tokens, n_in)?, 128.0))
        }
        (ActivationQuant::Nvfp4 { .. } | ActivationQuant::Int8, w) => {
            Err(QuantError::Unsupported(format!(
                "8-bit activation quantization with {} weights",
                w.format_name()
            )))
        }
        (ActivationQuant::Bf16, w) => {
            let xs = x.iter().map(|&v| gemm::round_bf16(v)).collect();
            Ok(Act::F32(permute_for::<I>(w, n_in, Cow::Owned(xs))))
        }
        (ActivationQuant::None, w) => Ok(Act::F32(permute_for::<I>(w, n_in, Cow::Borrowed(x)))),
    }
}

/// `xs` rows in the element order `I`'s kernels decode `w` in.
fn permute_for<'a, I: Isa>(w: &LinearWeight, n_in: usize, xs: Cow<'a, [f32]>) -> Cow<'a, [f32]> {
    if !matches!(w, LinearWeight::Nvfp4(_)) || I::NVFP4_PERM == Perm::Natural {
        return xs;
    }
    let mut out = vec![0.0; xs.len()];
    for (s, d) in xs.chunks_exact(n_in).zip(out.chunks_exact_mut(n_in)) {
        I::NVFP4_PERM.apply(s, d);
    }
    Cow::Owned(out)
}

/// W4A4 activations: every row quantized to NVFP4 with `input_scale`, as doubled E2M1
/// codes with each group's block scale.
fn prepare_a4<I: Isa>(
    isa: I,
    x: &[f32],
    tokens: usize,
    n_in: usize,
    input_scale: f32,
) -> Result<A4Act> {
    prepare_8bit(isa, A4Kind::Nvfp4, x, tokens, n_in, |xr, nat, sfa| {
        let (mut codes, mut scales) = (vec![0u8; n_in / 2], vec![0u8; n_in / BLOCK]);
        quantize_activation_row(xr, input_scale, &mut codes, &mut scales)?;
        for (pair, &byte) in nat.chunks_exact_mut(2).zip(codes.iter()) {
            pair[0] = e2m1::DOUBLED[usize::from(byte & 0xf)];
            pair[1] = e2m1::DOUBLED[usize::from(byte >> 4)];
        }
        sfa.iter_mut()
            .enumerate()
            .for_each(|(g, s)| *s = e4m3::decode(scales[g / 2]));
        Ok(())
    })
}

/// W4A8 activations: every row quantized to int8 ([`int8::quantize_row`]), its scale
/// per 256 elements repeated for each of the block's 8-element groups.
fn prepare_a8<I: Isa>(isa: I, x: &[f32], tokens: usize, n_in: usize) -> Result<A4Act> {
    prepare_8bit(isa, A4Kind::Int8, x, tokens, n_in, |xr, nat, sfa| {
        // Block scales into the front, then spread in place from the end (group g reads
        // block g/32 ≤ g, not yet overwritten): no allocation per decode step.
        int8::quantize_row(xr, nat, &mut sfa[..int8::scales_len(n_in)])?;
        let groups_per_block = int8::BLOCK / 8;
        for g in (0..sfa.len()).rev() {
            sfa[g] = sfa[g / groups_per_block];
        }
        Ok(())
    })
}

/// One token's input row and its natural-order code, code, group-scale and correction
/// rows, as the zipped row iterators of [`prepare_8bit`] yield them.
type RowSlices<'a> = (
    (((&'a [f32], &'a mut [i8]), &'a mut [i8]), &'a mut [f32]),
    &'a mut [i32],
);

/// Quantizes every token's row with `quantize(x_row, codes, group_scales)`
/// (natural-order 8-bit codes, one scale per 8-element group) and lays the result out
/// for the integer kernels ([`Isa::layout_a4_codes`]); rows in parallel for prompts.
fn prepare_8bit<I: Isa>(
    isa: I,
    kind: A4Kind,
    x: &[f32],
    tokens: usize,
    n_in: usize,
    quantize: impl Fn(&[f32], &mut [i8], &mut [f32]) -> Result<()> + Sync,
) -> Result<A4Act> {
    /// Rows from which the preparation is worth spreading over threads.
    const PAR_MIN_ROWS: usize = 8;
    let groups = n_in / 8;
    let mut a = A4Act {
        kind,
        natural: vec![0; tokens * n_in],
        qa: vec![0; tokens * n_in],
        sfa: vec![0.0; tokens * groups],
        negcorr: vec![0; tokens * groups],
        #[cfg(target_arch = "x86_64")]
        packed: Vec::new(),
    };
    let row = |((((xr, nat), qa), sfa), negcorr): RowSlices<'_>| {
        quantize(xr, nat, sfa)?;
        isa.layout_a4_codes(nat, qa, negcorr);
        Ok::<(), QuantError>(())
    };
    if tokens < PAR_MIN_ROWS {
        let rows = x
            .chunks_exact(n_in)
            .zip(a.natural.chunks_exact_mut(n_in))
            .zip(a.qa.chunks_exact_mut(n_in))
            .zip(a.sfa.chunks_exact_mut(groups))
            .zip(a.negcorr.chunks_exact_mut(groups));
        for r in rows {
            row(r)?;
        }
        return Ok(a);
    }
    x.par_chunks_exact(n_in)
        .zip(a.natural.par_chunks_exact_mut(n_in))
        .zip(a.qa.par_chunks_exact_mut(n_in))
        .zip(a.sfa.par_chunks_exact_mut(groups))
        .zip(a.negcorr.par_chunks_exact_mut(groups))
        .with_min_len(4)
        .try_for_each(row)?;
    Ok(a)
}
