"""BFCL single-turn on our path agrees with BFCL's own `evaluate_task`, case by case.

Our path: the request-less half of `bfcl-single` (`Run` with a scripted model answering each
entry's ground truth, and `bfcl_single.verdict` on a perturbation corpus), BFCL's per-entry
functions in the sandbox. Reference: tests/eval/bfcl_single_direct.py, BFCL's `evaluate_task`
in a plain process. Also BFCL's leaderboard aggregates against ours.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from astra_foundation.llm.types import Completion, ToolCall
from astra_foundation.sandbox import SandboxConfig, SandboxPool
from astra_verl.eval import bfcl_single as bs
from astra_verl.eval import bfcl_single_report as rep

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from bfcl_single_cases import all_plain, perturbations, truth  # noqa: E402
from testkit import require  # noqa: E402

PER_CATEGORY = 4
PROMPTING = tuple(c for c in bs.CATEGORIES if c not in ("simple_java", "simple_javascript"))


def _sample(category: str) -> list[bs.SingleEntry]:
    entries = bs.load_entries([category])
    if category == "simple_java":  # Java answers with typed values need Java source text: see bfcl_single_cases
        entries = [e for e in entries if all_plain(e)]
    return sorted(random.Random(f"truth:{category}").sample(entries, PER_CATEGORY), key=entries.index)


def _completion(result) -> Completion:
    if isinstance(result, list):
        calls = [ToolCall(id=f"c{i}", name=n, arguments=a) for i, c in enumerate(result) for n, a in c.items()]
        return Completion(text="", tool_calls=calls)
    return Completion(text=result)


async def _ours(tmp_path: Path, truth_sets: dict, cases: list, by_id: dict) -> tuple[dict, list]:
    config = SandboxConfig(workers=2, packages=list(bs.SANDBOX_PACKAGES), call_timeout_s=60.0)
    records = {}
    async with SandboxPool(config) as pool:
        for style, entries in truth_sets.items():
            # the scripted model knows each entry by its turn's last message (prompting adds a system prompt)
            answers = {e.question[0][-1]["content"]: truth(e, style) for e in entries}
            assert len(answers) == len(entries)

            async def ask(messages, tools, answers=answers):
                return _completion(answers[messages[-1]["content"]])

            results = bs.results_file(tmp_path / f"{style}.jsonl", style, "truth")
            run = bs.Run(entries, ask, pool, results, style, "truth")
            await run.run(concurrency=4, progress=False)
            records[style] = results.records
        verdicts = await asyncio.gather(*(bs.verdict(pool, by_id[i], style, result) for _, style, i, result in cases))
    return records, verdicts


@pytest.fixture(scope="module")
def outcome(tmp_path_factory):
    require(bs.missing_packages(), bs.INSTALL)
    tmp = tmp_path_factory.mktemp("bfcl_single")
    truth_sets = {
        "fc": [e for c in bs.CATEGORIES for e in _sample(c)],
        "prompting": [e for c in PROMPTING for e in _sample(c)],
    }
    corpus_ids = {"simple_python_0", "parallel_0", "multiple_0", "live_simple_0-0-0", "irrelevance_0", "live_relevance_0-0-0",
                  "simple_java_0", "simple_javascript_0"}  # fmt: skip
    by_id = {e.id: e for e in bs.load_entries(bs.CATEGORIES, ids=corpus_ids)}
    cases = perturbations(by_id)
    records, verdicts = asyncio.run(_ours(tmp, truth_sets, cases, by_id))
    direct_cases = [
        {"name": f"truth {style} {e.id}", "style": style, "category": e.category, "id": e.id, "result": truth(e, style)}
        for style, entries in truth_sets.items()
        for e in entries
    ] + [{"name": n, "style": s, "category": by_id[i].category, "id": i, "result": r} for n, s, i, r in cases]
    levels = {
        c: {"accuracy": round(0.05 + 0.07 * k, 2), "total_count": bs.category_size(c)}
        for k, c in enumerate(bs.CATEGORIES)
    }
    spec = tmp / "cases.json"
    spec.write_text(json.dumps({"cases": direct_cases, "aggregates": levels}))
    proc = subprocess.run(
        [sys.executable, str(HERE / "bfcl_single_direct.py"), str(spec), str(tmp / "direct.json")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    direct = json.loads((tmp / "direct.json").read_text())
    return SimpleNamespace(
        truth_sets=truth_sets, records=records, cases=cases, verdicts=verdicts, direct=direct, levels=levels
    )


def test_ground_truth_of_every_category_scores_100_percent_in_both_styles(outcome):
    for style, entries in outcome.truth_sets.items():
        recs = outcome.records[style]
        assert {e.category for e in entries} == set(bs.CATEGORIES if style == "fc" else PROMPTING)
        failed = {i: r.verdict for i, r in recs.items() if not r.valid}
        assert len(recs) == len(entries) and not failed, failed
        scores = rep.category_scores(recs.values())
        assert all(s.accuracy == 1.0 for s in scores.values())


def test_every_case_gets_the_verdict_bfcl_gets(outcome):
    direct = {v["name"]: v for v in outcome.direct["verdicts"]}
    ours = [
        (f"truth {style} {e.id}", outcome.records[style][e.id].verdict)
        for style, entries in outcome.truth_sets.items()
        for e in entries
    ] + [(name, v) for (name, *_), v in zip(outcome.cases, outcome.verdicts, strict=True)]
    mismatches = [
        (name, (v["valid"], v["error_type"]), (direct[name]["valid"], direct[name]["error_type"]))
        for name, v in ours
        if (v["valid"], v["error_type"]) != (direct[name]["valid"], direct[name]["error_type"])
    ]
    assert not mismatches, mismatches
    # the corpus is not trivially one-sided: both verdicts, several failure kinds
    corpus = [v for v in outcome.verdicts]
    assert sum(v["valid"] for v in corpus) >= 5 and sum(not v["valid"] for v in corpus) >= 15
    assert len({v["error_type"] for v in corpus if not v["valid"]}) >= 6


def test_aggregates_are_bfcls_leaderboard_numbers(outcome):
    scores = {c: rep.Score(c, v["accuracy"], 0.0, v["total_count"]) for c, v in outcome.levels.items()}
    ours = {a.name: a.accuracy for a in rep.aggregates(scores, lambda c: outcome.levels[c]["total_count"])}
    board = outcome.direct["aggregates"]
    pct = lambda text: float(text.rstrip("%")) / 100  # noqa: E731
    assert ours["Non-Live overall"] == pytest.approx(pct(board["data_non_live.csv"]["Non-Live Overall Acc"]), abs=5e-5)
    assert ours["Non-Live Simple"] == pytest.approx(pct(board["data_non_live.csv"]["Simple AST"]), abs=5e-5)
    assert ours["Live overall"] == pytest.approx(pct(board["data_live.csv"]["Live Overall Acc"]), abs=5e-5)
    assert ours["Irrelevance"] == pytest.approx(pct(board["data_overall.csv"]["Irrelevance Detection"]), abs=5e-5)
    assert ours["Relevance"] == pytest.approx(pct(board["data_overall.csv"]["Relevance Detection"]), abs=5e-5)
