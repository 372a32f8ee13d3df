//! Causal attention for a run of consecutive queries of one head (prompts): per block
//! of [`QUERY_BLOCK`] queries, scores and the weighted value sum are two small matmuls
//! ([`matmul_acc`]) instead of one dot product and one axpy per visible key.

use super::simd::{dispatch, matmul_acc, weight_exp};

/// Queries per block: the score block is `visible keys × QUERY_BLOCK` floats.
pub const QUERY_BLOCK: usize = 64;

/// The cached keys/values one query head reads: row `s` of its KV head starts at
/// `s * stride + offset`.
pub struct KvView<'a> {
    /// All cached keys, `[positions, kv_heads · head_dim]`.
    pub keys: &'a [f32],
    /// All cached values, same layout.
    pub values: &'a [f32],
    /// Floats per cached position.
    pub stride: usize,
    /// Start of this head's KV head within a position.
    pub offset: usize,
}

/// A run of consecutive queries of one head.
pub struct Queries<'a> {
    /// Query `i` is `q[i·stride..][..dim]`.
    pub q: &'a [f32],
    /// Floats between consecutive queries.
    pub stride: usize,
    /// Number of queries.
    pub count: usize,
    /// Head width.
    pub dim: usize,
    /// Absolute position of the first query; query `i` sees positions `0..=pos0 + i`.
    pub pos0: usize,
    /// Score scale, `1/√dim`.
    pub scale: f32,
}

/// Causal attention of `qs` over the cache; writes `[qs.count, qs.dim]` to `out`.
pub fn attend_queries(qs: &Queries, kv: &KvView, out: &mut [f32]) {
    dispatch!(attend_queries_portable, (qs: &Queries, kv: &KvView, out: &mut [f32]) {
        attend_body(qs, kv, out)
    })
}

#[inline(always)]
fn attend_body(qs: &Queries, kv: &KvView, out: &mut [f32]) {
    let (q, q_stride, n_q, d, pos0, scale) = (qs.q, qs.stride, qs.count, qs.dim, qs.pos0, qs.scale);
    // Qᵀ and the scores always have QUERY_BLOCK columns: a short last block is padded
    // with zero queries, so the score product runs on whole register blocks (its
    // column-edge loop was a seventh of a long-context prompt chunk that ended in a
    // short block); the padded columns are never read.
    const QB: usize = QUERY_BLOCK;
    let mut qt = vec![0.0f32; d * QB];
    let mut scores = Vec::new();
    for i0 in (0..n_q).step_by(QUERY_BLOCK) {
        let qb = QUERY_BLOCK.min(n_q - i0);
        // Positions 0..visible(i) are visible to query i of the block.
        let visible = |i: usize| pos0 + i0 + i + 1;
        let nk = visible(qb - 1);
        // Qᵀ of the block, `[d, QB]`.
        if qb < QB {
            qt.fill(0.0);
        }
        for i in 0..qb {
            for (p, &x) in q[(i0 + i) * q_stride..][..d].iter().enumerate() {
                qt[p * QB + i] = x;
            }
        }
        // Sᵀ = K Qᵀ · scale, `[nk, QB]` (key-major, so both products read rows).
        scores.clear();
        scores.resize(nk * QB, 0.0);
        let keys = &kv.keys[kv.offset..];
        matmul_acc::<QB>(
            (nk, QB, d),
            scale,
            keys,
            (kv.stride, 1),
            &qt,
            QB,
            &mut scores,
            QB,
        );
        // Column-wise causal softmax. Keys before `shared` are visible to every query
        // of the block: their loops run over the columns without a mask, which
        // vectorises (a mask test per element kept the whole softmax scalar, a quarter
        // of a long-context prompt chunk). Only the last `qb − 1` rows are masked.
        let shared = visible(0);
        let mut max = [f32::NEG_INFINITY; QUERY_BLOCK];
        let max = &mut max[..qb];
        for row in scores[..shared * QB].chunks_exact(QB) {
            for (m, &x) in max.iter_mut().zip(row) {
                *m = if x > *m { x } else { *m };
            }
        }
        for (s, row) in scores.chunks_exact(QB).enumerate().skip(shared) {
            for (i, (m, &x)) in max.iter_mut().zip(row).enumerate() {
                if s < visible(i) && x > *m {
                    *m = x;
                }
            }
        }
        let mut sum = [0.0f32; QUERY_BLOCK];
        for row in scores[..shared * QB].chunks_exact_mut(QB) {
            for ((x, &m), t) in row.iter_mut().zip(max.iter()).zip(sum.iter_mut()) {
                *x = weight_exp(*x - m);
                *t += *x;
            }
        }
        for (s, row) in scores.chunks_exact_mut(QB).enumerate().skip(shared) {
            for (i, x) in row[..qb].iter_mut().enumerate() {
                *x = if s < visible(i) {
                    weight_exp(*x - max[i])
                } else {
                    0.0
                };
                sum[i] += *x;
            }
        }
        let inv = sum.map(|v| 1.0 / v);
        for row in scores.chunks_exact_mut(QB) {
            for (x, &r) in row[..qb].iter_mut().zip(&inv) {
                *x *= r;
            }
        }
        // O = P V with P = (Sᵀ)ᵀ read through strides.
        let o = &mut out[i0 * d..][..qb * d];
        o.fill(0.0);
        let values = &kv.values[kv.offset..];
        matmul_acc::<64>((qb, d, nk), 1.0, &scores, (1, QB), values, kv.stride, o, d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a naive softmax attention, with a cached prefix and a ragged last block.
    #[test]
    fn blocked_attention_matches_naive() {
        let (d, kvh, pos0, n_q) = (8, 2, 5, 45);
        let total = pos0 + n_q;
        let val = |i: usize| ((i * 37 % 101) as f32 / 50.0) - 1.0;
        let keys: Vec<f32> = (0..total * kvh * d).map(val).collect();
        let values: Vec<f32> = (0..total * kvh * d).map(|i| val(i + 7)).collect();
        let q: Vec<f32> = (0..n_q * d).map(|i| val(i + 3)).collect();
        let kv = KvView {
            keys: &keys,
            values: &values,
            stride: kvh * d,
            offset: d,
        };
        let mut out = vec![0.0; n_q * d];
        let qs = Queries {
            q: &q,
            stride: d,
            count: n_q,
            dim: d,
            pos0,
            scale: 0.5,
        };
        attend_queries(&qs, &kv, &mut out);
        for i in 0..n_q {
            let vis = pos0 + i + 1;
            let s: Vec<f32> = (0..vis)
                .map(|p| {
                    (0..d)
                        .map(|j| q[i * d + j] * keys[p * kvh * d + d + j])
                        .sum::<f32>()
                        * 0.5
                })
                .collect();
            let m = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let e: Vec<f32> = s.iter().map(|x| (x - m).exp()).collect();
            let z: f32 = e.iter().sum();
            for j in 0..d {
                let want: f32 = (0..vis)
                    .map(|p| e[p] / z * values[p * kvh * d + d + j])
                    .sum();
                assert!((out[i * d + j] - want).abs() < 1e-5, "q{i} [{j}]");
            }
        }
    }
}
