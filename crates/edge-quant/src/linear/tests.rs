//! Small, fixture-free checks of the linear layer: hand-computed outputs for every
//! format, every available SIMD level against the reference, and error cases.

use super::*;
use crate::formats::e4m3;
use edge_core::rng::SeededRng;

/// `n` values uniform in [-1, 1), drawn from `seed`.
fn noise(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = SeededRng::from_seed(seed);
    (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect()
}

/// [`Linear::forward`] with the SIMD level forced to `level` (which must be available).
fn forward_at(lin: &Linear, level: SimdLevel, x: &[f32], tokens: usize, out: &mut [f32]) {
    edge_core::simd::with_level(level, || lin.forward(x, tokens, out))
        .unwrap()
        .unwrap();
}

fn levels() -> Vec<SimdLevel> {
    SimdLevel::ALL
        .into_iter()
        .filter(|l| l.is_available())
        .collect()
}

/// Runs every available level and the reference; checks them against `want`.
fn check_all(lin: &Linear, x: &[f32], tokens: usize, want: &[f32]) {
    let mut got = vec![f32::NAN; want.len()];
    lin.forward_reference(x, tokens, &mut got).unwrap();
    assert_eq!(got, want, "reference");
    for level in levels() {
        got.fill(f32::NAN);
        forward_at(lin, level, x, tokens, &mut got);
        assert_eq!(got, want, "{level}");
    }
}

#[test]
fn f32_identity_and_bf16_exact() {
    let mut eye = vec![0.0f32; 9];
    eye[0] = 1.0;
    eye[4] = 2.0;
    eye[8] = -1.0;
    let lin = Linear::new(3, 3, LinearWeight::F32(eye)).unwrap();
    check_all(
        &lin,
        &[1.0, 2.0, 3.0, 0.5, 0.25, 4.0],
        2,
        &[1.0, 4.0, -3.0, 0.5, 0.5, -4.0],
    );

    // bf16 1.0 = 0x3f80, -2.0 = 0xc000, 0.5 = 0x3f00, stored at an odd address.
    let mut bytes = vec![0u8];
    for v in [0x3f80u16, 0xc000, 0x3f00, 0x3f80] {
        bytes.extend(v.to_le_bytes());
    }
    let w = edge_core::Bytes::from_vec(bytes).slice(1..9).unwrap();
    let lin = Linear::new(2, 2, LinearWeight::Bf16(w)).unwrap();
    assert_eq!(lin.weight_bytes(), 8);
    check_all(&lin, &[3.0, 1.0], 1, &[1.0, 2.5]);
}

#[test]
fn fp8_and_nvfp4_hand_computed() {
    // FP8: codes 1.0 (0x38) and −2.0 (0xc0), scale 0.5.
    let t = Fp8Tensor::from_parts(1, 2, vec![0x38, 0xc0], 0.5).unwrap();
    let lin = Linear::new(1, 2, LinearWeight::Fp8(t)).unwrap();
    check_all(&lin, &[4.0, 1.0], 1, &[1.0]);

    // NVFP4: one row of 16 codes, all +1.5 (code 3) with block scale 2 (0x40), global
    // scale 0.25: every weight is 0.75.
    let t = Nvfp4Tensor::from_parts(1, 16, vec![0x33; 8], vec![0x40], 0.25).unwrap();
    let lin = Linear::new(1, 16, LinearWeight::Nvfp4(t)).unwrap();
    check_all(&lin, &[2.0; 16], 1, &[24.0]);
    assert_eq!(lin.weight_bytes(), 9);
}

#[test]
fn w4a4_hand_computed() {
    // Activations all 1.0 with input_scale 1/2688: SF = 448, codes +6 (0x7).
    // Weights all +0.5 (code 1), block scale 1 (0x38), global 2: ŵ = 1.
    let t = Nvfp4Tensor::from_parts(2, 32, vec![0x11; 32], vec![0x38; 4], 2.0).unwrap();
    let input_scale = 1.0 / 2688.0;
    let lin = Linear::new(2, 32, LinearWeight::Nvfp4(t))
        .unwrap()
        .with_activation_quant(ActivationQuant::Nvfp4 { input_scale })
        .unwrap();
    // x̂ = 6 · 448 · input_scale ≈ 1, y = Σ x̂·ŵ over 32 inputs.
    let x_hat = (6.0 * 448.0 * f64::from(input_scale)) as f32;
    let mut want = vec![0.0f32; 2];
    lin.forward_reference(&[1.0; 32], 1, &mut want).unwrap();
    assert!((want[0] - 32.0 * x_hat).abs() < 1e-4, "{want:?}");
    check_all(&lin, &[1.0; 32], 1, &want);
}

#[test]
fn every_level_matches_reference_on_a_mixed_case() {
    let (out, inp, tokens) = (37, 400, 6);
    let x = noise(tokens * inp, 1);
    let codes: Vec<u8> = noise(out * inp / 2, 2)
        .iter()
        .map(|v| ((v + 1.0) * 128.0) as u8)
        .collect();
    // Block scales 0x20..0x5f: finite, a few powers of two apart.
    let scales: Vec<u8> = codes.iter().step_by(8).map(|c| 0x20 + c % 0x40).collect();
    let fp8: Vec<u8> = codes.iter().chain(&codes).map(|&c| c & 0xf7).collect();
    let bf16: Vec<u8> = noise(out * inp, 3)
        .iter()
        .flat_map(|v| half::bf16::from_f32(*v).to_le_bytes())
        .collect();
    let weights = [
        LinearWeight::F32(noise(out * inp, 4)),
        LinearWeight::Bf16(bf16.into()),
        LinearWeight::Fp8(Fp8Tensor::from_parts(out, inp, fp8, 0.01).unwrap()),
        LinearWeight::Nvfp4(Nvfp4Tensor::from_parts(out, inp, codes, scales, 0.003).unwrap()),
    ];
    for w in weights {
        let nvfp4 = matches!(w, LinearWeight::Nvfp4(_));
        let lin = Linear::new(out, inp, w).unwrap();
        let mut modes = vec![lin.clone()];
        if nvfp4 {
            let a = ActivationQuant::Nvfp4 {
                input_scale: 0.0004,
            };
            modes.push(lin.with_activation_quant(a).unwrap());
        }
        for lin in modes {
            let mut want = vec![0.0f32; tokens * out];
            lin.forward_reference(&x, tokens, &mut want).unwrap();
            for level in levels() {
                let mut got = vec![0.0f32; tokens * out];
                forward_at(&lin, level, &x, tokens, &mut got);
                for (g, w) in got.iter().zip(&want) {
                    // Loose bound for a unit test; the property tests use the
                    // documented Σ|x̂·ŵ| tolerance.
                    assert!(
                        (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
                        "{level}: {g} vs {w}"
                    );
                }
            }
        }
    }
}

#[test]
fn nan_weights_propagate() {
    // E4M3 NaN (0x7f) as an FP8 weight and as an NVFP4 block scale.
    assert!(e4m3::decode(0x7f).is_nan());
    let mut codes = vec![0x38u8; 80];
    codes[70] = 0x7f;
    let t = Fp8Tensor::from_parts(1, 80, codes, 1.0).unwrap();
    let lin = Linear::new(1, 80, LinearWeight::Fp8(t)).unwrap();
    let mut scales = vec![0x38u8; 16];
    scales[3] = 0xff;
    let t = Nvfp4Tensor::from_parts(1, 256, vec![0x22; 128], scales, 1.0).unwrap();
    let lin4 = Linear::new(1, 256, LinearWeight::Nvfp4(t)).unwrap();
    for (lin, n) in [(lin, 80), (lin4, 256)] {
        let x = vec![1.0f32; n];
        let mut y = [0.0f32];
        lin.forward_reference(&x, 1, &mut y).unwrap();
        assert!(y[0].is_nan());
        for level in levels() {
            y[0] = 0.0;
            forward_at(&lin, level, &x, 1, &mut y);
            assert!(y[0].is_nan(), "{level}");
        }
    }
}

#[test]
fn nan_block_scale_poisons_only_its_row_in_integer_modes() {
    // 9 rows (for one token: passes over rows {0, 2, 4, 6} and {1, 3, 5, 7}, one from
    // each quarter, and a single row 8), a NaN block scale in row 1 only; one token
    // (the one-token rows), three (the fused few-token rows) and nine (the prompt GEMM:
    // a full 8-token tile and a single-token one).
    let (rows, n) = (9, 256);
    let mut scales = vec![0x38u8; rows * n / 16];
    scales[n / 16 + 9] = 0x7f;
    let codes: Vec<u8> = (0..rows * n / 2).map(|i| (i * 37 % 256) as u8).collect();
    let t = Nvfp4Tensor::from_parts(rows, n, codes, scales, 0.5).unwrap();
    for (act, tokens) in [
        ActivationQuant::Int8,
        ActivationQuant::Nvfp4 {
            input_scale: 1.0 / 2688.0,
        },
    ]
    .into_iter()
    .flat_map(|a| [1, 3, 9].map(|t| (a, t)))
    {
        let x = noise(tokens * n, 3);
        let lin = Linear::new(rows, n, LinearWeight::Nvfp4(t.clone()))
            .unwrap()
            .with_activation_quant(act)
            .unwrap();
        let mut want = vec![0.0f32; tokens * rows];
        lin.forward_reference(&x, tokens, &mut want).unwrap();
        for level in levels() {
            let mut got = vec![0.0f32; tokens * rows];
            forward_at(&lin, level, &x, tokens, &mut got);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let r = i % rows;
                if r == 1 {
                    assert!(g.is_nan() && w.is_nan(), "{act:?} {level} t={tokens}");
                } else {
                    assert!(
                        (g - w).abs() <= 1e-4 * w.abs().max(1.0),
                        "{act:?} {level} t={tokens} {i}"
                    );
                }
            }
        }
    }
}

#[test]
fn bad_inputs_are_typed_errors() {
    assert!(matches!(
        Linear::new(2, 3, LinearWeight::F32(vec![0.0; 5])),
        Err(crate::QuantError::LengthMismatch { .. })
    ));
    assert!(matches!(
        Linear::new(0, 3, LinearWeight::F32(vec![])),
        Err(crate::QuantError::ShapeMismatch { .. })
    ));
    assert!(matches!(
        Linear::new(2, 2, LinearWeight::Bf16(vec![0u8; 7].into())),
        Err(crate::QuantError::LengthMismatch { .. })
    ));
    let t = Fp8Tensor::from_parts(2, 3, vec![0; 6], 1.0).unwrap();
    assert!(matches!(
        Linear::new(3, 2, LinearWeight::Fp8(t)),
        Err(QuantError::ShapeMismatch { .. })
    ));
    let lin = Linear::new(1, 2, LinearWeight::F32(vec![1.0, 1.0])).unwrap();
    let mut y = [0.0f32; 2];
    assert!(matches!(
        lin.forward(&[1.0; 3], 1, &mut y[..1]),
        Err(QuantError::LengthMismatch { .. })
    ));
    assert!(matches!(
        lin.forward(&[1.0; 2], 1, &mut y),
        Err(QuantError::LengthMismatch { .. })
    ));
    assert!(lin.forward(&[], 0, &mut []).is_ok());
    let a = ActivationQuant::Nvfp4 { input_scale: 1.0 };
    assert!(matches!(
        lin.with_activation_quant(a),
        Err(QuantError::Unsupported(_))
    ));
}
