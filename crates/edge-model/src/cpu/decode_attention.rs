//! One-row (decode) attention over paged KV rows with AVX-512, AVX2 or NEON: the query
//! heads that share a KV head (`G` of them) are register-tiled against each row, so a
//! row is loaded and decoded once for all of them, and the value sums stay in registers
//! across a page instead of being loaded and stored per row (the auto-vectorised loop
//! did that, and at 16K cached tokens it ran at under 5 GB/s of FP8 rows).
//!
//! The kernel is written once over a vector of f32 lanes ([`Lanes`]) and compiled per
//! level: 16 lanes and 32 registers with AVX-512, 8 lanes and 16 registers with AVX2 +
//! FMA + F16C ([`lanes_x86`]), and on aarch64 8 lanes as a pair of 4-lane NEON vectors,
//! 16 pairs in the 32 registers ([`lanes_neon`]; the same code at every Arm level). The
//! tiles are sized from the lanes and registers.
//!
//! Rows are read in their page format: f32 directly; bf16 widened by a shift; FP8
//! E4M3 through an f16 conversion (`vcvtph2ps`, `fcvtl`) of the byte shifted into an
//! f16 (the f16 is the E4M3 value times 2⁻⁸, see [`super::kv_rows`]). The 2⁸ and the
//! layer's scale are folded into the score scale (keys) and into the softmax weights
//! (values), so no row pays for them.

#[cfg(target_arch = "aarch64")]
mod lanes_neon;
#[cfg(target_arch = "x86_64")]
mod lanes_x86;

use edge_core::simd::Token;
use edge_kvcache::BlockId;
use edge_kvcache::memory::{HostKv, KvRun};
#[cfg(target_arch = "aarch64")]
use lanes_neon::{F32x4x2, prefetch};
#[cfg(target_arch = "x86_64")]
use lanes_x86::{F32x8, F32x16, prefetch};

use super::simd::weight_exp;

/// A vector of f32 lanes at one SIMD level.
///
/// # Safety
/// Every method needs its level's CPU features. A pointer argument must have
/// [`Lanes::LANES`] values readable (or writable) from it.
trait Lanes: Copy {
    /// f32 values per vector.
    const LANES: usize;
    /// Vectors of this type the level's registers hold (the kernel's tiles are sized
    /// to fit them).
    const REGISTERS: usize;

    /// All lanes 0.
    unsafe fn zero() -> Self;
    /// All lanes `x`.
    unsafe fn splat(x: f32) -> Self;
    /// f32 values.
    unsafe fn load(p: *const f32) -> Self;
    /// bf16 values, widened.
    unsafe fn load_bf16(p: *const u16) -> Self;
    /// FP8 E4M3 codes, as the E4M3 value times 2⁻⁸. Code 0x7F (NaN in E4M3) reads as a
    /// number: the kernel is not used on pages that ever held a NaN.
    unsafe fn load_fp8(p: *const u8) -> Self;
    /// Writes the lanes to `p`.
    unsafe fn store(self, p: *mut f32);
    /// `self · b + c`, fused.
    unsafe fn fma(self, b: Self, c: Self) -> Self;
    /// `self + b`.
    unsafe fn add(self, b: Self) -> Self;
    /// The sum of the lanes.
    unsafe fn sum(self) -> f32;
    /// The lane sums of four vectors, `[Σv₀, Σv₁, Σv₂, Σv₃]` (four separate
    /// horizontal sums take two to three times the instructions).
    unsafe fn sum4(v: [Self; 4]) -> [f32; 4];
}

/// A run of rows in one page format, read a vector at a time as f32.
trait Rows: Copy {
    /// Values `at..at + V::LANES` (the caller keeps them inside the run).
    unsafe fn load<V: Lanes>(self, at: usize) -> V;
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
    unsafe fn load<V: Lanes>(self, at: usize) -> V {
        // SAFETY: the caller keeps `at..at + V::LANES` inside the run and runs at V's
        // level.
        unsafe { V::load(self.0.add(at)) }
    }
}

impl Rows for Bf16Rows {
    #[inline(always)]
    unsafe fn load<V: Lanes>(self, at: usize) -> V {
        // SAFETY: as above.
        unsafe { V::load_bf16(self.0.add(at)) }
    }
}

impl Rows for Fp8Rows {
    #[inline(always)]
    unsafe fn load<V: Lanes>(self, at: usize) -> V {
        // SAFETY: as above.
        unsafe { V::load_fp8(self.0.add(at)) }
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
/// `out` (`[G, d]`), at the level of [`edge_core::simd::token`] (AVX-512, AVX2 or any
/// NEON level). Returns false (doing nothing) at [`Token::Portable`] (below AVX2 on
/// x86, or forced), for shapes it does not tile (more than 8 query heads per KV head,
/// a head width not a multiple of 64) and for pages that may hold a NaN.
pub fn attend(qs: &[f32], g: &Group<'_>, scale: f32, out: &mut [f32]) -> bool {
    let d = g.kv.spec().head_dim;
    if d == 0 || !d.is_multiple_of(64) || qs.len() != out.len() || !qs.len().is_multiple_of(d) {
        return false;
    }
    if g.kv.may_hold_nan() {
        return false;
    }
    macro_rules! heads {
        ($kernel:ident, $($n:literal)*) => {
            match qs.len() / d {
                // SAFETY: the token matched proves the kernel's features; shapes
                // checked above.
                $($n => unsafe { $kernel::<$n>(qs, g, scale, out) },)*
                _ => return false,
            }
        };
    }
    match edge_core::simd::token() {
        #[cfg(target_arch = "x86_64")]
        Token::Avx512(_) => heads!(attend_avx512, 1 2 3 4 5 6 7 8),
        #[cfg(target_arch = "x86_64")]
        Token::Avx2(_) => heads!(attend_avx2, 1 2 3 4 5 6 7 8),
        // Float kernels gain nothing from dotprod or i8mm: one NEON kernel for all.
        #[cfg(target_arch = "aarch64")]
        Token::Neon | Token::NeonDotprod(_) | Token::NeonI8mm(_) => {
            heads!(attend_neon, 1 2 3 4 5 6 7 8)
        }
        Token::Portable => return false,
    }
    true
}

/// [`attend_heads`] compiled for AVX-512 (F/BW/VL) with the AVX2 set.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn attend_avx512<const G: usize>(qs: &[f32], g: &Group<'_>, scale: f32, out: &mut [f32]) {
    // SAFETY: compiled with, and (by the caller) run with, F32x16's features.
    unsafe { attend_heads::<F32x16, G>(qs, g, scale, out) }
}

/// [`attend_heads`] compiled for AVX2 + FMA + F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn attend_avx2<const G: usize>(qs: &[f32], g: &Group<'_>, scale: f32, out: &mut [f32]) {
    // SAFETY: compiled with, and (by the caller) run with, F32x8's features.
    unsafe { attend_heads::<F32x8, G>(qs, g, scale, out) }
}

/// [`attend_heads`] over NEON (baseline on aarch64; the f16 conversion FP8 rows use is
/// part of it too).
///
/// # Safety
/// As [`attend_heads`] (the shapes; no CPU feature beyond the target's).
#[cfg(target_arch = "aarch64")]
unsafe fn attend_neon<const G: usize>(qs: &[f32], g: &Group<'_>, scale: f32, out: &mut [f32]) {
    // SAFETY: NEON is part of every aarch64 target this builds for.
    unsafe { attend_heads::<F32x4x2, G>(qs, g, scale, out) }
}

/// The kernel for `G` query heads. It and every function it calls are
/// `#[inline(always)]`, so they compile into the caller with its features (the
/// softmax's plain loops vectorise for the level, [`Lanes`]' methods inline).
///
/// # Safety
/// The CPU must have `V`'s features, and the caller must be compiled with them;
/// `qs` and `out` are `[G, d]` with `d` a multiple of 64.
#[inline(always)]
unsafe fn attend_heads<V: Lanes, const G: usize>(
    qs: &[f32],
    g: &Group<'_>,
    scale: f32,
    out: &mut [f32],
) {
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
        // SAFETY: each run holds `rows × d` values; the kernels read exactly those, at
        // the caller's level.
        unsafe {
            match kv.keys(page, g.head, 0..rows) {
                KvRun::F32(x) => scores_of::<V, G, _>(F32Rows(x.as_ptr()), rows, d, qs, at, next),
                KvRun::Bf16(x) => scores_of::<V, G, _>(Bf16Rows(x.as_ptr()), rows, d, qs, at, next),
                KvRun::Fp8(x) => scores_of::<V, G, _>(Fp8Rows(x.as_ptr()), rows, d, qs, at, next),
            }
        }
    }
    for head in scores.chunks_exact_mut(visible) {
        softmax(head, scale * k_mul, v_mul);
    }
    out.fill(0.0);
    // A page's weights row by row (`[rows, G]`): a row's weights lie together.
    let mut weights = vec![0.0f32; block * G];
    for (p, &page) in pages.iter().enumerate() {
        let rows = rows_of(p);
        for (h, head) in scores.chunks_exact(visible).enumerate() {
            for (r, &x) in head[p * block..][..rows].iter().enumerate() {
                weights[r * G + h] = x;
            }
        }
        let next = Ahead::of(
            pages
                .get(p + 1)
                .map(|&n| kv.values(n, g.head, 0..rows_of(p + 1))),
            d,
        );
        let at = (&weights[..rows * G], next);
        // SAFETY: as for the keys.
        unsafe {
            match kv.values(page, g.head, 0..rows) {
                KvRun::F32(x) => weighted_sum::<V, G, _>(F32Rows(x.as_ptr()), rows, d, at, out),
                KvRun::Bf16(x) => weighted_sum::<V, G, _>(Bf16Rows(x.as_ptr()), rows, d, at, out),
                KvRun::Fp8(x) => weighted_sum::<V, G, _>(Fp8Rows(x.as_ptr()), rows, d, at, out),
            }
        }
    }
}

/// Vectors per head in a tile of at most `columns` columns, for `g` heads: the most
/// (a power of two) whose `g` sums take at most half the registers, the other half
/// left to the row's vectors, the weights and the loads in flight. More vectors per
/// head are more independent FMA chains, fewer passes over the page.
const fn tile(g: usize, lanes: usize, registers: usize, columns: usize) -> usize {
    let mut t = columns / lanes;
    while t > 1 && g * t > registers / 2 {
        t /= 2;
    }
    t
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
                unsafe { prefetch(self.ptr.add(r * self.row_bytes + line)) };
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
/// `scores[h · stride + first + r]`, a row at a time in steps of up to 32 columns.
///
/// # Safety
/// As [`attend_heads`]; `keys` holds `rows × d` values.
#[inline(always)]
unsafe fn scores_of<V: Lanes, const G: usize, R: Rows>(
    keys: R,
    rows: usize,
    d: usize,
    qs: &[f32],
    at: (&mut Vec<f32>, usize, usize),
    next: Ahead,
) {
    // SAFETY: forwarded; 32 divides d.
    unsafe {
        match const { tile(G, V::LANES, V::REGISTERS, 32) } {
            1 => scores_tile::<V, G, 1, R>(keys, rows, d, qs, at, next),
            2 => scores_tile::<V, G, 2, R>(keys, rows, d, qs, at, next),
            _ => scores_tile::<V, G, 4, R>(keys, rows, d, qs, at, next),
        }
    }
}

/// [`scores_of`] with `U` vectors per head per step.
#[inline(always)]
unsafe fn scores_tile<V: Lanes, const G: usize, const U: usize, R: Rows>(
    keys: R,
    rows: usize,
    d: usize,
    qs: &[f32],
    (scores, first, stride): (&mut Vec<f32>, usize, usize),
    next: Ahead,
) {
    let n = V::LANES;
    for r in 0..rows {
        next.row(r);
        // SAFETY: the caller's level; `c + U·n <= d` (U·n divides d), row `r` is in
        // the run and `h < G` rows of `qs`.
        let sums = unsafe {
            let mut acc = [[V::zero(); U]; G];
            for c in (0..d).step_by(U * n) {
                for u in 0..U {
                    let k = keys.load::<V>(r * d + c + u * n);
                    for (h, acc_h) in acc.iter_mut().enumerate() {
                        let q = V::load(qs.as_ptr().add(h * d + c + u * n));
                        acc_h[u] = q.fma(k, acc_h[u]);
                    }
                }
            }
            let mut sums = [V::zero(); G];
            for (s, acc_h) in sums.iter_mut().zip(&acc) {
                *s = acc_h[0];
                for &a in &acc_h[1..] {
                    *s = s.add(a);
                }
            }
            sums
        };
        let mut h = 0;
        while h + 4 <= G {
            // SAFETY: the caller's level.
            let four = unsafe { V::sum4([sums[h], sums[h + 1], sums[h + 2], sums[h + 3]]) };
            for (i, &x) in four.iter().enumerate() {
                scores[(h + i) * stride + first + r] = x;
            }
            h += 4;
        }
        for h in h..G {
            // SAFETY: the caller's level.
            scores[h * stride + first + r] = unsafe { sums[h].sum() };
        }
    }
}

/// `out_h += Σ_r w[r · G + h] · v_r` over the `rows` rows of `values`, one
/// tile of up to 64 columns at a time, the tile's sums in registers across the rows.
///
/// # Safety
/// As [`attend_heads`]; `values` holds `rows × d` values.
#[inline(always)]
unsafe fn weighted_sum<V: Lanes, const G: usize, R: Rows>(
    values: R,
    rows: usize,
    d: usize,
    at: (&[f32], Ahead),
    out: &mut [f32],
) {
    // SAFETY: forwarded; 64 divides d.
    unsafe {
        match const { tile(G, V::LANES, V::REGISTERS, 64) } {
            1 => weighted_tile::<V, G, 1, R>(values, rows, d, at, out),
            2 => weighted_tile::<V, G, 2, R>(values, rows, d, at, out),
            4 => weighted_tile::<V, G, 4, R>(values, rows, d, at, out),
            _ => weighted_tile::<V, G, 8, R>(values, rows, d, at, out),
        }
    }
}

/// [`weighted_sum`] in tiles of `T` vectors.
#[inline(always)]
unsafe fn weighted_tile<V: Lanes, const G: usize, const T: usize, R: Rows>(
    values: R,
    rows: usize,
    d: usize,
    (w, next): (&[f32], Ahead),
    out: &mut [f32],
) {
    let n = V::LANES;
    let o = out.as_mut_ptr();
    for tile in (0..d).step_by(n * T) {
        // SAFETY: the caller's level; `h < G` and `tile + T·n <= d` (T·n divides d):
        // inside `out` (`[G, d]`) and inside row `r` of the run; `w` is `[rows, G]`.
        unsafe {
            let mut acc = [[V::zero(); T]; G];
            for (h, acc_h) in acc.iter_mut().enumerate() {
                for (j, a) in acc_h.iter_mut().enumerate() {
                    *a = V::load(o.add(h * d + tile + n * j));
                }
            }
            for r in 0..rows {
                if tile == 0 {
                    next.row(r);
                }
                let (wr, mut weights) = (w.as_ptr().add(r * G), [V::zero(); G]);
                for (h, weight) in weights.iter_mut().enumerate() {
                    *weight = V::splat(*wr.add(h));
                }
                for j in 0..T {
                    let v = values.load::<V>(r * d + tile + n * j);
                    for (acc_h, &weight) in acc.iter_mut().zip(&weights) {
                        acc_h[j] = weight.fma(v, acc_h[j]);
                    }
                }
            }
            for (h, acc_h) in acc.iter().enumerate() {
                for (j, &a) in acc_h.iter().enumerate() {
                    a.store(o.add(h * d + tile + n * j));
                }
            }
        }
    }
}
