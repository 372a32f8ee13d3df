//! Re-quantizes the source weights of real ModelOpt 0.47 exports and requires the
//! exported bytes exactly.
//!
//! - `data/tiny-llama-nvfp4-modelopt047/`: an NVFP4 (W4A4, FP8 KV) export of a 2-layer
//!   Llama and its BF16 source weights (`original_bf16.safetensors`).
//! - `data/tiny-llama-fp8-modelopt047/`: the linears of an FP8 export of the same model.

use edge_quant::nvfp4::quantize::{fused_global_scale, global_scale_for};
use edge_quant::{Fp8Tensor, Nvfp4Tensor};
use half::bf16;
use safetensors::{Dtype, SafeTensors};

const NVFP4_DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/tiny-llama-nvfp4-modelopt047"
);
const FP8_DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/tiny-llama-fp8-modelopt047"
);

/// Fused projection groups: their members share `weight_scale_2` and `input_scale`.
const FUSED_GROUPS: [&[&str]; 2] = [&["q_proj", "k_proj", "v_proj"], &["gate_proj", "up_proj"]];

fn read(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

fn open(bytes: &[u8]) -> SafeTensors<'_> {
    SafeTensors::deserialize(bytes).expect("valid safetensors")
}

fn bf16_matrix(st: &SafeTensors<'_>, name: &str) -> (usize, usize, Vec<bf16>) {
    let t = st.tensor(name).unwrap_or_else(|_| panic!("missing {name}"));
    assert_eq!(t.dtype(), Dtype::BF16, "{name}");
    let [rows, cols] = t.shape() else {
        panic!("{name}: not 2-D")
    };
    let data = t
        .data()
        .chunks_exact(2)
        .map(|b| bf16::from_le_bytes([b[0], b[1]]))
        .collect();
    (*rows, *cols, data)
}

fn bytes_of<'a>(st: &SafeTensors<'a>, name: &str, dtype: Dtype) -> &'a [u8] {
    let t = st.tensor(name).unwrap_or_else(|_| panic!("missing {name}"));
    assert_eq!(t.dtype(), dtype, "{name}");
    t.data()
}

fn scalar_f32(st: &SafeTensors<'_>, name: &str) -> f32 {
    let t = st.tensor(name).unwrap_or_else(|_| panic!("missing {name}"));
    assert_eq!(t.dtype(), Dtype::F32, "{name}");
    assert!(t.shape().is_empty(), "{name}: expected a 0-dim scalar");
    let b = t.data();
    f32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

fn to_f32(data: &[bf16]) -> Vec<f32> {
    data.iter().map(|v| v.to_f32()).collect()
}

/// Module prefixes (`model.layers.0.self_attn.q_proj.`) that have `suffix` tensors.
fn prefixes_with(st: &SafeTensors<'_>, suffix: &str) -> Vec<String> {
    let mut p: Vec<String> = st
        .names()
        .into_iter()
        .filter_map(|n| n.strip_suffix(suffix).map(str::to_string))
        .collect();
    p.sort();
    p
}

/// The prefixes of `prefix`'s fused group present in `members` (itself alone if the
/// projection is not fused).
fn group_of(prefix: &str, members: &[String]) -> Vec<String> {
    let trimmed = prefix.trim_end_matches('.');
    let (parent, proj) = trimmed.rsplit_once('.').expect("dotted name");
    let group = FUSED_GROUPS.iter().find(|g| g.contains(&proj));
    match group {
        None => vec![prefix.to_string()],
        Some(g) => g
            .iter()
            .map(|p| format!("{parent}.{p}."))
            .filter(|p| members.contains(p))
            .collect(),
    }
}

#[test]
fn nvfp4_requantization_is_byte_exact() {
    let (qb, ob) = (
        read(&format!("{NVFP4_DIR}/model.safetensors")),
        read(&format!("{NVFP4_DIR}/original_bf16.safetensors")),
    );
    let (q, orig) = (open(&qb), open(&ob));
    // A linear is NVFP4 exactly when it has a `weight_scale`.
    let linears = prefixes_with(&q, "weight_scale");
    assert_eq!(linears.len(), 14, "7 linears × 2 layers");
    let mut group_scale_mattered = false;
    for p in &linears {
        let (rows, cols, w) = bf16_matrix(&orig, &format!("{p}weight"));
        let group = group_of(p, &linears);
        let wide: Vec<Vec<f32>> = group
            .iter()
            .map(|m| to_f32(&bf16_matrix(&orig, &format!("{m}weight")).2))
            .collect();
        let slices: Vec<&[f32]> = wide.iter().map(Vec::as_slice).collect();
        let g = fused_global_scale(&slices);

        let want_g = scalar_f32(&q, &format!("{p}weight_scale_2"));
        assert_eq!(g.to_bits(), want_g.to_bits(), "{p}: weight_scale_2");
        let t = Nvfp4Tensor::quantize_bf16_with_global_scale(rows, cols, &w, g).unwrap();
        assert_eq!(t.global_scale().to_bits(), want_g.to_bits(), "{p}");
        let want_codes = bytes_of(&q, &format!("{p}weight"), Dtype::U8);
        let want_scales = bytes_of(&q, &format!("{p}weight_scale"), Dtype::F8_E4M3);
        assert_eq!(t.codes(), want_codes, "{p}: weight bytes");
        assert_eq!(t.scales(), want_scales, "{p}: weight_scale bytes");

        // BF16 input and its exact f32 widening quantize identically.
        let f = Nvfp4Tensor::quantize_with_global_scale(rows, cols, &to_f32(&w), g).unwrap();
        assert_eq!(f, t, "{p}: bf16 vs f32 input");
        if group.len() == 1 {
            assert_eq!(
                Nvfp4Tensor::quantize_bf16(rows, cols, &w).unwrap(),
                t,
                "{p}"
            );
        } else {
            let own = global_scale_for(to_f32(&w).iter().fold(0.0f32, |m, x| m.max(x.abs())));
            group_scale_mattered |= own.to_bits() != g.to_bits();
        }
    }
    assert!(
        group_scale_mattered,
        "some fused member has a smaller amax than its group"
    );
}

#[test]
fn nvfp4_fused_group_members_share_input_scale() {
    let qb = read(&format!("{NVFP4_DIR}/model.safetensors"));
    let q = open(&qb);
    let linears = prefixes_with(&q, "weight_scale");
    let mut checked = 0;
    for p in &linears {
        let group = group_of(p, &linears);
        let first = scalar_f32(&q, &format!("{}input_scale", group[0]));
        assert!(first.is_finite() && first > 0.0, "{p}");
        for m in &group {
            let s = scalar_f32(&q, &format!("{m}input_scale"));
            assert_eq!(s.to_bits(), first.to_bits(), "{m} vs {}", group[0]);
            let g = scalar_f32(&q, &format!("{m}weight_scale_2"));
            let g0 = scalar_f32(&q, &format!("{}weight_scale_2", group[0]));
            assert_eq!(g.to_bits(), g0.to_bits(), "{m}: weight_scale_2");
        }
        checked += usize::from(group.len() > 1);
    }
    assert_eq!(checked, 10, "q/k/v and gate/up in both layers");
}

#[test]
fn nvfp4_dequantization_error_is_as_documented() {
    let (qb, ob) = (
        read(&format!("{NVFP4_DIR}/model.safetensors")),
        read(&format!("{NVFP4_DIR}/original_bf16.safetensors")),
    );
    let (q, orig) = (open(&qb), open(&ob));
    let (mut err2, mut ref2) = (0.0f64, 0.0f64);
    for p in prefixes_with(&q, "weight_scale") {
        let (rows, cols, w) = bf16_matrix(&orig, &format!("{p}weight"));
        let t = Nvfp4Tensor::from_parts(
            rows,
            cols,
            bytes_of(&q, &format!("{p}weight"), Dtype::U8).to_vec(),
            bytes_of(&q, &format!("{p}weight_scale"), Dtype::F8_E4M3).to_vec(),
            scalar_f32(&q, &format!("{p}weight_scale_2")),
        )
        .unwrap();
        let (mut e, mut r) = (0.0f64, 0.0f64);
        for (d, x) in t.dequantize().iter().zip(&w) {
            let x = f64::from(x.to_f32());
            e += (f64::from(*d) - x).powi(2);
            r += x * x;
        }
        let rel = (e / r).sqrt();
        assert!((0.085..0.105).contains(&rel), "{p}: relative error {rel}");
        (err2, ref2) = (err2 + e, ref2 + r);
    }
    let rel = (err2 / ref2).sqrt();
    assert!((rel - 0.0956).abs() < 0.002, "overall relative error {rel}");
}

#[test]
fn fp8_requantization_from_bf16_is_byte_exact() {
    let (qb, ob) = (
        read(&format!("{FP8_DIR}/model.safetensors")),
        read(&format!("{NVFP4_DIR}/original_bf16.safetensors")),
    );
    let (q, orig) = (open(&qb), open(&ob));
    let linears = prefixes_with(&q, "weight_scale");
    assert_eq!(linears.len(), 14);
    let mut f32_path_differs = 0;
    let mut unshared_weight_scale = false;
    for p in &linears {
        let (rows, cols, w) = bf16_matrix(&orig, &format!("{p}weight"));
        let want_codes = bytes_of(&q, &format!("{p}weight"), Dtype::F8_E4M3);
        let want_scale = scalar_f32(&q, &format!("{p}weight_scale"));
        let t = Fp8Tensor::quantize_bf16(rows, cols, &w).unwrap();
        assert_eq!(
            t.scale().to_bits(),
            want_scale.to_bits(),
            "{p}: weight_scale"
        );
        assert_eq!(t.codes(), want_codes, "{p}: weight bytes");

        // The f32 path (no BF16 rounding of the quotient) differs from the export.
        let f = Fp8Tensor::quantize(rows, cols, &to_f32(&w)).unwrap();
        assert_eq!(f.scale().to_bits(), want_scale.to_bits(), "{p}");
        f32_path_differs += usize::from(f.codes() != want_codes);

        // FP8 input scales are unified over a fused group; weight scales are not.
        let group = group_of(p, &linears);
        let s0 = scalar_f32(&q, &format!("{}input_scale", group[0]));
        let ws0 = scalar_f32(&q, &format!("{}weight_scale", group[0]));
        for m in &group {
            let s = scalar_f32(&q, &format!("{m}input_scale"));
            assert_eq!(s.to_bits(), s0.to_bits(), "{m}: input_scale");
            unshared_weight_scale |= scalar_f32(&q, &format!("{m}weight_scale")) != ws0;
        }
    }
    assert_eq!(
        f32_path_differs, 14,
        "double rounding shows in every linear"
    );
    assert!(unshared_weight_scale);
}
