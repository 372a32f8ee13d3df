//! Every registered kernel compiled by NVRTC to cubin for every target architecture (the
//! library form of `edge-llm kernels check`). Needs only NVRTC 13, no GPU:
//!
//! ```sh
//! .ci/kernels-check   # once: installs the wheels into .ci/cuda-wheels
//! CUDA_HOME=$PWD/.ci/cuda-wheels/nvidia/cu13 \
//!     cargo test -p edge-quant --features cuda --test kernel_compile -- --ignored
//! ```
#![cfg(feature = "cuda")]

use edge_core::cuda::{CompileTarget, ComputeCapability, Nvrtc, NvrtcLocation};
use edge_quant::kernel_sources::all_kernel_sources;

const TARGETS: &[&str] = &["sm_87", "sm_90", "sm_100", "sm_110", "sm_120"];

#[test]
#[ignore = "needs NVRTC 13: CUDA_HOME=$PWD/.ci/cuda-wheels/nvidia/cu13 cargo test -p edge-quant --features cuda --test kernel_compile -- --ignored"]
fn every_kernel_compiles_to_cubin_for_every_target() {
    let nvrtc = Nvrtc::open(&NvrtcLocation::Conventional).unwrap_or_else(|e| panic!("{e}"));
    let mut failures = Vec::new();
    for name in TARGETS {
        let arch = ComputeCapability::from_sm_name(name).unwrap();
        assert!(
            nvrtc.supports(arch),
            "NVRTC {:?} at {} cannot compile for {name}",
            nvrtc.version(),
            nvrtc.library().display()
        );
        for source in all_kernel_sources() {
            match nvrtc.compile(source, CompileTarget::Cubin(arch)) {
                Ok(out) => assert!(!out.bytes.is_empty(), "{} {name}: empty cubin", source.name),
                Err(e) => failures.push(e.to_string()),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
#[ignore = "needs NVRTC: CUDA_HOME=$PWD/.ci/cuda-wheels/nvidia/cu13 cargo test -p edge-quant --features cuda --test kernel_compile -- --ignored"]
fn a_rejected_source_is_a_typed_error_with_the_log() {
    let nvrtc = Nvrtc::open(&NvrtcLocation::Conventional).unwrap_or_else(|e| panic!("{e}"));
    let broken = edge_core::KernelSource {
        name: "broken",
        code: "extern \"C\" __global__ void k() { no_such_name = 1; }",
    };
    let sm90 = ComputeCapability::from_sm_name("sm_90").unwrap();
    match nvrtc.compile(&broken, CompileTarget::Cubin(sm90)) {
        Err(edge_core::CoreError::NvrtcCompile { name, log, .. }) => {
            assert_eq!(name, "broken");
            assert!(log.contains("no_such_name"), "{log}");
        }
        other => panic!("expected NvrtcCompile, got {other:?}"),
    }
}
