"""Golden-call recovery measured on worlds whose golden calls are known.

    python bench/recovery.py --n 300
    python bench/recovery.py --n 300 --base-url http://localhost:8000/v1 --model smollm2   # a model proposes too

Our environments are exported to ASTRA-RL-1k rows (`env_registry.export_rl`: golden calls,
sub-question texts, dependencies and final answers stripped), recovered LLM-free
(`env_registry.recovery`), and every recovered call is compared with the stripped one under the
reward's own check (`env_registry.matching.args_agree`), per family:

- recovered: share of target answers (tool sub-questions) with an accepted call;
- same: the recovered call passes the original sub-question's check and the original golden
  call passes the recovered one's (the reward pays exactly the same calls);
- looser: the recovered check pays every original golden call, but the recovered call itself
  fails the original check (a batch tool's one entity where the original asked for all four:
  the recovered reward also pays a call about that entity alone);
- false: the recovered check refuses an original golden call (the recovered reward would pay
  another entity or modifier than the original) — the count that must be 0;
- refused: answers left unrecovered as ambiguous (two different calls produce them);
- rows: share of rows with every answer recovered (what import-astra imports);
- time per row: median and p95 seconds of one row's search (rows searched `--concurrency` at once).

Families: the procedural generator, per scenario type; ASTRA pipeline records imported from a
JSONL (`--pipeline`, default the importer tests' fixtures written in ASTRA's format); and any
store's environments by generator (`--store`), e.g. synthesized ones:

    python -m data_synth env run --out runs/dry --mode domain --bundled-input --allow-scripted \
        --responder data_synth.env.canned:respond
    python bench/recovery.py --n 300 --store runs/dry/envs
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchkit import machine_line

from astra_foundation.llm.config import LLMConfig, add_llm_arguments
from env_registry.cli_rl import proposer_config, recover_rows
from env_registry.export_rl import answers_by_tool, to_rl_row
from env_registry.families.procedural import generate
from env_registry.importers.astra import convert, read_rl_row
from env_registry.importers.astra_rl import recovered_call_key
from env_registry.importers.sources import read_rows
from env_registry.matching import args_agree
from env_registry.recovery import Budget, Recovered, RowRecovery
from env_registry.spec import CallCheck, EnvSpec, GoldenCall
from env_registry.store import EnvStore
from env_registry.structure import check_structure

PIPELINE = Path(__file__).resolve().parent.parent / "tests" / "env_registry" / "data" / "astra_env_synthesis.jsonl"


def _recovered_check(tool: Any, mine: list[Recovered], r: Recovered) -> CallCheck | None:
    """The check the recovered environment's reward applies to `r`'s sub-question."""
    probe = tool.model_copy(deep=True)
    probe.golden_calls = [GoldenCall(args=a, expected=x.answer) for x in mine for a in [x.args, *x.alternatives]]
    key = recovered_call_key(probe)
    if key is None:
        return None
    golden = [
        {p: a.get(p, key.defaults.get(p)) for p in key.params if p in a or p in key.defaults}
        for a in [r.args, *r.alternatives]
    ]
    return CallCheck(**key.model_dump(), golden=golden)


def judge(env: EnvSpec, rec: RowRecovery) -> dict[str, int]:
    """Counts of one row: answers, recovered, same, looser, false, refused (see the module docstring)."""
    target = {q.id: q for q in env.reward_target().sub_questions}
    golden = {q.id: q for q in env.sub_questions}
    ids = {f"{tool}#{k}": qid for tool, pairs in answers_by_tool(env).items() for k, (qid, _) in enumerate(pairs)}
    out = {"answers": len(ids), "recovered": len(rec.recovered), "same": 0, "looser": 0, "false": 0}
    out["refused"] = sum(why.startswith("ambiguous") for why in rec.missing.values())
    for r in rec.recovered:
        qid = ids[r.id]
        original = target[qid].call_check
        tool = env.tool(r.tool)
        mine = [x for x in rec.recovered if x.tool == r.tool]
        check = _recovered_check(tool, mine, r)
        true_calls = [
            g.args
            for g in tool.golden_calls
            if qid in g.answers or (not g.answers and g.expected == golden[qid].answer)
        ]
        true_calls = true_calls or [g.args for g in tool.golden_calls]
        pays_true = check is None or all(args_agree(a, check) for a in true_calls)
        ours_ok = original is None or all(args_agree(a, original) for a in [r.args, *r.alternatives])
        key = "same" if pays_true and ours_ok else ("looser" if pays_true else "false")
        out[key] += 1
        if key == "false":
            print(f"  false recovery: {env.question!r} {r.id} recovered {r.args}, original {true_calls}")
    return out


async def run(envs: list[EnvSpec], budget: Budget, concurrency: int, llm: LLMConfig | None) -> list[RowRecovery]:
    rows = []
    for env in envs:
        row, issues = read_rl_row(to_rl_row(env))
        assert row is not None, issues
        rows.append(row)
    return await recover_rows(rows, budget, concurrency, llm)


def pipeline_envs(path: Path) -> list[EnvSpec]:
    """The structurally sound environments of a file of ASTRA pipeline records."""
    out = []
    for row in read_rows(path):
        c = convert(row.data or {}, row.label)
        if c.spec is not None and not c.issues and not check_structure(c.spec):
            out.append(c.spec)
    return out


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:5.1f}%" if b else "    -"


def report(families: dict[str, list[tuple[EnvSpec, RowRecovery]]]) -> None:
    print(
        f"\n{'family':<34} {'rows':>5} {'answers':>7} {'recovered':>9} {'same':>6} {'looser':>6} {'false':>5} "
        f"{'refused':>7} {'rows ok':>7} {'s/row p50':>9} {'p95':>6}"
    )
    for name, pairs in families.items():
        c: dict[str, int] = defaultdict(int)
        for env, rec in pairs:
            for k, v in judge(env, rec).items():
                c[k] += v
        complete = sum(rec.complete for _, rec in pairs)
        times = sorted(rec.seconds for _, rec in pairs)
        p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
        print(
            f"{name:<34} {len(pairs):>5} {c['answers']:>7} {_pct(c['recovered'], c['answers']):>9} "
            f"{_pct(c['same'], c['recovered']):>6} {c['looser']:>6} {c['false']:>5} {c['refused']:>7} "
            f"{_pct(complete, len(pairs)):>7} {statistics.median(times):>9.2f} {p95:>6.2f}"
        )
    print("same: share of recovered calls; looser, false, refused: counts of answers")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=300, help="procedural environments (default 300)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pipeline", type=Path, default=PIPELINE, help="JSONL of ASTRA pipeline records")
    ap.add_argument(
        "--store",
        type=Path,
        action="append",
        default=[],
        help="also a store's environments, a family per generator (e.g. a `data_synth env run` store)",
    )
    ap.add_argument("--concurrency", type=int, default=4, help="rows searched at once (default 4)")
    ap.add_argument("--calls-per-tool", type=int, default=Budget().calls_per_tool)
    ap.add_argument("--seconds-per-row", type=float, default=Budget().seconds_per_row)
    add_llm_arguments(
        ap, what="optional proposer for answers the LLM-free search does not find", shared=("concurrency",)
    )
    args = ap.parse_args()
    llm = proposer_config(args)
    print(machine_line())
    print(f"proposer: {'none (LLM-free)' if llm is None else llm.model or llm.scripted or llm.responder}")
    budget = Budget(calls_per_tool=args.calls_per_tool, seconds_per_row=args.seconds_per_row)
    procedural = generate(args.n, seed=args.seed)
    pipeline = pipeline_envs(args.pipeline) if args.pipeline.exists() else []
    stored = [e for path in args.store for e in EnvStore.open(path)]
    t0 = time.perf_counter()
    results = asyncio.run(run(procedural + pipeline + stored, budget, args.concurrency, llm))
    wall = time.perf_counter() - t0
    pairs = list(zip(procedural + pipeline + stored, results, strict=True))
    families: dict[str, list[tuple[EnvSpec, RowRecovery]]] = defaultdict(list)
    for env, rec in pairs[: len(procedural)]:
        families[f"procedural/{env.scenario_type.value}"].append((env, rec))
    families = dict(sorted(families.items()))
    families["procedural (all)"] = pairs[: len(procedural)]
    if pipeline:
        families["astra pipeline records"] = pairs[len(procedural) : len(procedural) + len(pipeline)]
    for env, rec in pairs[len(procedural) + len(pipeline) :]:
        p = env.provenance
        families.setdefault(f"store: {p.generator}{' (scripted)' if p.scripted else ''}", []).append((env, rec))
    print(
        f"recovered {len(pairs)} rows LLM-free in {wall:.1f} s wall ({args.concurrency} at once; budget "
        f"{budget.calls_per_tool} calls per tool and round, {budget.seconds_per_row:g} s per row)"
    )
    report(families)


if __name__ == "__main__":
    main()
