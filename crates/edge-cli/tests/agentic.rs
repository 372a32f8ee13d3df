//! `edge-llm bench agentic` on the embedded demo model over the committed synthetic
//! trajectories: in-process, and against `edge-llm serve` on a loopback port, with
//! the same prompt token counts and hot-cache ratio in both modes.
#![cfg(unix)]

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_edge-llm"))
}

fn dataset() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../benches/data/agentic_synthetic.jsonl")
}

/// The test's own folder (tests run in parallel), removed when dropped.
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn bench(extra: &[&str]) -> Output {
    bin()
        .args(["bench", "agentic", "--dataset"])
        .arg(dataset())
        .args(["--max-new-tokens", "6"])
        .args(extra)
        .output()
        .unwrap()
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn ok(o: &Output) {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// `edge-llm serve` on a free port with tree speculation, behind an API key.
fn serve() -> (std::process::Child, String) {
    support::spawn_serve(&["--spec", "tree", "--api-key", "s3cret"])
}

#[test]
fn in_process_and_endpoint_replays_agree() {
    let tmp = scratch();
    let dir = tmp.path();
    let (local, remote) = (dir.join("in.json"), dir.join("ep.json"));
    // Tree speculation in both, so acceptance is reported in-process and through
    // `usage.speculation` over HTTP.
    let o = bench(&["--spec", "tree", "--report", local.to_str().unwrap()]);
    ok(&o);
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains("hot-cache ratio") && table.contains("TTFT ms p50"),
        "{table}"
    );

    let (mut server, addr) = serve();
    let o = bench(&[
        "--endpoint",
        &format!("http://{addr}"),
        "--api-key",
        "s3cret",
        "--report",
        remote.to_str().unwrap(),
    ]);
    server.kill().ok();
    server.wait().ok();
    ok(&o);

    let (a, b) = (read(&local), read(&remote));
    assert_eq!(a["mode"], "in-process");
    assert_eq!(b["mode"], "endpoint");
    for r in [&a, &b] {
        assert_eq!(r["turns_expected"], 8, "{r}");
        assert_eq!(r["turns_completed"], 8, "{r}");
        assert_eq!(r["reconnects"], 0);
        assert!(r["ttft_ms"]["p50"].as_f64().unwrap() > 0.0);
        assert!(r["qps"].as_f64().unwrap() > 0.0);
        assert_eq!(r["iou_scored_turns"], 6);
    }
    let figures = |r: &Value, key: &str| -> Vec<Value> {
        r["turns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t[key].clone())
            .collect()
    };
    assert_eq!(figures(&a, "prompt_tokens"), figures(&b, "prompt_tokens"));
    assert_eq!(figures(&a, "cached_tokens"), figures(&b, "cached_tokens"));
    assert_eq!(figures(&a, "output_tokens"), figures(&b, "output_tokens"));
    assert_eq!(a["prompt_tokens"], b["prompt_tokens"]);
    assert_eq!(a["hot_cache_ratio"], b["hot_cache_ratio"]);
    assert_eq!(
        figures(&a, "target_forwards"),
        figures(&b, "target_forwards")
    );
    assert!(a["mean_accepted"].as_f64().unwrap() >= 1.0, "{a}");
    assert_eq!(a["mean_accepted"], b["mean_accepted"]);
    // Each turn extends the one before, so most of every later prompt is reused.
    assert!(a["hot_cache_ratio"].as_f64().unwrap() > 0.5, "{a}");
    assert!(dir.join("in.svg").exists() && dir.join("ep.svg").exists());

    let chart = dir.join("both.svg");
    let o = bin()
        .args(["bench", "agentic", "--compare"])
        .args([&local, &remote])
        .arg("--plot")
        .arg(&chart)
        .output()
        .unwrap();
    ok(&o);
    let svg = std::fs::read_to_string(&chart).unwrap();
    assert!(svg.contains(">in<") && svg.contains(">ep<"), "{svg}");
}

#[test]
fn bad_input_is_a_clear_error() {
    let tmp = scratch();
    let dir = tmp.path();
    let fail = |o: Output, needle: &str| {
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    };
    fail(
        bin()
            .args(["bench", "agentic", "--dataset"])
            .arg(dir.join("missing.jsonl"))
            .output()
            .unwrap(),
        "cannot read",
    );
    let bad = dir.join("bad.jsonl");
    std::fs::write(&bad, "{\"conversation_id\": \"a\", \"turn\": 1}\n{oops\n").unwrap();
    fail(
        bin()
            .args(["bench", "agentic", "--dataset"])
            .arg(&bad)
            .output()
            .unwrap(),
        "bad.jsonl:2",
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    fail(
        bench(&[
            "--endpoint",
            &format!("http://127.0.0.1:{port}"),
            "--model-name",
            "m",
        ]),
        "cannot reach",
    );
}
