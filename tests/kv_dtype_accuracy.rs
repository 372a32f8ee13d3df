//! What bf16 and FP8 KV pages cost in accuracy against f32 pages: prompt logits (max
//! |Δ|, mean cosine, top-1 agreement) and greedy agreement, on the HF fixtures and on
//! the trained demo model (numbers printed and recorded in docs/NUMERICS.md; bounds
//! loose enough to hold everywhere, tight enough to catch a broken page format).

use edge_kvcache::{CacheConfig, KvDType};
use edge_model::{ActivationMode, Cpu, LogitRows, Qwen35Model, Session, argmax};
use std::path::PathBuf;

fn dir(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

/// Prompt logits (all rows) and `steps` greedy tokens with `dtype` pages.
fn run(
    model: &Qwen35Model<Cpu>,
    prompt: &[u32],
    dtype: KvDType,
    steps: usize,
) -> (Vec<f32>, Vec<u32>) {
    let config = CacheConfig {
        kv_dtype: dtype,
        ..CacheConfig::default()
    };
    let mut s = Session::new(model, config).unwrap();
    let vocab = model.config().vocab_size;
    let logits = s.forward(prompt, LogitRows::All).unwrap().logits;
    let mut tok = argmax(&logits[(prompt.len() - 1) * vocab..]);
    let mut greedy = vec![tok];
    while greedy.len() < steps {
        tok = argmax(&s.forward(&[tok], LogitRows::Last).unwrap().logits);
        greedy.push(tok);
    }
    (logits, greedy)
}

fn compare(
    name: &str,
    model: &Qwen35Model<Cpu>,
    prompt: &[u32],
    steps: usize,
) -> Vec<(f32, f64, f64, f64)> {
    let vocab = model.config().vocab_size;
    let (reference, want) = run(model, prompt, KvDType::F32, steps);
    let mut out = Vec::new();
    for dtype in [KvDType::Bf16, KvDType::Fp8E4M3] {
        let (got, greedy) = run(model, prompt, dtype, steps);
        let max = got
            .iter()
            .zip(&reference)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        let rows = got.chunks_exact(vocab).zip(reference.chunks_exact(vocab));
        let (mut cos, mut top1) = (0.0, 0);
        for (a, b) in rows {
            let dot: f64 = a.iter().zip(b).map(|(x, y)| (x * y) as f64).sum();
            let na: f64 = a.iter().map(|x| (x * x) as f64).sum::<f64>().sqrt();
            let nb: f64 = b.iter().map(|x| (x * x) as f64).sum::<f64>().sqrt();
            cos += dot / (na * nb);
            top1 += usize::from(argmax(a) == argmax(b));
        }
        let n = prompt.len() as f64;
        let agree =
            greedy.iter().zip(&want).take_while(|(a, b)| a == b).count() as f64 / steps as f64;
        println!(
            "{name}, {dtype} pages vs f32: prompt logits max |Δ| {max:.2e}, mean cosine {:.6}, \
             top-1 {top1}/{}, greedy prefix {:.0}% of {steps}",
            cos / n,
            prompt.len(),
            100.0 * agree
        );
        out.push((max, cos / n, top1 as f64 / n, agree));
    }
    out
}

#[test]
fn reduced_precision_pages_stay_close_to_f32() {
    let prompt: Vec<u32> = (0..150).map(|i| (i * 37 % 250) as u32).collect();
    for (name, rel, mode) in [
        (
            "f32 fixture",
            "tests/fixtures/qwen35-tiny-f32",
            ActivationMode::None,
        ),
        (
            "NVFP4 fixture, W4A8",
            "tests/fixtures/qwen35-tiny-nvfp4",
            ActivationMode::Int8,
        ),
    ] {
        let model = Qwen35Model::load(&dir(rel), mode).unwrap();
        for (max, cos, top1, _) in compare(name, &model, &prompt, 16) {
            assert!(
                max < 0.5 && cos > 0.999 && top1 > 0.9,
                "{name}: {max} {cos} {top1}"
            );
        }
    }
    // The trained demo model (its weights make sharper, more realistic attention than
    // random ones) on a coding-agent prompt of about 300 tokens and a 64-token greedy run.
    let model = Qwen35Model::load(&dir("models/demo"), ActivationMode::None).unwrap();
    let prompt = demo_prompt();
    assert!(prompt.len() >= 250, "{} tokens", prompt.len());
    let r = compare("demo model", &model, &prompt, 64);
    // bf16 pages agree for the whole greedy run; FP8 at least for its first half.
    assert!(r[0].0 < 0.5 && r[0].1 > 0.9999 && r[0].3 == 1.0, "{r:?}");
    assert!(r[1].1 > 0.999 && r[1].3 >= 0.5, "{r:?}");
}

/// A bash-agent turn in the demo model's chat format, tokenized with its tokenizer.
fn demo_prompt() -> Vec<u32> {
    let tokenizer = tokenizers::Tokenizer::from_file(dir("models/demo/tokenizer.json")).unwrap();
    let text = "<|im_start|>system\nYou are a helpful coding assistant with shell access.\
                <|im_end|>\n<|im_start|>user\nThe tests in tests/test_parser.py fail after \
                the last refactor. Find out why and fix it.<|im_end|>\n<|im_start|>assistant\n\
                <tool_call>\n<function=bash>\n<parameter=command>\ncd /testbed && pytest -x \
                tests/test_parser.py\n</parameter>\n</function>\n</tool_call><|im_end|>\n\
                <|im_start|>user\n<tool_response>\nFAILED tests/test_parser.py::test_nested\
                </tool_response><|im_end|>\n<|im_start|>assistant\n";
    tokenizer.encode(text, false).unwrap().get_ids().to_vec()
}
