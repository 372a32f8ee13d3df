//! `--device cuda-emu` (the CUDA backend's own kernels emulated on the CPU) against
//! `--device cpu`: the same greedy tokens from the same prompts, on the demo model and
//! on synthetic bf16 and ModelOpt NVFP4 checkpoints, with f32 and FP8 pages, with tree
//! speculation, with bf16 activations (the CUDA backend's one activation mode).

use edge_model::synthetic::{SyntheticDType, write_predictable_checkpoint};
use std::path::Path;
use std::process::Command;

/// A small checkpoint whose heads the kernels take (head_dim 64), with an MTP head,
/// whose greedy continuations are clear (`write_predictable_checkpoint`).
fn synthetic_bf16(dir: &Path) {
    let config = serde_json::json!({
        "hidden_size": 128, "num_hidden_layers": 4, "intermediate_size": 256,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
        "linear_num_key_heads": 2, "linear_num_value_heads": 4,
        "linear_key_head_dim": 64, "linear_value_head_dim": 64,
        "vocab_size": 256, "max_position_embeddings": 4096, "eos_token_id": 1,
        "tie_word_embeddings": false
    });
    write_predictable_checkpoint(dir, &config, SyntheticDType::Bf16, 7).unwrap();
}

fn edge_llm(args: &[&str]) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_edge-llm"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "edge-llm {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null)
}

/// `generate`'s greedy tokens on `device` with `flags`.
fn tokens(device: &str, flags: &[&str]) -> Vec<u64> {
    let mut args = vec!["generate", "--device", device, "--json"];
    args.extend_from_slice(flags);
    let v = edge_llm(&args);
    let tokens: Vec<u64> = (v["tokens"].as_array().expect("tokens"))
        .iter()
        .map(|t| t.as_u64().unwrap())
        .collect();
    assert!(!tokens.is_empty(), "{v}");
    tokens
}

fn same_tokens(what: &str, flags: &[&str]) {
    let cpu = tokens("cpu", flags);
    let emulated = tokens("cuda-emu", flags);
    assert_eq!(cpu, emulated, "{what}: cpu against cuda-emu");
}

#[test]
fn the_demo_model_answers_alike() {
    let prompt = [
        "--prompt",
        "Count the lines of main.py",
        "--no-agent-defaults",
    ];
    for extra in [
        &["--act-quant", "bf16"][..],
        &["--act-quant", "bf16", "--spec", "tree"],
    ] {
        let flags: Vec<&str> = prompt
            .iter()
            .chain(extra)
            .copied()
            .chain(["--max-new-tokens", "24"])
            .collect();
        same_tokens("demo model", &flags);
    }
}

#[test]
fn synthetic_checkpoints_answer_alike() {
    let bf16 = tempfile::tempdir().unwrap();
    synthetic_bf16(bf16.path());
    let nvfp4 = tempfile::tempdir().unwrap();
    let (bf16_dir, nvfp4_dir) = (
        bf16.path().to_str().unwrap(),
        nvfp4.path().to_str().unwrap(),
    );
    edge_llm(&[
        "quantize", "--model", bf16_dir, "--out", nvfp4_dir, "--format", "nvfp4",
    ]);
    let prompt = "--prompt-ids=5,9,13,200,17,3,77,78,79,80,81,12";
    for model in [bf16_dir, nvfp4_dir] {
        for extra in [&[][..], &["--kv-dtype", "fp8"], &["--spec", "tree"]] {
            let mut flags = vec!["--model", model, prompt, "--act-quant", "bf16"];
            flags.extend_from_slice(&["--max-new-tokens", "12"]);
            flags.extend_from_slice(extra);
            same_tokens(&format!("{model} {extra:?}"), &flags);
        }
    }
}

/// The `logits` tensor of a `score` output file.
fn read_logits(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let t = st.tensor("logits").unwrap();
    (t.data().chunks_exact(4))
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// `score`'s logits and MTP logits on `device` (bf16 activations) with `flags`.
fn scores(dir: &Path, device: &str, flags: &[&str]) -> (Vec<f32>, Vec<f32>) {
    let (logits, mtp) = (
        dir.join(format!("{device}.st")),
        dir.join(format!("{device}-mtp.st")),
    );
    let mut args = vec!["score", "--device", device, "--act-quant", "bf16"];
    args.extend_from_slice(flags);
    let (l, m) = (logits.to_str().unwrap(), mtp.to_str().unwrap());
    args.extend_from_slice(&["--logits-out", l, "--mtp-logits-out", m]);
    edge_llm(&args);
    (read_logits(&logits), read_logits(&mtp))
}

/// The largest |a − b| of each row over that row's largest |a|, over all rows.
fn row_gap(a: &[f32], b: &[f32], vocab: usize) -> f32 {
    assert_eq!(a.len(), b.len());
    (a.chunks(vocab).zip(b.chunks(vocab)))
        .map(|(x, y)| {
            let scale = x.iter().fold(1e-6f32, |m, v| m.max(v.abs()));
            let gap = x.iter().zip(y).fold(0f32, |m, (p, q)| m.max((p - q).abs()));
            gap / scale
        })
        .fold(0.0, f32::max)
}

/// `score --device cuda-emu` against the CPU, both with bf16 activations: the demo model,
/// a synthetic checkpoint with FP8 pages and its ModelOpt NVFP4 export, the model's and the MTP head's logits
/// within docs/NUMERICS.md's tolerance for the CUDA backend (1e-2 of each row's largest
/// logit: bf16 activations move by one rounding step where an f32 sum crosses a
/// rounding boundary, as the CPU's own one-pass and token-by-token prompts do).
#[test]
fn scores_match_the_cpu_within_the_documented_tolerance() {
    let out = tempfile::tempdir().unwrap();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/demo");
    let synthetic = tempfile::tempdir().unwrap();
    synthetic_bf16(synthetic.path());
    let nvfp4 = tempfile::tempdir().unwrap();
    let (bf16_dir, nvfp4_dir) = (
        synthetic.path().to_str().unwrap(),
        nvfp4.path().to_str().unwrap(),
    );
    edge_llm(&[
        "quantize", "--model", bf16_dir, "--out", nvfp4_dir, "--format", "nvfp4",
    ]);
    let ids: String = (0..48)
        .map(|i| ((i * 37 + 11) % 250).to_string())
        .collect::<Vec<_>>()
        .join(",");
    let prompt = format!("--prompt-ids={ids}");
    for (model, vocab, extra) in [
        (demo.as_path(), None, &[][..]),
        (synthetic.path(), Some(256), &["--kv-dtype", "fp8"][..]),
        (nvfp4.path(), Some(256), &[][..]),
    ] {
        let mut flags = vec!["--model", model.to_str().unwrap(), prompt.as_str()];
        flags.extend_from_slice(extra);
        let (cpu, cpu_mtp) = scores(out.path(), "cpu", &flags);
        let (emu, emu_mtp) = scores(out.path(), "cuda-emu", &flags);
        let vocab = vocab.unwrap_or(cpu.len() / 48);
        let (gap, mtp_gap) = (
            row_gap(&cpu, &emu, vocab),
            row_gap(&cpu_mtp, &emu_mtp, vocab),
        );
        println!(
            "{}: logits gap {gap:.2e}, MTP gap {mtp_gap:.2e}",
            model.display()
        );
        assert!(
            gap < 1e-2 && mtp_gap < 1e-2,
            "{}: {gap:e} {mtp_gap:e}",
            model.display()
        );
    }
}
