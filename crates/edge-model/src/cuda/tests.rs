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

fn device() -> Arc<CudaDevice> {
    let dir = std::env::temp_dir().join("edge-model-ptx-cache");
    CudaDevice::new(0, KernelCache::in_dir(dir)).expect("open cuda:0")
}

/// Deterministic values in about [−scale, scale].
fn values(n: usize, seed: u32, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let h = (i as u32)
                .wrapping_mul(2_654_435_761)
                .wrapping_add(seed.wrapping_mul(40_503));
            ((h >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

fn assert_close(what: &str, gpu: &[f32], cpu: &[f32], rel: f32) {
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
fn gdn_decode_matches_cpu() {
    use crate::cpu::delta_rule::{HeadInputs, recurrent};
    let dev = device();
    // Qwen3.6-27B's GDN shape: 16 key heads, 48 value heads, both 128 wide.
    let (spans, hk, hv, dk, dv, slots) = (3, 16, 48, 128, 128, 5);
    let slot_ids = [4u32, 0, 2];
    let unit = |n: usize, seed: u32, scale: f32| -> Vec<f32> {
        let mut x = values(n, seed, 1.0);
        for head in x.chunks_mut(dk) {
            let norm = head.iter().map(|v| v * v).sum::<f32>().sqrt();
            head.iter_mut().for_each(|v| *v *= scale / norm);
        }
        x
    };
    let q = unit(spans * hk * dk, 20, 1.0 / (dk as f32).sqrt());
    let k = unit(spans * hk * dk, 21, 1.0);
    let (v, z) = (
        values(spans * hv * dv, 22, 2.0),
        values(spans * hv * dv, 23, 2.0),
    );
    let (b, a) = (values(spans * hv, 24, 3.0), values(spans * hv, 25, 4.0));
    let neg_a: Vec<f32> = values(hv, 26, 1.0).iter().map(|x| -x.exp()).collect();
    let dt_bias = values(hv, 27, 1.0);
    let w = values(dv, 28, 0.3)
        .iter()
        .map(|x| 1.0 + x)
        .collect::<Vec<_>>();
    let states = values(slots * hv * dk * dv, 29, 0.2);

    // CPU: the same per-head calls as cpu::gdn::recurrence for one-row spans.
    let mut want_states = states.clone();
    let mut want = vec![0.0f32; spans * hv * dv];
    for (s, &slot) in slot_ids.iter().enumerate() {
        for j in 0..hv {
            let kh = j / (hv / hk);
            let beta = [norm::sigmoid(b[s * hv + j])];
            let g = [neg_a[j] * norm::softplus(a[s * hv + j] + dt_bias[j])];
            let inp = HeadInputs {
                q: &q[(s * hk + kh) * dk..][..dk],
                k: &k[(s * hk + kh) * dk..][..dk],
                v: &v[(s * hv + j) * dv..][..dv],
                beta: &beta,
                g: &g,
                dk,
                dv,
            };
            let state = &mut want_states[((slot as usize) * hv + j) * dk * dv..][..dk * dv];
            let o = &mut want[(s * hv + j) * dv..][..dv];
            recurrent(&inp, state, o);
            norm::gated_rms_norm(o, &z[(s * hv + j) * dv..][..dv], &w, 1e-6);
        }
    }

    let up = |x: &[f32]| dev.upload(x).unwrap();
    let (neg_a_d, dt_d, w_d) = (up(&neg_a), up(&dt_bias), up(&w));
    let heads = GdnHeads {
        key_heads: hk,
        value_heads: hv,
        key_dim: dk,
        value_dim: dv,
    };
    let layer = GdnDecodeLayer {
        heads,
        neg_a: &neg_a_d,
        dt_bias: &dt_d,
        norm_weight: &w_d,
        eps: 1e-6,
    };
    let (qd, kd, vd, bd, ad, zd) = (up(&q), up(&k), up(&v), up(&b), up(&a), up(&z));
    let x = GdnDecodeInputs {
        q: &qd,
        k: &kd,
        v: &vd,
        b: &bd,
        a: &ad,
        z: &zd,
    };
    let mut sd = up(&states);
    let mut out = dev.zeros::<f32>(spans * hv * dv).unwrap();
    let slots_d = dev.upload(&slot_ids).unwrap();
    gdn_decode(&dev, &layer, &mut sd, &slots_d, &slot_ids, &x, &mut out).unwrap();
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

    let twice = [1u32, 1, 2];
    let r = gdn_decode(
        &dev,
        &layer,
        &mut sd,
        &dev.upload(&twice).unwrap(),
        &twice,
        &x,
        &mut out,
    );
    assert!(
        matches!(r, Err(crate::ModelError::InvalidInput(_))),
        "a slot used twice"
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test -p edge-model --features cuda --release --lib -- --ignored cuda::"]
fn gdn_conv_decode_matches_cpu() {
    use crate::cpu::conv::{ConvRange, conv_range};
    let dev = device();
    let (spans, hk, hv, dk, dv, kernel, slots) = (2, 16, 48, 128, 128, 4, 3);
    let channels = 2 * hk * dk + hv * dv;
    let slot_ids = [2u32, 0];
    let qkv = values(spans * channels, 30, 2.0);
    let taps = values(kernel * channels, 31, 0.5);
    let windows = values(slots * (kernel - 1) * channels, 32, 2.0);

    // CPU: the whole channel range of each span through conv_range, then the norms.
    let mut want_windows = windows.clone();
    let mut want = vec![0.0f32; spans * channels];
    for (s, &slot) in slot_ids.iter().enumerate() {
        let win =
            &mut want_windows[slot as usize * (kernel - 1) * channels..][..(kernel - 1) * channels];
        let mut range = ConvRange {
            first: 0,
            history: win.chunks_exact_mut(channels).collect(),
            out: &mut want[s * channels..][..channels],
        };
        conv_range(&qkv[s * channels..][..channels], 1, &taps, &mut range);
        for (h, head) in want[s * channels..][..2 * hk * dk]
            .chunks_exact_mut(dk)
            .enumerate()
        {
            norm::l2_norm(head);
            if h < hk {
                head.iter_mut().for_each(|e| *e *= 1.0 / (dk as f32).sqrt());
            }
        }
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
        dev.zeros::<f32>(spans * hk * dk).unwrap(),
        dev.zeros::<f32>(spans * hk * dk).unwrap(),
        dev.zeros::<f32>(spans * hv * dv).unwrap(),
    );
    let slots_d = dev.upload(&slot_ids).unwrap();
    gdn_conv_decode(
        &dev,
        heads,
        &up(&taps),
        &mut wd,
        &slots_d,
        &slot_ids,
        &up(&qkv),
        (&mut q, &mut k, &mut v),
    )
    .unwrap();
    let (q, k, v) = (
        dev.download(&q).unwrap(),
        dev.download(&k).unwrap(),
        dev.download(&v).unwrap(),
    );
    for s in 0..spans {
        let want_s = &want[s * channels..][..channels];
        let got: Vec<f32> = q[s * hk * dk..][..hk * dk]
            .iter()
            .chain(&k[s * hk * dk..][..hk * dk])
            .chain(&v[s * hv * dv..][..hv * dv])
            .copied()
            .collect();
        let scale = want_s.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let err = got
            .iter()
            .zip(want_s)
            .fold(0.0f32, |m, (g, c)| m.max((g - c).abs()));
        assert!(
            err <= 1e-5 * scale,
            "conv span {s}: max |err| {err:e} of {scale:e}"
        );
    }
    assert_eq!(
        dev.download(&wd).unwrap(),
        want_windows,
        "windows shift exactly"
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test -p edge-model --features cuda --release --lib -- --ignored cuda::"]
fn attention_decode_matches_reference() {
    use edge_kvcache::memory::{KvRun, decode_run};
    let dev = device();
    // Qwen3.6-27B's attention: 24 query heads on 4 KV heads of 256; FP8 pages of 16 rows.
    let (kv_heads, group, dim, block, pool, max_pages) = (4, 6, 256, 16, 300, 64);
    let lens = [1000u32, 1, 17];
    let n = lens.len();
    let table: Vec<u32> = (0..n * max_pages)
        .map(|i| ((i * 7919) % pool) as u32)
        .collect();
    let elems = pool * kv_heads * block * dim;
    let code = |i: usize| -> u8 {
        let c = (i.wrapping_mul(2_654_435_761) >> 7) as u8;
        if c & 0x7f == 0x7f { 0x3c } else { c } // no NaN codes
    };
    let keys: Vec<u8> = (0..elems).map(code).collect();
    let values: Vec<u8> = (0..elems).map(|i| code(i + 12_345)).collect();
    let (k_scale, v_scale) = (0.02f32, 0.03f32);
    let heads = kv_heads * group;
    let q = values_f32(n * heads * dim);

    // Reference: rows decoded as the CPU cache decodes them, f64 softmax.
    let row = |pages: &[u8], scale: f32, page: usize, h: usize, r: usize| -> Vec<f32> {
        let at = ((page * kv_heads + h) * block + r) * dim;
        let mut out = vec![0.0f32; dim];
        decode_run(KvRun::Fp8(&pages[at..at + dim]), scale, &mut out);
        out
    };
    let mut want = vec![0.0f64; n * heads * dim];
    for (s, &len) in lens.iter().enumerate() {
        for h in 0..heads {
            let qh = &q[(s * heads + h) * dim..][..dim];
            let mut scores = Vec::new();
            let mut vs = Vec::new();
            for r in 0..len as usize {
                let page = table[s * max_pages + r / block] as usize;
                let k = row(&keys, k_scale, page, h / group, r % block);
                let dot: f64 = k
                    .iter()
                    .zip(qh)
                    .map(|(&a, &b)| f64::from(a) * f64::from(b))
                    .sum();
                scores.push(dot / (dim as f64).sqrt());
                vs.push(row(&values, v_scale, page, h / group, r % block));
            }
            let mx = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let w: Vec<f64> = scores.iter().map(|x| (x - mx).exp()).collect();
            let total: f64 = w.iter().sum();
            for (wi, v) in w.iter().zip(&vs) {
                for (o, &x) in want[(s * heads + h) * dim..][..dim].iter_mut().zip(v) {
                    *o += wi / total * f64::from(x);
                }
            }
        }
    }

    let (kd, vd) = (dev.upload(&keys).unwrap(), dev.upload(&values).unwrap());
    let layer = DecodeAttention {
        pages: KvPages::Fp8 {
            keys: &kd,
            values: &vd,
            k_scale,
            v_scale,
        },
        kv_heads,
        group,
        head_dim: dim,
        block_size: block,
    };
    let (td, ld) = (dev.upload(&table).unwrap(), dev.upload(&lens).unwrap());
    let spans = SpanPages {
        table: &td,
        table_host: &table,
        lens: &ld,
        lens_host: &lens,
        max_pages,
    };
    let mut out = dev.zeros::<f32>(n * heads * dim).unwrap();
    attention_decode(&dev, &layer, &spans, &dev.upload(&q).unwrap(), &mut out).unwrap();
    let got = dev.download(&out).unwrap();
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let err = got
        .iter()
        .zip(&want)
        .fold(0.0f64, |m, (&g, &w)| m.max((f64::from(g) - w).abs()));
    assert!(err <= 1e-5 * scale, "max |err| {err:e} of {scale:e}");

    let too_long = [(max_pages * block + 1) as u32, 1, 1];
    let bad = SpanPages {
        lens_host: &too_long,
        ..spans
    };
    let r = attention_decode(&dev, &layer, &bad, &dev.upload(&q).unwrap(), &mut out);
    assert!(
        matches!(r, Err(crate::ModelError::InvalidInput(_))),
        "a span longer than its table"
    );
}

/// Query-like values in about [−2, 2].
fn values_f32(n: usize) -> Vec<f32> {
    values(n, 40, 2.0)
}
