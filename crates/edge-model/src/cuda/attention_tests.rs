//! The attention's CUDA operations (inputs, KV store and copies, paged attention)
//! against the CPU's own functions, on a GPU; ignored without one (see `tests.rs`).

use super::attention::{FirstPassKernel, attention_pass};
use super::kv_store::{KvLayerMut, KvPagesMut};
use super::rope::AttentionNorms;
use super::tests::{device, values, values_f32};
use super::*;
use crate::AttentionRows;
use crate::cpu::norm::rms_norm_zero_centred;
use crate::rope::Rope;
use edge_core::Device;
use edge_kvcache::memory::{KvRun, decode_run};
use edge_kvcache::{AttentionLayerSpec, BlockId, CacheMemory, CacheSpec, HostMemory, KvDType};

fn attention_rows_match_reference(on: Device) {
    let dev = device(on);
    // Qwen3.6-27B's attention: 24 query heads on 4 KV heads of 256; FP8 pages of 16 rows.
    let (kv_heads, group, dim, block, pool, max_pages) = (4, 6, 256, 16, 300, 64);
    // Span 0: a decode row at depth 1000; span 1: a prompt chunk of 5 rows at 17;
    // span 2: a 4-node tree after 600 committed rows (root, two children, a grandchild);
    // span 3: a prompt chunk of 45 rows at 500 (five tiles of the tile kernel).
    let mut span_of = vec![0u32, 1, 1, 1, 1, 1, 2, 2, 2, 2];
    let mut lens = vec![1000u32, 18, 19, 20, 21, 22, 600, 600, 600, 600];
    let mut masks = vec![0u64, 0, 0, 0, 0, 0, 0b0001, 0b0011, 0b0101, 0b1011];
    span_of.extend([3; 45]);
    lens.extend(501..546);
    masks.extend([0; 45]);
    let table: Vec<u32> = (0..4 * max_pages)
        .map(|i| ((i * 7919) % pool) as u32)
        .collect();
    let n = lens.len();
    let rows = AttentionRows {
        table: table.clone(),
        max_pages,
        block_size: block,
        span_of: span_of.clone(),
        lens: lens.clone(),
        masks: masks.clone(),
        stores: (0..n as u32).collect(),
    };
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
    for i in 0..n {
        let len = lens[i] as usize;
        let seen: Vec<usize> = (0..len)
            .chain((0..64).filter(|o| masks[i] >> o & 1 == 1).map(|o| len + o))
            .collect();
        let pages = &table[span_of[i] as usize * max_pages..][..max_pages];
        for h in 0..heads {
            let qh = &q[(i * heads + h) * dim..][..dim];
            let mut scores = Vec::new();
            let mut vs = Vec::new();
            for &r in &seen {
                let page = pages[r / block] as usize;
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
                for (o, &x) in want[(i * heads + h) * dim..][..dim].iter_mut().zip(v) {
                    *o += wi / total * f64::from(x);
                }
            }
        }
    }

    let (kd, vd) = (dev.upload(&keys).unwrap(), dev.upload(&values).unwrap());
    let layer = PagedAttention {
        pages: KvPages::Fp8 {
            keys: &kd,
            values: &vd,
            k_scale,
            v_scale,
        },
        kv_heads,
        group,
        head_dim: dim,
    };
    let on_device = DeviceAttentionRows::upload(&dev, rows.clone()).unwrap();
    let mut out = dev.zeros::<f32>(n * heads * dim).unwrap();
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    // The tile kernel (chosen: 8 tiles for 55 rows) and the row kernel (forced).
    for kernel in [FirstPassKernel::Auto, FirstPassKernel::Rows] {
        let q_dev = dev.upload(&q).unwrap();
        attention_pass(&dev, &layer, &on_device, &q_dev, &mut out, kernel).unwrap();
        let got = dev.download(&out).unwrap();
        let err = got
            .iter()
            .zip(&want)
            .fold(0.0f64, |m, (&g, &w)| m.max((f64::from(g) - w).abs()));
        assert!(
            err <= 1e-5 * scale,
            "{kernel:?}: max |err| {err:e} of {scale:e}"
        );
    }
    assert!(
        on_device.tiles.get().is_some_and(|t| t.is_some()),
        "the mixed batch took the tile kernel"
    );

    let too_long = AttentionRows {
        lens: vec![(max_pages * block + 1) as u32; n],
        ..rows.clone()
    };
    assert!(
        matches!(
            DeviceAttentionRows::upload(&dev, too_long),
            Err(crate::ModelError::InvalidPlan { .. })
        ),
        "a row past its table"
    );
    let small_pool = &dev.upload(&keys[..elems / 2]).unwrap();
    let short = PagedAttention {
        pages: KvPages::Fp8 {
            keys: small_pool,
            values: small_pool,
            k_scale,
            v_scale,
        },
        ..layer
    };
    let r = attention_rows(&dev, &short, &on_device, &dev.upload(&q).unwrap(), &mut out);
    assert!(
        matches!(
            r,
            Err(crate::ModelError::IndexOutOfRange { what: "page", .. })
        ),
        "a page outside the pool"
    );
}

fn attention_inputs_match_cpu(on: Device) {
    let dev = device(on);
    // Qwen3.6-27B: 24 query heads and 4 KV heads of 256, a quarter rotated.
    let (heads, kv_heads, d, rows) = (24, 4, 256, 3);
    let rope = Rope::new(64, 10_000_000.0);
    let inv_freq: Vec<f32> = (0..32)
        .map(|i| 1.0 / 10_000_000f32.powf((2 * i) as f32 / 64.0))
        .collect();
    let positions = [0u32, 9, 60_000];
    let qg = values(rows * heads * 2 * d, 1, 3.0);
    let k = values(rows * kv_heads * d, 2, 3.0);
    let (qw, kw) = (values(d, 3, 0.2), values(d, 4, 0.2));
    let (mut want_q, mut want_k) = (vec![0.0; rows * heads * d], k.clone());
    let mut want_gate = vec![0.0; rows * heads * d];
    for t in 0..rows {
        for h in 0..heads {
            let src = &qg[(t * heads + h) * 2 * d..][..2 * d];
            want_q[(t * heads + h) * d..][..d].copy_from_slice(&src[..d]);
            want_gate[(t * heads + h) * d..][..d].copy_from_slice(&src[d..]);
        }
        let q_row = &mut want_q[t * heads * d..][..heads * d];
        rms_norm_zero_centred(q_row, &qw, 1e-6);
        rope.apply(q_row, d, positions[t] as usize);
        let k_row = &mut want_k[t * kv_heads * d..][..kv_heads * d];
        rms_norm_zero_centred(k_row, &kw, 1e-6);
        rope.apply(k_row, d, positions[t] as usize);
    }
    let (qn, kn, f) = (
        dev.upload(&qw).unwrap(),
        dev.upload(&kw).unwrap(),
        dev.upload(&inv_freq).unwrap(),
    );
    let layer = AttentionNorms {
        heads,
        kv_heads,
        head_dim: d,
        q_norm: &qn,
        k_norm: &kn,
        inv_freq: &f,
        eps: 1e-6,
    };
    let mut kd = dev.upload(&k).unwrap();
    let (mut q, mut gate) = (
        dev.zeros::<f32>(rows * heads * d).unwrap(),
        dev.zeros::<f32>(rows * heads * d).unwrap(),
    );
    let pos = dev.upload(&positions).unwrap();
    attention_inputs(
        &dev,
        &layer,
        &dev.upload(&qg).unwrap(),
        &mut kd,
        &pos,
        &mut q,
        &mut gate,
    )
    .unwrap();
    assert_eq!(
        dev.download(&gate).unwrap(),
        want_gate,
        "the gate is copied"
    );
    // cos/sin of angles up to 6e4 rad: a few ulp apart between libm and CUDA.
    let tol = |got: &[f32], want: &[f32], what: &str| {
        let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g - w).abs() <= 2e-5 * scale,
                "{what}[{i}]: gpu {g}, cpu {w}"
            );
        }
    };
    tol(&dev.download(&q).unwrap(), &want_q, "q");
    tol(&dev.download(&kd).unwrap(), &want_k, "k");
    let bad = AttentionNorms {
        head_dim: 512,
        ..layer
    };
    let r = attention_inputs(
        &dev,
        &bad,
        &dev.upload(&qg).unwrap(),
        &mut kd,
        &pos,
        &mut q,
        &mut gate,
    );
    assert!(matches!(r, Err(crate::ModelError::Unsupported { .. })));
}

fn kv_store_and_copies_match_the_host_cache(on: Device) {
    let dev = device(on);
    let (kv_heads, d, block, pool) = (4, 256, 16, 6);
    for dtype in [KvDType::Fp8E4M3, KvDType::Bf16, KvDType::F32] {
        let spec = CacheSpec {
            block_size: block,
            kv_dtype: dtype,
            attention: vec![AttentionLayerSpec {
                kv_heads,
                head_dim: d,
                k_scale: 0.05,
                v_scale: 0.03,
            }],
            recurrent: vec![],
        };
        let mut host = HostMemory::new(&spec).unwrap();
        for p in 0..pool {
            host.materialize_page(BlockId::new(p)).unwrap();
        }
        let stores = vec![5u32, 17, 18, 90, 3];
        let n = stores.len();
        let (k, v) = (
            values(n * kv_heads * d, 7, 8.0),
            values(n * kv_heads * d, 8, 8.0),
        );
        let w = kv_heads * d;
        // Every row the test reads is written first (pages start unspecified).
        for slot in 0..pool * block {
            let zeros = vec![0.0; w];
            host.kv_mut(0)
                .write_row(BlockId::new(slot / block), slot % block, &zeros, &zeros)
                .unwrap();
        }
        for (i, &s) in stores.iter().enumerate() {
            let s = s as usize;
            host.kv_mut(0)
                .write_row(
                    BlockId::new(s / block),
                    s % block,
                    &k[i * w..][..w],
                    &v[i * w..][..w],
                )
                .unwrap();
        }
        let moves = [(17u32, 40u32), (40, 41), (3, 17)];
        for &(a, b) in &moves {
            let (a, b) = (a as usize, b as usize);
            host.kv_mut(0)
                .copy_row(
                    (BlockId::new(a / block), a % block),
                    (BlockId::new(b / block), b % block),
                )
                .unwrap();
        }
        let rows = AttentionRows {
            table: vec![0],
            max_pages: 1,
            block_size: block,
            span_of: vec![0; n],
            lens: vec![1; n],
            masks: vec![0; n],
            stores,
        };
        let on_device = DeviceAttentionRows::upload(&dev, rows).unwrap();
        let (kd, vd) = (dev.upload(&k).unwrap(), dev.upload(&v).unwrap());
        let elems = pool * block * w;
        // Compares every page of the device layer with the host cache's raw runs.
        let check = |keys: Vec<f32>, values: Vec<f32>| {
            let mut want_k = vec![0.0f32; d];
            let mut want_v = vec![0.0f32; d];
            for p in 0..pool {
                for h in 0..kv_heads {
                    for r in 0..block {
                        decode_run(
                            host.kv(0).keys(BlockId::new(p), h, r..r + 1),
                            0.05,
                            &mut want_k,
                        );
                        decode_run(
                            host.kv(0).values(BlockId::new(p), h, r..r + 1),
                            0.03,
                            &mut want_v,
                        );
                        let at = ((p * kv_heads + h) * block + r) * d;
                        assert_eq!(
                            &keys[at..at + d],
                            &want_k[..],
                            "{dtype:?} keys page {p} head {h} row {r}"
                        );
                        assert_eq!(
                            &values[at..at + d],
                            &want_v[..],
                            "{dtype:?} values page {p} head {h} row {r}"
                        );
                    }
                }
            }
        };
        let decode = |codes: KvRun, scale: f32| {
            let mut out = vec![0.0; elems];
            decode_run(codes, scale, &mut out);
            out
        };
        let layer_of = |pages| KvLayerMut {
            pages,
            kv_heads,
            head_dim: d,
            block_size: block,
        };
        match dtype {
            KvDType::Fp8E4M3 => {
                let (mut keys, mut vals) = (
                    dev.zeros::<u8>(elems).unwrap(),
                    dev.zeros::<u8>(elems).unwrap(),
                );
                let mut layer = layer_of(KvPagesMut::Fp8 {
                    keys: &mut keys,
                    values: &mut vals,
                    k_scale: 0.05,
                    v_scale: 0.03,
                });
                kv_store(&dev, &mut layer, &on_device, &kd, &vd).unwrap();
                kv_copy_rows(&dev, &mut layer, &moves).unwrap();
                let bad = kv_copy_rows(&dev, &mut layer, &[(0, (pool * block) as u32)]);
                assert!(
                    matches!(bad, Err(crate::ModelError::IndexOutOfRange { .. })),
                    "a slot outside the pages"
                );
                check(
                    decode(KvRun::Fp8(&dev.download(&keys).unwrap()), 0.05),
                    decode(KvRun::Fp8(&dev.download(&vals).unwrap()), 0.03),
                );
            }
            KvDType::Bf16 => {
                let (mut keys, mut vals) = (
                    dev.zeros::<u16>(elems).unwrap(),
                    dev.zeros::<u16>(elems).unwrap(),
                );
                let mut layer = layer_of(KvPagesMut::Bf16 {
                    keys: &mut keys,
                    values: &mut vals,
                });
                kv_store(&dev, &mut layer, &on_device, &kd, &vd).unwrap();
                kv_copy_rows(&dev, &mut layer, &moves).unwrap();
                check(
                    decode(KvRun::Bf16(&dev.download(&keys).unwrap()), 1.0),
                    decode(KvRun::Bf16(&dev.download(&vals).unwrap()), 1.0),
                );
            }
            KvDType::F32 => {
                let (mut keys, mut vals) = (
                    dev.zeros::<f32>(elems).unwrap(),
                    dev.zeros::<f32>(elems).unwrap(),
                );
                let mut layer = layer_of(KvPagesMut::F32 {
                    keys: &mut keys,
                    values: &mut vals,
                });
                kv_store(&dev, &mut layer, &on_device, &kd, &vd).unwrap();
                kv_copy_rows(&dev, &mut layer, &moves).unwrap();
                check(dev.download(&keys).unwrap(), dev.download(&vals).unwrap());
            }
        }
    }
}

/// The tile kernel against the row kernel at the 27B attention shape (24 query heads on
/// 4 KV heads of 256, FP8 pages of 16 rows) over 4096 cached rows: a 512-row prompt
/// chunk, a 32-node tree (a chain) and one decode row; the two agree to 1e-5 (their
/// speed: the `cuda_kernels` bench of edge-benches).
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test -p edge-model --features cuda --release --lib -- --ignored cuda::"]
fn attention_tiles_match_rows_at_depth() {
    let dev = device(Device::Cuda(0));
    let (kv_heads, group, dim, block, depth) = (4, 6, 256, 16, 4096);
    let max_pages = (depth + 512) / block;
    let elems = max_pages * kv_heads * block * dim;
    let code = |i: usize| -> u8 {
        let c = (i.wrapping_mul(2_654_435_761) >> 9) as u8;
        if c & 0x7f == 0x7f { 0x38 } else { c }
    };
    let keys = dev
        .upload(&(0..elems).map(code).collect::<Vec<u8>>())
        .unwrap();
    let values = dev
        .upload(&(0..elems).map(|i| code(i + 7)).collect::<Vec<u8>>())
        .unwrap();
    let layer = PagedAttention {
        pages: KvPages::Fp8 {
            keys: &keys,
            values: &values,
            k_scale: 0.02,
            v_scale: 0.03,
        },
        kv_heads,
        group,
        head_dim: dim,
    };
    let prompt: Vec<(u32, u64)> = (0..512).map(|i| (depth as u32 + i + 1, 0)).collect();
    let tree: Vec<(u32, u64)> = (0..32).map(|i| (depth as u32, (2u64 << i) - 1)).collect();
    for (what, rows) in [
        ("512-row prompt chunk", prompt),
        ("32-node tree", tree),
        ("decode row", vec![(depth as u32, 0)]),
    ] {
        let n = rows.len();
        let rows = AttentionRows {
            table: (0..max_pages as u32).collect(),
            max_pages,
            block_size: block,
            span_of: vec![0; n],
            lens: rows.iter().map(|r| r.0).collect(),
            masks: rows.iter().map(|r| r.1).collect(),
            stores: (0..n as u32).collect(),
        };
        let on_device = DeviceAttentionRows::upload(&dev, rows).unwrap();
        let q = dev.upload(&values_f32(n * kv_heads * group * dim)).unwrap();
        let (mut tiles_out, mut rows_out) = (
            dev.zeros::<f32>(n * kv_heads * group * dim).unwrap(),
            dev.zeros::<f32>(n * kv_heads * group * dim).unwrap(),
        );
        attention_pass(
            &dev,
            &layer,
            &on_device,
            &q,
            &mut tiles_out,
            FirstPassKernel::Auto,
        )
        .unwrap();
        attention_pass(
            &dev,
            &layer,
            &on_device,
            &q,
            &mut rows_out,
            FirstPassKernel::Rows,
        )
        .unwrap();
        let (a, b) = (
            dev.download(&tiles_out).unwrap(),
            dev.download(&rows_out).unwrap(),
        );
        let scale = b.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let err = a
            .iter()
            .zip(&b)
            .fold(0.0f32, |m, (x, y)| m.max((x - y).abs()));
        assert!(
            err <= 1e-5 * scale,
            "{what}: tiles against rows {err:e} of {scale:e}"
        );
    }
}

/// Decode batches split long prefixes finely; prompt chunks, with CTAs enough in their
/// tiles, keep few splits (and so few partials); every split covers the prefix.
#[test]
fn splits_follow_the_work_in_rows() {
    use super::attention::split;
    assert_eq!(
        split(65_536, 4),
        (256, 256),
        "one decode row at 64K: 256-row splits"
    );
    assert_eq!(split(65_536, 4 * 64), (4, 16_384), "64 decode rows");
    assert_eq!(
        split(65_536, 4 * 52),
        (5, 13_108),
        "a 512-row chunk in 52 tiles"
    );
    assert_eq!(split(100, 4), (1, 100), "a short prefix stays whole");
    assert_eq!(split(0, 4), (1, 1));
    for (longest, blocks) in [(1, 1), (4097, 3), (65_536, 2000), (300, 1)] {
        let (splits, rows) = split(longest, blocks);
        assert!(splits * rows >= longest && splits >= 1 && rows >= 1);
    }
}

edge_core::device_test!(attention_rows_match_reference, cuda);
edge_core::device_test!(attention_inputs_match_cpu, cuda);
edge_core::device_test!(kv_store_and_copies_match_the_host_cache, cuda);
