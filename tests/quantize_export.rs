//! `edge_model::export` against a real ModelOpt 0.47 export of the same bf16 weights
//! (`tests/fixtures/qwen35-tiny-nvfp4-src` → `tests/fixtures/qwen35-tiny-nvfp4`).

use edge_kvcache::CacheConfig;
use edge_model::export::{ExportOptions, QuantFormat, quantize_checkpoint};
use edge_model::{ActivationMode, Checkpoint, Cpu, LogitRows, Qwen35Model, Session};

/// Runs `tokens` through a fresh session of `model`.
fn run(model: &Qwen35Model<Cpu>, tokens: &[u32], logits: LogitRows) {
    let mut s = Session::new(model, CacheConfig::default()).unwrap();
    s.forward(tokens, logits).unwrap();
}
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
}

/// A folder the export creates, inside the test's own temporary folder (tests run in
/// parallel), which is removed when dropped.
fn out_dir() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    (tmp, out)
}

#[test]
fn nvfp4_export_is_byte_identical_to_modelopt() {
    let (_tmp, dst) = out_dir();
    let opts = ExportOptions {
        format: QuantFormat::Nvfp4,
        calibration: None,
        max_shard_bytes: usize::MAX,
    };
    let mut calls = 0;
    let report = quantize_checkpoint(
        &fixture("qwen35-tiny-nvfp4-src"),
        &dst,
        &opts,
        &mut |_, _| calls += 1,
    )
    .unwrap();
    assert_eq!(
        report.quantized, 25,
        "ModelOpt quantizes 25 linears in this model"
    );
    assert!(calls > 0);

    let ours = Checkpoint::open(&dst).unwrap();
    let theirs = Checkpoint::open(&fixture("qwen35-tiny-nvfp4")).unwrap();
    let mut compared = 0;
    for t in theirs.tensors() {
        // Activation and KV scales come from calibration, which this export skipped.
        let calibrated = [".input_scale", ".k_scale", ".v_scale"];
        if calibrated.iter().any(|s| t.name.ends_with(s)) {
            assert!(
                ours.get(&t.name).is_none(),
                "{} written without calibration",
                t.name
            );
            continue;
        }
        let mine = ours
            .get(&t.name)
            .unwrap_or_else(|| panic!("{} missing from our export", t.name));
        assert_eq!(mine.dtype, t.dtype, "{}", t.name);
        assert_eq!(mine.shape, t.shape, "{}", t.name);
        assert!(*mine.data == *t.data, "{}: bytes differ", t.name);
        compared += 1;
    }
    assert_eq!(compared, ours.tensors().count(), "no extra tensors");
    let hq: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dst.join("hf_quant_config.json")).unwrap())
            .unwrap();
    let want: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("qwen35-tiny-nvfp4").join("hf_quant_config.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        hq["quantization"]["exclude_modules"],
        want["quantization"]["exclude_modules"]
    );
    assert_eq!(hq["quantization"]["quant_algo"], "NVFP4");

    // The export loads and runs as W4A16.
    let model = Qwen35Model::load(&dst, ActivationMode::None).unwrap();
    run(&model, &[1, 2, 3], LogitRows::Last);
    // W4A4 needs calibrated input scales: a clear error, not a panic.
    let err = Qwen35Model::load(&dst, ActivationMode::Nvfp4)
        .unwrap_err()
        .to_string();
    assert!(err.contains("input_scale"), "{err}");
}

#[test]
fn fp8_export_round_trips_and_shards() {
    let (_tmp, dst) = out_dir();
    let opts = ExportOptions {
        format: QuantFormat::Fp8,
        calibration: None,
        max_shard_bytes: 100_000,
    };
    let report = quantize_checkpoint(
        &fixture("qwen35-tiny-nvfp4-src"),
        &dst,
        &opts,
        &mut |_, _| {},
    )
    .unwrap();
    assert!(
        report.files.len() > 1,
        "small shard limit gives several files"
    );
    assert!(dst.join("model.safetensors.index.json").exists());
    let ckpt = Checkpoint::open(&dst).unwrap();
    let w = ckpt.require("model.layers.0.mlp.down_proj.weight").unwrap();
    assert_eq!(w.dtype, edge_core::DType::F8E4M3);
    // Each FP8 weight dequantizes to its source within E4M3's precision (this random
    // tiny model amplifies any weight change chaotically, so logits are no measure).
    let src = Checkpoint::open(&fixture("qwen35-tiny-nvfp4-src")).unwrap();
    let mut quantized = 0;
    for t in ckpt
        .tensors()
        .filter(|t| t.dtype == edge_core::DType::F8E4M3)
    {
        let prefix = t.name.trim_end_matches(".weight");
        let scale = ckpt
            .require(&format!("{prefix}.weight_scale"))
            .unwrap()
            .scalar_f32()
            .unwrap();
        let (rows, cols) = (t.shape[0], t.shape[1]);
        let deq = edge_quant::Fp8Tensor::from_parts(rows, cols, t.data.clone(), scale)
            .unwrap()
            .dequantize();
        let orig = src.require(&t.name).unwrap().to_f32().unwrap();
        let err: f64 = deq
            .iter()
            .zip(&orig)
            .map(|(a, b)| ((a - b) as f64).powi(2))
            .sum::<f64>()
            .sqrt();
        let norm: f64 = orig.iter().map(|v| (*v as f64).powi(2)).sum::<f64>().sqrt();
        assert!(
            err / norm < 0.03,
            "{}: relative error {}",
            t.name,
            err / norm
        );
        quantized += 1;
    }
    assert_eq!(quantized, 25);
    let model = Qwen35Model::load(&dst, ActivationMode::None).unwrap();
    run(&model, &[5, 9, 200], LogitRows::All);
}

#[test]
fn calibrated_export_matches_modelopt_scales() {
    let bytes = std::fs::read(fixture("qwen35-tiny-nvfp4").join("expected.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let calib = st.tensor("calib_ids").unwrap();
    let cols = calib.shape()[1];
    let ids: Vec<u32> = calib
        .data()
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as u32)
        .collect();
    let prompts: Vec<Vec<u32>> = ids.chunks(cols).map(|c| c.to_vec()).collect();
    let scales =
        edge_model::export::calibrate(&fixture("qwen35-tiny-nvfp4-src"), &prompts).unwrap();
    let (_tmp, dst) = out_dir();
    let opts = ExportOptions {
        format: QuantFormat::Nvfp4,
        calibration: Some(scales),
        max_shard_bytes: usize::MAX,
    };
    quantize_checkpoint(
        &fixture("qwen35-tiny-nvfp4-src"),
        &dst,
        &opts,
        &mut |_, _| {},
    )
    .unwrap();
    let ours = Checkpoint::open(&dst).unwrap();
    let theirs = Checkpoint::open(&fixture("qwen35-tiny-nvfp4")).unwrap();
    let mut checked = 0;
    let mut worst: f32 = 0.0;
    for t in theirs.tensors() {
        if [".input_scale", ".k_scale", ".v_scale"]
            .iter()
            .any(|s| t.name.ends_with(s))
        {
            let want = t.scalar_f32().unwrap();
            let got = ours.require(&t.name).unwrap().scalar_f32().unwrap();
            // ModelOpt calibrates with bf16 compute, edge-llm with f32: maxima agree to
            // within bf16 rounding of the activations.
            let rel = (got - want).abs() / want;
            worst = worst.max(rel);
            assert!(rel < 0.05, "{}: ours {got}, ModelOpt {want}", t.name);
            checked += 1;
        }
    }
    println!("calibrated scales: worst relative difference to ModelOpt {worst:.4}");
    assert_eq!(checked, 25 + 2);
    let hq = std::fs::read_to_string(dst.join("hf_quant_config.json")).unwrap();
    assert!(hq.contains("\"kv_cache_quant_algo\": \"FP8\""), "{hq}");
    let model = Qwen35Model::load(&dst, ActivationMode::Nvfp4).unwrap();
    run(&model, &[1, 2, 3], LogitRows::Last);
}
