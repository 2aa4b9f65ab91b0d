"""The README's main job: ASTRA end to end on a laptop, on the embedded default (`make demo`).

No GPU, no API key, nothing downloaded. Every stage runs the same command a user would type, in
a fresh process, and prints what it did:

  1. plugin     `import verl` registers astra-verl's agent loop, reward managers and CPU platform
  2. model      a tiny Qwen2 with a locally trained tokenizer (`python -m astra_verl.tiny_model`)
  3. envs       seeded procedural environments (`env_registry generate`), stats and a plot
  4. validate   structure + every golden call replayed in the sandbox (`env_registry validate`)
  5. export     verl RL parquet (irrelevant-tool mixing `--mixing`, default none), prompts measured
                with the tokenizer (`env_registry export-parquet`), and golden demonstrations of the train
                rows as SFT parquet (`env_registry export-sft`:
                a fifth of them show a failed call, its real error and the corrected call)
  6. sft        verl's SFT trainer on CPU (`torchrun -m verl.trainer.sft_trainer +recipe=astra_sft_cpu`)
  7. grpo       verl's PPO loop, GRPO, from the SFT checkpoint
                (`main_ppo +recipe=astra_cpu`: astra_tool_agent, sandboxed tools, astra_f1), with verl's
                validation (greedy, no batch filling) on the train environments before and after

The model is tiny (hidden 128, 2 layers) and random before SFT, and a laptop affords a dozen environments, so what it learns is those environments, not tool use in
general (held-out environments: `bench/learning.py`). It ends with the policy's reward on them
before and after GRPO, measured as verl validates: every part runs for real (tool calls parsed from
generated tokens, executed in the sandbox, scored by F1, the actor updated and its weights synced
into the rollout), and the reward moves.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from astra_foundation.sandbox import describe_isolation
from astra_verl.demo_report import golden_response_tokens, paired_rise, per_env_scores, rise_line

STAGE_TIMEOUT_S = 900  # per stage; ASTRA_DEMO_STAGE_TIMEOUT_S overrides it (a loaded machine needs longer)
RESPONSE_BUDGET = 512  # tokens of one episode's response: assistant turns and the tool results they see
# Environments whose golden episodes fit the response budget: a climate tool returns a year of numbers
# and parallel chains add results side by side, so their episodes can overflow 512 tokens and cannot
# be solved (an outside run hit it); the demo checks the fit after export (golden_response_tokens).
DEMO_DOMAINS = "geography,people,events,finance,retail"
DEMO_SCENARIOS = "single_hop,multi_hop"
ANSI_CODES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class DemoError(RuntimeError):
    pass


def banner(title: str) -> None:
    print(f"\n== {title}", flush=True)


def run(
    cmd: list[str],
    cwd: Path,
    env: dict[str, str] | None = None,
    log: Path | None = None,
    timeout: float | None = None,
) -> str:
    """Run one stage's command; its output goes to `log` (and is returned); a failure shows the tail."""
    full_env = {**os.environ, "VERL_PLATFORM": "cpu", "PYTHONUNBUFFERED": "1", **(env or {})}
    print("$ " + " ".join(cmd), flush=True)
    timeout = timeout or float(os.environ.get("ASTRA_DEMO_STAGE_TIMEOUT_S", STAGE_TIMEOUT_S))
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        if log is not None:
            log.write_text(ANSI_CODES.sub("", _text(exc.stdout) + _text(exc.stderr)))
        raise DemoError(
            f"stage ran past {timeout:.0f} s and was stopped (a loaded machine: set ASTRA_DEMO_STAGE_TIMEOUT_S); "
            f"log: {log}"
        ) from None
    out = ANSI_CODES.sub("", proc.stdout + proc.stderr)  # Ray colours its log prefixes; logs are plain text
    if log is not None:
        log.write_text(out)
    if proc.returncode != 0:
        raise DemoError(f"stage failed (exit {proc.returncode}); last lines:\n{out[-4000:]}\nfull log: {log}")
    return out


def _text(out: str | bytes | None) -> str:
    return out.decode(errors="replace") if isinstance(out, bytes) else out or ""


def py(*args: str) -> list[str]:
    return [sys.executable, *args]


def check_plugin() -> None:
    # Lazy: verl is heavy (torch, ray) and the demo's first stages run without it.
    import verl  # noqa: F401  - loads astra_verl.plugin through the verl.plugins entry point
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER

    loops = sorted(n for n in _agent_loop_registry if n.startswith("astra"))
    rewards = sorted(n for n in REWARD_MANAGER if n.startswith("astra"))
    print(f"agent loops: {loops}; reward managers: {rewards}")
    if not loops or not rewards:
        raise DemoError("astra-verl did not register into verl; see the error log above")
    print(f"sandbox: {describe_isolation()}")


def read_metrics(path: Path) -> dict[int, dict[str, float]]:
    """verl's file logger: one JSON line {"step": N, "data": {...}} per step."""
    steps: dict[int, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        steps.setdefault(int(rec["step"]), {}).update(rec["data"])
    return steps


def fmt(m: dict[str, float], key: str, spec: str = ".3f") -> str:
    return format(m[key], spec) if key in m else "n/a"


STEP_COLUMNS = (  # (header, metric, format): one GRPO step per line
    ("all groups", "astra/reward_all_groups/mean", ".3f"),  # every rollout sampled this step
    ("trained", "critic/score/mean", ".3f"),  # the groups batch filling kept (std(R) > delta)
    ("solved", "astra/solved_rate", ".3f"),
    ("turns", "astra/turns/mean", ".2f"),
    ("calls", "astra/calls_per_episode/mean", ".2f"),
    ("invalid", "astra/invalid_call_rate", ".3f"),
    ("distr.", "astra/distractor_call_rate", ".3f"),
    ("s/step", "timing_s/step", ".2f"),
)


def print_steps(steps: dict[int, dict[str, float]]) -> None:
    """The training reward of every sampled group and of the trained ones, and the episode metrics."""
    print("step " + " ".join(f"{h:>10}" for h, _, _ in STEP_COLUMNS))
    for step in sorted(steps):
        print(f"{step:>4} " + " ".join(f"{fmt(steps[step], k, f):>10}" for _, k, f in STEP_COLUMNS))
    print("(reward at the rollout temperature; 'all groups' is the policy's, 'trained' what batch filling kept)")


def check_tensorboard(logdir: Path) -> None:
    """The demo ends by pointing at `tensorboard --logdir`: the folder must hold verl's event files."""
    if not any(logdir.rglob("events.out.tfevents.*")):
        raise DemoError(f"verl wrote no TensorBoard events under {logdir} (trainer.logger has tensorboard)")


def validation(dump: Path) -> dict:
    """Mean reward, invalid-call rate and per-environment reward of one verl validation pass
    (`trainer.validation_data_dir`'s `<step>.jsonl`: one line per episode with its score and counts)."""
    if not dump.exists():
        raise DemoError(f"verl wrote no validation dump {dump}; see grpo.log")
    rows = [json.loads(line) for line in dump.read_text().splitlines() if line.strip()]
    calls = sum(r["calls"] for r in rows)
    return {
        "episodes": len(rows),
        "reward": sum(r["score"] for r in rows) / len(rows),
        "invalid": sum(r["invalid_calls"] for r in rows) / calls if calls else 0.0,
        "per_env": per_env_scores(rows),
    }


def check_budget(sft_data: Path, model: Path) -> None:
    """Every golden episode must fit the response budget, or GRPO and validation score unsolvable tasks."""
    need = golden_response_tokens(sft_data, model)
    over = [n for n in need if n > RESPONSE_BUDGET]
    print(f"golden episodes need {min(need)}..{max(need)} response tokens (budget {RESPONSE_BUDGET})")
    if over:
        raise DemoError(
            f"{len(over)} golden episodes need more than the {RESPONSE_BUDGET}-token response budget ({max(over)}): "
            "choose --domains/--scenario-types whose tool results fit"
        )


def parser() -> argparse.ArgumentParser:
    """The demo's settings (bench/demo_rise.py parses its demo arguments with it to record them)."""
    p = argparse.ArgumentParser(
        prog="python -m astra_verl.demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", default="runs/demo", help="working folder (default runs/demo); reruns reuse the model")
    p.add_argument("--envs", type=int, default=12, help="procedural environments to generate (default 12)")
    p.add_argument("--max-hops", type=int, default=2, help="longest tool chain per environment (default 2)")
    p.add_argument(
        "--mixing",
        choices=["none", "random", "banded"],
        default="none",
        help="irrelevant tools per row (default none: short prompts a tiny model can fit on a laptop; GPU recipes use banded)",
    )
    p.add_argument("--domains", default=DEMO_DOMAINS, help=f"environment domains (default {DEMO_DOMAINS})")
    p.add_argument("--scenario-types", default=DEMO_SCENARIOS, help=f"scenario types (default {DEMO_SCENARIOS})")
    # SFT must leave a policy that solves some environments some of the time, so GRPO's groups differ:
    # 60 steps solved nothing (every group at reward 0); at 240 a seed could solve each environment
    # always or never, and GRPO had nothing to learn (docs/results/learning.md, "Demo rise"). 150 sits
    # between; the SFT time saved pays for 8 more GRPO steps (2 prompts x 4 at lr 1e-4).
    p.add_argument("--sft-steps", type=int, default=150, help="SFT steps on golden demonstrations (default 150)")
    p.add_argument("--grpo-steps", type=int, default=32, help="GRPO steps (default 32)")
    p.add_argument("--group-size", type=int, default=4, help="GRPO samples per prompt (default 4)")
    p.add_argument("--grpo-lr", type=float, default=1e-4, help="GRPO actor learning rate (default 1e-4)")
    p.add_argument(
        "--temperature",
        type=float,
        default=0.5,
        help="GRPO rollout temperature (default 0.5, the recipe's); validation is greedy whatever this is",
    )
    p.add_argument(
        "--max-gen-batches",
        type=float,
        default=2.0,
        help="batch filling's budget: prompts one GRPO step may sample, in batches, looking for groups whose "
        "rewards differ (default 2.0, the recipe's); a step that finds none trains on groups with no gradient",
    )
    p.add_argument(
        "--seed", type=int, default=0, help="model init, environments, split, SFT and GRPO data order (default 0)"
    )
    return p


def main(argv: list[str] | None = None) -> dict:
    """The demo's stages, top to bottom, each the command a user would type (as a recipe reads).
    Over 60 lines on purpose: splitting the stages into functions would hide their order.
    Returns what bench/demo_rise.py reads: the two validation passes, the rise and the stage timings."""
    args = parser().parse_args(argv)

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    model, store = out / "tiny-model", out / "store"
    t_start = time.perf_counter()
    timings: dict[str, float] = {}

    def timed(name: str, t0: float) -> None:
        timings[name] = time.perf_counter() - t0

    banner("1. plugin: what `import verl` registers")
    t0 = time.perf_counter()
    check_plugin()
    timed("plugin", t0)

    banner("2. model: tiny Qwen2 + local tokenizer with a tool chat template")
    t0 = time.perf_counter()
    print(run(py("-m", "astra_verl.tiny_model", str(model), "--seed", str(args.seed)), out).strip())
    timed("model", t0)

    banner("3. envs: procedural environments (no LLM), their statistics and a plot")
    t0 = time.perf_counter()
    if store.exists():  # a rerun starts from the same seed, so it would add nothing; start clean for clarity
        shutil.rmtree(store)
    run(py("-m", "env_registry", "--store", str(store), "-q", "generate", "--n", str(args.envs),
           "--max-hops", str(args.max_hops), "--domains", args.domains, "--scenario-types", args.scenario_types,
           "--seed", str(args.seed)), out)  # fmt: skip
    print(run(py("-m", "env_registry", "--store", str(store), "-q", "stats", "--plot", str(out / "envs.png")), out))
    timed("envs", t0)

    banner("4. validate: structure, and every golden call replayed in the sandbox")
    t0 = time.perf_counter()
    print(run(py("-m", "env_registry", "--store", str(store), "-q", "validate"), out).strip())
    timed("validate", t0)

    banner(f"5. export: RL parquet (mixing={args.mixing}) and golden SFT demonstrations")
    t0 = time.perf_counter()
    print(run(py("-m", "env_registry", "--store", str(store), "-q", "export-parquet", "--out", str(out / "rl"),
                 "--mixing", args.mixing, "--tokenizer", str(model), "--max-prompt-length", "4096",
                 "--seed", str(args.seed)), out).strip())  # fmt: skip
    rl = out / "rl" / f"mix_{args.mixing}"
    sft_data = out / "sft.parquet"
    print(
        run(
            py("-m", "env_registry", "-q", "export-sft", str(rl / "train.parquet"), "--output-file", str(sft_data)), out
        )
    )
    check_budget(sft_data, model)
    timed("export", t0)

    banner(f"6. sft: verl's SFT trainer on CPU, {args.sft_steps} steps on the golden demonstrations")
    t0 = time.perf_counter()
    sft_log = out / "sft.metrics.jsonl"
    run(py("-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1", "-m", "verl.trainer.sft_trainer",
           "+recipe=astra_sft_cpu", f"data.train_files={sft_data}", f"model.path={model}", "data.max_length=4096",
           f"trainer.total_training_steps={args.sft_steps}", "trainer.total_epochs=1000", "optim.lr=3e-3",
           "optim.lr_scheduler_type=constant", f"trainer.default_local_dir={out / 'sft-ckpt'}",
           f"trainer.seed={args.seed}",
           "trainer.logger=[console,file]"),
        out, env={"VERL_FILE_LOGGER_PATH": str(sft_log)}, log=out / "sft.log")  # fmt: skip
    sft = read_metrics(sft_log)
    losses = [sft[s]["train/loss"] for s in sorted(sft) if "train/loss" in sft[s]]
    timed("sft", t0)
    print(
        f"SFT: {len(losses)} steps, loss {losses[0]:.3f} -> {losses[-1]:.3f} in {timings['sft']:.0f} s (log: {out / 'sft.log'})"
    )
    checkpoint = out / "sft-ckpt" / f"global_step_{args.sft_steps}" / "huggingface"

    banner(f"7. grpo: main_ppo +recipe=astra_cpu, {args.grpo_steps} steps from the SFT checkpoint")
    t0 = time.perf_counter()
    grpo_log = out / "grpo.metrics.jsonl"
    grpo_log.unlink(missing_ok=True)
    shutil.rmtree(out / "validation", ignore_errors=True)
    run(py("-m", "verl.trainer.main_ppo", "+recipe=astra_cpu", f"astra.data_dir={out / 'rl'}",
           f"data.train_files={rl / 'train.parquet'}", f"data.val_files={rl / 'train.parquet'}",
           f"actor_rollout_ref.model.path={checkpoint}", f"trainer.total_training_steps={args.grpo_steps}",
           "data.max_prompt_length=4096", f"data.max_response_length={RESPONSE_BUDGET}", "trainer.val_before_train=true",
           f"data.seed={args.seed}", f"actor_rollout_ref.rollout.seed={args.seed}",
           f"actor_rollout_ref.rollout.n={args.group_size}", f"actor_rollout_ref.actor.optim.lr={args.grpo_lr}",
           f"actor_rollout_ref.rollout.temperature={args.temperature}", f"astra.batch_filling.max_gen_batches={args.max_gen_batches}", f"trainer.test_freq={args.grpo_steps}", f"trainer.validation_data_dir={out / 'validation'}",
           f"trainer.rollout_data_dir={out / 'rollouts'}", "trainer.logger=[console,file,tensorboard]",
           f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH={grpo_log}",
           f"+ray_kwargs.ray_init.runtime_env.env_vars.TENSORBOARD_DIR={out / 'tensorboard'}"),
        out, log=out / "grpo.log")  # fmt: skip
    grpo = read_metrics(grpo_log)
    timed("grpo", t0)
    print_steps({s: m for s, m in grpo.items() if s > 0})
    trained = [s for s in grpo if s > 0]
    if len(trained) < args.grpo_steps:
        raise DemoError(f"GRPO logged {len(trained)} of {args.grpo_steps} steps; see {out / 'grpo.log'}")
    check_tensorboard(out / "tensorboard")

    banner("done")
    print("  ".join(f"{k} {v:.0f}s" for k, v in timings.items()) + f"  | total {time.perf_counter() - t_start:.0f} s")
    before = validation(out / "validation" / "0.jsonl")
    after = validation(out / "validation" / f"{args.grpo_steps}.jsonl")
    print(
        f"Reward on the {before['episodes']} train environments, measured as verl validates "
        f"(greedy, every environment once):\n"
        f"  after SFT {before['reward']:.3f} (invalid-call rate {before['invalid']:.2f})  ->  "
        f"after {args.grpo_steps} GRPO steps {after['reward']:.3f} (invalid-call rate {after['invalid']:.2f})\n"
        "A 1M-parameter model fitted to a dozen environments learns those, not tool use in general: held-out\n"
        "environments are bench/learning.py's job.\n"
        "What ran is the real thing: tool calls parsed from generated tokens, executed in the sandbox, scored by\n"
        "the trajectory F1, and GRPO updates whose weights were synced into the rollout each step. On a GPU:\n"
        "README, 'Training on GPUs'."
    )
    rise = paired_rise(before["per_env"], after["per_env"])
    print(run(py("-m", "astra_verl.inspect", str(out)), out).strip())
    print(f"outputs in {out}: envs.png, rl/, sft.parquet, sft.log, grpo.log, rollouts/ (the trajectories)")
    print(
        "See what happened:\n"
        f"  every episode (calls, results, what was solved, why it ended): {out / 'inspect' / 'index.html'}\n"
        f"  training curves: tensorboard --logdir {out / 'tensorboard'}"
    )
    print(rise_line(rise))  # last: the line a user reads
    return {"before": before, "after": after, "rise": rise, "timings": timings}


if __name__ == "__main__":
    try:
        main()
    except DemoError as exc:
        print(f"\ndemo failed: {exc}", file=sys.stderr)
        sys.exit(1)
