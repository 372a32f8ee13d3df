#!/usr/bin/env bash
# The demo recipe's longer run on one GPU (issue 23), sized for one 10-minute device call.
#
#   tools/train_demo/train_gpu.sh OUT_DIR
#   DEVICE=cpu THREADS=2 TOKENS=6144 PHASE1_MIN=25 PHASE2_MIN=100 tools/train_demo/train_gpu.sh OUT_DIR
#     (the same recipe on 2 CPU cores: how models/demo-v2 was trained)
#
# Generates the copy-drill corpus and the byte-level tokenizer in a temp dir, then trains
# in two phases with train.py on the GPU:
#   1. hidden 128, FFN 384, where the in-context lookup forms: the induction phase on the
#      identifier alphabet, then corpus batches with every fourth batch an induction batch;
#   2. the MLPs widened to FFN 896 (5.17M parameters; new units start with zero output
#      weights, so the model keeps what it computes) and trained on at half the rate.
# OUT_DIR receives the release checkpoint (config, weights, tokenizer) and both phases'
# training logs. Evaluate it on a CPU machine afterwards:
#   python tools/train_demo/evaluate.py --model OUT_DIR --corpus tools/train_demo/work/corpus
#
# Environment (defaults in brackets):
#   PY          python with torch, transformers, tokenizers, safetensors [python3]
#   DEVICE      torch device [cuda]
#   THREADS     CPU threads for torch [8]; 2 for the CPU run on 2 cores
#   PHASE1_MIN  minutes of phase 1 [2.5]
#   PHASE2_MIN  minutes of phase 2 [4.5]
#   TOKENS      padded tokens per corpus batch [49152]
#   N_TRAIN     training conversations [40000]
#   SEED        corpus and phase-1 seed; phase 2 uses SEED+1 [1234]
#   WORK        scratch dir for corpus and phase 1 [a new temp dir]
# The CPU recipe (retrain.sh) stays the reproducible default; this run depends on the GPU's
# speed through the time budgets.
set -euo pipefail

OUT_DIR="${1:?usage: train_gpu.sh OUT_DIR}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PY:-python3}"
DEVICE="${DEVICE:-cuda}"
THREADS="${THREADS:-8}"
PHASE1_MIN="${PHASE1_MIN:-2.5}"
PHASE2_MIN="${PHASE2_MIN:-4.5}"
TOKENS="${TOKENS:-49152}"
N_TRAIN="${N_TRAIN:-40000}"
SEED="${SEED:-1234}"
WORK="${WORK:-$(mktemp -d)}"
export PYTHONUNBUFFERED=1

mkdir -p "$OUT_DIR"
start=$(date +%s)
echo "== corpus ($N_TRAIN conversations) and byte-level tokenizer -> $WORK"
"$PY" "$HERE/gen_corpus.py" --out "$WORK/corpus" --seed "$SEED" --n-train "$N_TRAIN" --n-heldout 300 \
  --mix proc=0.45,bash=0.25,typed=0.15,copy=0.15
"$PY" "$HERE/train_tokenizer.py" --corpus "$WORK/corpus/train.jsonl" --out "$WORK/tokenizer" --vocab-size 265
echo "== ready after $(($(date +%s) - start)) s"

common=(--device "$DEVICE" --threads "$THREADS" --corpus "$WORK/corpus" --tokenizer "$WORK/tokenizer" --hidden 128
  --max-len 6144 --tokens-per-step "$TOKENS" --steps 1000000 --induction-every 4
  --induction-alphabet identifiers)
echo "== phase 1: FFN 384, the lookup first ($PHASE1_MIN min)"
"$PY" "$HERE/train.py" "${common[@]}" --out "$WORK/phase1" --seed "$SEED" --intermediate 384 --lr 1e-3 \
  --induction-steps 300 --time-budget-min "$PHASE1_MIN" 2>&1 | tee "$OUT_DIR/train_phase1.out"
echo "== phase 2: FFN 896 ($PHASE2_MIN min)"
"$PY" "$HERE/train.py" "${common[@]}" --out "$OUT_DIR" --seed "$((SEED + 1))" --intermediate 896 --lr 5e-4 \
  --induction-steps 0 --init-from "$WORK/phase1" --time-budget-min "$PHASE2_MIN" 2>&1 | tee "$OUT_DIR/train_phase2.out"
cp "$WORK/phase1/training_log.csv" "$OUT_DIR/training_log_phase1.csv"
echo "== done in $(($(date +%s) - start)) s: $OUT_DIR"
