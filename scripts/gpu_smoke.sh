#!/usr/bin/env bash
# A 2-step ASTRA GRPO run on one GPU with vLLM, built from nothing but this repo (no downloads):
# the tiny local model, procedural environments with banded distractors, recipe astra_smoke
# (our agent loop, the astra_f1 reward, batch filling). Prints reward, turns and calls per step.
#
#   bash scripts/gpu_smoke.sh                  # prepare + train, under a 9-minute limit
#   bash scripts/gpu_smoke.sh --prepare-only   # model + data only (works without a GPU)
#
# Needs the GPU stack: `pip install -e .[gpu]` (verl[vllm]==0.9.1). Environment knobs:
#   PYTHON (default: .venv/bin/python if present, else python), RUN_DIR (default runs/gpu_smoke),
#   SMOKE_TIMEOUT_S (training limit, default 480), N_ENVS (default 64).
# Exit status: 0 when both steps ran and printed their metrics; non-zero otherwise (the log is
# kept at $RUN_DIR/train.log).
set -euo pipefail

cd "$(dirname "$0")/.."
REPO=$(pwd)
PY=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python)}
RUN_DIR=$(mkdir -p "${RUN_DIR:-runs/gpu_smoke}" && cd "${RUN_DIR:-runs/gpu_smoke}" && pwd)
SMOKE_TIMEOUT_S=${SMOKE_TIMEOUT_S:-480}
N_ENVS=${N_ENVS:-64}
PREPARE_ONLY=0
[ "${1:-}" = "--prepare-only" ] && PREPARE_ONLY=1

say() { printf '\n[gpu_smoke %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

say "python: $PY; run dir: $RUN_DIR"
"$PY" - <<'EOF'
import importlib.metadata as md
print("verl", md.version("verl"))
try:
    print("vllm", md.version("vllm"))
except md.PackageNotFoundError:
    print("vllm: not installed (training needs `pip install -e .[gpu]`)")
EOF

say "1/4 tiny model and tokenizer (local, random weights)"
"$PY" -m astra_verl.tiny_model "$RUN_DIR/tiny-model"

say "2/4 $N_ENVS procedural environments"
rm -rf "$RUN_DIR/store" "$RUN_DIR/envs"
"$PY" -m env_registry generate --store "$RUN_DIR/store" --n "$N_ENVS" --seed 0 --max-hops 3 -q

say "3/4 verl parquet with banded distractors, prompts measured with the tiny tokenizer"
"$PY" -m env_registry export-parquet --store "$RUN_DIR/store" --out "$RUN_DIR/envs" --mixing banded \
    --tokenizer "$RUN_DIR/tiny-model" --max-prompt-length 3072 --val-fraction 0.25 -q
"$PY" - "$RUN_DIR/envs/mix_banded" <<'EOF'
import sys, pyarrow.parquet as pq
for split in ("train", "val"):
    t = pq.read_table(f"{sys.argv[1]}/{split}.parquet")
    print(f"{split}: {t.num_rows} rows, columns {t.column_names}")
    assert t.num_rows >= 4, f"{split} has {t.num_rows} rows; the smoke batch needs 4"
EOF

if [ "$PREPARE_ONLY" = 1 ]; then
    say "prepared (--prepare-only): $RUN_DIR"
    exit 0
fi

say "4/4 GRPO: 2 steps, batch 4 x 4 rollouts, limit ${SMOKE_TIMEOUT_S}s"
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader
set +e
timeout --signal=TERM --kill-after=30 "$SMOKE_TIMEOUT_S" \
    "$PY" -m verl.trainer.main_ppo +recipe=astra_smoke \
        actor_rollout_ref.model.path="$RUN_DIR/tiny-model" \
        astra.data_dir="$RUN_DIR/envs" \
        trainer.default_local_dir="$RUN_DIR/checkpoints" \
        trainer.resume_mode=disable \
        trainer.rollout_data_dir="$RUN_DIR/rollouts" \
        2>&1 | tee "$RUN_DIR/train.log"
status=${PIPESTATUS[0]}

say "per-step metrics (from verl's console logger)"
"$PY" - "$RUN_DIR/train.log" <<'EOF'
import re, sys

KEYS = [
    ("critic/score/mean", "reward"),
    ("astra/f1/mean", "f1"),
    ("astra/solved_rate", "solved"),
    ("astra/turns/mean", "turns"),
    ("astra/calls_per_episode/mean", "calls/ep"),
    ("astra/invalid_call_rate", "invalid"),
    ("astra/distractor_call_rate", "distractor"),
    ("astra/batch_filling/dispatched_prompts", "refills"),
    ("astra/batch_filling/filled_with_invalid_groups", "filled"),
    ("timing_s/step", "step_s"),
]
steps = {}
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"\bstep:(\d+) - (.*)$", line.strip())
    if m:
        steps[int(m.group(1))] = dict(kv.split(":", 1) for kv in m.group(2).split(" - ") if ":" in kv)
if not steps:
    sys.exit("no step metrics found in the log: training did not complete a step")
print("step " + " ".join(f"{short:>10}" for _, short in KEYS))
for step, metrics in sorted(steps.items()):
    print(f"{step:>4} " + " ".join(f"{float(metrics[k]):>10.3f}" if k in metrics else f"{'-':>10}" for k, _ in KEYS))
missing = [k for k, _ in KEYS if k not in steps[max(steps)]]
if missing:
    sys.exit(f"missing from the step metrics: {missing}")
if sorted(steps) != [1, 2]:
    sys.exit(f"expected steps [1, 2], got {sorted(steps)}")
EOF
parse=$?
set -e
[ "$status" -eq 0 ] || { say "training exited with status $status (124: the ${SMOKE_TIMEOUT_S}s limit); log: $RUN_DIR/train.log"; exit "$status"; }
say "done: 2 steps; log $RUN_DIR/train.log, rollouts $RUN_DIR/rollouts"
exit "$parse"
