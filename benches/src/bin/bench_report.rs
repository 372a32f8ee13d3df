//! Turns the criterion results of the `bandwidth` and `linear` benchmarks into the
//! markdown tables of `docs/PERFORMANCE.md`.
//!
//! Run after `cargo bench -p edge-benches`:
//! `cargo run -p edge-benches --bin bench_report [target/criterion]`.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One benchmark: bytes per iteration and median time in nanoseconds.
struct Result {
    bytes: f64,
    median_ns: f64,
}

impl Result {
    fn gib_per_s(&self) -> f64 {
        self.bytes / (self.median_ns * 1e-9) / (1u64 << 30) as f64
    }
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// Every `<dir>/new/benchmark.json` under `root`, keyed by criterion's full id.
fn collect(root: &Path, out: &mut BTreeMap<String, Result>) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let new = path.join("new");
        if let (Some(b), Some(e)) = (
            read_json(&new.join("benchmark.json")),
            read_json(&new.join("estimates.json")),
        ) {
            let bytes = b["throughput"]["Bytes"].as_f64();
            let median = e["median"]["point_estimate"].as_f64();
            if let (Some(id), Some(bytes), Some(median_ns)) = (b["full_id"].as_str(), bytes, median)
            {
                out.insert(id.to_string(), Result { bytes, median_ns });
            }
        }
        collect(&path, out);
    }
}

fn main() {
    let root = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/criterion"));
    let mut results = BTreeMap::new();
    collect(&root, &mut results);

    println!("| read benchmark (1 GiB unless noted) | median time | GiB/s |");
    println!("|---|---:|---:|");
    let mut bandwidth = 0.0f64;
    for (id, r) in results
        .iter()
        .filter(|(id, _)| id.starts_with("bandwidth/"))
    {
        println!(
            "| `{}` | {:.2} ms | {:.1} |",
            id,
            r.median_ns / 1e6,
            r.gib_per_s()
        );
        if id.contains("1GiB/rayon") {
            bandwidth = bandwidth.max(r.gib_per_s());
        }
    }
    println!("\nBest 2-thread 1 GiB read: **{bandwidth:.1} GiB/s**\n");

    println!(
        "| shape (out×in) | format | tokens | median time | weight GiB/s \
         | % of group read | % of best read |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    // Report order: shape as benchmarked, then format, then tokens.
    let formats = ["nvfp4-w4a16", "nvfp4-w4a4", "bf16", "fp8", "f32"];
    let shapes = ["17408x5120", "5120x17408", "10240x5120"];
    for shape in shapes {
        let group = format!("linear-{shape}");
        let Some(reference) = results.get(&format!("{group}/read-1GiB")) else {
            continue;
        };
        let group_bw = reference.gib_per_s();
        let best = bandwidth.max(group_bw);
        let name = shape.replace('x', "×");
        println!(
            "| {name} | *read-1GiB reference* | – | {:.2} ms | {:.1} | 100% | {:.0}% |",
            reference.median_ns / 1e6,
            group_bw,
            100.0 * group_bw / best
        );
        for format in formats {
            for tokens in [1, 16] {
                let Some(r) = results.get(&format!("{group}/{format}/{tokens}")) else {
                    continue;
                };
                println!(
                    "| {name} | {format} | {tokens} | {:.2} ms | {:.1} | {:.0}% | {:.0}% |",
                    r.median_ns / 1e6,
                    r.gib_per_s(),
                    100.0 * r.gib_per_s() / group_bw,
                    100.0 * r.gib_per_s() / best
                );
            }
        }
    }
}
