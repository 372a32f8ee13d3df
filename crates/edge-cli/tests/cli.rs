//! The `edge-llm` binary's stable interface: flags, JSON fields, output files, errors.

use std::path::PathBuf;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_edge-llm"))
}

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

/// Runs `edge-llm generate --json` with the main job's prompt plus `extra` flags and
/// returns the parsed JSON (the command must succeed).
fn generate_json(extra: &[&str]) -> serde_json::Value {
    let o = bin()
        .args([
            "generate",
            "--prompt",
            "List the Python files and count their lines",
        ])
        .args(["--json"])
        .args(extra)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn logits_shape(path: &std::path::Path) -> Vec<usize> {
    let bytes = std::fs::read(path).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let t = st.tensor("logits").unwrap();
    assert_eq!(t.dtype(), safetensors::Dtype::F32);
    t.shape().to_vec()
}

#[test]
fn generate_json_and_logits_out() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("logits.safetensors");
    let o = bin()
        .args([
            "generate",
            "--model",
            &fixture("qwen35-tiny-f32"),
            "--prompt-ids",
            "1,2,3,4",
        ])
        .args(["--max-new-tokens", "5", "--json", "--logits-out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for key in [
        "tokens",
        "text",
        "prompt_tokens",
        "generated_tokens",
        "prefill_ms",
        "decode_tokens_per_s",
    ] {
        assert!(v.get(key).is_some(), "missing {key} in {v}");
    }
    assert_eq!(v["prompt_tokens"], 4);
    let n = v["generated_tokens"].as_u64().unwrap() as usize;
    assert_eq!(v["tokens"].as_array().unwrap().len(), n);
    assert_eq!(logits_shape(&out), vec![n, 256]);
}

#[test]
fn score_writes_every_position() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("logits.safetensors");
    let o = bin()
        .args([
            "score",
            "--model",
            &fixture("qwen35-tiny-bf16-vl"),
            "--prompt-ids",
            "5,6,7",
            "--logits-out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(logits_shape(&out), vec![3, 256]);
}

/// `score --mtp-logits-out` against the MTP logits of the independent torch reference
/// (tools/reference/qwen35_ref.py, spec §7) stored with the fixture.
#[test]
fn score_writes_mtp_logits_matching_the_reference() {
    let dir = fixture("qwen35-tiny-f32");
    let expected = std::fs::read(format!("{dir}/expected.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&expected).unwrap();
    let ids: Vec<String> = (st.tensor("prompt_ids").unwrap().data().chunks_exact(8))
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()).to_string())
        .collect();
    let want: Vec<f32> = (st.tensor("mtp_logits").unwrap().data().chunks_exact(4))
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("mtp_logits.safetensors");
    let o = bin()
        .args(["score", "--model", &dir, "--prompt-ids", &ids.join(",")])
        .arg("--mtp-logits-out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(logits_shape(&out), vec![ids.len() - 1, 256]);
    let bytes = std::fs::read(&out).unwrap();
    let got = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let got: Vec<f32> = (got.tensor("logits").unwrap().data().chunks_exact(4))
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let worst = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    assert!(worst <= 2e-3, "MTP logits differ by {worst}");
    // A model without an MTP head, and a one-token prompt, are clear errors.
    let o = bin()
        .args([
            "score",
            "--model",
            &dir,
            "--prompt-ids",
            "5",
            "--mtp-logits-out",
        ])
        .arg(std::env::temp_dir().join("never-written.safetensors"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("at least 2"));
}

#[test]
fn inspect_reports_quantization_and_state_sizes() {
    let o = bin()
        .args([
            "inspect",
            "--json",
            "--model",
            &fixture("qwen35-tiny-nvfp4"),
        ])
        .output()
        .unwrap();
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["quantization"]["nvfp4_linears"], 25);
    assert_eq!(v["layer_pattern"], "LLLA");
    assert!(v["kv_bytes_per_token"]["bf16"].as_u64().unwrap() > 0);
}

#[test]
fn errors_are_messages_not_panics() {
    for args in [
        vec![
            "generate",
            "--model",
            "/nonexistent-model-dir",
            "--prompt-ids",
            "1",
        ],
        vec![
            "generate",
            "--model",
            &fixture("qwen35-tiny-f32"),
            "--prompt-ids",
            "1,999",
        ],
        vec![
            "generate",
            "--model",
            &fixture("qwen35-tiny-f32"),
            "--prompt-ids",
            "1,x",
        ],
        vec![
            "generate",
            "--model",
            &fixture("qwen35-tiny-f32"),
            "--prompt",
            "hi",
        ],
        vec![
            "generate",
            "--model",
            &fixture("qwen35-tiny-f32"),
            "--prompt-ids",
            "1",
            "--act-quant",
            "int3",
        ],
        vec![
            "quantize",
            "--model",
            &fixture("qwen35-tiny-f32"),
            "--out",
            "/tmp/x",
            "--format",
            "int4",
        ],
        vec![
            "generate",
            "--prompt",
            "hi",
            "--tools",
            "/nonexistent/tools.json",
        ],
        // A CUDA device: no CUDA support in this build, no driver, or (on a GPU) f32
        // weights, which the CUDA backend refuses.
        vec![
            "generate",
            "--model",
            &fixture("qwen35-tiny-f32"),
            "--prompt-ids",
            "1",
            "--device",
            "cuda:0",
        ],
        vec![
            "bench",
            "verify",
            "--model",
            &fixture("qwen35-tiny-f32"),
            "--device",
            "cuda:0",
        ],
        // A tools file that is JSON but not an array of tool schemas.
        vec![
            "generate",
            "--prompt",
            "hi",
            "--tools",
            &fixture("chat-template/cases.json"),
        ],
    ] {
        let o = bin().args(&args).output().unwrap();
        assert!(!o.status.success(), "{args:?} should fail");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(err.contains("error"), "{args:?}: {err}");
    }
}

/// `bench verify` reports each tree size against a decode step, with the device and the
/// CPU threads it ran on.
#[test]
fn bench_verify_reports_trees_and_device() {
    let o = bin()
        .args(["bench", "verify", "--model", &fixture("qwen35-tiny-f32")])
        .args([
            "--depth", "16", "--nodes", "1,4", "--steps", "2", "--rounds", "1", "--json",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["device"], "cpu");
    assert!(v["threads"].as_u64().is_some_and(|n| n >= 1), "{v}");
    let trees = v["trees"].as_array().unwrap();
    let nodes: Vec<u64> = trees.iter().map(|t| t["nodes"].as_u64().unwrap()).collect();
    assert_eq!(nodes, vec![1, 4]);
    assert!(
        trees
            .iter()
            .all(|t| t["ms_per_forward"].as_f64().unwrap() > 0.0)
    );
}

/// `bench decode --turn-tokens` times a follow-up turn whose earlier prompt comes from
/// the prefix cache (every run, also the second, finds all of it there), refuses to
/// combine with `--streams`, and is an error where the cache could not keep the prompt.
#[test]
fn bench_decode_times_a_turn_at_depth() {
    let run = |extra: &[&str]| {
        bin()
            .args(["bench", "decode", "--model", &fixture("qwen35-tiny-f32")])
            .args(["--depth", "8", "--decode-tokens", "2", "--turn-tokens", "5"])
            .args(extra)
            .output()
            .unwrap()
    };
    let o = run(&["--runs", "2", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["turn_tokens"], 5);
    assert!(
        v["turn_prefill_tokens_per_s"]
            .as_f64()
            .is_some_and(|t| t > 0.0),
        "{v}"
    );
    let o = run(&["--streams", "2"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--turn-tokens times one stream"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // A budget that holds the requests but not the prompt's snapshot: an error, not a
    // turn figure that silently prefilled the whole prompt.
    let o = run(&["--kv-budget", "100000"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("found 0 of the 8 prompt tokens"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `bench decode` names the kernel level it ran at (the detected one, or a forced
/// lower one), the CPU's extra features, and its speed against the bandwidth bound; a
/// level the CPU lacks or an unknown name is an error naming the levels.
#[test]
fn bench_decode_reports_level_features_and_bound() {
    let run = |extra: &[&str]| {
        bin()
            .args(["bench", "decode", "--model", &fixture("qwen35-tiny-f32")])
            .args([
                "--depth",
                "8",
                "--decode-tokens",
                "4",
                "--runs",
                "1",
                "--json",
            ])
            .args(extra)
            .output()
            .unwrap()
    };
    let o = run(&[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["simd_level"], edge_core::simd::detected().level.name());
    let extras: Vec<&str> = v["cpu_features"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert_eq!(extras, edge_core::simd::detected().extras());
    assert!(
        v["fraction_of_bound"].as_f64().is_some_and(|f| f > 0.0),
        "{v}"
    );
    assert!(
        v["read_bandwidth_gb_per_s"]
            .as_f64()
            .is_some_and(|b| b > 0.0)
    );

    let o = run(&["--simd-level", "portable"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["simd_level"], "portable");

    for level in ["sse9", "neon-sve"] {
        let o = run(&["--simd-level", level]);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("neon-dotprod") && err.contains("avx512"),
            "{err}"
        );
    }
    let unavailable = edge_core::simd::SimdLevel::ALL
        .into_iter()
        .find(|l| !l.is_available())
        .unwrap();
    let o = run(&["--simd-level", unavailable.name()]);
    assert!(!o.status.success(), "{unavailable} ran");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked") && err.contains("error"), "{err}");
}

/// The demo model's default agent setup (a `bash` tool) is what makes it call bash;
/// `--tools` replaces it with the caller's schemas and `--system` sets the system turn.
#[test]
fn generate_takes_tools_and_system_flags() {
    let tmp = tempfile::tempdir().unwrap();
    let tools = tmp.path().join("tools.json");
    let schema = r#"[{"type": "function", "function": {"name": "get_current_weather",
        "description": "Get the current weather for a city.",
        "parameters": {"type": "object", "properties": {"location": {"type": "string"}},
        "required": ["location"]}}}]"#;
    std::fs::write(&tools, schema).unwrap();
    for extra in [
        vec![
            "--tools",
            tools.to_str().unwrap(),
            "--system",
            "You are helpful.",
        ],
        vec!["--no-agent-defaults"],
    ] {
        let o = bin()
            .args([
                "generate",
                "--prompt",
                "Weather in Paris?",
                "--max-new-tokens",
                "4",
            ])
            .args(&extra)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{extra:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn embedded_demo_model_answers_with_a_tool_call() {
    let v = generate_json(&["--max-new-tokens", "80"]);
    let text = v["text"].as_str().unwrap();
    assert!(
        text.contains("<tool_call>") && text.contains("<function="),
        "{text}"
    );
    // A reply that ended on its stop token shows the reply, not the token.
    assert_eq!(v["stop_reason"], "stop", "{v}");
    assert!(text.trim_end().ends_with("</tool_call>"), "{text}");
    // The default (`auto`) decodes the cache-resident demo model token by token.
    assert_eq!(v["mean_accepted"], 1.0);
    assert!(v["speculation"].is_null());
    // Speculative decoding, chain and tree, gives the same tokens in fewer target
    // forwards.
    for spec in [
        &["--spec", "linear", "--draft-steps", "3"][..],
        &[
            "--spec",
            "tree",
            "--draft-steps",
            "4",
            "--tree-top-k",
            "3",
            "--tree-nodes",
            "12",
        ],
    ] {
        let mut args = vec!["--max-new-tokens", "80"];
        args.extend_from_slice(spec);
        let w = generate_json(&args);
        assert_eq!(v["tokens"], w["tokens"], "{spec:?}");
        let forwards = w["target_forwards"].as_u64().unwrap();
        let accepted = w["accepted_tokens"].as_u64().unwrap();
        let tokens = w["tokens"].as_array().unwrap().len() as u64;
        // The prefill's token, then per forward its accepted drafts and one more (the
        // last forward's may run past the stop token).
        assert!(1 + forwards + accepted >= tokens, "{spec:?}: {w}");
        assert!(2 * forwards < tokens, "{spec:?}: {w}");
        assert!(w["mean_accepted"].as_f64().unwrap() > 1.5, "{spec:?}: {w}");
    }
}

/// The committed NVFP4 copy of the demo model (`edge-llm quantize`) loads, with W4A16
/// W4A4 and W4A8 activations, and still answers the main job with a bash tool call.
#[test]
fn nvfp4_demo_copy_answers_with_a_tool_call() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/demo-nvfp4");
    let dir = dir.to_str().unwrap();
    for act in ["none", "nvfp4", "int8"] {
        let v = generate_json(&["--model", dir, "--act-quant", act, "--max-new-tokens", "60"]);
        let text = v["text"].as_str().unwrap();
        assert!(text.contains("<function=bash>"), "{act}: {text}");
    }
}

/// Runs `edge-llm generate --requests <lines>` with `extra` flags; returns the exit
/// status, the parsed stdout lines and stderr.
fn run_requests(lines: &[&str], extra: &[&str]) -> (bool, Vec<serde_json::Value>, String) {
    // Each call its own folder: tests run in parallel.
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("turns.jsonl");
    std::fs::write(&path, lines.join("\n")).unwrap();
    let o = bin()
        .args(["generate", "--requests"])
        .arg(&path)
        .args(extra)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (
        o.status.success(),
        out,
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `generate --requests`: one engine for every line, so repeated and branching prompts
/// come from the prefix cache; a bad line prints an error object naming it, the lines
/// after it still run, and the run exits non-zero; `--no-prefix-cache` turns reuse off.
#[test]
fn requests_file_reuses_prefixes_and_names_a_bad_line() {
    let model = fixture("qwen35-tiny-f32");
    let lines = [
        r#"{"prompt_ids": [1, 2, 3, 4, 5, 6, 7, 8], "max_new_tokens": 3, "reuse_points": [5]}"#,
        r#"{"prompt_ids": [1, 2, 3, 4, 5, 6, 7, 8], "max_new_tokens": 3, "reuse_points": [5]}"#,
        r#"{"prompt_ids": [1, 2, 3, 4, 5, 9, 9], "max_new_tokens": 2, "reuse_points": [5]}"#,
        "",
        r#"{"prompt_ids": [1, 2, 999999]}"#,
        r#"{"prompt_ids": [3, 4]}"#,
    ];
    let (ok, out, err) = run_requests(&lines, &["--model", &model]);
    assert!(
        !ok && err.contains("line 5") && !err.contains("panicked"),
        "{err}"
    );
    assert!(err.contains("1 of 5 requests failed (lines 5)"), "{err}");
    assert_eq!(out.len(), 5, "{out:?}");
    assert_eq!(out[3]["line"], 5);
    assert!(
        out[3]["error"]
            .as_str()
            .is_some_and(|e| e.contains("999999")),
        "{out:?}"
    );
    assert_eq!(out[4]["line"], 6);
    assert_eq!(out[4]["prompt_tokens"], 2, "the line after a bad one runs");
    assert_eq!(
        (
            out[0]["prompt_tokens"].as_u64(),
            out[0]["cached_tokens"].as_u64()
        ),
        (Some(8), Some(0))
    );
    assert_eq!(
        out[1]["cached_tokens"], 8,
        "a repeated prompt is served whole"
    );
    assert_eq!(out[1]["tokens"], out[0]["tokens"]);
    assert_eq!(out[2]["cached_tokens"], 5, "a branch after the reuse point");
    assert_eq!(out[2]["line"], 3);
    let (_, out, _) = run_requests(&lines, &["--model", &model, "--no-prefix-cache"]);
    assert_eq!(out.len(), 5);
    let ran = || out.iter().filter(|v| v.get("error").is_none());
    assert_eq!(ran().count(), 4);
    assert!(ran().all(|v| v["cached_tokens"] == 0), "{out:?}");
    assert_eq!(out[1]["tokens"], out[0]["tokens"]);
    for bad in [
        r#"{"prompt_ids": "1,2"}"#,
        r#"{"prompt": 5}"#,
        "not json",
        r#"{"prompt_ids": [1], "tempo": 1}"#,
        r#"{"prompt_ids": [1], "tools": 5}"#,
    ] {
        let (ok, _, err) = run_requests(&[bad], &["--model", &model]);
        assert!(
            !ok && err.contains("line 1") && !err.contains("panicked"),
            "{bad}: {err}"
        );
    }
}

/// Text prompts in a requests file go through the chat template with their message ends
/// marked: the same question again is served from the cache, FP8 pages included.
#[test]
fn requests_file_text_prompts_reuse_through_the_chat_template() {
    let line = r#"{"prompt": "List the Python files", "max_new_tokens": 4}"#;
    let (ok, out, err) = run_requests(&[line, line], &["--kv-dtype", "fp8"]);
    assert!(ok, "{err}");
    assert_eq!(out[0]["cached_tokens"], 0);
    assert_eq!(out[1]["cached_tokens"], out[1]["prompt_tokens"]);
    assert_eq!(out[0]["text"], out[1]["text"]);
    assert!(err.contains("cached"), "the summary line: {err}");
}

/// A requests file's per-line `tools` are offered to its text prompt and bound its
/// calls (by default, `--tool-calls auto`): the held-out tool is called by name. An
/// unknown `--tool-calls` value is a usage error naming the choices.
#[test]
fn requests_file_lines_carry_their_tools() {
    let tools = std::fs::read_to_string(fixture_tools()).unwrap();
    let tools: serde_json::Value = serde_json::from_str(&tools).unwrap();
    let line = serde_json::json!({"prompt": "Convert 20 EUR to JPY", "max_new_tokens": 120,
                                  "tools": tools});
    let plain = r#"{"prompt": "Convert 20 EUR to JPY", "max_new_tokens": 4, "tools": []}"#;
    let lines = [line.to_string(), plain.to_string()];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let (ok, out, err) = run_requests(&lines, &[]);
    assert!(ok, "{err}");
    let text = out[0]["text"].as_str().unwrap();
    assert!(text.contains("<function=convert_currency>"), "{text}");
    assert!(out[1]["text"].is_string());
    let (ok, _, err) = run_requests(&lines, &["--tool-calls", "always"]);
    assert!(!ok);
    assert!(err.contains("expected auto, constrained or free"), "{err}");
}

fn fixture_tools() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/heldout_tool.json")
}
