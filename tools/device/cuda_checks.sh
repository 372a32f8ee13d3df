#!/usr/bin/env bash
# GPU checks of the CUDA kernels (edge-quant's and edge-model's) from prebuilt test
# binaries.
#
#   tools/device/cuda_checks.sh prepare   # on the build machine (no GPU needed)
#   tools/device/cuda_checks.sh run       # on the GPU machine, from the repository root
#
# prepare: builds with `--features cuda` the release test binaries of
#   crates/edge-quant/tests/cuda_parity.rs and cuda_tensor_core.rs and of edge-model's
#   unit tests (its cuda:: tests), copies them (debug info stripped) to .device/bin/, and,
#   if NVRTC is found here (NVRTC_DIR: a CUDA install root or a wheel's nvidia/cu13; else
#   the NVRTC 13 wheels of .ci/install-cuda-wheels), compiles edge-quant's kernels for
#   sm_80/sm_89/sm_90 into the PTX cache .device/ptx-cache, so the GPU machine needs only
#   the driver for them (>= CUDA 13.0 for NVRTC 13's PTX). .device/ is git-ignored: carry
#   it (device tool: carry [".device"]).
#   It also builds the `edge-llm` binary with `--features cuda` into .device/bin/.
# run: runs every ignored test single-threaded: edge-quant's parity and timings, the
#   tensor-core parity and 27B sweep, the same sweep through PyTorch's bf16 matmul when
#   python3 has torch (tools/device/torch_bf16_sweep.py), edge-model's operations and the
#   whole model (CudaBackend) against the CPU backend, with the prompt kernels' timings
#   (attention tiles against rows, chunked against row-by-row GDN; they compile through the
#   machine's NVRTC), then the NVRTC compile test on its own (its failure is reported,
#   not fatal), the embedded demo model's greedy reply on cuda:0 beside the CPU's, then
#   the decode benchmark of a random Qwen3.6-27B-shaped NVFP4 model
#   written on the device (`bench synth --shape qwen3.6-27b --weights nvfp4`, ≈17 GB in
#   $SYNTH_DIR, default /tmp/edge-27b-nvfp4) against the device's copy bandwidth, and
#   the cost of verifying token trees of 1 to 32 nodes on it (bench verify). The log
#   goes to $OUT/cuda_checks.log when $OUT is set, else .device/.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEV="$ROOT/.device"

# Prints a folder NVRTC is found in the way edge-core looks (as CUDA_HOME: lib64/ or
# lib/ inside, include/ beside it), or nothing.
find_nvrtc() {
    if [[ -n "${NVRTC_DIR:-${NVRTC_LIB_DIR:-}}" ]]; then
        echo "${NVRTC_DIR:-$NVRTC_LIB_DIR}"
        return
    fi
    "$ROOT/.ci/install-cuda-wheels" 2>/dev/null || true
}

prepare() {
    cd "$ROOT"
    local log exe
    log=$(cargo test -p edge-quant -p edge-model --features cuda --release --no-run 2>&1) || {
        echo "$log"
        exit 1
    }
    mkdir -p "$DEV/bin"
    cargo build -p edge-cli --features cuda --release
    cp target/release/edge-llm "$DEV/bin/edge-llm"
    strip --strip-debug "$DEV/bin/edge-llm" 2>/dev/null || true
    for test in cuda_parity cuda_tensor_core edge_model; do
        exe=$(echo "$log" | grep -oE "\([^)]*/$test-[0-9a-f]+\)" | tr -d '()' | tail -n1)
        [[ -n "$exe" ]] || { echo "$log"; echo "$test binary not found" >&2; exit 1; }
        cp "$exe" "$DEV/bin/$test"
        strip --strip-debug "$DEV/bin/$test" 2>/dev/null || true
        echo "copied $exe -> .device/bin/$test ($(du -h "$DEV/bin/$test" | cut -f1))"
    done

    local nvrtc
    nvrtc=$(find_nvrtc || true)
    if [[ -n "$nvrtc" ]]; then
        rm -rf "$DEV/ptx-cache"
        CUDA_HOME="$nvrtc" \
            EDGE_QUANT_PTX_CACHE="$DEV/ptx-cache" \
            "$DEV/bin/cuda_parity" --ignored --exact nvrtc_compiles_every_kernel_for_sm80_sm89_sm90
        echo "PTX cache: $(ls "$DEV/ptx-cache" | wc -l) entries in .device/ptx-cache"
    else
        echo "warning: NVRTC not found here; the GPU machine must load libnvrtc itself" >&2
    fi
}

run() {
    cd "$ROOT"
    [[ -x "$DEV/bin/cuda_parity" ]] || { echo "run '$0 prepare' first and carry .device" >&2; exit 2; }
    local out="${OUT:-$DEV}"
    mkdir -p "$out"
    export EDGE_QUANT_PTX_CACHE="${EDGE_QUANT_PTX_CACHE:-$DEV/ptx-cache}"
    export EDGE_QUANT_TEST_DATA="${EDGE_QUANT_TEST_DATA:-$ROOT/crates/edge-quant/tests/data}"
    # libcuda comes from the driver; libnvrtc (only for architectures not in the cache)
    # from the CUDA toolkit if there is one (edge-core also looks in /usr/local/cuda and
    # $CUDA_HOME itself, for libnvrtc.so.13 or .so.12).
    export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/nvidia/lib64:/usr/local/cuda/lib64"
    {
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true
        echo "== parity tests and timings"
    } 2>&1 | tee "$out/cuda_checks.log"
    set -o pipefail
    local status=0
    "$DEV/bin/cuda_parity" --ignored --test-threads=1 --nocapture \
        --skip nvrtc_compiles_every_kernel_for_sm80_sm89_sm90 2>&1 | tee -a "$out/cuda_checks.log" || status=$?
    echo "== tensor-core parity and the 27B sweep" | tee -a "$out/cuda_checks.log"
    "$DEV/bin/cuda_tensor_core" --ignored --test-threads=1 --nocapture 2>&1 | tee -a "$out/cuda_checks.log" || status=$?
    echo "== the model's operations against the CPU backend" | tee -a "$out/cuda_checks.log"
    "$DEV/bin/edge_model" --ignored --test-threads=1 --nocapture cuda:: 2>&1 | tee -a "$out/cuda_checks.log" || status=$?
    if python3 -c "import torch" 2>/dev/null; then
        echo "== the same sweep through PyTorch bf16 matmul" | tee -a "$out/cuda_checks.log"
        python3 "$ROOT/tools/device/torch_bf16_sweep.py" 2>&1 | tee -a "$out/cuda_checks.log" || true
    fi
    echo "== NVRTC compile test (informational)" | tee -a "$out/cuda_checks.log"
    "$DEV/bin/cuda_parity" --ignored --exact nvrtc_compiles_every_kernel_for_sm80_sm89_sm90 \
        2>&1 | tee -a "$out/cuda_checks.log" || echo "NVRTC compile test failed (no libnvrtc here?)" | tee -a "$out/cuda_checks.log"
    echo "== the embedded demo model end to end: generate on cuda:0 against the CPU (bf16 activations both)" | tee -a "$out/cuda_checks.log"
    local prompt="List the Python files and count their lines" gpu_text cpu_text
    gpu_text=$(timeout 120 "$DEV/bin/edge-llm" generate --device cuda:0 --prompt "$prompt" 2>&1) || true
    cpu_text=$(timeout 120 "$DEV/bin/edge-llm" generate --act-quant bf16 --prompt "$prompt" 2>&1) || true
    { echo "cuda: $gpu_text"; echo "cpu:  $cpu_text"
      [[ "$gpu_text" == "$cpu_text" ]] && echo "same greedy text: yes" || echo "same greedy text: NO"; } |
        tee -a "$out/cuda_checks.log"
    echo "== 27B-shaped NVFP4 decode (bench decode --device cuda:0)" | tee -a "$out/cuda_checks.log"
    local synth="${SYNTH_DIR:-/tmp/edge-27b-nvfp4}"
    [[ -f "$synth/config.json" ]] || timeout 150 "$DEV/bin/edge-llm" bench synth \
        --shape qwen3.6-27b --weights nvfp4 --out "$synth" 2>&1 | tee -a "$out/cuda_checks.log" || true
    timeout 240 "$DEV/bin/edge-llm" bench decode --model "$synth" --device cuda:0 \
        --kv-dtype fp8 --prompt-tokens 256 --decode-tokens 64 --runs 3 --json 2>&1 |
        tee -a "$out/cuda_checks.log" || echo "27B decode benchmark failed" | tee -a "$out/cuda_checks.log"
    echo "== 27B-shaped tree verification (bench verify --device cuda:0)" | tee -a "$out/cuda_checks.log"
    timeout 180 "$DEV/bin/edge-llm" bench verify --model "$synth" --device cuda:0 \
        --kv-dtype fp8 --depth 256 --nodes 1,8,16,32 --steps 4 --rounds 2 --json 2>&1 |
        tee -a "$out/cuda_checks.log" || echo "27B verify benchmark failed" | tee -a "$out/cuda_checks.log"
    echo "== parity status: $status" | tee -a "$out/cuda_checks.log"
    return "$status"
}

case "${1:-run}" in
prepare) prepare ;;
run) run ;;
*)
    echo "usage: $0 prepare|run" >&2
    exit 2
    ;;
esac
