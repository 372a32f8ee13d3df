//! The model's CUDA operations against the CPU backend's own functions, on a GPU. Every
//! test is ignored (it needs one); run them with
//! `cargo test -p edge-model --features cuda --release --lib -- --ignored cuda:: --test-threads=1`
//! (or `tools/device/cuda_checks.sh`). The host emulation of the same kernels is
//! `kernels/host_emulation/check_model.py`.

use super::*;
use crate::backend::Gate;
use crate::cpu::norm;
use edge_core::Device;
use edge_core::cuda::{CudaDevice, KernelCache};
use edge_core::rng::SeededRng;
use std::sync::Arc;

/// The CUDA device a device-parameterised test runs on (`device_test!`), on a GPU with
/// the CLI's kernel cache (`edge-llm kernels warm` fills it).
pub(super) fn device(on: Device) -> Arc<CudaDevice> {
    let dir = KernelCache::user_default_dir()
        .unwrap_or_else(|| std::env::temp_dir().join("edge-model-ptx-cache"));
    let cache = KernelCache::in_dir(dir);
    CudaDevice::open(on, &super::HOST_KERNEL_TABLES, cache).expect("open the CUDA device")
}

/// `n` values uniform in [−scale, scale), drawn by [`SeededRng`] from `seed`.
pub(super) fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut rng = SeededRng::from_seed(seed);
    (0..n).map(|_| rng.uniform(-scale, scale)).collect()
}

pub(super) fn assert_close(what: &str, gpu: &[f32], cpu: &[f32], rel: f32) {
    assert_eq!(gpu.len(), cpu.len(), "{what}: lengths");
    for (i, (&g, &c)) in gpu.iter().zip(cpu).enumerate() {
        let tol = rel * c.abs().max(1e-6);
        assert!((g - c).abs() <= tol, "{what}[{i}]: gpu {g:e}, cpu {c:e}");
    }
}

fn elementwise_ops_match_cpu(on: Device) {
    let dev = device(on);
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
    // As many rows as `out` holds, one past the end of `a`.
    let bad = [5u32; 4];
    let r = gather_rows(&dev, &ad, w, &dev.upload(&bad).unwrap(), &bad, &mut out);
    assert!(
        matches!(
            r,
            Err(crate::ModelError::IndexOutOfRange {
                what: "row",
                index: 5,
                ..
            })
        ),
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
    let bad = [50u32; 3];
    let r = embed_bf16(&dev, &td, w, &dev.upload(&bad).unwrap(), &bad, &mut out);
    assert!(
        matches!(
            r,
            Err(crate::ModelError::TokenOutOfVocab {
                token: 50,
                vocab: 50
            })
        ),
        "id past the vocabulary"
    );
}

fn norms_match_cpu(on: Device) {
    let dev = device(on);
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

fn argmax_matches_cpu(on: Device) {
    let dev = device(on);
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

fn top_k_matches_a_sort(on: Device) {
    let dev = device(on);
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
        matches!(bad, Err(crate::ModelError::Unsupported { .. })),
        "k past MAX_TOP_K"
    );
}

/// Query-like values in about [−2, 2].
pub(super) fn values_f32(n: usize) -> Vec<f32> {
    values(n, 40, 2.0)
}

edge_core::device_test!(elementwise_ops_match_cpu, cuda);
edge_core::device_test!(norms_match_cpu, cuda);
edge_core::device_test!(argmax_matches_cpu, cuda);
edge_core::device_test!(top_k_matches_a_sort, cuda);
