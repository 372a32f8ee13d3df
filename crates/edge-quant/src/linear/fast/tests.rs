//! Unit tests of the kernel interface: permutations, every ISA's decoders against the
//! portable ones, and the default integer-row methods.

use super::*;
use edge_core::rng::SeededRng;

#[test]
fn perms_are_bijections() {
    for perm in [
        Perm::EvenOdd(64),
        Perm::EvenOdd(128),
        Perm::Nibble16x8,
        Perm::Nibble32x4,
    ] {
        let mut seen = vec![false; perm.chunk()];
        for p in 0..perm.chunk() {
            assert!(!std::mem::replace(&mut seen[perm.source(p)], true));
        }
    }
    let src: Vec<u32> = (0..300).collect();
    for perm in [
        Perm::Natural,
        Perm::EvenOdd(64),
        Perm::EvenOdd(128),
        Perm::Nibble16x8,
        Perm::Nibble32x4,
    ] {
        let mut dst = vec![0; 300];
        perm.apply(&src, &mut dst);
        let c = perm.chunk();
        for (p, &v) in dst.iter().enumerate() {
            let full = 300 / c * c;
            let want = if p < full {
                p / c * c + perm.source(p % c)
            } else {
                p
            };
            assert_eq!(v as usize, want, "{perm:?} position {p}");
        }
    }
    let src: Vec<u32> = (0..144).collect();
    let mut dst = vec![0; 144];
    Perm::Nibble16x8.apply(&src, &mut dst);
    assert_eq!(&dst[..3], &[0, 8, 16]);
    assert_eq!(dst[16], 1);
    assert_eq!(&dst[128..], &src[128..]);
}

/// `n` random bytes drawn from `seed`.
fn bytes(n: usize, seed: u64) -> Vec<u8> {
    SeededRng::from_seed(seed).bytes(n)
}

/// Equal values (±0 alike: integer tables have no −0) or both NaN.
fn same(a: f32, b: f32) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

/// Every decoder of `isa` against the portable one, through its permutations;
/// NaN codes and scales, subnormals and row tails included.
fn check_isa<I: Isa>(isa: I) {
    let n = 2 * SEG.min(1024) + 48;
    let codes = bytes(n / 2, 1);
    let mut scales = bytes(n / 16, 2);
    scales[5] = 0x7f;
    scales[20] = 0x03;
    let mut fp8: Vec<u8> = (0..=255u8).cycle().take(n).collect();
    fp8.rotate_left(7);

    let (mut want, mut got) = (vec![0.0f32; n], vec![0.0f32; n]);
    portable::decode_nvfp4(&codes, &scales, &mut want);
    isa.decode_nvfp4(&codes, &scales, &mut got);
    let mut permuted = vec![0.0f32; n];
    I::NVFP4_PERM.apply(&want, &mut permuted);
    let bad = got.iter().zip(&permuted).position(|(a, b)| !same(*a, *b));
    assert_eq!(bad, None, "nvfp4 {:?}", bad.map(|i| (got[i], permuted[i])));

    portable::decode_fp8(&fp8, &mut want);
    isa.decode_fp8(&fp8, &mut got);
    assert!(got.iter().zip(&want).all(|(a, b)| same(*a, *b)), "fp8");

    let bf = bytes(2 * n + 1, 3);
    portable::decode_bf16(&bf[1..], &mut want);
    isa.decode_bf16(&bf[1..], &mut got);
    assert!(got.iter().zip(&want).all(|(a, b)| same(*a, *b)), "bf16");

    let (mut wq0, mut wsc0) = (vec![0u8; n], vec![0.0f32; n / 8]);
    let (mut wq1, mut wsc1) = (vec![0u8; n], vec![0.0f32; n / 8]);
    portable::decode_w4(&codes, &scales, &mut wq0, &mut wsc0);
    isa.decode_w4(&codes, &scales, &mut wq1, &mut wsc1);
    let mut wq_perm = vec![0u8; n];
    I::A4_PERM.apply(&wq0, &mut wq_perm);
    assert_eq!(wq1, wq_perm, "w4 codes");
    assert!(
        wsc1.iter().zip(&wsc0).all(|(a, b)| same(*a, *b)),
        "w4 scales"
    );

    // The activation layout against its definition: whole chunks, then a tail;
    // the extreme codes included.
    let mut nat: Vec<i8> = bytes(n, 7).iter().map(|&b| b as i8).collect();
    nat[..4].copy_from_slice(&[-128, 127, -127, 0]);
    let (mut qa0, mut nc0) = (vec![0i8; n], vec![0i32; n / 8]);
    I::A4_PERM.apply(&nat, &mut qa0);
    a4_corrections(&nat, &mut nc0);
    let (mut qa1, mut nc1) = (vec![0i8; n], vec![0i32; n / 8]);
    isa.layout_a4_codes(&nat, &mut qa1, &mut nc1);
    assert_eq!((qa1, nc1), (qa0, nc0), "a4 layout");

    // The row kernel against the decode-then-dot default, 1 and 9 tokens.
    scales[5] = 0x38;
    for tokens in [1, 9] {
        let rows = 3;
        let codes = bytes(rows * n / 2, 4);
        let scales = bytes(rows * n / 16, 5)
            .iter()
            .map(|b| b & 0x77)
            .collect::<Vec<_>>();
        let xs: Vec<f32> = bytes(tokens * n, 6)
            .iter()
            .map(|&b| b as f32 / 64.0 - 2.0)
            .collect();
        let mut buf = vec![0.0f32; SEG];
        let (mut a, mut b) = (vec![0.0f32; rows * tokens], vec![0.0f32; rows * tokens]);
        isa.nvfp4_rows(&codes, &scales, n, &xs, tokens, &mut a, &mut buf);
        for (r, acc) in b.chunks_exact_mut(tokens).enumerate() {
            let mut w = vec![0.0f32; n];
            I::decode_nvfp4(
                isa,
                &codes[r * n / 2..][..n / 2],
                &scales[r * n / 16..][..n / 16],
                &mut w,
            );
            isa.dot(&w, &xs, n, acc);
        }
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() <= 1e-4 * (1.0 + y.abs()), "rows: {x} vs {y}");
        }
    }
}

/// The default `a4_rows_into`: `a4_rows` scaled and written into the band's
/// columns of a `[tokens, out]` matrix, the other columns untouched.
#[test]
fn a4_rows_into_writes_scaled_columns() {
    let (rows, n, tokens) = (5, 64, 3);
    let codes = bytes(rows * n / 2, 8);
    let scales: Vec<u8> = bytes(rows * n / 16, 9).iter().map(|b| b & 0x77).collect();
    let natural: Vec<i8> = bytes(tokens * n, 10).iter().map(|&b| b as i8).collect();
    let mut act = A4Act {
        kind: A4Kind::Int8,
        qa: vec![0; tokens * n],
        sfa: (0..tokens * n / 8).map(|g| 0.5 + g as f32).collect(),
        negcorr: vec![0; tokens * n / 8],
        natural,
        #[cfg(target_arch = "x86_64")]
        packed: Vec::new(),
    };
    for t in 0..tokens {
        let (qa, nc) = (
            &mut act.qa[t * n..][..n],
            &mut act.negcorr[t * n / 8..][..n / 8],
        );
        portable::Portable.layout_a4_codes(&act.natural[t * n..][..n], qa, nc);
    }
    let mut tile = vec![0.0f32; rows * tokens];
    portable::Portable.a4_rows(&codes, &scales, n, &act, tokens, &mut tile);
    let width = rows + 3;
    let mut m = vec![-1.0f32; tokens * width];
    let mut bands = ColumnBand::split(&mut m, width, std::iter::once(2..2 + rows));
    let w = Nvfp4Rows {
        codes: &codes,
        scales: &scales,
        n_in: n,
    };
    portable::Portable.a4_rows_into(w, &act, 2.0, &mut bands[0]);
    drop(bands);
    for t in 0..tokens {
        for c in 0..width {
            let want = match c {
                2..7 => 2.0 * tile[(c - 2) * tokens + t],
                _ => -1.0,
            };
            assert_eq!(m[t * width + c], want, "token {t} column {c}");
        }
    }
}

#[test]
fn every_isa_decodes_like_the_portable_kernels() {
    check_isa(portable::Portable);
    #[cfg(target_arch = "x86_64")]
    {
        if let Some(isa) = x86::Avx2::detect() {
            check_isa(isa);
        }
        if let Some(isa) = x86::Avx512::detect() {
            check_isa(isa);
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        check_isa(aarch64::Neon);
        if let Some(isa) = edge_core::simd::Dotprod::detect() {
            check_isa(isa);
        }
        if let Some(isa) = edge_core::simd::I8mm::detect() {
            check_isa(isa);
        }
    }
}

#[test]
fn detection_is_consistent() {
    assert!(simd_level().is_available());
    assert!(SimdLevel::Portable.is_available());
    assert_eq!(simd_level().to_string(), simd_level().name());
}
