//! One-row (decode) attention over paged KV rows with AVX-512: the query heads that
//! share a KV head (`G` of them) are register-tiled against each row, so a row is
//! loaded and decoded once for all of them, and the value sums stay in registers
//! across a page instead of being loaded and stored per row (the auto-vectorised loop
//! did that, and at 16K cached tokens it ran at under 5 GB/s of FP8 rows).
//!
//! Rows are read in their page format: f32 directly; bf16 widened by a shift; FP8
//! E4M3 through `vcvtph2ps` on the byte shifted into an f16 (the f16 is the E4M3 value
//! times 2⁻⁸, see [`super::kv_rows`]). The 2⁸ and the layer's scale are folded into the
//! score scale (keys) and into the softmax weights (values), so no row pays for them.

use core::arch::x86_64::*;
use edge_kvcache::BlockId;
use edge_kvcache::memory::{HostKv, KvRun};

use super::simd::weight_exp;

/// Whether [`attend`] runs at the current SIMD level: [`edge_core::simd::SimdLevel::Avx512`],
/// whose token proves every feature it enables (AVX-512 F/BW/VL, AVX2, FMA, F16C).
pub fn available() -> bool {
    edge_core::simd::token().avx512().is_some()
}

/// A run of rows in one page format, read 16 values at a time as f32.
trait Rows: Copy {
    /// Values `at..at + 16` (the caller keeps them inside the run).
    unsafe fn load(self, at: usize) -> __m512;
}

#[derive(Clone, Copy)]
struct F32Rows(*const f32);
#[derive(Clone, Copy)]
struct Bf16Rows(*const u16);
/// FP8 E4M3 codes, read as the E4M3 value times 2⁻⁸.
#[derive(Clone, Copy)]
struct Fp8Rows(*const u8);

impl Rows for F32Rows {
    #[inline(always)]
    unsafe fn load(self, at: usize) -> __m512 {
        // SAFETY: the caller keeps `at..at + 16` inside the run.
        unsafe { _mm512_loadu_ps(self.0.add(at)) }
    }
}

impl Rows for Bf16Rows {
    #[inline(always)]
    unsafe fn load(self, at: usize) -> __m512 {
        // SAFETY: as above; 16 bf16 values are 32 bytes.
        unsafe {
            let h = _mm256_loadu_si256(self.0.add(at).cast());
            _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
        }
    }
}

impl Rows for Fp8Rows {
    /// Sign-extending the byte puts the sign in bit 15 (and a copy in bit 14, cleared)
    /// and, shifted by 7, the exponent and mantissa in f16 position. Code 0x7F (NaN in
    /// E4M3) reads as a number: [`attend`] is not used on pages that ever held a NaN.
    #[inline(always)]
    unsafe fn load(self, at: usize) -> __m512 {
        // SAFETY: as above; 16 codes are 16 bytes.
        unsafe {
            let w = _mm256_cvtepi8_epi16(_mm_loadu_si128(self.0.add(at).cast()));
            let h = _mm256_and_si256(_mm256_slli_epi16::<7>(w), _mm256_set1_epi16(!0x4000));
            _mm512_cvtph_ps(h)
        }
    }
}

/// What one call attends: one KV head of one sequence, `visible` rows.
pub struct Group<'a> {
    /// The layer's pages.
    pub kv: &'a HostKv,
    /// The sequence's page table.
    pub pages: &'a [BlockId],
    /// The KV head.
    pub head: usize,
    /// Rows the query sees.
    pub visible: usize,
}

/// Softmax attention of the query heads `qs` (`[G, d]`) over the group's rows, into
/// `out` (`[G, d]`). Returns false (doing nothing) for shapes it does not tile (more
/// than 8 query heads per KV head, a head width not a multiple of 64) and for pages
/// that may hold a NaN.
///
/// # Safety
/// The CPU must have the features [`available`] checks.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub unsafe fn attend(qs: &[f32], g: &Group<'_>, scale: f32, out: &mut [f32]) -> bool {
    let d = g.kv.spec().head_dim;
    if d == 0 || !d.is_multiple_of(64) || qs.len() != out.len() || !qs.len().is_multiple_of(d) {
        return false;
    }
    if g.kv.may_hold_nan() {
        return false;
    }
    macro_rules! heads {
        ($($n:literal)*) => {
            match qs.len() / d {
                // SAFETY: same features; shapes checked above.
                $($n => unsafe { attend_heads::<$n>(qs, g, scale, out) },)*
                _ => return false,
            }
        };
    }
    heads!(1 2 3 4 5 6 7 8);
    true
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn attend_heads<const G: usize>(qs: &[f32], g: &Group<'_>, scale: f32, out: &mut [f32]) {
    let (kv, visible) = (g.kv, g.visible);
    let (d, block) = (kv.spec().head_dim, kv.block_size());
    let pages = &g.pages[..visible.div_ceil(block)];
    // FP8 rows read as value · 2⁻⁸; the layer's scale multiplies every value.
    let (k_mul, v_mul) = match kv.dtype() {
        edge_kvcache::KvDType::Fp8E4M3 => (256.0 * kv.spec().k_scale, 256.0 * kv.spec().v_scale),
        _ => (1.0, 1.0),
    };
    let mut scores = vec![0.0f32; G * visible];
    let rows_of = |p: usize| (visible - p * block).min(block);
    for (p, &page) in pages.iter().enumerate() {
        let rows = rows_of(p);
        let next = Ahead::of(
            pages
                .get(p + 1)
                .map(|&n| kv.keys(n, g.head, 0..rows_of(p + 1))),
            d,
        );
        let at = (&mut scores, p * block, visible);
        // SAFETY: each run holds `rows × d` values; the kernels read exactly those.
        unsafe {
            match kv.keys(page, g.head, 0..rows) {
                KvRun::F32(x) => scores_of::<G, _>(F32Rows(x.as_ptr()), rows, d, qs, at, next),
                KvRun::Bf16(x) => scores_of::<G, _>(Bf16Rows(x.as_ptr()), rows, d, qs, at, next),
                KvRun::Fp8(x) => scores_of::<G, _>(Fp8Rows(x.as_ptr()), rows, d, qs, at, next),
            }
        }
    }
    for head in scores.chunks_exact_mut(visible) {
        softmax(head, scale * k_mul, v_mul);
    }
    out.fill(0.0);
    for (p, &page) in pages.iter().enumerate() {
        let rows = rows_of(p);
        let next = Ahead::of(
            pages
                .get(p + 1)
                .map(|&n| kv.values(n, g.head, 0..rows_of(p + 1))),
            d,
        );
        let at = (&scores[..], p * block, visible, next);
        // SAFETY: as for the keys.
        unsafe {
            match kv.values(page, g.head, 0..rows) {
                KvRun::F32(x) => weighted_sum::<G, _>(F32Rows(x.as_ptr()), rows, d, at, out),
                KvRun::Bf16(x) => weighted_sum::<G, _>(Bf16Rows(x.as_ptr()), rows, d, at, out),
                KvRun::Fp8(x) => weighted_sum::<G, _>(Fp8Rows(x.as_ptr()), rows, d, at, out),
            }
        }
    }
}

/// The next page's rows, to prefetch one row per row processed: they lie elsewhere in
/// memory, so the hardware prefetcher, which follows the current page, would reach
/// them only after the first misses (one core streaming one head's pages got about
/// 6 GB/s of FP8 rows without this). One row per step keeps few requests in flight at
/// a time, which the core does not drop.
#[derive(Clone, Copy)]
struct Ahead {
    ptr: *const u8,
    row_bytes: usize,
    rows: usize,
}

impl Ahead {
    #[inline(always)]
    fn of(run: Option<KvRun<'_>>, d: usize) -> Self {
        let (ptr, bytes, width): (*const u8, usize, usize) = match run {
            None => (std::ptr::null(), 0, 1),
            Some(KvRun::F32(x)) => (x.as_ptr().cast(), 4 * x.len(), 4),
            Some(KvRun::Bf16(x)) => (x.as_ptr().cast(), 2 * x.len(), 2),
            Some(KvRun::Fp8(x)) => (x.as_ptr(), x.len(), 1),
        };
        Ahead {
            ptr,
            row_bytes: width * d,
            rows: bytes / (width * d),
        }
    }

    /// Prefetches row `r` (if the next page has it).
    #[inline(always)]
    fn row(self, r: usize) {
        if r < self.rows {
            for line in (0..self.row_bytes).step_by(64) {
                // SAFETY: a prefetch never faults and changes no memory; the address is
                // inside row `r` of the run.
                unsafe {
                    _mm_prefetch::<_MM_HINT_T0>(self.ptr.add(r * self.row_bytes + line).cast())
                };
            }
        }
    }
}

/// `e^{(s − max)·scale}` normalised to sum to `v_mul`, over one head's scores: the
/// exponentials in one vectorisable loop, the maximum and the sum in 16 lanes (a
/// running scalar sum or `f32::max` fold kept the loops scalar).
#[inline(always)]
fn softmax(head: &mut [f32], scale: f32, v_mul: f32) {
    let mut lanes = [f32::NEG_INFINITY; 16];
    let mut chunks = head.chunks_exact(16);
    for c in &mut chunks {
        for (m, &x) in lanes.iter_mut().zip(c) {
            *m = if x > *m { x } else { *m };
        }
    }
    let max = (chunks.remainder().iter().chain(&lanes))
        .fold(f32::NEG_INFINITY, |m, &x| if x > m { x } else { m });
    let shift = max * scale;
    for s in head.iter_mut() {
        *s = weight_exp(*s * scale - shift);
    }
    let mut sums = [0.0f32; 16];
    let mut chunks = head.chunks_exact(16);
    for c in &mut chunks {
        for (t, &x) in sums.iter_mut().zip(c) {
            *t += x;
        }
    }
    let sum: f32 = chunks.remainder().iter().sum::<f32>() + sums.iter().sum::<f32>();
    let w = v_mul / sum;
    head.iter_mut().for_each(|s| *s *= w);
}

/// Unscaled `q_h · k_r` of the `rows` rows of `keys` for each of the `G` heads, into
/// `scores[h · stride + first + r]`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[inline]
unsafe fn scores_of<const G: usize, R: Rows>(
    keys: R,
    rows: usize,
    d: usize,
    qs: &[f32],
    (scores, first, stride): (&mut Vec<f32>, usize, usize),
    next: Ahead,
) {
    for r in 0..rows {
        next.row(r);
        let (mut a, mut b) = ([_mm512_setzero_ps(); G], [_mm512_setzero_ps(); G]);
        for c in (0..d).step_by(32) {
            // SAFETY: `c + 32 <= d` (d is a multiple of 64) and row `r` is in the run.
            unsafe {
                let (k0, k1) = (keys.load(r * d + c), keys.load(r * d + c + 16));
                for h in 0..G {
                    let q = qs.as_ptr().add(h * d + c);
                    a[h] = _mm512_fmadd_ps(_mm512_loadu_ps(q), k0, a[h]);
                    b[h] = _mm512_fmadd_ps(_mm512_loadu_ps(q.add(16)), k1, b[h]);
                }
            }
        }
        let mut h = 0;
        while h + 4 <= G {
            let sums = reduce4([0, 1, 2, 3].map(|i| _mm512_add_ps(a[h + i], b[h + i])));
            let mut four = [0.0f32; 4];
            // SAFETY: `four` holds 4 floats.
            unsafe { _mm_storeu_ps(four.as_mut_ptr(), sums) };
            for (i, &x) in four.iter().enumerate() {
                scores[(h + i) * stride + first + r] = x;
            }
            h += 4;
        }
        for h in h..G {
            scores[h * stride + first + r] = _mm512_reduce_add_ps(_mm512_add_ps(a[h], b[h]));
        }
    }
}

/// The lane sums of four vectors, `[Σv₀, Σv₁, Σv₂, Σv₃]`, in 13 instructions (four
/// separate horizontal sums take about 32).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[inline]
fn reduce4(v: [__m512; 4]) -> __m128 {
    // Per 128-bit lane: [v0₀+v0₂, v1₀+v1₂, v0₁+v0₃, v1₁+v1₃], then for v2, v3.
    let s01 = _mm512_add_ps(
        _mm512_unpacklo_ps(v[0], v[1]),
        _mm512_unpackhi_ps(v[0], v[1]),
    );
    let s23 = _mm512_add_ps(
        _mm512_unpacklo_ps(v[2], v[3]),
        _mm512_unpackhi_ps(v[2], v[3]),
    );
    // Per 128-bit lane: [Σv0, Σv1, Σv2, Σv3] of that lane's four elements.
    let lo = _mm512_castpd_ps(_mm512_unpacklo_pd(
        _mm512_castps_pd(s01),
        _mm512_castps_pd(s23),
    ));
    let hi = _mm512_castpd_ps(_mm512_unpackhi_pd(
        _mm512_castps_pd(s01),
        _mm512_castps_pd(s23),
    ));
    let u = _mm512_add_ps(lo, hi);
    let high = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(u)));
    let u = _mm256_add_ps(_mm512_castps512_ps256(u), high);
    _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps::<1>(u))
}

/// `out_h += Σ_r w[h · stride + first + r] · v_r` over the `rows` rows of `values`,
/// one tile of 64 columns (4 heads or fewer) or 32 (more) at a time, the tile's sums in
/// registers across the rows.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[inline]
unsafe fn weighted_sum<const G: usize, R: Rows>(
    values: R,
    rows: usize,
    d: usize,
    (w, first, stride, next): (&[f32], usize, usize, Ahead),
    out: &mut [f32],
) {
    if G <= 4 {
        // SAFETY: forwarded; d is a multiple of 64.
        unsafe { weighted_tile::<G, 4, R>(values, rows, d, (w, first, stride, next), out) }
    } else {
        // SAFETY: forwarded; d is a multiple of 32.
        unsafe { weighted_tile::<G, 2, R>(values, rows, d, (w, first, stride, next), out) }
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[inline]
unsafe fn weighted_tile<const G: usize, const T: usize, R: Rows>(
    values: R,
    rows: usize,
    d: usize,
    (w, first, stride, next): (&[f32], usize, usize, Ahead),
    out: &mut [f32],
) {
    for tile in (0..d).step_by(16 * T) {
        let o = out.as_mut_ptr();
        let mut acc = [[_mm512_setzero_ps(); T]; G];
        for (h, acc_h) in acc.iter_mut().enumerate() {
            for (j, a) in acc_h.iter_mut().enumerate() {
                // SAFETY: `h < G`, `tile + 16·T <= d`: inside `out` (`[G, d]`).
                *a = unsafe { _mm512_loadu_ps(o.add(h * d + tile + 16 * j)) };
            }
        }
        for r in 0..rows {
            if tile == 0 {
                next.row(r);
            }
            let mut v = [_mm512_setzero_ps(); T];
            for (j, vj) in v.iter_mut().enumerate() {
                // SAFETY: row `r` of the run, columns inside `d`.
                *vj = unsafe { values.load(r * d + tile + 16 * j) };
            }
            for (h, acc_h) in acc.iter_mut().enumerate() {
                let weight = _mm512_set1_ps(w[h * stride + first + r]);
                for (a, &vj) in acc_h.iter_mut().zip(&v) {
                    *a = _mm512_fmadd_ps(weight, vj, *a);
                }
            }
        }
        for (h, acc_h) in acc.iter().enumerate() {
            for (j, &a) in acc_h.iter().enumerate() {
                // SAFETY: as for the loads.
                unsafe { _mm512_storeu_ps(o.add(h * d + tile + 16 * j), a) };
            }
        }
    }
}
