//! Attention of a span's query rows straight from its pages (prompt chunks,
//! verification chains and token trees): each tile of 32 cache rows is decoded once
//! into a small buffer and met by a block of queries of the KV head there (the query
//! heads of several rows, [`QUERY_BLOCK`] in all), with an online softmax, so nothing
//! is gathered and a block's scores never outgrow a tile. Scores and the weighted
//! value sum are register-blocked small matmuls ([`matmul_acc`]).

use super::kv_rows::{rows_f32, rows_into};
use super::simd::{dispatch, matmul_acc, weight_exp};
use edge_kvcache::BlockId;
use edge_kvcache::memory::HostKv;

/// Queries per block: a tile's scores are `TILE_ROWS × QUERY_BLOCK` floats.
pub const QUERY_BLOCK: usize = 64;

/// The rows a span's queries see: every cached row before `base`, and of the rows
/// `base .. base + extent` those `sees(query_row, offset)` admits.
pub struct SpanRows<'a> {
    /// The sequence's pages.
    pub pages: &'a [BlockId],
    /// The KV head.
    pub head: usize,
    /// Rows every query sees.
    pub base: usize,
    /// Rows past `base` that some query may see.
    pub extent: usize,
    /// Whether query row `i` (of the span) sees row `base + offset`.
    pub sees: &'a (dyn Fn(usize, usize) -> bool + Sync),
}

/// The queries of one KV head: `count` rows of the span, each with `group` heads;
/// query `(i, g)` is `q[i · stride + g · d ..][..d]`.
pub struct GroupQueries<'a> {
    /// Query values.
    pub q: &'a [f32],
    /// Floats between consecutive rows.
    pub stride: usize,
    /// Rows.
    pub count: usize,
    /// Heads per row sharing the KV head.
    pub group: usize,
    /// Head width.
    pub dim: usize,
    /// Score scale, `1/√dim`.
    pub scale: f32,
}

/// Softmax attention of every query of `qs` over the rows `rows` admits; writes
/// `[count, group, dim]` to `out`.
pub fn attend_span(kv: &HostKv, rows: &SpanRows, qs: &GroupQueries, out: &mut [f32]) {
    dispatch!(attend_span_portable, (kv: &HostKv, rows: &SpanRows, qs: &GroupQueries, out: &mut [f32]) {
        let total = qs.count * qs.group;
        let mut start = 0;
        while start < total {
            let n = QUERY_BLOCK.min(total - start);
            let o = &mut out[start * qs.dim..][..n * qs.dim];
            match n {
                0..=16 => block::<16>(kv, rows, qs, start, n, o),
                17..=32 => block::<32>(kv, rows, qs, start, n, o),
                _ => block::<QUERY_BLOCK>(kv, rows, qs, start, n, o),
            }
            start += n;
        }
    })
}

/// Rows per tile of the online softmax. Tiles are fixed runs of cache rows, not pages,
/// so the result does not depend on the page size.
const TILE_ROWS: usize = 32;

/// The keys (or values) of cache rows `tile` as f32 `[rows, dim]`: borrowed or decoded
/// from one page when the tile lies in one, else decoded page by page into `buf`.
fn tile_rows<'a>(
    kv: &'a HostKv,
    rows: &SpanRows,
    keys: bool,
    tile: std::ops::Range<usize>,
    scale: f32,
    buf: &'a mut Vec<f32>,
) -> &'a [f32] {
    let (block, d) = (kv.block_size(), kv.spec().head_dim);
    let run = |page, within: std::ops::Range<usize>| match keys {
        true => kv.keys(page, rows.head, within),
        false => kv.values(page, rows.head, within),
    };
    let at = tile.start % block;
    if at + tile.len() <= block {
        return rows_f32(
            run(rows.pages[tile.start / block], at..at + tile.len()),
            scale,
            buf,
        );
    }
    buf.resize(tile.len() * d, 0.0);
    let mut row = tile.start;
    while row < tile.end {
        let (page, at) = (rows.pages[row / block], row % block);
        let n = (block - at).min(tile.end - row);
        let out = &mut buf[(row - tile.start) * d..][..n * d];
        rows_into(run(page, at..at + n), scale, out);
        row += n;
    }
    buf
}

/// Queries `start .. start + n` (flattened `(row, head)` order) through every tile of
/// the visible rows.
#[inline(always)]
fn block<const QB: usize>(
    kv: &HostKv,
    rows: &SpanRows,
    qs: &GroupQueries,
    start: usize,
    n: usize,
    out: &mut [f32],
) {
    let d = qs.dim;
    let (k_scale, v_scale) = (kv.spec().k_scale, kv.spec().v_scale);
    // Qᵀ `[d, QB]`, zero-padded.
    let mut qt = vec![0.0f32; d * QB];
    for j in 0..n {
        let (i, g) = ((start + j) / qs.group, (start + j) % qs.group);
        for (p, &x) in qs.q[i * qs.stride + g * d..][..d].iter().enumerate() {
            qt[p * QB + j] = x;
        }
    }
    let mut max = [f32::NEG_INFINITY; QB];
    let mut sum = [0.0f32; QB];
    let mut acc = vec![0.0f32; n * d];
    let mut scores = vec![0.0f32; TILE_ROWS * QB];
    let (mut kbuf, mut vbuf) = (Vec::new(), Vec::new());
    let end = rows.base + rows.extent;
    for first in (0..end).step_by(TILE_ROWS) {
        let nr = (end - first).min(TILE_ROWS);
        let tile = first..first + nr;
        let keys = tile_rows(kv, rows, true, tile.clone(), k_scale, &mut kbuf);
        // Sᵀ = K Qᵀ · scale, `[nr, QB]`.
        let s = &mut scores[..nr * QB];
        s.fill(0.0);
        matmul_acc::<QB>((nr, QB, d), qs.scale, keys, (d, 1), &qt, QB, s, QB);
        // Mask the rows past `base` a query does not see.
        for r in rows.base.max(first)..first + nr {
            let row = &mut s[(r - first) * QB..][..QB];
            for (j, x) in row[..n].iter_mut().enumerate() {
                if !(rows.sees)((start + j) / qs.group, r - rows.base) {
                    *x = f32::NEG_INFINITY;
                }
            }
        }
        // Online softmax: new maxima, rescale what is summed so far.
        let mut factor = [1.0f32; QB];
        for j in 0..n {
            let m = (0..nr).map(|r| s[r * QB + j]).fold(max[j], f32::max);
            if m > max[j] {
                factor[j] = weight_exp(max[j] - m);
                max[j] = m;
            }
        }
        for (t, f) in sum[..n].iter_mut().zip(&factor) {
            *t *= f;
        }
        for row in s.chunks_exact_mut(QB) {
            for j in 0..n {
                let x = row[j];
                row[j] = if x == f32::NEG_INFINITY {
                    0.0
                } else {
                    weight_exp(x - max[j])
                };
                sum[j] += row[j];
            }
        }
        for (j, a) in acc.chunks_exact_mut(d).enumerate() {
            if factor[j] != 1.0 {
                a.iter_mut().for_each(|x| *x *= factor[j]);
            }
        }
        let values = tile_rows(kv, rows, false, tile, v_scale, &mut vbuf);
        // acc += P V with P = (Sᵀ)ᵀ read through strides.
        matmul_acc::<64>((n, d, nr), 1.0, s, (1, QB), values, d, &mut acc, d);
    }
    for (j, (o, a)) in out.chunks_exact_mut(d).zip(acc.chunks_exact(d)).enumerate() {
        let inv = 1.0 / sum[j];
        for (o, &x) in o.iter_mut().zip(a) {
            *o = x * inv;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use edge_kvcache::memory::decode_run;
    use edge_kvcache::{AttentionLayerSpec, CacheMemory, CacheSpec, HostMemory, KvDType};

    /// Against a direct softmax over the stored rows (decoded as stored), for every
    /// page format, with a tree mask and a causal one, groups of heads, and more
    /// queries than one block holds.
    #[test]
    fn matches_a_direct_softmax_over_the_visible_rows() {
        let wave = |i: usize, f: f32| ((i as f32) * f).sin();
        let (d, block, base) = (32usize, 5usize, 23usize);
        for dtype in [KvDType::F32, KvDType::Bf16, KvDType::Fp8E4M3] {
            for (count, group) in [(1usize, 1usize), (6, 2), (20, 4)] {
                let extent = count;
                let rows = base + extent;
                let spec = CacheSpec {
                    block_size: block,
                    kv_dtype: dtype,
                    attention: vec![AttentionLayerSpec {
                        kv_heads: 2,
                        head_dim: d,
                        k_scale: 0.04,
                        v_scale: 0.02,
                    }],
                    recurrent: vec![],
                };
                let mut mem = HostMemory::new(&spec).unwrap();
                let pages: Vec<BlockId> = (0..rows.div_ceil(block))
                    .map(|i| BlockId::new(3 * i + 2))
                    .collect();
                for &p in &pages {
                    mem.materialize_page(p).unwrap();
                }
                for s in 0..rows {
                    let k: Vec<f32> = (0..2 * d)
                        .map(|i| 2.0 * wave(s * 2 * d + i, 0.37))
                        .collect();
                    let v: Vec<f32> = (0..2 * d).map(|i| wave(s * 2 * d + i, 0.91)).collect();
                    mem.kv_mut(0)
                        .write_row(pages[s / block], s % block, &k, &v)
                        .unwrap();
                }
                let kv = mem.kv(0);
                let stored = |s: usize, keys: bool| -> Vec<f32> {
                    let (page, r) = (pages[s / block], s % block);
                    let (run, scale) = match keys {
                        true => (kv.keys(page, 1, r..r + 1), 0.04),
                        false => (kv.values(page, 1, r..r + 1), 0.02),
                    };
                    let mut out = vec![0.0; d];
                    decode_run(run, scale, &mut out);
                    out
                };
                // A tree: row i's parent is (i − 1) / 3.
                let mut visible = vec![0u64; count];
                for i in 0..count {
                    let own = 1u64 << i;
                    visible[i] = if i == 0 {
                        own
                    } else {
                        visible[(i - 1) / 3] | own
                    };
                }
                let tree = |i: usize, o: usize| (visible[i] >> o) & 1 == 1;
                let chain = |i: usize, o: usize| o <= i;
                let masks: [&(dyn Fn(usize, usize) -> bool + Sync); 2] = [&tree, &chain];
                let stride = group * d + 7;
                let q: Vec<f32> = (0..count * stride).map(|i| wave(i, 1.3)).collect();
                for sees in masks {
                    let span = SpanRows {
                        pages: &pages,
                        head: 1,
                        base,
                        extent,
                        sees,
                    };
                    let qs = GroupQueries {
                        q: &q,
                        stride,
                        count,
                        group,
                        dim: d,
                        scale: 0.2,
                    };
                    let mut out = vec![f32::NAN; count * group * d];
                    attend_span(kv, &span, &qs, &mut out);
                    for i in 0..count {
                        for g in 0..group {
                            let qv = &q[i * stride + g * d..][..d];
                            let seen: Vec<usize> = (0..rows)
                                .filter(|&s| s < base || sees(i, s - base))
                                .collect();
                            let logits: Vec<f64> = (seen.iter())
                                .map(|&s| {
                                    let k = stored(s, true);
                                    qv.iter().zip(&k).map(|(a, b)| (a * b) as f64).sum::<f64>()
                                        * 0.2
                                })
                                .collect();
                            let m = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                            let w: Vec<f64> = logits.iter().map(|l| (l - m).exp()).collect();
                            let z: f64 = w.iter().sum();
                            let got = &out[(i * group + g) * d..][..d];
                            for (c, &x) in got.iter().enumerate() {
                                let want: f64 = (seen.iter().zip(&w))
                                    .map(|(&s, wi)| wi / z * stored(s, false)[c] as f64)
                                    .sum();
                                assert!(
                                    (x as f64 - want).abs() < 1e-5,
                                    "{dtype:?} {count}x{group} row {i} head {g} [{c}]: {x} vs {want}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
