//! The aarch64 kernels against the portable ones, called directly (so each level's own
//! kernel is the one under test, whatever the driver picks): the integer rows of the
//! dotprod and i8mm levels for 1 to 4 tokens and prompt sizes, odd row counts and row
//! tails, W4A8 and W4A4 activations; the `bfmmla` GEMM tile.

use super::super::gemm::{Bf16Kernel, MR, NR, PortableKernel};
use super::super::portable::{Portable, e4m3_unit};
use super::super::prepare::{Act, prepare};
use super::super::{A4Act, A4Kind, Isa};
use crate::formats::e2m1;
use edge_core::rng::SeededRng;
use edge_core::simd::{Dotprod, I8mm, NeonBf16};

fn bytes(n: usize, seed: u64) -> Vec<u8> {
    SeededRng::from_seed(seed).bytes(n)
}

/// Activations of `tokens` random rows laid out by `isa`: int8 codes with one scale per
/// 256 inputs (W4A8) or doubled E2M1 codes with one per 16 (W4A4).
fn activations<I: Isa>(isa: I, kind: A4Kind, n_in: usize, tokens: usize, seed: u64) -> A4Act {
    let groups = n_in / 8;
    let raw = bytes(tokens * n_in, seed);
    let natural: Vec<i8> = match kind {
        A4Kind::Int8 => raw.iter().map(|&b| (b as i8).max(-127)).collect(),
        A4Kind::Nvfp4 => raw
            .iter()
            .map(|&b| e2m1::DOUBLED[usize::from(b & 15)])
            .collect(),
    };
    let per = match kind {
        A4Kind::Int8 => crate::int8::BLOCK / 8,
        A4Kind::Nvfp4 => 2,
    };
    let sfa = (0..tokens * groups)
        .map(|g| {
            let (t, g) = (g / groups, g % groups);
            0.01 + ((t * 7 + g / per * 3) % 11) as f32 * 0.013
        })
        .collect();
    let mut a = A4Act {
        kind,
        qa: vec![0; tokens * n_in],
        negcorr: vec![0; tokens * groups],
        natural,
        sfa,
    };
    for t in 0..tokens {
        let (qa, nc) = (
            &mut a.qa[t * n_in..][..n_in],
            &mut a.negcorr[t * groups..][..groups],
        );
        isa.layout_a4_codes(&a.natural[t * n_in..][..n_in], qa, nc);
    }
    a
}

/// `isa.a4_rows` against the portable rows for `rows × n_in` weights and `tokens`
/// tokens, within 1e-5 of `Σ|ŵ·x̂|` per output.
fn check_a4_rows<I: Isa>(isa: I, kind: A4Kind, rows: usize, n_in: usize, tokens: usize) {
    let seed = (rows * 1000 + n_in + tokens) as u64;
    let codes = bytes(rows * n_in / 2, seed);
    // Finite scales of both signs, a few binades apart.
    let scales: Vec<u8> = bytes(rows * n_in / 16, seed + 1)
        .iter()
        .map(|&b| (b & 0x9f) + 0x10)
        .collect();
    let ours = activations(isa, kind, n_in, tokens, seed + 2);
    let theirs = activations(Portable, kind, n_in, tokens, seed + 2);
    let (mut got, mut want) = (vec![f32::NAN; rows * tokens], vec![0.0; rows * tokens]);
    isa.a4_rows(&codes, &scales, n_in, &ours, tokens, &mut got);
    Portable.a4_rows(&codes, &scales, n_in, &theirs, tokens, &mut want);
    for r in 0..rows {
        for t in 0..tokens {
            let abs: f64 = (0..n_in)
                .map(|k| {
                    let e = r * n_in + k;
                    let q = (codes[e / 2] >> (4 * (e % 2))) & 15;
                    let w = f64::from(e2m1::DOUBLED[usize::from(q)])
                        * f64::from(e4m3_unit(scales[e / 16]));
                    let x = f64::from(theirs.natural[t * n_in + k])
                        * f64::from(theirs.sfa[(t * n_in + k) / 8]);
                    (w * x).abs()
                })
                .sum();
            let (g, w) = (got[r * tokens + t], want[r * tokens + t]);
            assert!(
                (f64::from(g) - f64::from(w)).abs() <= 1e-5 * abs + 1e-30,
                "{kind:?} rows {rows} n_in {n_in} tokens {tokens}: row {r} token {t}: {g} vs {w}"
            );
        }
    }
}

/// Shapes: one chunk, a chunk and a tail, several segments with a tail; odd and even
/// row counts (lone rows, row pairs, the four-row passes); 1 to 4 tokens, then prompt
/// sizes with odd token counts and more than one sliver.
fn check_int_isa<I: Isa>(isa: I) {
    for kind in [A4Kind::Int8, A4Kind::Nvfp4] {
        for n_in in [16, 32, 48, 256, 2048 + 256 + 48] {
            for rows in [1, 2, 3, 7, 9] {
                for tokens in [1, 2, 3, 4, 5, 9] {
                    check_a4_rows(isa, kind, rows, n_in, tokens);
                }
            }
        }
        check_a4_rows(isa, kind, 11, 512 + 16, 37);
        check_a4_rows(isa, kind, 17, 4096, 6);
    }
}

#[test]
fn dotprod_integer_rows_match_the_portable_ones() {
    match Dotprod::detect() {
        Some(isa) => check_int_isa(isa),
        None => eprintln!("no dotprod on this CPU: skipped"),
    }
}

#[test]
fn i8mm_integer_rows_match_the_portable_ones() {
    match I8mm::detect() {
        Some(isa) => check_int_isa(isa),
        None => eprintln!("no i8mm on this CPU: skipped"),
    }
}

/// The `bfmmla` tile against the portable one: even and odd pair counts, overwriting
/// and accumulating, finite bf16 values of mixed signs and magnitudes.
#[test]
fn bfmmla_tile_matches_the_portable_one() {
    let Some(kernel) = NeonBf16::detect() else {
        eprintln!("no FEAT_BF16 on this CPU: skipped");
        return;
    };
    // A bf16 pair from two random bytes each: exponents within a few binades of 1.
    let pair = |b: &[u8]| {
        let half = |x: u8, y: u8| u32::from(0x3c00 | (u16::from(x & 0x83) << 8) | u16::from(y));
        half(b[0], b[1]) | (half(b[2], b[3]) << 16)
    };
    for pairs in [1, 2, 3, 8, 17, 1024] {
        let a: Vec<u32> = bytes(4 * pairs * MR, pairs as u64)
            .chunks(4)
            .map(pair)
            .collect();
        let b: Vec<u32> = bytes(4 * pairs * NR, 7 + pairs as u64)
            .chunks(4)
            .map(pair)
            .collect();
        for accumulate in [false, true] {
            let init: Vec<f32> = (0..MR * NR).map(|i| (i % 13) as f32 - 6.0).collect();
            let (mut got, mut want) = (init.clone(), init);
            kernel.tile(&a, &b, &mut got, accumulate);
            PortableKernel.tile(&a, &b, &mut want, accumulate);
            let lo = |v: u32| f32::from_bits(v << 16).abs();
            let hi = |v: u32| f32::from_bits(v & 0xffff_0000).abs();
            for i in 0..MR {
                for j in 0..NR {
                    let abs: f32 = (0..pairs)
                        .map(|p| {
                            let (x, y) = (a[p * MR + i], b[p * NR + j]);
                            lo(x) * lo(y) + hi(x) * hi(y)
                        })
                        .sum::<f32>()
                        + 6.0;
                    let (g, w) = (got[i * NR + j], want[i * NR + j]);
                    assert!(
                        (g - w).abs() <= 1e-5 * abs,
                        "pairs {pairs} accumulate {accumulate} [{i}][{j}]: {g} vs {w}"
                    );
                }
            }
        }
    }
}

/// The driver runs each level's own integer kernels: a W4A8 and a W4A4 layer forced to
/// `NeonDotprod` and `NeonI8mm` give, bit for bit, what that level's [`Isa::a4_rows`]
/// gives on the activations [`prepare`] makes for it (1, 3 and 9 tokens: the
/// `sdot` rows, the `smmla` rows and the prompt path).
#[test]
fn the_driver_picks_each_levels_integer_kernels() {
    use crate::linear::{ActivationQuant, Linear, LinearWeight};
    use crate::nvfp4::Nvfp4Tensor;
    use edge_core::simd::{SimdLevel, with_level};
    fn direct<I: Isa>(isa: I, lin: &Linear, x: &[f32], tokens: usize) -> Vec<f32> {
        let Ok(Act::A4(act, factor)) = prepare(isa, lin, x, tokens) else {
            unreachable!("integer activations")
        };
        let LinearWeight::Nvfp4(t) = lin.weight() else {
            unreachable!("NVFP4 weights")
        };
        let (n_out, n_in) = (lin.out_features(), lin.in_features());
        let mut tile = vec![0.0; n_out * tokens];
        isa.a4_rows(t.codes(), t.scales(), n_in, &act, tokens, &mut tile);
        let mut out = vec![0.0; n_out * tokens];
        for (r, row) in tile.chunks_exact(tokens).enumerate() {
            for (t_, &v) in row.iter().enumerate() {
                out[t_ * n_out + r] = v * (factor * t.global_scale());
            }
        }
        out
    }
    let (n_out, n_in) = (13, 512 + 16);
    let codes = bytes(n_out * n_in / 2, 40);
    let scales: Vec<u8> = bytes(n_out * n_in / 16, 41)
        .iter()
        .map(|b| b & 0x77)
        .collect();
    let w = Nvfp4Tensor::from_parts(n_out, n_in, codes, scales, 0.02).unwrap();
    let lin = Linear::new(n_out, n_in, LinearWeight::Nvfp4(w)).unwrap();
    let modes = [
        ActivationQuant::Int8,
        ActivationQuant::Nvfp4 {
            input_scale: 1.0 / 2688.0,
        },
    ];
    for mode in modes {
        let lin = lin.clone().with_activation_quant(mode).unwrap();
        for tokens in [1, 3, 9] {
            let x: Vec<f32> = bytes(tokens * n_in, 42)
                .iter()
                .map(|&b| b as f32 / 64.0 - 2.0)
                .collect();
            let forced = |level| {
                let mut y = vec![0.0; n_out * tokens];
                with_level(level, || lin.forward(&x, tokens, &mut y))
                    .unwrap()
                    .unwrap();
                y
            };
            if let Some(isa) = Dotprod::detect() {
                let want = direct(isa, &lin, &x, tokens);
                assert_eq!(forced(SimdLevel::NeonDotprod), want, "dotprod {tokens}");
            }
            if let Some(isa) = I8mm::detect() {
                let want = direct(isa, &lin, &x, tokens);
                assert_eq!(forced(SimdLevel::NeonI8mm), want, "i8mm {tokens}");
            }
        }
    }
}
