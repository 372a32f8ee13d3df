//! Shared helpers for the workspace's criterion benchmarks (see `benches/benches/`).
