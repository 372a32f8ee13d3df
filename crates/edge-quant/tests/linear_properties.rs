//! Property tests of the CPU linear layer: for every weight format and both activation
//! modes, every SIMD level available here (the detected one and the portable fallback
//! included) agrees with the reference within the documented tolerance
//! (`FAST_PATH_REL_TOLERANCE · Σ|x̂·ŵ|`), on random shapes and random raw weight bytes.
//! Also: the W4A4 activation quantizer against the ModelOpt vector, bad inputs, and the
//! SIMD level chosen on this machine.

use edge_core::Bytes;
use edge_core::rng::SeededRng;
use edge_core::simd::with_level;
use edge_quant::linear::{
    ActivationQuant, FAST_PATH_REL_TOLERANCE, Linear, LinearWeight, SimdLevel, simd_level,
};
use edge_quant::nvfp4::activation::{quantize_activation_row, quantize_activations};
use edge_quant::{Fp8Tensor, Nvfp4Tensor, QuantError, int8};
use proptest::prelude::*;

/// Test data drawn by the project's generator from a proptest-chosen seed.
struct Data(SeededRng);

impl Data {
    fn new(seed: u64) -> Self {
        Data(SeededRng::from_seed(seed))
    }
    fn byte(&mut self) -> u8 {
        (self.0.next_u64() >> 56) as u8
    }
    /// Uniform in [-1, 1), with an occasional ×16 outlier (1 in 64).
    fn value(&mut self) -> f32 {
        let v = self.0.uniform(-1.0, 1.0);
        if self.0.below(64) == 0 { v * 16.0 } else { v }
    }
    /// Any E4M3 byte except the two NaNs.
    fn e4m3(&mut self) -> u8 {
        loop {
            let b = self.byte();
            if b & 0x7f != 0x7f {
                return b;
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Format {
    F32,
    Bf16,
    Fp8,
    Nvfp4,
    Nvfp4W4a4,
    Nvfp4W4a8,
    /// W4A8 with block scales as a checkpoint has them: non-negative, within a few
    /// binades in most rows (the integer-scale path of the prompt GEMM) and some zero;
    /// every fifth row has arbitrary scales (the GEMM's per-block fallback).
    Nvfp4W4a8Checkpoint,
}

/// A layer of `format` with random weights, and its dequantized weight.
fn make_layer(format: Format, out: usize, inp: usize, rng: &mut Data) -> (Linear, Vec<f32>) {
    let n = out * inp;
    let weight = match format {
        Format::F32 => LinearWeight::F32((0..n).map(|_| rng.value()).collect()),
        Format::Bf16 => {
            // One leading byte so the bf16 data is not 2-byte aligned.
            let mut bytes = vec![0u8];
            for _ in 0..n {
                bytes.extend(half::bf16::from_f32(rng.value()).to_le_bytes());
            }
            LinearWeight::Bf16(Bytes::from_vec(bytes).slice(1..1 + 2 * n).unwrap())
        }
        Format::Fp8 => {
            let codes: Vec<u8> = (0..n).map(|_| rng.e4m3()).collect();
            let scale = 0.001 + (rng.byte() as f32) / 1000.0;
            LinearWeight::Fp8(Fp8Tensor::from_parts(out, inp, codes, scale).unwrap())
        }
        Format::Nvfp4 | Format::Nvfp4W4a4 | Format::Nvfp4W4a8 | Format::Nvfp4W4a8Checkpoint => {
            let codes: Vec<u8> = (0..n / 2).map(|_| rng.byte()).collect();
            let checkpoint = matches!(format, Format::Nvfp4W4a8Checkpoint);
            let scales: Vec<u8> = (0..n / 16)
                .map(|i| match rng.byte() {
                    _ if !checkpoint || i / (inp / 16) % 5 == 3 => rng.e4m3(),
                    0..8 => 0,
                    // E4M3 exponents 5 to 10.
                    b => 0x28 + b % 0x30,
                })
                .collect();
            let global = 1e-4 + (rng.byte() as f32) * 1e-4;
            let t = Nvfp4Tensor::from_parts(out, inp, codes, scales, global).unwrap();
            LinearWeight::Nvfp4(t)
        }
    };
    let deq = match &weight {
        LinearWeight::F32(w) => w.clone(),
        LinearWeight::Bf16(b) => b
            .chunks_exact(2)
            .map(|p| half::bf16::from_le_bytes([p[0], p[1]]).to_f32())
            .collect(),
        LinearWeight::Fp8(t) => t.dequantize(),
        LinearWeight::Nvfp4(t) => t.dequantize(),
    };
    (Linear::new(out, inp, weight).unwrap(), deq)
}

/// Checks every available level against the reference for one random case.
fn check_case(format: Format, tokens: usize, out: usize, inp: usize, seed: u64) {
    check_case_with(format, false, tokens, out, inp, seed);
}

/// [`check_case`], optionally with bf16-rounded activations ([`ActivationQuant::Bf16`]).
fn check_case_with(
    format: Format,
    bf16_act: bool,
    tokens: usize,
    out: usize,
    inp: usize,
    seed: u64,
) {
    let mut rng = Data::new(seed);
    let (mut lin, w) = make_layer(format, out, inp, &mut rng);
    let x: Vec<f32> = (0..tokens * inp).map(|_| rng.value()).collect();
    // x̂: the activations the product effectively uses.
    let x_hat = if bf16_act {
        lin = lin.with_activation_quant(ActivationQuant::Bf16).unwrap();
        x.iter()
            .map(|&v| half::bf16::from_f32(v).to_f32())
            .collect()
    } else if let Format::Nvfp4W4a4 = format {
        let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        // Calibrated scale times a factor in [0.5, 2): some blocks saturate.
        let input_scale = amax / 2688.0 * (0.5 + rng.byte() as f32 / 170.0);
        lin = lin
            .with_activation_quant(ActivationQuant::Nvfp4 { input_scale })
            .unwrap();
        quantize_activations(tokens, inp, &x, input_scale)
            .unwrap()
            .dequantize()
    } else if let Format::Nvfp4W4a8 | Format::Nvfp4W4a8Checkpoint = format {
        lin = lin.with_activation_quant(ActivationQuant::Int8).unwrap();
        let (mut q, mut s) = (vec![0i8; inp], vec![0.0f32; int8::scales_len(inp)]);
        x.chunks_exact(inp)
            .flat_map(|row| {
                int8::quantize_row(row, &mut q, &mut s).unwrap();
                int8::dequantize_row(&q, &s)
            })
            .collect()
    } else {
        x.clone()
    };
    let mut want = vec![0.0f32; tokens * out];
    lin.forward_reference(&x, tokens, &mut want).unwrap();
    for level in SimdLevel::ALL.into_iter().filter(|l| l.is_available()) {
        let mut got = vec![f32::NAN; tokens * out];
        with_level(level, || lin.forward(&x, tokens, &mut got))
            .unwrap()
            .unwrap();
        for t in 0..tokens {
            for r in 0..out {
                let abs_sum: f64 = (0..inp)
                    .map(|k| (f64::from(x_hat[t * inp + k]) * f64::from(w[r * inp + k])).abs())
                    .sum();
                let (g, e) = (got[t * out + r], want[t * out + r]);
                let tol = FAST_PATH_REL_TOLERANCE * abs_sum + 1e-30;
                assert!(
                    (f64::from(g) - f64::from(e)).abs() <= tol,
                    "{format:?} {level} t={t} r={r} shape [{tokens}x{inp}]·[{out}x{inp}]ᵀ: \
                     fast {g} vs reference {e} (Σ|x̂ŵ| = {abs_sum})"
                );
            }
        }
    }
}

fn shapes() -> impl Strategy<Value = (usize, usize, usize, u64)> {
    (1usize..=20, 1usize..=300, 1usize..=64, any::<u64>())
        .prop_map(|(tokens, out, blocks, seed)| (tokens, out, 16 * blocks, seed))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn f32_fast_matches_reference((tokens, out, inp, seed) in shapes()) {
        check_case(Format::F32, tokens, out, inp, seed);
    }

    #[test]
    fn bf16_fast_matches_reference((tokens, out, inp, seed) in shapes()) {
        check_case(Format::Bf16, tokens, out, inp, seed);
    }

    #[test]
    fn fp8_fast_matches_reference((tokens, out, inp, seed) in shapes()) {
        check_case(Format::Fp8, tokens, out, inp, seed);
    }

    #[test]
    fn nvfp4_w4a16_fast_matches_reference((tokens, out, inp, seed) in shapes()) {
        check_case(Format::Nvfp4, tokens, out, inp, seed);
    }

    #[test]
    fn nvfp4_w4a4_fast_matches_reference((tokens, out, inp, seed) in shapes()) {
        check_case(Format::Nvfp4W4a4, tokens, out, inp, seed);
    }

    #[test]
    fn nvfp4_w4a8_fast_matches_reference((tokens, out, inp, seed) in shapes()) {
        check_case(Format::Nvfp4W4a8, tokens, out, inp, seed);
    }

    /// The W4A8 prompt GEMM with integer block scales: token slivers (32) and row
    /// blocks (64) crossed, partial 256-input chunks, per-block rows mixed in.
    #[test]
    fn nvfp4_w4a8_checkpoint_scales_match_reference(tokens in 1usize..=40,
                                                    out in 1usize..=150,
                                                    blocks in 1usize..=48,
                                                    seed in any::<u64>()) {
        check_case(Format::Nvfp4W4a8Checkpoint, tokens, out, 16 * blocks, seed);
    }

    /// bf16 activations: the packed GEMM (8+ tokens, ragged token and output tiles) and
    /// the row kernels on rounded inputs, every weight format.
    #[test]
    fn bf16_activations_fast_match_reference(tokens in 1usize..=40, out in 1usize..=200,
                                              blocks in 1usize..=40, seed in any::<u64>()) {
        for format in [Format::F32, Format::Bf16, Format::Fp8, Format::Nvfp4] {
            check_case_with(format, true, tokens, out, 16 * blocks, seed);
        }
        check_case_with(Format::Bf16, true, tokens, out, 16 * blocks + 1, seed);
    }

    /// Unaligned input lengths for the non-NVFP4 formats (any `in`, SIMD tails).
    #[test]
    fn odd_input_lengths_match(tokens in 1usize..6, out in 1usize..40, inp in 1usize..200,
                               seed in any::<u64>()) {
        for format in [Format::F32, Format::Bf16, Format::Fp8] {
            check_case(format, tokens, out, inp, seed);
        }
    }
}

/// The GEMM's input chunking: rows longer than one packed chunk (2048 inputs), with a
/// partial permutation chunk at the end.
#[test]
fn bf16_gemm_spans_several_input_chunks() {
    check_case_with(Format::Nvfp4, true, 19, 50, 4096 + 48, 7);
    check_case_with(Format::Bf16, true, 9, 49, 2048 + 2049, 8);
    check_case_with(Format::Fp8, true, 8, 3, 2050, 9);
}

#[test]
fn decode_shapes_spot_check() {
    // One real decode-like shape per NVFP4 mode (segments and a full SIMD chunk count).
    check_case(Format::Nvfp4, 1, 64, 5120, 7);
    check_case(Format::Nvfp4, 11, 40, 2048 + 48, 9);
    check_case(Format::Nvfp4W4a4, 3, 48, 4096 + 16, 8);
    // W4A8 for 1 to 5 tokens (the fused decode kernels and the segment loop): several
    // segments, a lone 64-input chunk and a natural-order tail.
    for tokens in 1..=5 {
        check_case(Format::Nvfp4W4a8, tokens, 23, 2048 + 128 + 64 + 48, 16);
        check_case(Format::Nvfp4W4a8, tokens, 9, 1024, 17);
        // Rows in four lockstep runs with a remainder, split over several tasks.
        check_case(Format::Nvfp4W4a8, tokens, 103, 512, 21);
        // 2 to 4 tokens of whole 256-input steps: rows in pairs meeting every token in
        // registers, and a lone last row; W4A4 activations through the same kernel.
        check_case(Format::Nvfp4W4a4, tokens, 17, 768, 23);
        // Non-negative checkpoint scales keep every row in the register kernels (a
        // negative scale sends its rows to the segment loop), with every fifth row's
        // scales arbitrary.
        check_case(Format::Nvfp4W4a8Checkpoint, tokens, 37, 1024, 22);
        check_case(Format::Nvfp4W4a8Checkpoint, tokens, 6, 3584, 24);
    }
    // The integer prompt GEMM: ragged 4-token tiles, row blocks of 32 with an odd
    // remainder (2-row tiles and a lone row), several segments and tails.
    for tokens in [6, 7, 8, 13] {
        check_case(Format::Nvfp4W4a8, tokens, 71, 2048 + 128 + 64 + 48, 18);
    }
    // The W4A8 GEMM with integer block scales on a model-sized row.
    check_case(Format::Nvfp4W4a8Checkpoint, 37, 70, 3584 + 48, 20);
    check_case(Format::Nvfp4W4a4, 9, 35, 1024 + 16, 19);
    // One token with rows long enough for the paired-row kernels, odd row counts.
    check_case(Format::Nvfp4, 1, 7, 8192 + 144, 10);
    check_case(Format::Bf16, 1, 5, 8192 + 3, 11);
    check_case(Format::Fp8, 1, 5, 8192 + 70, 12);
    check_case(Format::F32, 1, 3, 77, 13);
    // bf16 activations below the GEMM's 8 tokens (the bf16 dot-product kernels on
    // AVX-512 BF16): several scale-decoding rounds, a row tail, 1 to 7 tokens.
    for tokens in 1..=7 {
        check_case_with(Format::Nvfp4, true, tokens, 37, 2048 + 128 + 48, 14);
        check_case_with(Format::Bf16, true, tokens, 29, 2048 + 64 + 13, 15);
    }
    // One token of bf16 rows in four lockstep runs with a remainder, over several tasks.
    check_case_with(Format::Bf16, true, 1, 103, 1024, 22);
}

#[test]
fn w4a4_activation_matches_modelopt_vector() {
    #[derive(serde::Deserialize)]
    struct Case {
        input_f32_hex: Vec<String>,
        input_scale_hex: String,
        packed_uint8: Vec<u8>,
        block_scale_e4m3_u8: Vec<u8>,
    }
    #[derive(serde::Deserialize)]
    struct Vectors {
        nvfp4_activation_case: Case,
    }
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/nvfp4-vectors.json");
    let v: Vectors = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let c = v.nvfp4_activation_case;
    let hex = |s: &str| f32::from_bits(u32::from_str_radix(&s[2..], 16).unwrap());
    let x: Vec<f32> = c.input_f32_hex.iter().map(|s| hex(s)).collect();
    let input_scale = hex(&c.input_scale_hex);
    let mut codes = vec![0u8; x.len() / 2];
    let mut scales = vec![0u8; x.len() / 16];
    quantize_activation_row(&x, input_scale, &mut codes, &mut scales).unwrap();
    assert_eq!(scales, c.block_scale_e4m3_u8);
    assert_eq!(codes, c.packed_uint8);
    let t = quantize_activations(1, x.len(), &x, input_scale).unwrap();
    assert_eq!(t.codes(), &c.packed_uint8[..]);
    assert_eq!(t.global_scale(), input_scale);
}

#[test]
fn bad_inputs_are_typed_errors_not_panics() {
    let t = Nvfp4Tensor::from_parts(4, 32, vec![0x11; 64], vec![0x38; 8], 1.0).unwrap();
    let lin = Linear::new(4, 32, LinearWeight::Nvfp4(t)).unwrap();
    let mut y = vec![0.0f32; 8];
    for level in SimdLevel::ALL {
        let r = with_level(level, || lin.forward(&[0.0; 63], 2, &mut y));
        match r {
            Ok(r) => assert!(
                matches!(r, Err(QuantError::LengthMismatch { .. })),
                "{level}"
            ),
            // A level this CPU lacks is refused before anything runs.
            Err(e) => assert!(
                !level.is_available()
                    && matches!(e, edge_core::CoreError::SimdLevelUnavailable(l) if l == level),
                "{level}: {e}"
            ),
        }
    }
    assert!(matches!(
        lin.forward(&[0.0; 64], 2, &mut y[..7]),
        Err(QuantError::LengthMismatch { .. })
    ));
    assert!(matches!(
        lin.forward_reference(&[0.0; 64], 2, &mut y[..7]),
        Err(QuantError::LengthMismatch { .. })
    ));
    assert!(matches!(
        lin.forward(&[0.0; 32], usize::MAX, &mut y),
        Err(QuantError::LengthMismatch { .. })
    ));
    for bad in [
        0.0f32,
        -1.0,
        f32::NAN,
        f32::INFINITY,
        f32::MIN_POSITIVE / 8.0,
    ] {
        let r = lin
            .clone()
            .with_activation_quant(ActivationQuant::Nvfp4 { input_scale: bad });
        assert!(matches!(r, Err(QuantError::InvalidScale { .. })), "{bad}");
    }
    // W4A4 and W4A8 need NVFP4 weights.
    let f = Linear::new(2, 16, LinearWeight::F32(vec![0.0; 32])).unwrap();
    let r = f
        .clone()
        .with_activation_quant(ActivationQuant::Nvfp4 { input_scale: 1.0 });
    assert!(matches!(r, Err(QuantError::Unsupported(_))));
    let r = f.with_activation_quant(ActivationQuant::Int8);
    assert!(matches!(r, Err(QuantError::Unsupported(_))));
    // Non-finite activations cannot be quantized to int8 either.
    let w4a8 = lin
        .clone()
        .with_activation_quant(ActivationQuant::Int8)
        .unwrap();
    let mut x = vec![0.5f32; 32];
    x[20] = f32::NAN;
    for r in [
        w4a8.forward(&x, 1, &mut y[..4]),
        w4a8.forward_reference(&x, 1, &mut y[..4]),
    ] {
        assert!(
            matches!(r, Err(QuantError::NonFinite { index: 20, .. })),
            "{r:?}"
        );
    }
    // Non-finite activations cannot be quantized to NVFP4.
    let w4a4 = lin
        .with_activation_quant(ActivationQuant::Nvfp4 { input_scale: 1.0 })
        .unwrap();
    let mut x = vec![0.5f32; 32];
    x[5] = f32::INFINITY;
    let r = w4a4.forward(&x, 1, &mut y[..4]);
    assert!(matches!(r, Err(QuantError::NonFinite { index: 5, .. })));
    let r = w4a4.forward_reference(&x, 1, &mut y[..4]);
    assert!(matches!(r, Err(QuantError::NonFinite { index: 5, .. })));
    // Shape mismatches at construction.
    let t = Nvfp4Tensor::from_parts(4, 32, vec![0x11; 64], vec![0x38; 8], 1.0).unwrap();
    assert!(matches!(
        Linear::new(4, 48, LinearWeight::Nvfp4(t)),
        Err(QuantError::ShapeMismatch { .. })
    ));
    assert!(matches!(
        Linear::new(usize::MAX, 2, LinearWeight::F32(vec![])),
        Err(QuantError::ShapeMismatch { .. })
    ));
}

#[test]
fn fast_path_uses_simd_on_this_machine() {
    let level = simd_level();
    eprintln!("fast path SIMD level: {level}");
    assert!(level.is_available());
    // The level is edge-core's detected one (whose unit tests check it against the
    // CPU's feature bits), and a forced level reaches the fast path.
    assert_eq!(level, edge_core::simd::detected().level);
    let forced = with_level(SimdLevel::Portable, simd_level).unwrap();
    assert_eq!(forced, SimdLevel::Portable);
    #[cfg(target_arch = "x86_64")]
    assert!(!SimdLevel::Neon.is_available());
    #[cfg(target_arch = "aarch64")]
    assert!(matches!(
        level,
        SimdLevel::Neon | SimdLevel::NeonDotprod | SimdLevel::NeonI8mm
    ));
    assert!(SimdLevel::Portable.is_available());
}

/// `forward_shared` of `layers` on `x` equals each layer's own `forward`, bit for bit.
fn check_shared_forward(level: SimdLevel, layers: &[&Linear], x: &[f32], tokens: usize) {
    let mut got: Vec<Vec<f32>> = layers
        .iter()
        .map(|l| vec![f32::NAN; tokens * l.out_features()])
        .collect();
    let mut outs: Vec<&mut [f32]> = got.iter_mut().map(|v| v.as_mut_slice()).collect();
    with_level(level, || {
        Linear::forward_shared(layers, x, tokens, &mut outs)
    })
    .unwrap()
    .unwrap();
    for (i, (lin, g)) in layers.iter().zip(&got).enumerate() {
        let mut want = vec![0.0f32; g.len()];
        with_level(level, || lin.forward(x, tokens, &mut want))
            .unwrap()
            .unwrap();
        assert_eq!(g, &want, "{level} tokens={tokens} layer {i}");
    }
}

/// `forward_shared` on layers with 8-bit activations: layers that quantize the input
/// alike share one preparation, and those that do not (other input scales, other
/// weight formats) must still get their own, so each output equals its own `forward`.
#[test]
fn shared_forward_keeps_each_layers_activation_mode() {
    let mut rng = Data::new(12);
    let inp = 384;
    let w4a4 = |input_scale| ActivationQuant::Nvfp4 { input_scale };
    let layers: Vec<Linear> = [
        (Format::Nvfp4W4a8, 40, ActivationQuant::Int8),
        (Format::Nvfp4W4a8, 24, ActivationQuant::Int8),
        (Format::Nvfp4W4a4, 16, w4a4(0.002)),
        (Format::Nvfp4W4a4, 16, w4a4(0.0005)),
        (Format::Nvfp4, 8, ActivationQuant::None),
        (Format::Bf16, 8, ActivationQuant::None),
    ]
    .into_iter()
    .map(|(format, out, act)| {
        let lin = make_layer(format, out, inp, &mut rng).0;
        lin.with_activation_quant(act).unwrap()
    })
    .collect();
    let refs: Vec<&Linear> = layers.iter().collect();
    for tokens in [1, 3, 9] {
        let x: Vec<f32> = (0..tokens * inp).map(|_| rng.value()).collect();
        for level in SimdLevel::ALL.into_iter().filter(|l| l.is_available()) {
            check_shared_forward(level, &refs, &x, tokens);
        }
    }
}

/// `forward_shared` gives exactly what `forward` gives per layer: mixed formats (the
/// GEMM group packs natural and NVFP4-permuted activations), f32 layers outside the
/// group, prompt and decode token counts, bf16 and f32 activations; and it checks shapes.
#[test]
fn shared_forward_equals_per_layer_forward() {
    let mut rng = Data::new(11);
    let inp = 160;
    for bf16_act in [true, false] {
        let layers: Vec<Linear> = [
            (Format::Nvfp4, 50),
            (Format::Bf16, 97),
            (Format::Fp8, 16),
            (Format::F32, 33),
        ]
        .into_iter()
        .map(|(format, out)| {
            let lin = make_layer(format, out, inp, &mut rng).0;
            if bf16_act {
                lin.with_activation_quant(ActivationQuant::Bf16).unwrap()
            } else {
                lin
            }
        })
        .collect();
        let refs: Vec<&Linear> = layers.iter().collect();
        for tokens in [1, 8, 21] {
            let x: Vec<f32> = (0..tokens * inp).map(|_| rng.value()).collect();
            for level in SimdLevel::ALL.into_iter().filter(|l| l.is_available()) {
                check_shared_forward(level, &refs, &x, tokens);
            }
        }
        let mut short = vec![0.0f32; 3];
        let mut outs: Vec<&mut [f32]> = vec![short.as_mut_slice()];
        let x = vec![0.0f32; inp];
        assert!(matches!(
            Linear::forward_shared(&refs[..1], &x, 1, &mut outs),
            Err(edge_quant::QuantError::LengthMismatch { .. })
        ));
        assert!(matches!(
            Linear::forward_shared(&refs, &x, 1, &mut outs),
            Err(edge_quant::QuantError::ShapeMismatch { .. })
        ));
    }
}
