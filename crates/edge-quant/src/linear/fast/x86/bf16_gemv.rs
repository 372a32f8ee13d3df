//! Bf16-activation kernels for one to seven tokens (decode steps and small speculative
//! verifies): `vdpbf16ps` works on the weight bytes as stored. bf16 weights need no
//! decoding at all; an NVFP4 nibble becomes its bf16 E2M1 value through one `vpermw`
//! per 32 weights. That halves the instructions per weight byte of the f32 row kernels
//! (shift, `vpermps` and FMA per 16 weights), which are compute-bound per core on Zen 4.
//!
//! Numerics are the prompt GEMM's: activations rounded to bf16 (by the caller),
//! weights exact in bf16, products exact, f32 sums (`vdpbf16ps` treats subnormal
//! inputs as zero).

use super::super::portable;
use super::Avx512Bf16;
use super::avx2::{SPREAD_ROWS, spread_rows};
use super::avx512;
use crate::formats::e2m1;
use core::arch::x86_64::*;

/// Most tokens per call; the GEMM takes over from 8.
pub(crate) const MAX_TOKENS: usize = 7;

/// Token proving the features of [`Avx512Bf16`]: the AVX-512 level (word permutes and
/// masks need AVX-512 BW) and AVX-512 BF16 (the dot products).
///
/// [`Avx512Bf16`]: edge_core::simd::Avx512Bf16
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bf16Gemv(());

impl Bf16Gemv {
    /// The kernels, proven runnable by the [`Avx512Bf16`] token.
    pub(crate) fn new(_: Avx512Bf16) -> Self {
        Bf16Gemv(())
    }

    /// bf16 weights: `out[r·tokens + t] = Σ_k w[r][k] · x[t·n_in + k]` for the
    /// `out.len()/tokens` rows of little-endian bf16 bytes in `w` (`2·n_in` each) and
    /// bf16 activations `x` (`[tokens, n_in]`, `1 <= tokens <= MAX_TOKENS`).
    pub(crate) fn bf16_rows(
        self,
        w: &[u8],
        n_in: usize,
        x: &[u16],
        tokens: usize,
        out: &mut [f32],
    ) {
        // SAFETY (both): the token exists only if detection found every feature the
        // kernels enable.
        if tokens == 1 && n_in.is_multiple_of(64) {
            return unsafe { bf16_rows_in_runs(w, n_in, x, out) };
        }
        unsafe {
            rows(out, tokens, |r, t| {
                bf16_row_dispatch(&w[2 * r * n_in..][..2 * n_in], x, n_in, t)
            })
        }
    }

    /// NVFP4 weights: as [`Bf16Gemv::bf16_rows`] with `ŵ = E2M1[q] · e4m3(SF) · 2⁻⁸` (no
    /// global scale) and `x` in [`Perm::Nibble32x4`] order.
    ///
    /// [`Perm::Nibble32x4`]: crate::linear::fast::Perm::Nibble32x4
    pub(crate) fn nvfp4_rows(
        self,
        codes: &[u8],
        scales: &[u8],
        n_in: usize,
        x: &[u16],
        tokens: usize,
        out: &mut [f32],
    ) {
        let row = |r: usize| {
            (
                &codes[r * n_in / 2..][..n_in / 2],
                &scales[r * n_in / 16..][..n_in / 16],
            )
        };
        // SAFETY: as above.
        unsafe {
            rows(out, tokens, |r, t| {
                let (c, s) = row(r);
                nvfp4_row_dispatch(c, s, x, n_in, t)
            })
        }
    }
}

/// Fills `out` (`[rows, tokens]`) with `row(r, tokens)`.
#[inline]
fn rows(out: &mut [f32], tokens: usize, row: impl Fn(usize, usize) -> [f32; MAX_TOKENS]) {
    for (r, y) in out.chunks_exact_mut(tokens).enumerate() {
        y.copy_from_slice(&row(r, tokens)[..tokens]);
    }
}

/// Runs `$kernel::<G>` for the token count `$t` and widens its result to `MAX_TOKENS`.
macro_rules! by_tokens {
    ($t:expr, $kernel:ident ( $($arg:expr),* )) => {{
        let mut y = [0.0f32; MAX_TOKENS];
        match $t {
            1 => y[..1].copy_from_slice(&$kernel::<1>($($arg),*)),
            2 => y[..2].copy_from_slice(&$kernel::<2>($($arg),*)),
            3 => y[..3].copy_from_slice(&$kernel::<3>($($arg),*)),
            4 => y[..4].copy_from_slice(&$kernel::<4>($($arg),*)),
            5 => y[..5].copy_from_slice(&$kernel::<5>($($arg),*)),
            6 => y[..6].copy_from_slice(&$kernel::<6>($($arg),*)),
            7 => y[..7].copy_from_slice(&$kernel::<7>($($arg),*)),
            t => panic!("bf16 GEMV takes 1..={MAX_TOKENS} tokens, got {t}"),
        }
        y
    }};
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,avx512bf16")]
fn bf16_row_dispatch(w: &[u8], x: &[u16], n: usize, tokens: usize) -> [f32; MAX_TOKENS] {
    by_tokens!(tokens, bf16_row(w, x, n))
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,avx512bf16")]
fn nvfp4_row_dispatch(
    codes: &[u8],
    scales: &[u8],
    x: &[u16],
    n: usize,
    tokens: usize,
) -> [f32; MAX_TOKENS] {
    by_tokens!(tokens, nvfp4_row(codes, scales, x, n))
}

/// Reinterprets 32 packed bf16 values.
#[inline]
#[target_feature(enable = "avx512f,avx512bf16")]
fn bh(v: __m512i) -> __m512bh {
    // SAFETY: both are 64-byte plain vector types; every bit pattern is valid for both.
    unsafe { std::mem::transmute::<__m512i, __m512bh>(v) }
}

/// One token against rows of `2n` bytes (`n` a multiple of 64), taken
/// [`SPREAD_ROWS`] at a time from the runs of [`spread_rows`] and read in lockstep, as
/// the one-token integer kernels do: several sequential weight streams keep more DRAM
/// requests in flight than one (this is `lm_head` at every decode step), and each
/// activation load serves [`SPREAD_ROWS`] rows.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,avx512bf16")]
fn bf16_rows_in_runs(w: &[u8], n: usize, x: &[u16], out: &mut [f32]) {
    let row = 2 * n;
    let (passes, rest) = spread_rows(out.len());
    for pass in passes {
        let mut ws = [&w[..0]; SPREAD_ROWS];
        for (wk, &r) in ws.iter_mut().zip(&pass) {
            *wk = &w[r * row..][..row];
        }
        for (&r, y) in pass.iter().zip(bf16_row_group(ws, x, n)) {
            out[r] = y;
        }
    }
    for r in rest {
        [out[r]] = bf16_row_group([&w[r * row..][..row]], x, n);
    }
}

/// `R` bf16 rows (`2n` bytes each, `n` a multiple of 64) against one token.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,avx512bf16")]
fn bf16_row_group<const R: usize>(w: [&[u8]; R], x: &[u16], n: usize) -> [f32; R] {
    assert!(n.is_multiple_of(64) && x.len() >= n && w.iter().all(|w| w.len() >= 2 * n));
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    for i in (0..n).step_by(64) {
        // SAFETY: i + 64 <= n: elements [i, i + 64) of `x` and bytes [2i, 2i + 128) of
        // every row are in bounds (asserted lengths).
        unsafe {
            let xp = x.as_ptr().add(i);
            let x0 = bh(_mm512_loadu_si512(xp.cast()));
            let x1 = bh(_mm512_loadu_si512(xp.add(32).cast()));
            for (a, w) in acc.iter_mut().zip(w) {
                avx512::prefetch(w, 2 * i);
                avx512::prefetch(w, 2 * i + 64);
                let wp = w.as_ptr().add(2 * i);
                a[0] = _mm512_dpbf16_ps(a[0], bh(_mm512_loadu_si512(wp.cast())), x0);
                a[1] = _mm512_dpbf16_ps(a[1], bh(_mm512_loadu_si512(wp.add(64).cast())), x1);
            }
        }
    }
    acc.map(|[a, b]| _mm512_reduce_add_ps(_mm512_add_ps(a, b)))
}

/// One bf16 row (`2n` bytes) against `G` tokens.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,avx512bf16")]
fn bf16_row<const G: usize>(w: &[u8], x: &[u16], n: usize) -> [f32; G] {
    assert!(w.len() >= 2 * n && x.len() >= G * n);
    let mut acc = [[_mm512_setzero_ps(); 2]; G];
    let mut i = 0;
    while i + 64 <= n {
        avx512::prefetch(w, 2 * i);
        avx512::prefetch(w, 2 * i + 64);
        // SAFETY: i + 64 <= n: bytes [2i, 2i + 128) of `w` and elements [i, i + 64) of
        // each token's row of `x` are in bounds (asserted lengths).
        unsafe {
            let wp = w.as_ptr().add(2 * i);
            let w0 = bh(_mm512_loadu_si512(wp.cast()));
            let w1 = bh(_mm512_loadu_si512(wp.add(64).cast()));
            for (t, a) in acc.iter_mut().enumerate() {
                let xp = x.as_ptr().add(t * n + i);
                a[0] = _mm512_dpbf16_ps(a[0], w0, bh(_mm512_loadu_si512(xp.cast())));
                a[1] = _mm512_dpbf16_ps(a[1], w1, bh(_mm512_loadu_si512(xp.add(32).cast())));
            }
        }
        i += 64;
    }
    while i < n {
        let m: __mmask32 = if n - i >= 32 {
            !0
        } else {
            (1u32 << (n - i)) - 1
        };
        // SAFETY: the masked loads read only elements [i, min(n, i + 32)) of the row of
        // `w` and of each token's row of `x`, all in bounds.
        unsafe {
            let w0 = bh(_mm512_maskz_loadu_epi16(m, w.as_ptr().add(2 * i).cast()));
            for (t, a) in acc.iter_mut().enumerate() {
                let xv = _mm512_maskz_loadu_epi16(m, x.as_ptr().add(t * n + i).cast());
                a[0] = _mm512_dpbf16_ps(a[0], w0, bh(xv));
            }
        }
        i += 32;
    }
    acc.map(|[a, b]| _mm512_reduce_add_ps(_mm512_add_ps(a, b)))
}

/// The bf16 bits of each E2M1 value, twice: `vpermw` reads five index bits, and the
/// fifth (the next nibble's low bit) must not matter.
const E2M1_BF16_X2: [u16; 32] = {
    let mut t = [0u16; 32];
    let mut i = 0;
    while i < 32 {
        t[i] = (e2m1::VALUES[i % 16].to_bits() >> 16) as u16;
        i += 1;
    }
    t
};

/// One NVFP4 row (`n/2` code bytes, `n/16` scales) against `G` tokens whose activations
/// are in `Nibble32x4` order. Per 128-input chunk: vector `j` of weights is nibble `j`
/// of every 16-bit word of the 64 code bytes; 32-bit lane `L` of it pairs inputs
/// `8L + j` and `8L + 4 + j`, both in block `L/2`, so one unscaled partial sum per lane
/// takes its block scale once.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,avx512bf16")]
fn nvfp4_row<const G: usize>(codes: &[u8], scales: &[u8], x: &[u16], n: usize) -> [f32; G] {
    assert!(codes.len() >= n / 2 && scales.len() >= n / 16 && x.len() >= G * n);
    let chunks = n / 128;
    // SAFETY: the table holds 32 u16s (64 bytes).
    let lut = unsafe { _mm512_loadu_si512(E2M1_BF16_X2.as_ptr().cast()) };
    let dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    let mut sums = [_mm512_setzero_ps(); G];
    let mut sc = [0.0f32; 128];
    for c0 in (0..chunks).step_by(16) {
        let nc = (chunks - c0).min(16);
        avx512::decode_scales(&scales[8 * c0..8 * (c0 + nc)], &mut sc[..8 * nc]);
        for c in c0..c0 + nc {
            avx512::prefetch(codes, 64 * c);
            // SAFETY: chunk c reads code bytes [64c, 64c + 64) (64·chunks <= n/2),
            // scales [8(c − c0), +8) of `sc` (8·nc <= 128) and elements [128c, 128c + 128)
            // of each token's row of `x` (128·chunks <= n).
            unsafe {
                let v = _mm512_loadu_si512(codes.as_ptr().add(64 * c).cast());
                let w = [
                    bh(_mm512_permutexvar_epi16(v, lut)),
                    bh(_mm512_permutexvar_epi16(_mm512_srli_epi16::<4>(v), lut)),
                    bh(_mm512_permutexvar_epi16(_mm512_srli_epi16::<8>(v), lut)),
                    bh(_mm512_permutexvar_epi16(_mm512_srli_epi16::<12>(v), lut)),
                ];
                let s8 = _mm256_loadu_ps(sc.as_ptr().add(8 * (c - c0)));
                let s = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(s8));
                for (t, sum) in sums.iter_mut().enumerate() {
                    let xp = x.as_ptr().add(t * n + 128 * c);
                    let xv = |j: usize| bh(_mm512_loadu_si512(xp.add(32 * j).cast()));
                    // Two chains halve the dependency on vdpbf16ps latency.
                    let p0 = _mm512_dpbf16_ps(_mm512_setzero_ps(), w[0], xv(0));
                    let p1 = _mm512_dpbf16_ps(_mm512_setzero_ps(), w[1], xv(1));
                    let p0 = _mm512_dpbf16_ps(p0, w[2], xv(2));
                    let p1 = _mm512_dpbf16_ps(p1, w[3], xv(3));
                    *sum = _mm512_fmadd_ps(_mm512_add_ps(p0, p1), s, *sum);
                }
            }
        }
    }
    let mut y = sums.map(|s| _mm512_reduce_add_ps(s));
    let full = 128 * chunks;
    if full < n {
        // A natural-order tail of fewer than 128 inputs.
        let mut wt = [0.0f32; 128];
        let wt = &mut wt[..n - full];
        portable::decode_nvfp4(&codes[full / 2..n / 2], &scales[full / 16..n / 16], wt);
        for (t, yt) in y.iter_mut().enumerate() {
            let xt = &x[t * n + full..t * n + n];
            *yt += wt
                .iter()
                .zip(xt)
                .map(|(w, &b)| w * f32::from_bits(u32::from(b) << 16))
                .sum::<f32>();
        }
    }
    y
}
