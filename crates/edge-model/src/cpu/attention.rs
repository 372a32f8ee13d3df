//! The CPU attention kernels: preparing queries and keys, storing rows in the paged
//! cache, and causal attention through each sequence's page table.
//!
//! A one-row span (a decode step) walks its pages directly: the query heads that share
//! a KV head read its rows once, page by page (each page holds one head's rows
//! contiguously). Longer spans (prompt chunks, verification chains) and token trees
//! meet the pages directly too, a block of queries at a time
//! ([`super::attention_paged`]).

use super::attention_paged::{GroupQueries, QUERY_BLOCK, SpanRows, attend_span};
use super::kv_rows::rows_f32;
use super::norm::rms_norm_zero_centred;
use super::simd::{axpy, dispatch, dot, weight_exp};
use crate::Result;
use crate::backend::{AttentionParams, AttentionShape, ForwardPlan, SpanPlan};
use edge_core::par;
use edge_kvcache::BlockId;
use edge_kvcache::memory::HostKv;
use rayon::prelude::*;

/// One token's query, gate and key rows, numbered, as the preparation loop yields them.
type TokenRows<'a> = (usize, ((&'a mut [f32], &'a mut [f32]), &'a mut [f32]));

/// Tokens from which the per-token preparation of queries and keys runs in parallel.
const PAR_MIN_TOKENS: usize = 16;

/// Splits interleaved `[q | gate]` per head; normalises and rotates q and k at each
/// row's position: per token, in parallel for prompts.
pub fn prepare(
    params: &AttentionParams<'_, super::Cpu>,
    qg: &[f32],
    k: &mut [f32],
    positions: &[u32],
    q: &mut [f32],
    gate: &mut [f32],
) {
    let AttentionShape {
        heads: h,
        kv_heads: hkv,
        head_dim: d,
    } = params.shape;
    let prepare = |(t, ((qt, gt), kt)): TokenRows<'_>| {
        let src = &qg[t * h * 2 * d..][..h * 2 * d];
        for ((qd, gd), s) in qt
            .chunks_exact_mut(d)
            .zip(gt.chunks_exact_mut(d))
            .zip(src.chunks_exact(2 * d))
        {
            qd.copy_from_slice(&s[..d]);
            gd.copy_from_slice(&s[d..]);
        }
        let pos = positions[t] as usize;
        rms_norm_zero_centred(qt, params.q_norm, params.eps);
        params.rope.apply(qt, d, pos);
        rms_norm_zero_centred(kt, params.k_norm, params.eps);
        params.rope.apply(kt, d, pos);
    };
    let rows = q
        .chunks_mut(h * d)
        .zip(gate.chunks_mut(h * d))
        .zip(k.chunks_mut(hkv * d))
        .enumerate();
    if positions.len() >= PAR_MIN_TOKENS {
        rows.collect::<Vec<_>>().into_par_iter().for_each(prepare);
    } else {
        rows.for_each(prepare);
    }
}

/// Stores every row's keys and values (`[rows, kv_heads · head_dim]`) in its cache row.
pub fn store(kv: &mut HostKv, plan: &ForwardPlan, k: &[f32], v: &[f32]) -> Result<()> {
    let w = kv.spec().row_width();
    for span in &plan.spans {
        for i in 0..span.len() {
            let (page, row) = plan.kv_slot(span, i);
            let r = span.rows.start + i;
            kv.write_row(page, row, &k[r * w..][..w], &v[r * w..][..w])?;
        }
    }
    Ok(())
}

/// Causal attention of every row over its sequence's cached rows; `q` and `out` are
/// `[rows, heads · head_dim]`.
pub fn attend(shape: AttentionShape, kv: &HostKv, plan: &ForwardPlan, q: &[f32], out: &mut [f32]) {
    let AttentionShape {
        heads: h,
        kv_heads: hkv,
        head_dim: d,
    } = shape;
    let width = h * d;
    let scale = 1.0 / (d as f32).sqrt();
    let group = h / hkv;
    // One item per (one-row span, KV head): the query heads sharing a KV head read its
    // rows once; where there are more threads than items, groups are split so that
    // every thread gets one.
    let is_decode = |s: &SpanPlan| s.len() == 1 && s.tree.is_none();
    let decode_spans = plan.spans.iter().filter(|s| is_decode(s)).count();
    let split = (rayon::current_num_threads().div_ceil(hkv * decode_spans.max(1))).clamp(1, group);
    let per = group.div_ceil(split);
    let mut items: Vec<(&SpanPlan, usize, &mut [f32])> = Vec::new();
    let mut spans: Vec<(&SpanPlan, &mut [f32])> = Vec::new();
    let mut rest = out;
    for span in &plan.spans {
        let (mine, tail) = std::mem::take(&mut rest).split_at_mut(span.len() * width);
        rest = tail;
        if is_decode(span) {
            for (j, o) in mine.chunks_mut(group * d).enumerate() {
                for (i, part) in o.chunks_mut(per * d).enumerate() {
                    items.push((span, j * group + i * per, part));
                }
            }
        } else {
            spans.push((span, mine));
        }
    }
    attend_spans(shape, kv, spans, q);
    par::for_each(items, |(span, first, o)| {
        let qs = &q[span.rows.start * width + first * d..][..o.len()];
        let group_view = GroupView {
            kv,
            pages: &span.pages,
            head: first / group,
            visible: span.first + 1,
        };
        attend_group(qs, &group_view, scale, d, o);
    });
}

/// Spans of several rows (prompt chunks, verification chains) and token trees: one
/// item per (span, KV head, block of rows whose query heads fill one
/// [`QUERY_BLOCK`]; a tree is one block), each meeting every visible page once with an
/// online softmax ([`attend_span`]). The pages are read in their format a page at a
/// time and a block's scores never outgrow a page, so a prompt chunk at depth reads
/// each page once per block instead of gathering every visible row into f32 first
/// (which, at 16K cached rows, took 3 to 4.5 times as long: docs/PERFORMANCE.md).
fn attend_spans(
    shape: AttentionShape,
    kv: &HostKv,
    mut spans: Vec<(&SpanPlan, &mut [f32])>,
    q: &[f32],
) {
    if spans.is_empty() {
        return;
    }
    let AttentionShape {
        heads: h,
        kv_heads: hkv,
        head_dim: d,
    } = shape;
    let group = h / hkv;
    let width = h * d;
    let scale = 1.0 / (d as f32).sqrt();
    let per = (QUERY_BLOCK / group).max(1);
    // (span, KV head, first row, rows), and each item's `[rows, group, d]` result.
    let mut items: Vec<(usize, usize, usize, usize)> = Vec::new();
    for (s, (span, _)) in spans.iter().enumerate() {
        let len = span.len();
        let step = if span.tree.is_some() { len } else { per };
        for head in 0..hkv {
            for r0 in (0..len).step_by(step.max(1)) {
                items.push((s, head, r0, step.min(len - r0)));
            }
        }
    }
    let mut results: Vec<Vec<f32>> = items
        .iter()
        .map(|&(_, _, _, n)| vec![0.0; n * group * d])
        .collect();
    let work: Vec<_> = items.iter().zip(results.iter_mut()).collect();
    par::for_each(work, |(&(s, head, r0, n), o)| {
        let span = spans[s].0;
        let chain = |i: usize, offset: usize| offset <= i;
        let tree = |i: usize, offset: usize| {
            let t = span.tree.as_ref().expect("a tree span");
            (t.visible[i] >> offset) & 1 == 1
        };
        // A chain's block sees every row before its own first row.
        let (base, extent, sees): (usize, usize, &(dyn Fn(usize, usize) -> bool + Sync)) =
            match &span.tree {
                Some(t) => (span.first, t.extent(), &tree),
                None => (span.first + r0, n, &chain),
            };
        let rows = SpanRows {
            pages: &span.pages,
            head,
            base,
            extent,
            sees,
        };
        let qs = GroupQueries {
            q: &q[(span.rows.start + r0) * width + head * group * d..],
            stride: width,
            count: n,
            group,
            dim: d,
            scale,
        };
        attend_span(kv, &rows, &qs, o);
    });
    // Scatter `[rows, group, d]` per item into `[rows, heads, d]`.
    for (&(s, head, r0, _), res) in items.iter().zip(&results) {
        let out = &mut *spans[s].1;
        for (i, row) in res.chunks_exact(group * d).enumerate() {
            out[(r0 + i) * width + head * group * d..][..group * d].copy_from_slice(row);
        }
    }
}

/// See [`super::attend_decode`].
#[cfg(feature = "bench")]
pub(super) fn attend_decode(
    qs: &[f32],
    kv: &HostKv,
    pages: &[BlockId],
    head: usize,
    visible: usize,
    out: &mut [f32],
) {
    let d = kv.spec().head_dim;
    let view = GroupView {
        kv,
        pages,
        head,
        visible,
    };
    attend_group(qs, &view, 1.0 / (d as f32).sqrt(), d, out);
}

/// One KV head of one sequence: its pages and the rows a one-row query sees.
pub(super) struct GroupView<'a> {
    kv: &'a HostKv,
    pages: &'a [BlockId],
    head: usize,
    visible: usize,
}

/// Softmax attention over the `visible` cached rows of one KV head for the query heads
/// in `qs` (`[heads, d]`), written to `out` (`[heads, d]`): each key and value row is
/// read once for all of them.
fn attend_group(qs: &[f32], kv: &GroupView, scale: f32, d: usize, out: &mut [f32]) {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    if attend_group_tiled(qs, kv, scale, out) {
        return;
    }
    attend_group_auto(qs, kv, scale, d, out);
}

/// [`attend_group`] in the register-tiled kernel of the current level (AVX-512, AVX2
/// or NEON), if it takes the shape; false (doing nothing) if not.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn attend_group_tiled(qs: &[f32], kv: &GroupView, scale: f32, out: &mut [f32]) -> bool {
    let group = super::decode_attention::Group {
        kv: kv.kv,
        pages: kv.pages,
        head: kv.head,
        visible: kv.visible,
    };
    super::decode_attention::attend(qs, &group, scale, out)
}

/// [`attend_group`] in auto-vectorised loops (any head count and width, any CPU).
fn attend_group_auto(qs: &[f32], kv: &GroupView, scale: f32, d: usize, out: &mut [f32]) {
    dispatch!(attend_portable, (qs: &[f32], kv: &GroupView, scale: f32, d: usize, out: &mut [f32]) {
        attend_group_body(qs, kv, scale, d, out)
    })
}

#[inline(always)]
fn attend_group_body(qs: &[f32], g: &GroupView, scale: f32, d: usize, out: &mut [f32]) {
    let heads = qs.len() / d;
    let visible = g.visible;
    let block = g.kv.block_size();
    let (k_scale, v_scale) = (g.kv.spec().k_scale, g.kv.spec().v_scale);
    // Plain loops, not `map(..).collect()`: an iterator's `fold` is compiled without
    // the caller's target features, and `dot` inlined there ran as SSE.
    let mut scores = vec![0.0f32; heads * visible];
    let mut buf = Vec::new();
    let pages = &g.pages[..visible.div_ceil(block)];
    for (p, &page) in pages.iter().enumerate() {
        let n = (visible - p * block).min(block);
        let keys = rows_f32(g.kv.keys(page, g.head, 0..n), k_scale, &mut buf);
        for r in 0..n {
            let key = &keys[r * d..][..d];
            let s = p * block + r;
            for (h, q) in qs.chunks_exact(d).enumerate() {
                scores[h * visible + s] = dot(q, key) * scale;
            }
        }
    }
    for head_scores in scores.chunks_exact_mut(visible.max(1)) {
        let max = head_scores
            .iter()
            .copied()
            .fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0;
        for s in head_scores.iter_mut() {
            *s = weight_exp(*s - max);
            sum += *s;
        }
        let inv = 1.0 / sum;
        head_scores.iter_mut().for_each(|p| *p *= inv);
    }
    out.fill(0.0);
    for (p, &page) in pages.iter().enumerate() {
        let n = (visible - p * block).min(block);
        let values = rows_f32(g.kv.values(page, g.head, 0..n), v_scale, &mut buf);
        for r in 0..n {
            let value = &values[r * d..][..d];
            let s = p * block + r;
            for (h, o) in out.chunks_exact_mut(d).enumerate() {
                axpy(scores[h * visible + s], value, o);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use edge_kvcache::{AttentionLayerSpec, CacheMemory, CacheSpec, HostMemory, KvDType};

    /// The register-tiled kernel against the auto-vectorised loops at every level the
    /// CPU has but the portable one (AVX2 forced on an AVX-512 CPU, plain NEON on an
    /// i8mm one), for every page format, 1 to 8 query heads, widths 64 to 256, odd page
    /// sizes and row counts (one row, partial last pages); at the portable level it
    /// declines.
    #[test]
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn tiled_kernel_matches_the_loops() {
        use edge_core::simd::{SimdLevel, with_level};
        let levels: Vec<SimdLevel> = SimdLevel::ALL
            .into_iter()
            .filter(|&l| l != SimdLevel::Portable && l.is_available())
            .collect();
        let wave = |i: usize, f: f32| ((i as f32) * f).sin();
        let cases = [
            (4usize, 1usize),
            (7, 1),
            (5, 23),
            (3, 31),
            (32, 77),
            (16, 300),
        ];
        for dtype in [KvDType::F32, KvDType::Bf16, KvDType::Fp8E4M3] {
            for d in [64usize, 128, 256] {
                for (block, rows) in cases {
                    let spec = CacheSpec {
                        block_size: block,
                        kv_dtype: dtype,
                        attention: vec![AttentionLayerSpec {
                            kv_heads: 2,
                            head_dim: d,
                            k_scale: 0.05,
                            v_scale: 0.03,
                        }],
                        recurrent: vec![],
                    };
                    let mut mem = HostMemory::new(&spec).unwrap();
                    let pages: Vec<BlockId> = (0..rows.div_ceil(block))
                        .map(|i| BlockId::new(2 * i + 1))
                        .collect();
                    for &p in &pages {
                        mem.materialize_page(p).unwrap();
                    }
                    for s in 0..rows {
                        let k: Vec<f32> = (0..2 * d)
                            .map(|i| 3.0 * wave(s * 2 * d + i, 0.37))
                            .collect();
                        let v: Vec<f32> = (0..2 * d)
                            .map(|i| 2.0 * wave(s * 2 * d + i, 0.91))
                            .collect();
                        mem.kv_mut(0)
                            .write_row(pages[s / block], s % block, &k, &v)
                            .unwrap();
                    }
                    // A NaN key makes every output NaN, as the exact decode gives.
                    let mut nan_mem = HostMemory::new(&spec).unwrap();
                    nan_mem.materialize_page(BlockId::new(0)).unwrap();
                    let nan_row = vec![f32::NAN; 2 * d];
                    nan_mem
                        .kv_mut(0)
                        .write_row(BlockId::new(0), 0, &nan_row, &nan_row)
                        .unwrap();
                    let nan_view = GroupView {
                        kv: nan_mem.kv(0),
                        pages: &[BlockId::new(0)],
                        head: 1,
                        visible: 1,
                    };
                    let view = GroupView {
                        kv: mem.kv(0),
                        pages: &pages,
                        head: 1,
                        visible: rows,
                    };
                    let case = format!("{dtype:?} d={d} block={block} rows={rows}");
                    for &level in &levels {
                        with_level(level, || {
                            let mut out = vec![0.0; 4 * d];
                            attend_group(&vec![1.0; 4 * d], &nan_view, 0.125, d, &mut out);
                            assert!(out.iter().all(|x| x.is_nan()), "{level} {case}");
                            for heads in 1..=8 {
                                let qs: Vec<f32> = (0..heads * d).map(|i| wave(i, 1.3)).collect();
                                let mut tiled = vec![f32::NAN; heads * d];
                                assert!(
                                    attend_group_tiled(&qs, &view, 0.125, &mut tiled),
                                    "{level} {case} heads={heads}: not tiled"
                                );
                                let mut loops = vec![f32::NAN; heads * d];
                                attend_group_auto(&qs, &view, 0.125, d, &mut loops);
                                for (i, (a, b)) in tiled.iter().zip(&loops).enumerate() {
                                    assert!(
                                        (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                                        "{level} {case} heads={heads} [{i}]: {a} vs {b}"
                                    );
                                }
                            }
                        })
                        .unwrap();
                    }
                    let declined = with_level(SimdLevel::Portable, || {
                        attend_group_tiled(&vec![1.0; 4 * d], &view, 0.125, &mut vec![0.0; 4 * d])
                    });
                    assert!(!declined.unwrap(), "{case}");
                }
            }
        }
    }

    /// Query heads attended together over pages give each head's own attention
    /// exactly, and match a direct softmax computation over the stored rows.
    #[test]
    fn grouped_heads_over_pages_match_single_heads_and_softmax() {
        let (d, rows, heads, block) = (16usize, 37usize, 3usize, 5usize);
        let spec = CacheSpec {
            block_size: block,
            kv_dtype: KvDType::F32,
            attention: vec![AttentionLayerSpec {
                kv_heads: 2,
                head_dim: d,
                k_scale: 1.0,
                v_scale: 1.0,
            }],
            recurrent: vec![],
        };
        let mut mem = HostMemory::new(&spec).unwrap();
        // Pages out of order, as a real page table has them.
        let pages: Vec<BlockId> = (0..rows.div_ceil(block))
            .map(|i| BlockId::new(9 - i))
            .collect();
        let wave = |i: usize, f: f32| ((i as f32) * f).sin();
        let mut keys = vec![];
        let mut values = vec![];
        for &p in &pages {
            mem.materialize_page(p).unwrap();
        }
        for s in 0..rows {
            let k: Vec<f32> = (0..2 * d).map(|i| wave(s * 2 * d + i, 0.37)).collect();
            let v: Vec<f32> = (0..2 * d).map(|i| wave(s * 2 * d + i, 0.91)).collect();
            mem.kv_mut(0)
                .write_row(pages[s / block], s % block, &k, &v)
                .unwrap();
            keys.push(k);
            values.push(v);
        }
        let qs: Vec<f32> = (0..heads * d).map(|i| wave(i, 1.3)).collect();
        let view = GroupView {
            kv: mem.kv(0),
            pages: &pages,
            head: 1,
            visible: 29,
        };
        let mut together = vec![f32::NAN; heads * d];
        attend_group(&qs, &view, 0.25, d, &mut together);
        for (g, q) in qs.chunks_exact(d).enumerate() {
            let mut alone = vec![f32::NAN; d];
            attend_group(q, &view, 0.25, d, &mut alone);
            assert_eq!(alone, together[g * d..][..d], "head {g}");
            let logits: Vec<f64> = (0..29)
                .map(|s| {
                    let key = &keys[s][d..];
                    q.iter().zip(key).map(|(a, b)| (a * b) as f64).sum::<f64>() * 0.25
                })
                .collect();
            let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let w: Vec<f64> = logits.iter().map(|l| (l - max).exp()).collect();
            let total: f64 = w.iter().sum();
            for (k, got) in alone.iter().enumerate() {
                let want: f64 = (0..29)
                    .map(|s| w[s] / total * values[s][d + k] as f64)
                    .sum();
                assert!(
                    (*got as f64 - want).abs() < 1e-5,
                    "head {g}, {k}: {got} vs {want}"
                );
            }
        }
    }

    /// Chains split into blocks of rows (16 rows of 4 query heads here) over pages in
    /// every format, two spans at once (one at depth, one from the start), against a
    /// direct causal softmax over the rows as stored.
    #[test]
    fn spans_in_row_blocks_match_a_direct_causal_softmax() {
        use edge_kvcache::SlotId;
        use edge_kvcache::memory::decode_run;
        let (d, h, hkv, block) = (32usize, 8usize, 2usize, 5usize);
        let width = h * d;
        let wave = |i: usize, f: f32| ((i as f32) * f).sin();
        for dtype in [KvDType::F32, KvDType::Bf16, KvDType::Fp8E4M3] {
            let spec = CacheSpec {
                block_size: block,
                kv_dtype: dtype,
                attention: vec![AttentionLayerSpec {
                    kv_heads: hkv,
                    head_dim: d,
                    k_scale: 0.04,
                    v_scale: 0.02,
                }],
                recurrent: vec![],
            };
            let mut mem = HostMemory::new(&spec).unwrap();
            // (first, rows) per span; each span has its own pages.
            let shapes = [(23usize, 37usize), (0, 20)];
            let mut next_page = 1;
            let mut plans = Vec::new();
            let mut start = 0;
            for (s, &(first, len)) in shapes.iter().enumerate() {
                let total = first + len;
                let pages: Vec<BlockId> = (0..total.div_ceil(block))
                    .map(|_| {
                        next_page += 2;
                        BlockId::new(next_page)
                    })
                    .collect();
                for &p in &pages {
                    mem.materialize_page(p).unwrap();
                }
                for r in 0..total {
                    let k: Vec<f32> = (0..hkv * d)
                        .map(|i| wave(s * 9973 + r * 97 + i, 0.37))
                        .collect();
                    let v: Vec<f32> = (0..hkv * d)
                        .map(|i| wave(s * 9973 + r * 97 + i, 0.91))
                        .collect();
                    mem.kv_mut(0)
                        .write_row(pages[r / block], r % block, &k, &v)
                        .unwrap();
                }
                plans.push(SpanPlan {
                    rows: start..start + len,
                    first,
                    pages,
                    slot: SlotId::new(s),
                    tree: None,
                });
                start += len;
            }
            let kv = mem.kv(0);
            let q: Vec<f32> = (0..start * width).map(|i| wave(i, 1.3)).collect();
            let mut out = vec![f32::NAN; start * width];
            let shape = AttentionShape {
                heads: h,
                kv_heads: hkv,
                head_dim: d,
            };
            let mut rest = &mut out[..];
            let mut spans = Vec::new();
            for plan in &plans {
                let (mine, tail) = std::mem::take(&mut rest).split_at_mut(plan.len() * width);
                spans.push((plan, mine));
                rest = tail;
            }
            attend_spans(shape, kv, spans, &q);
            let stored = |plan: &SpanPlan, r: usize, head: usize, keys: bool| {
                let (page, row) = (plan.pages[r / block], r % block);
                let (run, scale) = match keys {
                    true => (kv.keys(page, head, row..row + 1), 0.04),
                    false => (kv.values(page, head, row..row + 1), 0.02),
                };
                let mut x = vec![0.0; d];
                decode_run(run, scale, &mut x);
                x
            };
            for plan in &plans {
                for i in 0..plan.len() {
                    let row = plan.rows.start + i;
                    let seen = plan.first + i + 1;
                    for head in 0..h {
                        let kvh = head / (h / hkv);
                        let qv = &q[row * width + head * d..][..d];
                        let logits: Vec<f64> = (0..seen)
                            .map(|r| {
                                let k = stored(plan, r, kvh, true);
                                qv.iter().zip(&k).map(|(a, b)| (a * b) as f64).sum::<f64>()
                                    / (d as f64).sqrt()
                            })
                            .collect();
                        let m = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                        let w: Vec<f64> = logits.iter().map(|l| (l - m).exp()).collect();
                        let z: f64 = w.iter().sum();
                        for c in 0..d {
                            let want: f64 = (0..seen)
                                .map(|r| w[r] / z * stored(plan, r, kvh, false)[c] as f64)
                                .sum();
                            let got = out[row * width + head * d + c] as f64;
                            assert!(
                                (got - want).abs() < 1e-5,
                                "{dtype:?} span at {} row {i} head {head} [{c}]: {got} vs {want}",
                                plan.first
                            );
                        }
                    }
                }
            }
        }
    }
}
