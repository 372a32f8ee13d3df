#!/usr/bin/env bash
# Regenerate the demo model from scratch: corpus -> tokenizer -> template check -> model -> eval.
#
#   tools/train_demo/retrain.sh            # full run, writes models/demo/* (about 1 h on 2 CPU cores)
#   tools/train_demo/retrain.sh --smoke    # ~2-10 min end-to-end check, writes only to a temp dir
#   tools/train_demo/retrain.sh --continue # continue training the committed models/demo on a fresh
#                                          # corpus (its tokenizer kept; seed SEED+1 for the data order)
#
# Environment:
#   VENV   Python venv to use or create (default: ~/.cache/edge-llm/train-demo-venv; never inside the repo)
#   WORK   scratch dir for the corpus (default: tools/train_demo/work, git-ignored)
#   SEED   corpus and training seed (default: 1234)
#   NICE   nice level for the heavy steps (default: 10)
#   PIP_ARGS  extra pip arguments, e.g. "--index-url https://download.pytorch.org/whl/cpu"
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENV="${VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/edge-llm/train-demo-venv}"
WORK="${WORK:-$HERE/work}"
SEED="${SEED:-1234}"
NICE="${NICE:-10}"
OUT="$ROOT/models/demo"

if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating venv $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install ${PIP_ARGS:-} torch==2.15.0 transformers==5.23.0 tokenizers safetensors jinja2
fi
PY="$VENV/bin/python"

if [ "${1:-}" = "--smoke" ]; then
  exec nice -n "$NICE" "$PY" "$HERE/train.py" --smoke --seed "$SEED"
fi

mkdir -p "$WORK" "$OUT"
CONTINUE=()
if [ "${1:-}" = "--continue" ]; then
  # Same weights' vocabulary: the committed tokenizer stays; the model starts from the
  # committed weights, and a different seed gives a different data order.
  INIT="$WORK/init-model"
  rm -rf "$INIT" && cp -r "$OUT" "$INIT"
  # Half the from-scratch peak learning rate: the weights are already trained.
  CONTINUE=(--init-from "$INIT" --seed "$((SEED + 1))" --lr 1e-3)
fi

echo "== corpus -> $WORK/corpus"
"$PY" "$HERE/gen_corpus.py" --out "$WORK/corpus" --seed "$SEED" --n-train 20000 --n-heldout 300
if [ ${#CONTINUE[@]} -eq 0 ]; then
  echo "== tokenizer -> $OUT"
  nice -n "$NICE" "$PY" "$HERE/train_tokenizer.py" --corpus "$WORK/corpus/train.jsonl" --out "$OUT" --vocab-size 4096
fi
echo "== chat template check"
"$PY" "$HERE/check_template.py" --model "$OUT" --corpus "$WORK/corpus" --limit 2000
echo "== training -> $OUT"
nice -n "$NICE" "$PY" "$HERE/train.py" --corpus "$WORK/corpus" --tokenizer "$OUT" --out "$OUT" --seed "$SEED" \
  "${CONTINUE[@]}" 2>&1 | tee "$WORK/train.log"
echo "== NVFP4 copy -> $ROOT/models/demo-nvfp4 (edge-llm quantize, calibrated on training conversations)"
"$PY" "$HERE/calibration_ids.py" --corpus "$WORK/corpus/train.jsonl" --tokenizer "$OUT" > "$WORK/calibration.txt"
(cd "$ROOT" && cargo run --release -q -p edge-cli -- quantize --model "$OUT" --out "$ROOT/models/demo-nvfp4" \
  --format nvfp4 --calibration "$WORK/calibration.txt")
cp "$OUT/agent_defaults.json" "$ROOT/models/demo-nvfp4/"
echo "== evaluation -> $OUT/eval.json"
nice -n "$NICE" "$PY" "$HERE/evaluate.py" --model "$OUT" --corpus "$WORK/corpus" 2>&1 | tee "$WORK/eval.log"
