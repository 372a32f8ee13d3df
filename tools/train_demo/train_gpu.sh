#!/usr/bin/env bash
# The demo recipe (retrain.sh, every stage) on one GPU, its stage budgets scaled down.
#
#   tools/train_demo/train_gpu.sh OUT_DIR
#
# Runs `retrain.sh --train-only` with DEVICE=cuda, THREADS=8, TOKENS=49152 (8x the CPU
# recipe's batch) and TIME_SCALE=0.012 (575 min of CPU stages -> about 7 min), writing the
# release checkpoint and each stage's training log into OUT_DIR. Corpus generation and the
# six stage start-ups come on top: time one run before fitting it into a limited device
# call. Any of those variables can be overridden. Evaluate the result on a CPU machine:
#   OUT=OUT_DIR tools/train_demo/retrain.sh ... (or evaluate.py / evaluate_engine.py directly)
# The CPU recipe (retrain.sh) stays the reproducible default; this run depends on the GPU's
# speed through the time budgets.
set -euo pipefail
OUT_DIR="${1:?usage: train_gpu.sh OUT_DIR}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$OUT_DIR"
export OUT="$(cd "$OUT_DIR" && pwd)"
export DEVICE="${DEVICE:-cuda}" THREADS="${THREADS:-8}" TOKENS="${TOKENS:-49152}"
export TIME_SCALE="${TIME_SCALE:-0.012}" PY="${PY:-python3}"
exec "$HERE/retrain.sh" --train-only
