//! The reference (oracle) linear layer: dequantize one weight row with the tensor
//! types' own dequantizers, then an f64 dot product per token. No SIMD, no threads.

use super::{ActivationQuant, Linear, LinearWeight};
use crate::error::Result;
use crate::formats::{e2m1, e4m3};
use crate::int8;
use crate::nvfp4::{BLOCK, activation::quantize_activation_row};

/// `out[t, r] = Σ_k x[t, k] · W[r, k]`; shapes already checked by the caller.
pub(super) fn forward(lin: &Linear, x: &[f32], tokens: usize, out: &mut [f32]) -> Result<()> {
    let (n_out, n_in) = (lin.out_features, lin.in_features);
    if let (ActivationQuant::Nvfp4 { input_scale }, LinearWeight::Nvfp4(w)) = (lin.act, &lin.weight)
    {
        return forward_w4a4(w, input_scale, x, tokens, out);
    }
    // The activations as the product uses them, in f64 (an int8 code times its f32
    // scale needs more than 24 bits).
    let x: Vec<f64> = match lin.act {
        ActivationQuant::Bf16 => x
            .iter()
            .map(|&v| f64::from(half::bf16::from_f32(v).to_f32()))
            .collect(),
        ActivationQuant::Int8 => dequantize_int8(x, n_in)?,
        ActivationQuant::None | ActivationQuant::Nvfp4 { .. } => {
            x.iter().map(|&v| f64::from(v)).collect()
        }
    };
    let mut row = vec![0.0f32; n_in];
    for r in 0..n_out {
        dequantize_row(&lin.weight, r, n_in, &mut row);
        for t in 0..tokens {
            let xt = &x[t * n_in..(t + 1) * n_in];
            let dot: f64 = xt.iter().zip(&row).map(|(&a, &b)| a * f64::from(b)).sum();
            out[t * n_out + r] = dot as f32;
        }
    }
    Ok(())
}

/// W4A8: every row quantized to int8 per block, then `q · s` exactly in f64.
fn dequantize_int8(x: &[f32], n_in: usize) -> Result<Vec<f64>> {
    let mut q = vec![0i8; n_in];
    let mut scales = vec![0.0f32; int8::scales_len(n_in)];
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks_exact(n_in) {
        int8::quantize_row(row, &mut q, &mut scales)?;
        let blocks = q.chunks(int8::BLOCK).zip(&scales);
        out.extend(blocks.flat_map(|(b, &s)| b.iter().map(move |&c| f64::from(c) * f64::from(s))));
    }
    Ok(out)
}

/// Row `r` of the dequantized weight.
fn dequantize_row(w: &LinearWeight, r: usize, n_in: usize, row: &mut [f32]) {
    match w {
        LinearWeight::F32(v) => row.copy_from_slice(&v[r * n_in..(r + 1) * n_in]),
        LinearWeight::Bf16(b) => {
            let bytes = &b[r * n_in * 2..(r + 1) * n_in * 2];
            for (o, p) in row.iter_mut().zip(bytes.chunks_exact(2)) {
                *o = half::bf16::from_le_bytes([p[0], p[1]]).to_f32();
            }
        }
        LinearWeight::Fp8(t) => {
            let codes = &t.codes()[r * n_in..(r + 1) * n_in];
            for (o, &c) in row.iter_mut().zip(codes) {
                *o = e4m3::decode(c) * t.scale();
            }
        }
        LinearWeight::Nvfp4(t) => t.dequantize_row(r, row),
    }
}

/// W4A4: quantize each activation row, then
/// `y = alpha · Σ_blocks SFa·SFw · Σ_k E2M1[qa]·E2M1[qw]` in f64.
fn forward_w4a4(
    w: &crate::Nvfp4Tensor,
    input_scale: f32,
    x: &[f32],
    tokens: usize,
    out: &mut [f32],
) -> Result<()> {
    let (n_out, n_in) = (w.rows(), w.cols());
    let alpha = f64::from(input_scale) * f64::from(w.global_scale());
    let mut a_codes = vec![0u8; n_in / 2];
    let mut a_scales = vec![0u8; n_in / BLOCK];
    for t in 0..tokens {
        quantize_activation_row(
            &x[t * n_in..(t + 1) * n_in],
            input_scale,
            &mut a_codes,
            &mut a_scales,
        )?;
        for r in 0..n_out {
            let w_codes = &w.codes()[r * n_in / 2..(r + 1) * n_in / 2];
            let w_scales = &w.scales()[r * n_in / BLOCK..(r + 1) * n_in / BLOCK];
            let mut sum = 0.0f64;
            for b in 0..n_in / BLOCK {
                let mut block = 0.0f64;
                for k in b * BLOCK..(b + 1) * BLOCK {
                    let qa = a_codes[k / 2] >> (4 * (k % 2));
                    let qw = w_codes[k / 2] >> (4 * (k % 2));
                    block += f64::from(e2m1::decode(qa)) * f64::from(e2m1::decode(qw));
                }
                let sfa = f64::from(e4m3::decode(a_scales[b]));
                let sfw = f64::from(e4m3::decode(w_scales[b]));
                sum += sfa * sfw * block;
            }
            out[t * n_out + r] = (alpha * sum) as f32;
        }
    }
    Ok(())
}
