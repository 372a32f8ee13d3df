#!/usr/bin/env bash
# The GPU check, in two short device calls, from binaries prepared on a machine with no
# GPU (docs/CUDA.md, "The GPU check").
#
#   tools/device/cuda_checks.sh prepare       # here: build, warm the PTX cache, pack
#   tools/device/cuda_checks.sh correctness   # device call 1 (carry [".device"]), ≤ 4 min
#   tools/device/cuda_checks.sh performance   # device call 2 (carry [".device"]), ≤ 5 min
#
# prepare: builds with the `cuda` feature the release test binaries whose
#   device-parameterised tests have a GPU variant (`name::cuda`, ignored without a GPU),
#   the `cuda_kernels` bench (edge-benches) and the `edge-llm` binary without the
#   embedded demo model
#   (the checks read models/demo from the working tree, which travels anyway); warms the
#   kernel cache with every kernel (edge-quant's and the model's) as PTX for sm_80,
#   sm_89 and sm_90 (`edge-llm kernels warm`, NVRTC from $NVRTC_DIR or the pip wheels of
#   .ci/install-cuda-wheels), so the GPU machine needs only a CUDA 13 driver; strips the
#   binaries and packs them with the cache into .device/bundle.tar.xz (git-ignored). It
#   prints the carry: the bundle plus the tracked tree, which must stay under 40 MiB.
# correctness: unpacks the bundle, prints the GPU, the driver and where NVRTC is, runs
#   every GPU variant (each binary under `timeout`) and prints its test lines, then the
#   greedy tokens on the CPU and on cuda:0 (bf16 activations both) for the demo model
#   and for a predictable bench-0.5b checkpoint quantized to NVFP4 with FP8 pages, each
#   with "same: yes/NO". Ends with one summary line.
# performance: the `cuda_kernels` bench (the NVFP4 product sweep at 1–64 tokens, CUDA
#   cores and tensor cores, against the copy bandwidth; `nvfp4_linear` at the 27B MLP
#   decode shapes; a prompt chunk and a decode step of a 4-layer 27B block), the sweep
#   beside PyTorch's bf16 matmul on the same shapes when torch is there (with the
#   ratio), the decode of a Qwen3.6-27B-shaped NVFP4 model cut
#   to 8 of its 64 layers (the same layers and vocabulary) as a fraction of the copy
#   bandwidth, and tree verification at 1 to 32 nodes on it. Ends with one summary line.
# Logs go to $OUT/cuda_checks_<call>.log when $OUT is set (the device tool's), else
# .device/.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEV="$ROOT/.device"
WORK="${TMPDIR:-/tmp}/edge-llm-device"
# Test binaries: crate/test target names as cargo prints them.
TESTS="cuda_parity cuda_tensor_core edge_model step_batch tree_verify scratch_reuse model_errors speculation batching prefix_reuse"
PROMPT="List the Python files and count their lines"

prepare() {
    cd "$ROOT"
    local log exe stage="$DEV/stage"
    rm -rf "$stage" && mkdir -p "$stage/bin"
    log=$(cargo test -p edge-quant -p edge-model -p edge-runtime \
        --features edge-quant/cuda,edge-model/cuda,edge-runtime/cuda --release --no-run 2>&1) ||
        { echo "$log"; exit 1; }
    for test in $TESTS; do
        exe=$(echo "$log" | grep -oE "\([^)]*/deps/$test-[0-9a-f]+\)" | tr -d '()' | tail -n1)
        [[ -n "$exe" ]] || { echo "$log"; echo "$test binary not found" >&2; exit 1; }
        cp "$exe" "$stage/bin/$test"
    done
    log=$(cargo bench -p edge-benches --features cuda --bench cuda_kernels --no-run 2>&1) ||
        { echo "$log"; exit 1; }
    exe=$(echo "$log" | grep -oE "\([^)]*/deps/cuda_kernels-[0-9a-f]+\)" | tr -d '()' | tail -n1)
    [[ -n "$exe" ]] || { echo "$log"; echo "cuda_kernels binary not found" >&2; exit 1; }
    cp "$exe" "$stage/bin/cuda_kernels"
    cargo build -p edge-cli --release --no-default-features --features cuda
    cp target/release/edge-llm "$stage/bin/edge-llm"
    strip "$stage"/bin/* 2>/dev/null || true

    local nvrtc="${NVRTC_DIR:-}"
    [[ -n "$nvrtc" ]] || nvrtc=$("$ROOT/.ci/install-cuda-wheels")
    "$stage/bin/edge-llm" kernels warm --arch sm_80,sm_89,sm_90 --nvrtc "$nvrtc" \
        --cache "$stage/cache/edge-llm/kernels" | tail -n1
    rm -f "$DEV/bundle.tar.xz"
    tar -C "$stage" -cf - . | xz -T0 -6 >"$DEV/bundle.tar.xz"
    rm -rf "$stage"
    local bundle tree
    bundle=$(stat -c %s "$DEV/bundle.tar.xz")
    tree=$(git ls-files -z | xargs -0 du -cb | tail -n1 | cut -f1)
    echo "carry: bundle $((bundle / 1024)) KiB + tracked tree $((tree / 1024)) KiB = $(((bundle + tree) / 1048576)) MiB (limit 40 MiB)"
}

# Unpacks the bundle and points the kernel cache at it.
unpack() {
    [[ -f "$DEV/bundle.tar.xz" ]] || { echo "run '$0 prepare' first and carry .device" >&2; exit 2; }
    rm -rf "$WORK" && mkdir -p "$WORK"
    timeout 60 tar -C "$WORK" -xJf "$DEV/bundle.tar.xz"
    export XDG_CACHE_HOME="$WORK/cache"
    export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/nvidia/lib64:/usr/local/cuda/lib64"
    BIN="$WORK/bin"
}

# The "tokens" array of `generate --json` output.
tokens_of() { grep -oE '"tokens": ?\[[^]]*\]' <<<"$1" | head -n1 | tr -d ' '; }

# Prints the CPU's and cuda:0's greedy tokens for `generate` with the given flags and
# whether they are the same; returns 1 when they differ.
same_tokens() {
    local what=$1 cpu gpu
    shift
    cpu=$(tokens_of "$(timeout 120 "$BIN/edge-llm" generate --device cpu --act-quant bf16 --json "$@" 2>&1 || true)")
    gpu=$(tokens_of "$(timeout 120 "$BIN/edge-llm" generate --device cuda:0 --json "$@" 2>&1 || true)")
    echo "$what"
    echo "  cpu:     $cpu"
    echo "  cuda:0:  $gpu"
    if [[ -n "$cpu" && "$cpu" == "$gpu" ]]; then echo "  same: yes"; else echo "  same: NO"; return 1; fi
}

correctness() {
    cd "$ROOT"
    local t0=$SECONDS passed=0 failed=0 same=0 differ=0 line
    unpack
    echo "== GPU and driver"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "nvidia-smi failed"
    echo "NVRTC: $(ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null | head -n1 || true)" \
        "(not needed for sm_80/89/90: the PTX cache is warm)"
    local out
    for test in $TESTS; do
        echo "== $test: GPU variants"
        out=$(timeout 90 "$BIN/$test" --ignored --test-threads=1 ::cuda 2>&1) || true
        grep -E "^test .* \.\.\. |panicked" <<<"$out" || true
        line=$(grep -E "^test result" <<<"$out" || true)
        if [[ "$line" =~ ([0-9]+)\ passed\;\ ([0-9]+)\ failed ]]; then
            echo "$line"
            passed=$((passed + BASH_REMATCH[1]))
            failed=$((failed + BASH_REMATCH[2]))
        else
            echo "no test result (timed out or crashed)"
            failed=$((failed + 1))
        fi
    done
    echo "== greedy tokens, CPU against cuda:0 (bf16 activations both)"
    if same_tokens "demo model" --model models/demo --prompt "$PROMPT" --max-new-tokens 48; then
        same=$((same + 1)); else differ=$((differ + 1)); fi
    local synth="$WORK/bench-nvfp4"
    timeout 90 "$BIN/edge-llm" bench synth --out "$WORK/bench-bf16" --predictable >/dev/null 2>&1 &&
        timeout 90 "$BIN/edge-llm" quantize --model "$WORK/bench-bf16" --out "$synth" --format nvfp4 >/dev/null 2>&1 ||
        echo "could not write the NVFP4 checkpoint"
    if same_tokens "predictable bench-0.5b, NVFP4 (ModelOpt layout), FP8 pages" --model "$synth" \
        --prompt-ids 5,9,13,200,17,3,77,78,79,80,81,12 --max-new-tokens 32 --kv-dtype fp8; then
        same=$((same + 1)); else differ=$((differ + 1)); fi
    echo "correctness: $passed passed, $failed failed; greedy tokens same: $same of $((same + differ)); $((SECONDS - t0)) s"
    [[ $failed -eq 0 && $differ -eq 0 ]]
}

performance() {
    cd "$ROOT"
    local t0=$SECONDS ours="$WORK/sweep.txt" theirs="$WORK/torch.txt" synth="$WORK/qwen27b-8"
    unpack
    echo "== cuda_kernels bench: NVFP4 products over 16 Qwen3.6-27B MLP matrices (1-64 tokens),"
    echo "   the 27B MLP decode shapes, a prompt chunk and a decode step of a 27B block"
    CRITERION_HOME="$WORK/criterion" timeout 180 "$BIN/cuda_kernels" --bench 2>&1 | tee "$ours" || true
    if timeout 20 python3 -c "import torch" 2>/dev/null; then
        echo "== the same shapes through PyTorch's bf16 matmul (cuBLAS)"
        timeout 90 python3 tools/device/torch_bf16_sweep.py 2>&1 | tee "$theirs" || true
        echo "tokens | edge-llm best µs | cuBLAS bf16 µs | ratio (cuBLAS / edge-llm)"
        # From criterion's lines: the benchmark id (nvfp4-mlp-27b/<kernel>/<tokens>), then
        # on its line or the next "time: [low unit mid unit high unit]"; the better kernel's
        # mid estimate per token count, in µs.
        awk 'FNR == NR && match($0, /nvfp4-mlp-27b\/(cuda|tensor)-cores\/[0-9]+/) {
                 split(substr($0, RSTART, RLENGTH), id, "/"); tokens = id[3] }
             FNR == NR && /time:/ && tokens != "" {
                 split(substr($0, index($0, "[") + 1), f, " ")
                 us = f[4] == "ns" ? f[3] / 1e3 : f[4] == "ms" ? f[3] * 1e3 : f[4] == "s" ? f[3] * 1e6 : f[3]
                 if (!(tokens in best) || us < best[tokens]) best[tokens] = us
                 tokens = ""; next }
             FNR == NR { next }
             $2 == "|" && $1 in best { printf "%6d | %16.0f | %14.0f | %.2f\n", $1, best[$1], $3, $3 / best[$1] }' \
            "$ours" "$theirs"
    else
        echo "(no torch here: no cuBLAS baseline)"
    fi
    echo "== decode of a Qwen3.6-27B-shaped NVFP4 model, 8 of 64 layers, FP8 pages"
    timeout 120 "$BIN/edge-llm" bench synth --shape qwen3.6-27b --weights nvfp4 --layers 8 --out "$synth" ||
        echo "could not write the 27B-shaped checkpoint"
    timeout 120 "$BIN/edge-llm" bench decode --model "$synth" --device cuda:0 --kv-dtype fp8 \
        --prompt-tokens 256 --decode-tokens 64 --runs 3 --json 2>&1 || echo "decode benchmark failed"
    echo "== tree verification at 1-32 nodes on it"
    timeout 90 "$BIN/edge-llm" bench verify --model "$synth" --device cuda:0 --kv-dtype fp8 \
        --depth 256 --nodes 1,8,16,32 --steps 4 --rounds 2 --json 2>&1 || echo "verify benchmark failed"
    echo "performance: done in $((SECONDS - t0)) s"
}

call="${1:-}"
case "$call" in
prepare) prepare ;;
correctness | performance)
    log="${OUT:-$DEV}/cuda_checks_$call.log"
    mkdir -p "$(dirname "$log")"
    "$call" 2>&1 | tee "$log"
    exit "${PIPESTATUS[0]}"
    ;;
*)
    echo "usage: $0 prepare|correctness|performance" >&2
    exit 2
    ;;
esac
