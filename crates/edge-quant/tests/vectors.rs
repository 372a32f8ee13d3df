//! Checks every case in `data/nvfp4-vectors.json` (generated with ModelOpt 0.47.0 and
//! torch 2.15.0 by `gen_nvfp4_vectors.py`): E2M1 decode/encode, the full E4M3fn and E5M2
//! decode tables and torch casts, the NVFP4 weight cases byte for byte, and the swizzle
//! offsets. (The W4A4 activation case is tested with the activation quantizer.)

use edge_quant::Nvfp4Tensor;
use edge_quant::formats::{e2m1, e4m3, e5m2};
use edge_quant::nvfp4::swizzle::{padded_dims, swizzle_scales, swizzled_offset};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Deserialize)]
struct Vectors {
    e2m1_decode: BTreeMap<String, f64>,
    e2m1_encode_modelopt: Vec<E2m1Encode>,
    fp8_cast_torch: Vec<Fp8Cast>,
    e4m3fn_decode: Vec<String>,
    e5m2_decode: Vec<String>,
    nvfp4_weight_cases: Vec<WeightCase>,
    swizzle_example: Swizzle,
}

#[derive(Deserialize)]
struct E2m1Encode {
    x_f32: String,
    code: u8,
}

#[derive(Deserialize)]
struct Fp8Cast {
    x: String,
    e4m3fn: u8,
    e5m2: u8,
}

#[derive(Deserialize)]
struct WeightCase {
    name: String,
    shape: [usize; 2],
    input_f32_hex: Vec<String>,
    input: Vec<f64>,
    weight_uint8: Vec<u8>,
    weight_shape: [usize; 2],
    weight_scale_e4m3_u8: Vec<u8>,
    weight_scale_shape: [usize; 2],
    weight_scale_f32: Vec<f64>,
    weight_scale_2_hex: String,
    dequant: Vec<f64>,
}

#[derive(Deserialize)]
struct Swizzle {
    #[serde(rename = "M")]
    m: usize,
    #[serde(rename = "K_sf")]
    k_sf: usize,
    padded: [usize; 2],
    samples: Vec<SwizzleSample>,
    first_32_entries_as_row_major_index: Vec<usize>,
}

#[derive(Deserialize)]
struct SwizzleSample {
    m: usize,
    k: usize,
    offset: usize,
}

fn load() -> Vectors {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/nvfp4-vectors.json");
    let text = std::fs::read_to_string(path).expect("read nvfp4-vectors.json");
    serde_json::from_str(&text).expect("parse nvfp4-vectors.json")
}

fn hex_f32(s: &str) -> f32 {
    let digits = s.strip_prefix("0x").expect("0x prefix");
    f32::from_bits(u32::from_str_radix(digits, 16).expect("hex"))
}

/// Parses the JSON's float strings ("nan", "inf", "-0.0", decimals).
fn parse_f32(s: &str) -> f32 {
    s.parse::<f32>()
        .unwrap_or_else(|_| panic!("bad float {s:?}"))
}

/// Same value, including the sign of zero; NaN equals NaN.
fn same(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

#[test]
fn e2m1_decode_table() {
    let v = load();
    assert_eq!(v.e2m1_decode.len(), 16);
    for (code, value) in &v.e2m1_decode {
        let code: u8 = code.parse().expect("code");
        // The JSON writes code 8 as 0.0; the table holds −0, which compares equal.
        assert_eq!(e2m1::decode(code), *value as f32, "code {code}");
    }
    assert!(e2m1::decode(8).is_sign_negative());
}

#[test]
fn e2m1_encode_matches_modelopt() {
    let v = load();
    assert_eq!(v.e2m1_encode_modelopt.len(), 40);
    for case in &v.e2m1_encode_modelopt {
        let x = hex_f32(&case.x_f32);
        assert_eq!(e2m1::encode(x), case.code, "x = {x} ({})", case.x_f32);
    }
}

#[test]
fn e4m3fn_and_e5m2_decode_tables() {
    let v = load();
    assert_eq!(v.e4m3fn_decode.len(), 256);
    assert_eq!(v.e5m2_decode.len(), 256);
    for b in 0..=255u8 {
        let want = parse_f32(&v.e4m3fn_decode[b as usize]);
        assert!(same(e4m3::decode(b), want), "e4m3 {b:#04x}: {want}");
        let want = parse_f32(&v.e5m2_decode[b as usize]);
        assert!(same(e5m2::decode(b), want), "e5m2 {b:#04x}: {want}");
    }
}

#[test]
fn fp8_casts_match_torch() {
    let v = load();
    assert_eq!(v.fp8_cast_torch.len(), 23);
    for case in &v.fp8_cast_torch {
        let x = parse_f32(&case.x);
        assert_eq!(e4m3::encode(x), case.e4m3fn, "e4m3fn({x})");
        assert_eq!(e5m2::encode(x), case.e5m2, "e5m2({x})");
    }
}

#[test]
fn nvfp4_weight_cases_byte_exact() {
    let v = load();
    assert_eq!(v.nvfp4_weight_cases.len(), 4);
    for case in &v.nvfp4_weight_cases {
        let name = &case.name;
        let [rows, cols] = case.shape;
        let input: Vec<f32> = case.input_f32_hex.iter().map(|h| hex_f32(h)).collect();
        assert_eq!(input.len(), rows * cols, "{name}");
        for (a, b) in input.iter().zip(&case.input) {
            assert_eq!(*a, *b as f32, "{name}: input hex and decimal disagree");
        }
        assert_eq!(case.weight_shape, [rows, cols / 2], "{name}");
        assert_eq!(case.weight_scale_shape, [rows, cols / 16], "{name}");

        let t = Nvfp4Tensor::quantize(rows, cols, &input).expect(name);
        let g = hex_f32(&case.weight_scale_2_hex);
        assert_eq!(
            t.global_scale().to_bits(),
            g.to_bits(),
            "{name}: weight_scale_2"
        );
        assert_eq!(t.codes(), &case.weight_uint8[..], "{name}: packed codes");
        assert_eq!(t.scales(), &case.weight_scale_e4m3_u8[..], "{name}: scales");
        for (&s, &f) in t.scales().iter().zip(&case.weight_scale_f32) {
            assert_eq!(e4m3::decode(s), f as f32, "{name}: scale value");
        }
        let deq = t.dequantize();
        for (i, (&got, &want)) in deq.iter().zip(&case.dequant).enumerate() {
            assert_eq!(got, want as f32, "{name}: dequant[{i}]");
        }

        // The explicit-scale path with the same scale gives the same tensor.
        let again = Nvfp4Tensor::quantize_with_global_scale(rows, cols, &input, g).expect(name);
        assert_eq!(again, t, "{name}: quantize_with_global_scale");
    }
}

#[test]
fn nvfp4_ramp_spot_values_from_the_notes() {
    let v = load();
    let ramp = &v.nvfp4_weight_cases[0];
    assert_eq!(ramp.name, "ramp_1x32");
    let input: Vec<f32> = ramp.input_f32_hex.iter().map(|h| hex_f32(h)).collect();
    let t = Nvfp4Tensor::quantize(1, 32, &input).unwrap();
    let want = [
        0xff, 0xef, 0xee, 0xde, 0xdd, 0xcc, 0xab, 0x9a, 0x10, 0x22, 0x43, 0x54, 0x65, 0x66, 0x76,
        0x77,
    ];
    assert_eq!(t.codes(), &want);
    assert_eq!(t.scales(), &[0x7e, 0x7d]);
    assert_eq!(t.global_scale().to_bits(), 0x3ac3_0c31);
}

#[test]
fn swizzle_offsets() {
    let v = load();
    let sw = &v.swizzle_example;
    let (pr, pc) = padded_dims(sw.m, sw.k_sf).unwrap();
    assert_eq!([pr, pc], sw.padded);
    assert_eq!(sw.samples.len(), 10);
    for s in &sw.samples {
        assert_eq!(
            swizzled_offset(s.m, s.k, pc),
            s.offset,
            "({}, {})",
            s.m,
            s.k
        );
    }
    // Position i of the swizzled buffer holds row-major element `first_32[i]`.
    for (pos, &idx) in sw.first_32_entries_as_row_major_index.iter().enumerate() {
        let (m, k) = (idx / sw.k_sf, idx % sw.k_sf);
        assert_eq!(swizzled_offset(m, k, pc), pos, "row-major index {idx}");
    }
    // The same through the buffer transform, with distinct non-zero bytes per element.
    let label = |idx: usize| (idx % 251 + 1) as u8;
    let scales: Vec<u8> = (0..sw.m * sw.k_sf).map(label).collect();
    let out = swizzle_scales(sw.m, sw.k_sf, &scales).unwrap();
    assert_eq!(out.len(), pr * pc);
    for (pos, &idx) in sw.first_32_entries_as_row_major_index.iter().enumerate() {
        assert_eq!(out[pos], label(idx), "swizzled byte {pos}");
    }
    assert_eq!(out.iter().filter(|&&b| b != 0).count(), sw.m * sw.k_sf);
}
