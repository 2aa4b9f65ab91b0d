"""Reward-manager throughput: `astra_f1` vs verl's `naive` manager with a trivial compute_score, cold.

Both managers score the same batch of synthetic astra trajectories through `run_single`, one
sample per call and all samples awaited together, as verl's `RewardLoopWorker.compute_score_batch`
does. `naive` decodes each response with the tokenizer (the tiny local one, built here) and calls
a compute_score that returns 0.0 (the cheapest rule reward possible); `astra_f1` parses the
ground truth, reads the episode log and matches every call's output against the sub-answers
(`env_registry.matching`), decoding nothing.

Cold, as in training: every timed pass scores a batch of its own (new outputs, new answers, same
distribution: another seed), and `env_registry.matching`'s per-text caches are emptied before
it, so nothing a pass scores was seen before. The headline is the median of the cold passes.
For contrast, the last batch is scored once more (warm: every text cached), which is what the
old "median of 3 passes over one batch" measured.

Target: astra_f1 is never the step's bottleneck, i.e. >= 0.5x naive's throughput, cold, at
1,500-character outputs.

    .venv/bin/python bench/reward.py [--n 1024] [--group 8] [--calls 6] [--output-chars 1500] \
        [--response-tokens 2048] [--passes 3]
    .venv/bin/python bench/reward.py --quick        # what `make bench` runs
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from benchkit import Report, machine_line, verdict
from omegaconf import OmegaConf
from tensordict import TensorDict

from astra_verl.calls.call_log import CallRecord, EpisodeLog
from env_registry.call_gate import CallStatus
from env_registry.spec import RewardTarget, TargetSubQuestion

CONFIG = OmegaConf.create(
    {"reward": {"custom_reward_function": {"path": None}, "reward_model": {"enable": False}}, "astra": {"reward": {}}}
)


def trivial_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> float:
    return 0.0


def mock_output(rng: random.Random, answer: str | None, chars: int) -> str:
    """A JSON tool output of about `chars` characters, with many numbers (the matcher's worst case)."""
    rows, size = [], 0
    while size < chars:
        row = {
            "id": rng.randint(1, 10**6),
            "name": f"item-{rng.randint(1, 999)}",
            "value": round(rng.random() * 1e4, 3),
        }
        rows.append(row)
        size += len(json.dumps(row))
    if answer is not None:
        rows[rng.randrange(len(rows))]["result"] = answer
    return json.dumps({"results": rows})


def build_batch(n: int, group: int, n_calls: int, output_chars: int, response_tokens: int, vocab: int, seed: int):
    rng = random.Random(seed)
    samples = []
    targets: list[str] = []
    for p in range((n + group - 1) // group):
        answers = [str(rng.randint(100, 99999)), f"{rng.random() * 100:.3f}", f"City {p}", str(rng.randint(1, 50))]
        target = RewardTarget(
            env_id=f"env-{p}",
            final_answer=answers[-1],
            sub_questions=[
                TargetSubQuestion(id=f"q{i}", answer=a, needs_tool=True, tool=f"tool_{i}")
                for i, a in enumerate(answers)
            ],
        )
        targets.append(target.model_dump_json())
    for i in range(n):
        p = i // group
        target = RewardTarget.model_validate_json(targets[p])
        calls = []
        for c in range(n_calls):
            q = target.sub_questions[c % len(target.sub_questions)]
            status = CallStatus.OK if rng.random() > 0.15 else CallStatus.SCHEMA_ERROR
            hit = q.answer if rng.random() > 0.3 else None
            calls.append(
                CallRecord(
                    turn=c // 2 + 1,
                    index=c % 2,
                    tool=q.tool if rng.random() > 0.1 else "distractor_tool",
                    arguments={"query": f"x{c}"},
                    status=status,
                    output=mock_output(rng, hit, output_chars) if status is CallStatus.OK else "error: bad arguments",
                    distractor=False,
                    source_env=target.env_id,
                )
            )
        log = EpisodeLog(env_id=target.env_id, calls=calls, assistant_turns=n_calls // 2 + 2, final_answer="done")
        samples.append((targets[p], log.to_extra_fields()))

    prompts = torch.randint(3, vocab, (n, 256))
    responses = torch.randint(3, vocab, (n, response_tokens))
    tool_extra = np.empty(n, dtype=object)
    tool_extra[:] = [s[1] for s in samples]
    reward_model = np.empty(n, dtype=object)
    reward_model[:] = [{"style": "rule", "ground_truth": s[0]} for s in samples]
    extra_info = np.empty(n, dtype=object)
    extra_info[:] = [{"index": i} for i in range(n)]
    from verl import DataProto

    return DataProto(
        batch=TensorDict(
            {
                "prompts": prompts,
                "responses": responses,
                "attention_mask": torch.ones(n, 256 + response_tokens, dtype=torch.int64),
            },
            batch_size=n,
        ),
        non_tensor_batch={
            "uid": np.array([f"u{i // group}" for i in range(n)], dtype=object),
            "data_source": np.array(["astra/bench"] * n, dtype=object),
            "reward_model": reward_model,
            "extra_info": extra_info,
            "__num_turns__": np.array([n_calls + 2] * n),
            "tool_extra_fields": tool_extra,
        },
    )


def score_pass(manager, data) -> float:
    """Trajectories per second of one pass over `data`."""

    async def score_all():
        return await asyncio.gather(*[manager.run_single(data[i : i + 1]) for i in range(len(data))])

    t0 = time.perf_counter()
    out = manager.loop.run_until_complete(score_all())
    rate = len(data) / (time.perf_counter() - t0)
    assert len(out) == len(data)
    return rate


def clear_matching_caches() -> None:
    """Empty every cache the matcher keeps (`env_registry.matching` and the text readers it uses),
    so the next pass starts cold."""
    from env_registry import matching, text_reading

    for module in (matching, text_reading):
        for value in vars(module).values():
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1024, help="trajectories per batch (default 1024)")
    ap.add_argument("--group", type=int, default=8, help="rollouts per prompt sharing a ground truth (default 8)")
    ap.add_argument("--calls", type=int, default=6, help="tool calls per trajectory (default 6)")
    ap.add_argument("--output-chars", type=int, default=1500, help="characters per tool output (default 1500)")
    ap.add_argument("--response-tokens", type=int, default=2048, help="response length naive decodes (default 2048)")
    ap.add_argument("--passes", type=int, default=3, help="cold passes, each on a fresh batch (default 3)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="smaller batches (make bench)")
    ap.add_argument("--json", metavar="PATH", help="write the summary rows as JSON")
    args = ap.parse_args()
    if args.quick:
        args.n, args.passes = 512, 3

    from transformers import AutoTokenizer
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls

    import astra_verl.reward.managers  # noqa: F401  - registers astra_f1 (the plugin does this under verl)
    from astra_verl.tiny_model import build

    with tempfile.TemporaryDirectory() as tmp:
        tokenizer = AutoTokenizer.from_pretrained(str(build(Path(tmp) / "tiny")))

    def batch(seed: int, n: int):
        return build_batch(n, args.group, args.calls, args.output_chars, args.response_tokens, len(tokenizer), seed)

    # One batch per pass, all built before any timing; seeds apart from the warm-up's.
    batches = [batch(args.seed + 1000 * (p + 1), args.n) for p in range(args.passes)]
    naive = get_reward_manager_cls("naive")(CONFIG, tokenizer, trivial_score)
    astra = get_reward_manager_cls("astra_f1")(CONFIG, tokenizer, None)
    warm_up = batch(args.seed, 32)
    score_pass(astra, warm_up)  # imports and first-call costs, on texts no timed pass scores
    score_pass(naive, warm_up)
    naive_all, astra_all = [], []
    for data in batches:  # interleaved, so load from other work hits both alike
        clear_matching_caches()
        naive_all.append(score_pass(naive, data))
        clear_matching_caches()
        astra_all.append(score_pass(astra, data))
    naive_rate, astra_rate = statistics.median(naive_all), statistics.median(astra_all)
    warm = score_pass(astra, batches[-1])  # the same batch again: every text is in the caches
    share, matches = matching_share(astra, batch(args.seed + 999_999, args.n))

    print(machine_line())
    print(
        f"batch: {args.n} trajectories, {args.calls} calls x ~{args.output_chars} chars of output, "
        f"{args.response_tokens} response tokens, groups of {args.group}; {args.passes} cold passes, a fresh batch each"
    )
    print(
        f"naive (decode + trivial compute_score): {naive_rate:10.1f} traj/s   passes: {[round(r) for r in naive_all]}"
    )
    print(
        f"astra_f1 (episode log + matching):      {astra_rate:10.1f} traj/s   passes: {[round(r) for r in astra_all]}"
    )
    print(f"per trajectory, cold: naive {1e6 / naive_rate:.0f} us, astra_f1 {1e6 / astra_rate:.0f} us")
    ratio = astra_rate / naive_rate
    print(f"ratio astra_f1 / naive, cold = {ratio:.2f}x  (target >= 0.5x: {verdict(ratio >= 0.5)})")
    print(
        f"astra_f1 warm (the last batch scored again, every text cached; not the headline): {warm:.1f} traj/s = {warm / naive_rate:.2f}x naive"
    )
    print(
        f"astra_f1 time in the matching rule (answer_in_output, answer_in_text), cold: {share:.0%} ({matches} matches per pass)"
    )
    print(machine_line())
    report = Report("bench/reward.py")
    report.add(what=f"reward throughput, cold (fresh outputs every pass), {args.output_chars:,}-char outputs",
               competitor="verl `naive` manager (decode + a compute_score returning 0)",
               ours=f"{astra_rate:,.0f} traj/s", theirs=f"{naive_rate:,.0f} traj/s", ratio=f"{ratio:.2f}x",
               target=">= 0.5x", met=ratio >= 0.5)  # fmt: skip
    report.write(args.json)


def matching_share(manager, data) -> tuple[float, int]:
    """One more cold pass, on a batch of its own, with the matching rule timed (both of the
    functions `astra_verl.calls.solved` calls: `answer_in_output`, `answer_in_text`): how much of
    astra_f1 is the matching rule."""
    from astra_verl.calls import solved

    names = ("answer_in_output", "answer_in_text")
    originals, spent, calls = {name: getattr(solved, name) for name in names}, [0.0], [0]

    def timed(original):
        def run(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - t0
                calls[0] += 1

        return run

    clear_matching_caches()
    for name, original in originals.items():
        setattr(solved, name, timed(original))
    try:
        t0 = time.perf_counter()
        score_pass(manager, data)
        total = time.perf_counter() - t0
    finally:
        for name, original in originals.items():
            setattr(solved, name, original)
    if calls[0] == 0:
        raise SystemExit("bench/reward.py: astra_f1 called no matching function: the timing wraps the wrong names")
    return spent[0] / total, calls[0]


if __name__ == "__main__":
    main()
