#!/usr/bin/env bash
# Regenerate the embedded demo model (models/demo and its NVFP4 copy models/demo-nvfp4)
# from scratch with the staged v2 recipe (docs/DEMO_MODEL.md):
#
#   tools/train_demo/retrain.sh              # the full recipe: 575 min of training on 2 CPU cores
#   tools/train_demo/retrain.sh --smoke      # every stage for a few steps on a small corpus, into a
#                                            # temp dir (minutes); never writes models/
#   tools/train_demo/retrain.sh --continue   # one more stage on the committed models/demo
#   tools/train_demo/retrain.sh --train-only # the stages only, into OUT (train_gpu.sh uses it)
#
# Corpus A: 40000 conversations (procedural tools, bash sessions, typed tools, copy drills) and
# the byte-level tokenizer (265 entries). Corpus B: 12000, 27% of them distractor-heavy turns,
# with corpus A's held-out split. Then train.py, each stage continuing the one before, time-budgeted:
#   1. hidden 128, FFN 384, 8 layers; the in-context lookup first (induction batches)  25 min
#   2. the MLPs widened to FFN 896 (5.17M parameters)                                 100 min
#   3. continued on corpus A                                                          115 min
#   4. continued on corpus A                                                          115 min
#   5. continued on corpus B                                                          115 min
#   6. deepened to 12 layers (7.48M parameters), continued on corpus B                105 min
# then the NVFP4 copy (calibrated on training conversations) and the evaluations: evaluate.py
# (MTP agreement, tokens per target forward) into eval.json, and evaluate_engine.py (tool calls
# through the Rust engine, free and constrained, all held-out prompts) into its `engine` block.
#
# Environment (defaults in brackets):
#   PY          a python with torch, transformers, tokenizers, safetensors, jinja2 [the venv's]
#   VENV        Python venv to use or create when PY is unset [~/.cache/edge-llm/train-demo-venv;
#               never inside the repo]
#   WORK        scratch dir for corpora and stages [tools/train_demo/work, git-ignored]
#   OUT         the model directory written [models/demo]; its NVFP4 copy goes to OUT-nvfp4
#   SEED        base seed [1234]: corpus A and stage 1 use SEED, stage k SEED+k-1, stage 6 and
#               corpus B SEED+6; the held-out split SEED+1000003
#   DEVICE      torch device [cpu]; THREADS torch threads [2]; TOKENS padded tokens per batch [6144]
#   TIME_SCALE  multiplies every stage's minutes [1]
#   NICE        nice level of the heavy steps [10]
#   PIP_ARGS    extra pip arguments for creating the venv
# Training time is budgeted, so the steps taken (and the weights) depend on the machine's speed.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENV="${VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/edge-llm/train-demo-venv}"
WORK="${WORK:-$HERE/work}"
OUT="${OUT:-$ROOT/models/demo}"
SEED="${SEED:-1234}"
DEVICE="${DEVICE:-cpu}"
THREADS="${THREADS:-2}"
TOKENS="${TOKENS:-6144}"
TIME_SCALE="${TIME_SCALE:-1}"
NICE="${NICE:-10}"
MODE="${1:-full}"
export PYTHONUNBUFFERED=1

if [ -z "${PY:-}" ]; then
  if [ ! -x "$VENV/bin/python" ]; then
    echo "== creating venv $VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install ${PIP_ARGS:-} torch==2.15.0 transformers==5.23.0 tokenizers safetensors jinja2
  fi
  PY="$VENV/bin/python"
fi

N_A=40000 N_B=12000 N_HELDOUT=300 STEPS=1000000 INDUCTION=300 EVAL_PROMPTS=600 MTP_PROMPTS=40 MTP_CONVS=100 REPLY=0
case "$MODE" in
  full | --train-only | --continue) ;;
  --smoke)
    WORK="$(mktemp -d)" OUT="$WORK/model"
    N_A=300 N_B=200 N_HELDOUT=30 STEPS=2 INDUCTION=2 EVAL_PROMPTS=8 MTP_PROMPTS=4 MTP_CONVS=4 REPLY=24
    echo "== smoke run in $WORK" ;;
  *) echo "usage: retrain.sh [--smoke | --continue | --train-only]" >&2; exit 2 ;;
esac
mkdir -p "$WORK" "$OUT"
minutes() { "$PY" -c "print($1 * $TIME_SCALE)"; }

corpus_a() {
  echo "== corpus A ($N_A conversations) -> $WORK/corpus-a"
  "$PY" "$HERE/gen_corpus.py" --out "$WORK/corpus-a" --seed "$SEED" --n-train "$N_A" --n-heldout "$N_HELDOUT" \
    --mix proc=0.45,bash=0.25,typed=0.15,copy=0.15
}
corpus_b() { # corpus_b SEED
  echo "== corpus B ($N_B conversations, distractor-heavy, seed $1; corpus A's held-out split) -> $WORK/corpus-b"
  "$PY" "$HERE/gen_corpus.py" --out "$WORK/corpus-b" --seed "$1" --heldout-seed "$((SEED + 1000003))" \
    --n-train "$N_B" --n-heldout "$N_HELDOUT" --mix proc=0.315,bash=0.175,typed=0.105,distract=0.27,copy=0.135
}
# stage NAME CORPUS SEED MINUTES OUT_DIR [train.py flags...]: one time-budgeted train.py run.
stage() {
  local name=$1 corpus=$2 seed=$3 min=$4 dir=$5
  shift 5
  echo "== stage $name: seed $seed, budget $(minutes "$min") min -> $dir"
  nice -n "$NICE" "$PY" "$HERE/train.py" --device "$DEVICE" --threads "$THREADS" --corpus "$corpus" \
    --tokenizer "$WORK/tokenizer" --out "$dir" --seed "$seed" --hidden 128 --max-len 6144 --max-pos 262144 \
    --tokens-per-step "$TOKENS" --steps "$STEPS" --induction-every 4 --induction-alphabet identifiers \
    --time-budget-min "$(minutes "$min")" "$@" 2>&1 | tee "$WORK/$name.out"
  cp "$dir/training_log.csv" "$WORK/training_log_$name.csv"
}
continued() { # continued NAME CORPUS SEED MINUTES FROM OUT_DIR [flags...]
  local name=$1 corpus=$2 seed=$3 min=$4 from=$5 dir=$6
  shift 6
  stage "$name" "$corpus" "$seed" "$min" "$dir" --intermediate 896 --lr 5e-4 --induction-steps 0 \
    --init-from "$from" "$@"
}

if [ "$MODE" = "--continue" ]; then
  # One more 12-layer stage from the committed weights on a fresh corpus B drawn with
  # CONTINUE_SEED (a seed no earlier stage or corpus used; models/demo/README.md lists
  # them). OUT gets the weights and training_log_continue-SEED.csv; its other files stay.
  : "${CONTINUE_SEED:?set CONTINUE_SEED}"
  rm -rf "$WORK/init-model" "$WORK/tokenizer" && cp -r "$OUT" "$WORK/init-model"
  mkdir -p "$WORK/tokenizer" && cp "$OUT"/tokenizer*.json "$WORK/tokenizer/"
  corpus_b "$CONTINUE_SEED"
  continued continue "$WORK/corpus-b" "$CONTINUE_SEED" 105 "$WORK/init-model" "$WORK/continued" \
    --layers 12
  cp "$WORK/continued"/{config.json,generation_config.json,model.safetensors} "$OUT/"
  cp "$WORK/training_log_continue.csv" "$OUT/training_log_continue-$CONTINUE_SEED.csv"
else
  corpus_a
  echo "== byte-level tokenizer -> $WORK/tokenizer"
  "$PY" "$HERE/train_tokenizer.py" --corpus "$WORK/corpus-a/train.jsonl" --out "$WORK/tokenizer" --vocab-size 265
  "$PY" "$HERE/check_template.py" --model "$WORK/tokenizer" --corpus "$WORK/corpus-a" --limit 2000
  corpus_b "$((SEED + 6))"
  stage phase1 "$WORK/corpus-a" "$SEED" 25 "$WORK/stage1" --intermediate 384 --lr 1e-3 \
    --induction-steps "$INDUCTION"
  continued phase2 "$WORK/corpus-a" "$((SEED + 1))" 100 "$WORK/stage1" "$WORK/stage2"
  continued continue1 "$WORK/corpus-a" "$((SEED + 2))" 115 "$WORK/stage2" "$WORK/stage3"
  continued continue2 "$WORK/corpus-a" "$((SEED + 3))" 115 "$WORK/stage3" "$WORK/stage4"
  continued continue3 "$WORK/corpus-b" "$((SEED + 4))" 115 "$WORK/stage4" "$WORK/stage5"
  continued continue4 "$WORK/corpus-b" "$((SEED + 6))" 105 "$WORK/stage5" "$WORK/stage6" --layers 12
  cp "$WORK/stage6"/{config.json,generation_config.json,model.safetensors,tokenizer.json,tokenizer_config.json} "$OUT/"
  # The logs under the names models/demo keeps: training_log.csv is phase 2's.
  for name in phase1 continue1 continue2 continue3 continue4; do
    cp "$WORK/training_log_$name.csv" "$OUT/"
  done
  cp "$WORK/training_log_phase2.csv" "$OUT/training_log.csv"
fi
[ "$MODE" = "--train-only" ] && { echo "== trained: $OUT"; exit 0; }

NVFP4="$OUT-nvfp4" # models/demo -> models/demo-nvfp4
echo "== NVFP4 copy -> $NVFP4 (edge-llm quantize, calibrated on training conversations)"
cargo build --release -q -p edge-cli --manifest-path "$ROOT/Cargo.toml"
EDGE_LLM="$ROOT/target/release/edge-llm"
CALIBRATION_CORPUS="$WORK/corpus-a"
[ -d "$CALIBRATION_CORPUS" ] || CALIBRATION_CORPUS="$WORK/corpus-b" # --continue draws only corpus B
"$PY" "$HERE/calibration_ids.py" --corpus "$CALIBRATION_CORPUS/train.jsonl" --tokenizer "$OUT" > "$WORK/calibration.txt"
"$EDGE_LLM" quantize --model "$OUT" --out "$NVFP4" --format nvfp4 --calibration "$WORK/calibration.txt"
[ -f "$OUT/agent_defaults.json" ] || cp "$ROOT/models/demo/agent_defaults.json" "$OUT/"
cp "$OUT/agent_defaults.json" "$NVFP4/"
echo "== evaluation -> $OUT/eval.json"
nice -n "$NICE" "$PY" "$HERE/evaluate.py" --model "$OUT" --corpus "$WORK/corpus-b" \
  --max-prompts "$MTP_PROMPTS" --mtp-convs "$MTP_CONVS" --max-new-tokens "$REPLY" 2>&1 | tee "$WORK/eval.log"
nice -n "$NICE" "$PY" "$HERE/evaluate_engine.py" --model "$OUT" --corpus "$WORK/corpus-b" \
  --edge-llm "$EDGE_LLM" --max-prompts "$EVAL_PROMPTS" --max-new-tokens "$REPLY" 2>&1 | tee "$WORK/eval_engine.log"
echo "== done: $OUT"
