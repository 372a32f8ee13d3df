//! The gated delta rule core (spec §4.8): the single-token recurrence and the chunked
//! form HF uses for every multi-token forward. All in f32; the state is `[dk, dv]`.

use super::simd::{
    Structure, axpy, dispatch, flush_negligible, matmul_acc, matmul_acc_structured, weight_exp,
};

/// One head's inputs over `len` tokens: `q` and `k` `[len, dk]` (already L2-normalised,
/// `q` scaled by `1/√dk`), `v` `[len, dv]`, `beta` and `g` `[len]`.
pub struct HeadInputs<'a> {
    /// Queries.
    pub q: &'a [f32],
    /// Keys.
    pub k: &'a [f32],
    /// Values.
    pub v: &'a [f32],
    /// Write strengths β ∈ (0, 1).
    pub beta: &'a [f32],
    /// Log decays g ≤ 0.
    pub g: &'a [f32],
    /// Key width.
    pub dk: usize,
    /// Value width.
    pub dv: usize,
}

/// Token-by-token recurrence; updates `state` and writes `[len, dv]` to `out`.
pub fn recurrent(inp: &HeadInputs, state: &mut [f32], out: &mut [f32]) {
    dispatch!(recurrent_portable, (inp: &HeadInputs, state: &mut [f32], out: &mut [f32]) {
        recurrent_body(inp, state, out)
    })
}

/// Two passes over the state per token (it is the layer's largest operand at decode, and
/// at decode it comes from DRAM: the weight stream evicts it between tokens). The first
/// only reads: `a = Sᵀk`, `b = Sᵀq`. With `S' = e^g·S`, `S'ᵀk = e^g·a` gives the update
/// `δ = β(v − e^g·a)` and `o = S''ᵀq = e^g·b + (k·q)·δ`, so the second pass writes
/// `S'' = e^g·S + k⊗δ` once (three state sweeps instead of four).
#[inline(always)]
fn recurrent_body(inp: &HeadInputs, state: &mut [f32], out: &mut [f32]) {
    let (dk, dv) = (inp.dk, inp.dv);
    let mut sk = vec![0.0f32; dv];
    for t in 0..inp.beta.len() {
        let (q, k) = (&inp.q[t * dk..][..dk], &inp.k[t * dk..][..dk]);
        let v = &inp.v[t * dv..][..dv];
        let decay = weight_exp(inp.g[t]);
        let o = &mut out[t * dv..][..dv];
        sk.fill(0.0);
        o.fill(0.0);
        for ((row, &ki), &qi) in state.chunks_exact(dv).zip(k).zip(q) {
            for ((&s, a), b) in row.iter().zip(sk.iter_mut()).zip(o.iter_mut()) {
                *a += ki * s;
                *b += qi * s;
            }
        }
        let kq: f32 = k.iter().zip(q).map(|(&a, &b)| a * b).sum();
        for ((a, &vj), y) in sk.iter_mut().zip(v).zip(o.iter_mut()) {
            *a = inp.beta[t] * (vj - decay * *a);
            *y = decay * *y + kq * *a;
        }
        for (row, &ki) in state.chunks_exact_mut(dv).zip(k) {
            for (s, &d) in row.iter_mut().zip(sk.iter()) {
                *s = flush_negligible(decay * *s + ki * d);
            }
        }
    }
}

/// Chunk length of the chunked algorithm (HF's default).
pub const CHUNK: usize = 64;

/// The chunked algorithm over chunks of [`CHUNK`] tokens (the last one shorter; HF pads
/// with zero-β, zero-g tokens, which changes nothing). Same result as [`recurrent`] up
/// to f32 rounding.
pub fn chunked(inp: &HeadInputs, state: &mut [f32], out: &mut [f32]) {
    let len = inp.beta.len();
    let mut start = 0;
    let mut scratch = ChunkScratch::new(inp.dk, inp.dv);
    while start < len {
        let n = CHUNK.min(len - start);
        scratch.run(
            inp,
            start,
            n,
            state,
            &mut out[start * inp.dv..][..n * inp.dv],
        );
        start += n;
    }
}

struct ChunkScratch {
    gamma: Vec<f32>,
    /// `T`, then `T·diag(β)` and `T·diag(β e^γ)`, `[CHUNK, CHUNK]`.
    t: Vec<f32>,
    /// `K Kᵀ`, then `(Q Kᵀ) ⊙ D`, `[n, n]`.
    gram: Vec<f32>,
    /// `Kᵀ`, `[dk, n]`.
    kt: Vec<f32>,
    /// `D[r, s] = e^{γ_r − γ_s}` for `s ≤ r`, `[n, n]` (one exp per pair, shared by
    /// both masked products).
    decay: Vec<f32>,
    u: Vec<f32>,
    /// `W`, then `diag(e^{γ_last − γ}) K`, `[n, dk]`.
    w: Vec<f32>,
    vnew: Vec<f32>,
    row: Vec<f32>,
    dk: usize,
    dv: usize,
}

impl ChunkScratch {
    #[inline(always)]
    fn new(dk: usize, dv: usize) -> Self {
        ChunkScratch {
            gamma: vec![0.0; CHUNK],
            t: vec![0.0; CHUNK * CHUNK],
            gram: vec![0.0; CHUNK * CHUNK],
            kt: vec![0.0; dk * CHUNK],
            decay: vec![0.0; CHUNK * CHUNK],
            u: vec![0.0; CHUNK * dv],
            w: vec![0.0; CHUNK * dk],
            vnew: vec![0.0; CHUNK * dv],
            row: vec![0.0; CHUNK],
            dk,
            dv,
        }
    }

    /// One chunk, compiled for the best SIMD level available.
    fn run(
        &mut self,
        inp: &HeadInputs,
        start: usize,
        n: usize,
        state: &mut [f32],
        out: &mut [f32],
    ) {
        let this = self;
        dispatch!(run_portable, (this: &mut ChunkScratch, inp: &HeadInputs, start: usize, n: usize, state: &mut [f32], out: &mut [f32]) {
            this.run_body(inp, start, n, state, out)
        })
    }

    /// The chunk as small matmuls ([`matmul_acc`]); the order of operations within each
    /// product differs from HF's, the algebra does not.
    #[inline(always)]
    fn run_body(
        &mut self,
        inp: &HeadInputs,
        start: usize,
        n: usize,
        state: &mut [f32],
        out: &mut [f32],
    ) {
        let (dk, dv) = (self.dk, self.dv);
        let q = &inp.q[start * dk..][..n * dk];
        let k = &inp.k[start * dk..][..n * dk];
        let v = &inp.v[start * dv..][..n * dv];
        let beta = &inp.beta[start..start + n];
        let mut acc = 0.0;
        for (gm, &g) in self.gamma.iter_mut().zip(&inp.g[start..start + n]) {
            acc += g;
            *gm = acc;
        }
        let gamma = &self.gamma[..n];
        let dmat = &mut self.decay[..n * n];
        for r in 0..n {
            for s in 0..=r {
                dmat[r * n + s] = weight_exp(gamma[r] - gamma[s]);
            }
        }
        let dmat = &self.decay[..n * n];
        let decay = |r: usize, s: usize| dmat[r * n + s];
        let kt = &mut self.kt[..dk * n];
        for (s, ks) in k.chunks_exact(dk).enumerate() {
            for (i, &x) in ks.iter().enumerate() {
                kt[i * n + s] = x;
            }
        }
        let kt = &self.kt[..dk * n];
        let gram = &mut self.gram[..n * n];

        // T = (I + A)^{-1}, A = strict-lower(β_r k_r·k_s D_rs), by forward substitution
        // exactly as HF builds it: attn[i, :i] = row + row · attn[:i, :i].
        gram.fill(0.0);
        // Only the strict lower part is read.
        matmul_acc_structured::<64>(
            (n, n, dk),
            1.0,
            (k, (dk, 1), kt, n),
            gram,
            n,
            Structure::LowerC,
        );
        let t = &mut self.t;
        for r in 0..n {
            for s in 0..r {
                t[r * CHUNK + s] = flush_negligible(-beta[r] * gram[r * n + s] * decay(r, s));
            }
        }
        for i in 1..n {
            // new[s] = row[s] + Σ_{s<m<i} row[m]·t[m][s], accumulated row by row so the
            // inner loop runs over contiguous memory.
            self.row[..i].copy_from_slice(&t[i * CHUNK..][..i]);
            let (done, rest) = t.split_at_mut(i * CHUNK);
            let new = &mut rest[..i];
            for m in 1..i {
                axpy(self.row[m], &done[m * CHUNK..][..m], &mut new[..m]);
            }
        }
        // T·diag(β), zero above the diagonal.
        for r in 0..n {
            t[r * CHUNK + r] = 1.0;
            for s in r + 1..n {
                t[r * CHUNK + s] = 0.0;
            }
            for s in 0..=r {
                t[r * CHUNK + s] = flush_negligible(t[r * CHUNK + s] * beta[s]);
            }
        }
        // U = T diag(β) V, then W = T diag(β e^γ) K.
        let (u, w) = (&mut self.u[..n * dv], &mut self.w[..n * dk]);
        u.fill(0.0);
        matmul_acc_structured::<64>(
            (n, dv, n),
            1.0,
            (t, (CHUNK, 1), v, dv),
            u,
            dv,
            Structure::LowerA,
        );
        let mut exp_gamma = [0.0f32; CHUNK];
        for (e, &g) in exp_gamma.iter_mut().zip(gamma) {
            *e = weight_exp(g);
        }
        for r in 0..n {
            for s in 0..=r {
                t[r * CHUNK + s] = flush_negligible(t[r * CHUNK + s] * exp_gamma[s]);
            }
        }
        w.fill(0.0);
        matmul_acc_structured::<64>(
            (n, dk, n),
            1.0,
            (t, (CHUNK, 1), k, dk),
            w,
            dk,
            Structure::LowerA,
        );
        // V' = U − W S.
        let vnew = &mut self.vnew[..n * dv];
        vnew.copy_from_slice(u);
        matmul_acc::<64>((n, dv, dk), -1.0, w, (dk, 1), state, dv, vnew, dv);
        // O = diag(e^γ) Q S + ((Q Kᵀ) ⊙ D) V', D zero above the diagonal.
        out.fill(0.0);
        matmul_acc::<64>((n, dv, dk), 1.0, q, (dk, 1), state, dv, out, dv);
        for (o, &eg) in out.chunks_exact_mut(dv).zip(&exp_gamma) {
            o.iter_mut().for_each(|x| *x = flush_negligible(*x * eg));
        }
        gram.fill(0.0);
        // Masked to the diagonal and below just after.
        matmul_acc_structured::<64>(
            (n, n, dk),
            1.0,
            (q, (dk, 1), kt, n),
            gram,
            n,
            Structure::LowerC,
        );
        for r in 0..n {
            for s in 0..n {
                gram[r * n + s] = if s <= r {
                    flush_negligible(gram[r * n + s] * decay(r, s))
                } else {
                    0.0
                };
            }
        }
        matmul_acc_structured::<64>(
            (n, dv, n),
            1.0,
            (gram, (n, 1), vnew, dv),
            out,
            dv,
            Structure::LowerA,
        );
        // S ← e^{γ_last} S + (diag(e^{γ_last − γ}) K)ᵀ V'.
        let last = gamma[n - 1];
        let el = weight_exp(last);
        state
            .iter_mut()
            .for_each(|x| *x = flush_negligible(*x * el));
        for (s, (kd, ks)) in w.chunks_exact_mut(dk).zip(k.chunks_exact(dk)).enumerate() {
            let f = weight_exp(last - gamma[s]);
            for (d, &x) in kd.iter_mut().zip(ks) {
                *d = flush_negligible(x * f);
            }
        }
        matmul_acc::<64>((dk, dv, n), 1.0, w, (1, dk), vnew, dv, state, dv);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::simd::NEGLIGIBLE;
    use edge_core::rng::SeededRng;

    /// Uniform in [−0.5, 0.5).
    fn draw(rng: &mut SeededRng) -> f32 {
        rng.uniform(-0.5, 0.5)
    }

    fn normalised(rows: usize, d: usize, rng: &mut SeededRng, scale: f32) -> Vec<f32> {
        let mut x: Vec<f32> = (0..rows * d).map(|_| draw(rng)).collect();
        for r in x.chunks_mut(d) {
            crate::cpu::norm::l2_norm(r);
            r.iter_mut().for_each(|v| *v *= scale);
        }
        x
    }

    /// One head's random inputs: L2-normalised `q` and `k`, `v` scaled by `v_scale`, and
    /// `beta`/`g` made by the given maps from (token, uniform draw in [−0.5, 0.5)).
    struct Head {
        q: Vec<f32>,
        k: Vec<f32>,
        v: Vec<f32>,
        beta: Vec<f32>,
        g: Vec<f32>,
        dk: usize,
        dv: usize,
    }

    impl Head {
        fn random(
            (len, dk, dv): (usize, usize, usize),
            rng: &mut SeededRng,
            v_scale: f32,
            beta: impl Fn(usize, f32) -> f32,
            g: impl Fn(usize, f32) -> f32,
        ) -> Self {
            let q = normalised(len, dk, rng, 1.0 / (dk as f32).sqrt());
            let k = normalised(len, dk, rng, 1.0);
            let v = (0..len * dv).map(|_| draw(rng) * v_scale).collect();
            let beta = (0..len).map(|i| beta(i, draw(rng))).collect();
            let g = (0..len).map(|i| g(i, draw(rng))).collect();
            Head {
                q,
                k,
                v,
                beta,
                g,
                dk,
                dv,
            }
        }

        fn inputs(&self) -> HeadInputs<'_> {
            HeadInputs {
                q: &self.q,
                k: &self.k,
                v: &self.v,
                beta: &self.beta,
                g: &self.g,
                dk: self.dk,
                dv: self.dv,
            }
        }
    }

    /// A head forgetting fast (`g` about −2 per token with a few −90 steps, so a chunk's
    /// decays span e^−300 and lower):
    /// the chunked and token paths still agree, and neither leaves a subnormal in the
    /// state or the outputs (each would cost a microcode assist per vector operation on
    /// Intel cores, see [`super::simd::NEGLIGIBLE`]).
    #[test]
    fn fast_forgetting_heads_stay_clear_of_subnormals() {
        let (len, dk, dv) = (130, 8, 6);
        let mut rng = SeededRng::from_seed(11);
        // Weak writes (some nearly none, as a gate deep in its sigmoid's tail gives) and
        // steady decay: products of decay factors near 2⁻⁶⁰ with small β·k·k, and a few
        // huge steps.
        let head = Head::random(
            (len, dk, dv),
            &mut rng,
            1e-3,
            |i, u| (u + 0.5) * if i % 13 == 3 { 1e-25 } else { 0.02 },
            |i, u| if i % 29 == 5 { -90.0 } else { (u - 1.5) * 1.5 },
        );
        let inp = head.inputs();
        let init: Vec<f32> = (0..dk * dv).map(|_| draw(&mut rng) * 1e-3).collect();
        let (mut s1, mut s2) = (init.clone(), init);
        let (mut o1, mut o2) = (vec![0.0; len * dv], vec![0.0; len * dv]);
        let subnormals = |x: &[f32]| x.iter().filter(|v| v.is_subnormal()).count();
        recurrent(&inp, &mut s1, &mut o1);
        assert_eq!(subnormals(&s1) + subnormals(&o1), 0);
        // `chunked` by hand, to look at every intermediate of every chunk.
        let mut scratch = ChunkScratch::new(dk, dv);
        for start in (0..len).step_by(CHUNK) {
            let n = CHUNK.min(len - start);
            let out = &mut o2[start * dv..][..n * dv];
            scratch.run(&inp, start, n, &mut s2, out);
            let ChunkScratch {
                t,
                gram,
                decay,
                u,
                w,
                vnew,
                row,
                ..
            } = &scratch;
            for (what, x) in [
                ("T", t),
                ("gram", gram),
                ("decay", decay),
                ("U", u),
                ("W", w),
                ("V'", vnew),
                ("row", row),
                ("state", &s2),
                ("out", &out.to_vec()),
            ] {
                assert_eq!(subnormals(x), 0, "subnormals in {what} at chunk {start}");
            }
            // Decay factors are weights: zero or at least 2⁻⁶⁰, so that multiplying by
            // them never underflows on the way to a flushed product.
            let tiny = decay.iter().find(|&&x| x != 0.0 && x < NEGLIGIBLE);
            assert!(tiny.is_none(), "decay factor {tiny:?} at chunk {start}");
        }
        for (a, b) in o1.iter().zip(&o2).chain(s1.iter().zip(&s2)) {
            assert!((a - b).abs() <= 1e-6 + 1e-4 * a.abs(), "{a} vs {b}");
        }
    }

    #[test]
    fn chunked_matches_recurrent_across_chunks() {
        let (len, dk, dv) = (150, 8, 6);
        let mut rng = SeededRng::from_seed(7);
        let head = Head::random(
            (len, dk, dv),
            &mut rng,
            4.0,
            |_, u| u + 0.5,
            |_, u| -(u + 0.5) * 0.3,
        );
        let inp = head.inputs();
        let init: Vec<f32> = (0..dk * dv).map(|_| draw(&mut rng)).collect();
        let (mut s1, mut s2) = (init.clone(), init);
        let (mut o1, mut o2) = (vec![0.0; len * dv], vec![0.0; len * dv]);
        recurrent(&inp, &mut s1, &mut o1);
        chunked(&inp, &mut s2, &mut o2);
        let max = |a: &[f32], b: &[f32]| {
            a.iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0, f32::max)
        };
        assert!(max(&o1, &o2) < 1e-4, "outputs differ by {}", max(&o1, &o2));
        assert!(max(&s1, &s2) < 1e-4, "states differ by {}", max(&s1, &s2));
    }
}
