//! The ModelOpt NVFP4 export (`tests/fixtures/qwen35-tiny-nvfp4`, made by
//! `tools/reference/make_modelopt_fixture.py`) run by edge-model, against references
//! computed in PyTorch from the same exported bytes.

use edge_kvcache::{CacheConfig, KvDType};
use edge_model::{ActivationMode, LogitRows, Qwen35Model, Session};
use safetensors::SafeTensors;
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/qwen35-tiny-nvfp4")
}

fn expected(name: &str) -> Vec<f32> {
    let bytes = std::fs::read(dir().join("expected.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let t = st.tensor(name).unwrap();
    t.data()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn prompt() -> Vec<u32> {
    let bytes = std::fs::read(dir().join("expected.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let t = st.tensor("prompt_ids").unwrap();
    t.data()
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as u32)
        .collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

fn logits(mode: ActivationMode) -> Vec<f32> {
    let model = Qwen35Model::load(&dir(), mode).unwrap();
    assert!(
        model.mtp().is_some(),
        "the export keeps the MTP head in bf16"
    );
    Session::new(&model, CacheConfig::default())
        .unwrap()
        .forward(&prompt(), LogitRows::All)
        .unwrap()
        .logits
}

#[test]
fn w4a16_matches_dequantized_weight_reference() {
    let got = logits(ActivationMode::None);
    let want = expected("w4a16_logits");
    let cos = cosine(&got, &want);
    let max = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    println!("W4A16: cosine {cos:.7}, max |Δ| {max:.2e}");
    assert!(cos >= 0.9999, "cosine {cos}");
}

#[test]
fn w4a4_emulation_matches_simulated_w4a4_reference() {
    let got = logits(ActivationMode::Nvfp4);
    let want = expected("w4a4_logits");
    let cos = cosine(&got, &want);
    println!("W4A4: cosine {cos:.6}");
    assert!(cos >= 0.99, "cosine {cos}");
    // And it really quantizes activations: W4A4 is measurably not W4A16.
    let w4a16 = expected("w4a16_logits");
    assert!(cosine(&got, &w4a16) < 0.99999);
}

#[test]
fn w4a4_with_fp8_kv_cache_matches_reference() {
    let model = Qwen35Model::load(&dir(), ActivationMode::Nvfp4).unwrap();
    let fp8 = CacheConfig {
        kv_dtype: KvDType::Fp8E4M3,
        ..CacheConfig::default()
    };
    let got = Session::new(&model, fp8)
        .unwrap()
        .forward(&prompt(), LogitRows::All)
        .unwrap()
        .logits;
    let want = expected("w4a4_kv8_logits");
    let cos = cosine(&got, &want);
    let max = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    println!("W4A4 + FP8 KV: cosine {cos:.6}, max |Δ| {max:.2e}");
    assert!(cos >= 0.99, "cosine {cos}");
}
