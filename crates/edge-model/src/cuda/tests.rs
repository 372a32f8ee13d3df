//! The model's CUDA operations against the CPU backend's own functions, on a GPU. Every
//! test is ignored (it needs one); run them with
//! `cargo test -p edge-model --features cuda --release --lib -- --ignored cuda:: --test-threads=1`
//! (or `tools/device/cuda_checks.sh`). The host emulation of the same kernels is
//! `kernels/host_emulation/check_model.py`.

use super::*;
use crate::backend::Gate;
use crate::cpu::norm;
use edge_core::cuda::{CudaDevice, KernelCache};
use std::sync::Arc;

pub(super) fn device() -> Arc<CudaDevice> {
    let dir = std::env::temp_dir().join("edge-model-ptx-cache");
    CudaDevice::new(0, KernelCache::in_dir(dir)).expect("open cuda:0")
}

/// Deterministic values in about [−scale, scale].
pub(super) fn values(n: usize, seed: u32, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let h = (i as u32)
                .wrapping_mul(2_654_435_761)
                .wrapping_add(seed.wrapping_mul(40_503));
            ((h >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

pub(super) fn assert_close(what: &str, gpu: &[f32], cpu: &[f32], rel: f32) {
    assert_eq!(gpu.len(), cpu.len(), "{what}: lengths");
    for (i, (&g, &c)) in gpu.iter().zip(cpu).enumerate() {
        let tol = rel * c.abs().max(1e-6);
        assert!((g - c).abs() <= tol, "{what}[{i}]: gpu {g:e}, cpu {c:e}");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test -p edge-model --features cuda --release --lib -- --ignored cuda::"]
fn elementwise_ops_match_cpu() {
    let dev = device();
    let n = 5120 * 3 + 17;
    let (x, y) = (values(n, 1, 3.0), values(n, 2, 3.0));
    let mut xd = dev.upload(&x).unwrap();
    add(&dev, &mut xd, &dev.upload(&y).unwrap()).unwrap();
    let want: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    assert_eq!(dev.download(&xd).unwrap(), want, "add is exact");

    let g = values(n, 3, 8.0);
    for kind in [Gate::Silu, Gate::Sigmoid] {
        let mut xd = dev.upload(&x).unwrap();
        gate(&dev, kind, &dev.upload(&g).unwrap(), &mut xd).unwrap();
        let mut want = x.clone();
        norm::gate_in_place(kind, &g, &mut want);
        assert_close(
            &format!("{kind:?}"),
            &dev.download(&xd).unwrap(),
            &want,
            1e-5,
        );
    }

    let (w, rows) = (96, 5);
    let (a, b) = (values(w * rows, 4, 1.0), values(w * rows, 5, 1.0));
    let mut out = dev.zeros::<f32>(2 * w * rows).unwrap();
    concat_rows(
        &dev,
        &dev.upload(&a).unwrap(),
        &dev.upload(&b).unwrap(),
        w,
        &mut out,
    )
    .unwrap();
    let want: Vec<f32> = (0..rows)
        .flat_map(|r| {
            a[r * w..(r + 1) * w]
                .iter()
                .chain(&b[r * w..(r + 1) * w])
                .copied()
        })
        .collect();
    assert_eq!(dev.download(&out).unwrap(), want, "concat_rows");

    let idx = [4u32, 0, 2, 2];
    let mut out = dev.zeros::<f32>(idx.len() * w).unwrap();
    let ad = dev.upload(&a).unwrap();
    gather_rows(&dev, &ad, w, &dev.upload(&idx).unwrap(), &idx, &mut out).unwrap();
    let want: Vec<f32> = idx
        .iter()
        .flat_map(|&r| a[r as usize * w..][..w].to_vec())
        .collect();
    assert_eq!(dev.download(&out).unwrap(), want, "gather_rows");
    let bad = [5u32];
    let r = gather_rows(&dev, &ad, w, &dev.upload(&bad).unwrap(), &bad, &mut out);
    assert!(
        matches!(r, Err(crate::ModelError::InvalidInput(_))),
        "row past the end"
    );

    let table: Vec<u16> = values(50 * w, 6, 1.0)
        .iter()
        .map(|&v| half::bf16::from_f32(v).to_bits())
        .collect();
    let ids = [49u32, 0, 7];
    let mut out = dev.zeros::<f32>(ids.len() * w).unwrap();
    let td = dev.upload(&table).unwrap();
    embed_bf16(&dev, &td, w, &dev.upload(&ids).unwrap(), &ids, &mut out).unwrap();
    let want: Vec<f32> = ids
        .iter()
        .flat_map(|&t| {
            table[t as usize * w..][..w]
                .iter()
                .map(|&b| half::bf16::from_bits(b).to_f32())
        })
        .collect();
    assert_eq!(dev.download(&out).unwrap(), want, "embed");
    let bad = [50u32];
    let r = embed_bf16(&dev, &td, w, &dev.upload(&bad).unwrap(), &bad, &mut out);
    assert!(
        matches!(r, Err(crate::ModelError::InvalidInput(_))),
        "id past the vocabulary"
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test -p edge-model --features cuda --release --lib -- --ignored cuda::"]
fn norms_match_cpu() {
    let dev = device();
    for (rows, width) in [(3, 5120), (8, 256), (5, 128), (2, 33)] {
        let x = values(rows * width, 7, 4.0);
        let w = values(width, 8, 0.2);
        let mut out = dev.zeros::<f32>(rows * width).unwrap();
        rms_norm(
            &dev,
            &dev.upload(&x).unwrap(),
            &dev.upload(&w).unwrap(),
            1e-6,
            &mut out,
        )
        .unwrap();
        let mut want = vec![0.0; rows * width];
        norm::rms_norm_zero_centred_into(&x, &w, 1e-6, &mut want);
        assert_close(
            &format!("rms_norm {rows}x{width}"),
            &dev.download(&out).unwrap(),
            &want,
            2e-5,
        );

        let z = values(rows * width, 9, 3.0);
        let mut od = dev.upload(&x).unwrap();
        gated_rms_norm(
            &dev,
            &mut od,
            &dev.upload(&z).unwrap(),
            &dev.upload(&w).unwrap(),
            1e-6,
        )
        .unwrap();
        let mut want = x.clone();
        norm::gated_rms_norm(&mut want, &z, &w, 1e-6);
        assert_close(
            &format!("gated_rms_norm {rows}x{width}"),
            &dev.download(&od).unwrap(),
            &want,
            2e-5,
        );
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test -p edge-model --features cuda --release --lib -- --ignored cuda::"]
fn argmax_matches_cpu() {
    let dev = device();
    let vocab = 248_320;
    let mut logits = values(4 * vocab, 10, 20.0);
    logits[vocab + 17] = 99.0;
    logits[vocab + 200_000] = 99.0; // a tie: the first wins
    logits[2 * vocab..3 * vocab].fill(f32::NAN);
    for v in logits[3 * vocab..].iter_mut().step_by(2) {
        *v = f32::NAN;
    }
    let mut out = dev.zeros::<u32>(4).unwrap();
    argmax(&dev, &dev.upload(&logits).unwrap(), vocab, &mut out).unwrap();
    let want: Vec<u32> = logits.chunks_exact(vocab).map(crate::argmax).collect();
    assert_eq!(dev.download(&out).unwrap(), want);
}

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test -p edge-model --features cuda --release --lib -- --ignored cuda::"]
fn top_k_matches_a_sort() {
    let dev = device();
    let vocab = 248_320;
    let mut logits = values(3 * vocab, 11, 20.0);
    for v in logits[..vocab].iter_mut().step_by(3) {
        *v = (*v * 2.0).round() / 2.0; // many ties
    }
    logits[vocab..2 * vocab].fill(f32::NEG_INFINITY);
    logits[vocab + 5] = 1.0; // one finite logit among −inf ties
    logits[2 * vocab + 9] = f32::NAN;
    let temperature = 0.8;
    let got = top_k(&dev, &dev.upload(&logits).unwrap(), vocab, 200, temperature).unwrap();
    for (r, row) in logits.chunks_exact(vocab).enumerate() {
        let mut order: Vec<u32> = (0..vocab as u32)
            .filter(|&i| !row[i as usize].is_nan())
            .collect();
        order.sort_by(|&a, &b| row[b as usize].total_cmp(&row[a as usize]).then(a.cmp(&b)));
        order.truncate(200);
        assert_eq!(got.counts[r], 200);
        assert_eq!(&got.ids[r * 200..][..200], &order[..], "row {r} ids");
        let mx = row[order[0] as usize];
        assert_eq!(got.max[r], mx);
        let sum: f64 = (row.iter().filter(|v| !v.is_nan()))
            .map(|&v| {
                if v == mx {
                    1.0
                } else {
                    f64::from((v - mx) / temperature).exp()
                }
            })
            .sum();
        assert!(
            (f64::from(got.sum[r]) - sum).abs() <= 1e-4 * sum,
            "row {r} sum"
        );
    }
    let bad = top_k(&dev, &dev.upload(&logits).unwrap(), vocab, 300, 1.0);
    assert!(
        matches!(bad, Err(crate::ModelError::InvalidInput(_))),
        "k past MAX_TOP_K"
    );
}

/// Spans of 1, 5 and 2 rows (a decode step and two prompt chunks) and a 6-row token tree
/// (two roots), on scattered slots.
const GDN_SPAN_ROWS: [usize; 4] = [1, 5, 2, 6];
const GDN_SLOTS: [u32; 4] = [4, 0, 2, 3];
const GDN_TREE: [Option<u32>; 6] = [None, Some(0), Some(0), Some(1), None, Some(4)];

/// The pass's spans: three chains, then the tree.
fn gdn_rows() -> crate::GdnRows {
    use crate::gdn_rows::NO_TREE;
    let mut rows = crate::GdnRows::chains(GDN_SLOTS.to_vec(), &GDN_SPAN_ROWS).unwrap();
    rows.tree_of[3] = 0;
    let r0 = rows.starts[3] as usize;
    for (i, p) in GDN_TREE.iter().enumerate() {
        rows.parents[r0 + i] = p.unwrap_or(NO_TREE);
    }
    rows
}

/// Row i's ancestors in GDN_TREE, root first.
fn tree_path(i: usize) -> Vec<usize> {
    let mut path = Vec::new();
    let mut p = GDN_TREE[i];
    while let Some(a) = p {
        path.push(a as usize);
        p = GDN_TREE[a as usize];
    }
    path.reverse();
    path
}

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test -p edge-model --features cuda --release --lib -- --ignored cuda::"]
fn gdn_recurrence_matches_cpu() {
    use crate::cpu::delta_rule::{HeadInputs, recurrent};
    let dev = device();
    // Qwen3.6-27B's GDN shape: 16 key heads, 48 value heads, both 128 wide.
    let (hk, hv, dk, dv, slots) = (16, 48, 128, 128, 5);
    let rows: usize = GDN_SPAN_ROWS.iter().sum();
    let unit = |n: usize, seed: u32, scale: f32| -> Vec<f32> {
        let mut x = values(n, seed, 1.0);
        for head in x.chunks_mut(dk) {
            let norm = head.iter().map(|v| v * v).sum::<f32>().sqrt();
            head.iter_mut().for_each(|v| *v *= scale / norm);
        }
        x
    };
    // q, k, v head-major per span, as the conv writes them; b, a, z token-major.
    let q = unit(rows * hk * dk, 20, 1.0 / (dk as f32).sqrt());
    let k = unit(rows * hk * dk, 21, 1.0);
    let (v, z) = (
        values(rows * hv * dv, 22, 2.0),
        values(rows * hv * dv, 23, 2.0),
    );
    let (b, a) = (values(rows * hv, 24, 3.0), values(rows * hv, 25, 4.0));
    let neg_a: Vec<f32> = values(hv, 26, 1.0).iter().map(|x| -x.exp()).collect();
    let dt_bias = values(hv, 27, 1.0);
    let w = values(dv, 28, 0.3)
        .iter()
        .map(|x| 1.0 + x)
        .collect::<Vec<_>>();
    let states = values(slots * hv * dk * dv, 29, 0.2);

    // CPU: the per-head calls of cpu::gdn::recurrence and cpu::gdn_tree::recurrence.
    let mut want_states = states.clone();
    let mut want = vec![0.0f32; rows * hv * dv];
    let mut r0 = 0;
    for (s, (&n, &slot)) in GDN_SPAN_ROWS.iter().zip(&GDN_SLOTS).enumerate() {
        for j in 0..hv {
            let kh = j / (hv / hk);
            let beta: Vec<f32> = (0..n)
                .map(|i| norm::sigmoid(b[(r0 + i) * hv + j]))
                .collect();
            let g: Vec<f32> = (0..n)
                .map(|i| neg_a[j] * norm::softplus(a[(r0 + i) * hv + j] + dt_bias[j]))
                .collect();
            let inp = HeadInputs {
                q: &q[r0 * hk * dk + kh * n * dk..][..n * dk],
                k: &k[r0 * hk * dk + kh * n * dk..][..n * dk],
                v: &v[r0 * hv * dv + j * n * dv..][..n * dv],
                beta: &beta,
                g: &g,
                dk,
                dv,
            };
            let state = &mut want_states[((slot as usize) * hv + j) * dk * dv..][..dk * dv];
            let mut o = vec![0.0f32; n * dv];
            if s == 3 {
                // The tree: every row from the committed state along its path, which stays.
                let head = crate::cpu::delta_tree::TreeHead {
                    q: inp.q,
                    k: inp.k,
                    v: inp.v,
                    beta: &beta,
                    g: &g,
                    parents: &GDN_TREE,
                    dk,
                    dv,
                };
                crate::cpu::delta_tree::outputs(&head, state, &mut o);
            } else {
                recurrent(&inp, state, &mut o);
            }
            for (i, row) in o.chunks_exact_mut(dv).enumerate() {
                let at = ((r0 + i) * hv + j) * dv;
                norm::gated_rms_norm(row, &z[at..][..dv], &w, 1e-6);
                want[at..][..dv].copy_from_slice(row);
            }
        }
        r0 += n;
    }

    let up = |x: &[f32]| dev.upload(x).unwrap();
    let (neg_a_d, dt_d, w_d) = (up(&neg_a), up(&dt_bias), up(&w));
    let heads = GdnHeads {
        key_heads: hk,
        value_heads: hv,
        key_dim: dk,
        value_dim: dv,
    };
    let layer = GdnLayer {
        heads,
        neg_a: &neg_a_d,
        dt_bias: &dt_d,
        norm_weight: &w_d,
        eps: 1e-6,
    };
    let (qd, kd, vd, bd, ad, zd) = (up(&q), up(&k), up(&v), up(&b), up(&a), up(&z));
    let x = GdnInputs {
        q: &qd,
        k: &kd,
        v: &vd,
        b: &bd,
        a: &ad,
        z: &zd,
    };
    let mut sd = up(&states);
    let mut out = dev.zeros::<f32>(rows * hv * dv).unwrap();
    let spans = GdnSpans::upload(&dev, gdn_rows()).unwrap();
    gdn_recurrence(&dev, &layer, &mut sd, &spans, &x, &mut out).unwrap();
    let max_abs = |x: &[f32]| x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let (got, got_states) = (dev.download(&out).unwrap(), dev.download(&sd).unwrap());
    let err = got
        .iter()
        .zip(&want)
        .fold(0.0f32, |m, (g, c)| m.max((g - c).abs()));
    assert!(err <= 1e-5 * max_abs(&want), "output: max |err| {err:e}");
    let err = got_states
        .iter()
        .zip(&want_states)
        .fold(0.0f32, |m, (g, c)| m.max((g - c).abs()));
    assert!(
        err <= 1e-5 * max_abs(&want_states),
        "states: max |err| {err:e}"
    );

    let twice = crate::GdnRows {
        slots: vec![1, 1, 2, 3],
        ..gdn_rows()
    };
    assert!(
        matches!(
            GdnSpans::upload(&dev, twice),
            Err(crate::ModelError::InvalidInput(_))
        ),
        "a slot used twice"
    );
    let outside = crate::GdnRows {
        slots: vec![1, 9, 2, 3],
        ..gdn_rows()
    };
    let outside = GdnSpans::upload(&dev, outside).unwrap();
    let r = gdn_recurrence(&dev, &layer, &mut sd, &outside, &x, &mut out);
    assert!(
        matches!(r, Err(crate::ModelError::InvalidInput(_))),
        "a slot outside the pool"
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test -p edge-model --features cuda --release --lib -- --ignored cuda::"]
fn gdn_conv_matches_cpu() {
    use crate::cpu::conv::{ConvRange, conv_range};
    let dev = device();
    let (hk, hv, dk, dv, kernel, slots) = (16, 48, 128, 128, 4, 5);
    let rows: usize = GDN_SPAN_ROWS.iter().sum();
    let channels = 2 * hk * dk + hv * dv;
    let qkv = values(rows * channels, 30, 2.0);
    let taps = values(kernel * channels, 31, 0.5);
    let windows = values(slots * (kernel - 1) * channels, 32, 2.0);

    // CPU: the whole channel range of each span through conv_range (`[n, channels]`), then
    // the norms, rearranged head-major per span as cpu::gdn::conv writes it.
    let mut want_windows = windows.clone();
    let (mut want_q, mut want_k, mut want_v) = (
        vec![0.0f32; rows * hk * dk],
        vec![0.0f32; rows * hk * dk],
        vec![0.0f32; rows * hv * dv],
    );
    let mut r0 = 0;
    for (s, (&n, &slot)) in GDN_SPAN_ROWS.iter().zip(&GDN_SLOTS).enumerate() {
        let win =
            &mut want_windows[slot as usize * (kernel - 1) * channels..][..(kernel - 1) * channels];
        let mut conv = vec![0.0f32; n * channels];
        if s == 3 {
            // Tree rows as cpu::gdn_tree::conv computes them: the committed window, then
            // the path's rows; the window stays.
            for i in 0..n {
                let mut rows: Vec<&[f32]> = win.chunks_exact(channels).collect();
                rows.extend(
                    tree_path(i)
                        .into_iter()
                        .chain([i])
                        .map(|p| &qkv[(r0 + p) * channels..][..channels]),
                );
                let rows = &rows[rows.len() - kernel..];
                let out = &mut conv[i * channels..][..channels];
                for (t, x) in rows.iter().enumerate() {
                    for ((o, &w), &xc) in out.iter_mut().zip(&taps[t * channels..]).zip(*x) {
                        *o += w * xc;
                    }
                }
                out.iter_mut().for_each(|o| *o = norm::silu(*o));
            }
        } else {
            let mut range = ConvRange {
                first: 0,
                history: win.chunks_exact_mut(channels).collect(),
                out: &mut conv,
            };
            conv_range(&qkv[r0 * channels..][..n * channels], n, &taps, &mut range);
        }
        for (i, row) in conv.chunks_exact_mut(channels).enumerate() {
            for (h, head) in row[..2 * hk * dk].chunks_exact_mut(dk).enumerate() {
                norm::l2_norm(head);
                if h < hk {
                    head.iter_mut().for_each(|e| *e *= 1.0 / (dk as f32).sqrt());
                    want_q[r0 * hk * dk + (h * n + i) * dk..][..dk].copy_from_slice(head);
                } else {
                    let at = r0 * hk * dk + ((h - hk) * n + i) * dk;
                    want_k[at..][..dk].copy_from_slice(head);
                }
            }
            for (j, head) in row[2 * hk * dk..].chunks_exact(dv).enumerate() {
                want_v[r0 * hv * dv + (j * n + i) * dv..][..dv].copy_from_slice(head);
            }
        }
        r0 += n;
    }

    let up = |x: &[f32]| dev.upload(x).unwrap();
    let heads = GdnHeads {
        key_heads: hk,
        value_heads: hv,
        key_dim: dk,
        value_dim: dv,
    };
    let mut wd = up(&windows);
    let (mut q, mut k, mut v) = (
        dev.zeros::<f32>(rows * hk * dk).unwrap(),
        dev.zeros::<f32>(rows * hk * dk).unwrap(),
        dev.zeros::<f32>(rows * hv * dv).unwrap(),
    );
    let spans = GdnSpans::upload(&dev, gdn_rows()).unwrap();
    gdn_conv(
        &dev,
        heads,
        &up(&taps),
        &mut wd,
        &spans,
        &up(&qkv),
        (&mut q, &mut k, &mut v),
    )
    .unwrap();
    for (name, got, want) in [("q", &q, &want_q), ("k", &k, &want_k), ("v", &v, &want_v)] {
        let got = dev.download(got).unwrap();
        let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let err = got
            .iter()
            .zip(want)
            .fold(0.0f32, |m, (g, c)| m.max((g - c).abs()));
        assert!(
            err <= 1e-5 * scale,
            "conv {name}: max |err| {err:e} of {scale:e}"
        );
    }
    assert_eq!(
        dev.download(&wd).unwrap(),
        want_windows,
        "windows shift exactly"
    );
}

/// Query-like values in about [−2, 2].
pub(super) fn values_f32(n: usize) -> Vec<f32> {
    values(n, 40, 2.0)
}
