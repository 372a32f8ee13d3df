//! The Gated DeltaNet's CUDA operations (conv, row and chunked recurrence) against the
//! CPU backend's own functions, on a GPU; ignored without one (see `tests.rs`).

use super::gdn::{GdnHeads, GdnLayer};
use super::tests::{device, values};
use super::*;
use crate::cpu::norm;
use edge_core::Device;
use edge_core::cuda::{CudaDevice, DeviceSlice};

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

/// The recurrence on `spans` (chains of `span_rows` rows on `slots`, and the tree
/// GDN_TREE where `spans` has one) at Qwen3.6-27B's GDN shape (16 key heads, 48 value
/// heads, both 128 wide) against the CPU backend's per-head calls: `recurrent` for one
/// row and `chunked` for more (`cpu::gdn::recurrence`) where `chunked_chains`, else
/// `recurrent` row after row as the row kernel, and `delta_tree::outputs` for the tree.
/// `then` gets the device, the layer, the inputs, the states and the output afterwards.
fn recurrence_case(
    on: Device,
    span_rows: &[usize],
    slots_of: &[u32],
    spans: crate::GdnRows,
    chunked_chains: bool,
    then: impl FnOnce(
        &CudaDevice,
        &GdnLayer<'_>,
        &GdnInputs<'_>,
        &mut DeviceSlice<f32>,
        &mut DeviceSlice<f32>,
    ),
) {
    use crate::cpu::delta_rule::{HeadInputs, chunked, recurrent};
    let dev = device(on);
    let (hk, hv, dk, dv, slots) = (16, 48, 128, 128, 5);
    let rows: usize = span_rows.iter().sum();
    let unit = |n: usize, seed: u64, scale: f32| -> Vec<f32> {
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
    for (&n, (&slot, &tree)) in span_rows.iter().zip(slots_of.iter().zip(&spans.tree_of)) {
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
            if tree != crate::gdn_rows::NO_TREE {
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
            } else if chunked_chains && n > 1 {
                chunked(&inp, state, &mut o);
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
    let spans = GdnSpans::upload(&dev, spans).unwrap();
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
    then(&dev, &layer, &x, &mut sd, &mut out);
}

fn gdn_recurrence_matches_cpu(on: Device) {
    recurrence_case(
        on,
        &GDN_SPAN_ROWS,
        &GDN_SLOTS,
        gdn_rows(),
        false,
        |dev, layer, x, sd, out| {
            let twice = crate::GdnRows {
                slots: vec![1, 1, 2, 3],
                ..gdn_rows()
            };
            assert!(
                matches!(
                    GdnSpans::upload(dev, twice),
                    Err(crate::ModelError::InvalidPlan { .. })
                ),
                "a slot used twice"
            );
            let outside = crate::GdnRows {
                slots: vec![1, 9, 2, 3],
                ..gdn_rows()
            };
            let outside = GdnSpans::upload(dev, outside).unwrap();
            let r = gdn_recurrence(dev, layer, sd, &outside, x, out);
            assert!(
                matches!(r, Err(crate::ModelError::IndexOutOfRange { index: 9, .. })),
                "a slot outside the pool"
            );
        },
    );
}

/// Prompt chunks without a tree take the chunked kernel: spans of 1, 70 (three chunks,
/// the last partial), 33 and 32 rows, against the CPU backend's own choice (`chunked`
/// for several rows).
fn gdn_chunked_recurrence_matches_cpu(on: Device) {
    let (span_rows, slots) = ([1, 70, 33, 32], [4, 0, 2, 3]);
    let spans = crate::GdnRows::chains(slots.to_vec(), &span_rows).unwrap();
    assert_eq!(
        super::gdn::recurrence_kernel(
            GdnHeads {
                key_heads: 16,
                value_heads: 48,
                key_dim: 128,
                value_dim: 128
            },
            &spans
        ),
        "eq_gdn_chunked_f32"
    );
    recurrence_case(on, &span_rows, &slots, spans, true, |_, _, _, _, _| {});
}

fn gdn_conv_matches_cpu(on: Device) {
    use crate::cpu::conv::{ConvRange, conv_range};
    let dev = device(on);
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

/// A 512-row prompt chunk at the 27B shape takes the chunked kernel and matches the CPU
/// (its speed: the `cuda_kernels` bench of edge-benches).
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test -p edge-model --features cuda --release --lib -- --ignored cuda::"]
fn gdn_prompt_chunk_matches_cpu() {
    let spans = crate::GdnRows::chains(vec![0], &[512]).unwrap();
    let heads = GdnHeads {
        key_heads: 16,
        value_heads: 48,
        key_dim: 128,
        value_dim: 128,
    };
    assert_eq!(
        super::gdn::recurrence_kernel(heads, &spans),
        "eq_gdn_chunked_f32"
    );
    recurrence_case(
        Device::Cuda(0),
        &[512],
        &[0],
        spans,
        true,
        |_, _, _, _, _| {},
    );
}

edge_core::device_test!(gdn_recurrence_matches_cpu, cuda);
edge_core::device_test!(gdn_chunked_recurrence_matches_cpu, cuda);
edge_core::device_test!(gdn_conv_matches_cpu, cuda);
