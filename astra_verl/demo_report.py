"""What the demo (`astra_verl.demo`) and `bench/demo_rise.py` report, as small pure functions.

- `per_env_scores`: one verl validation dump (`<step>.jsonl`) as {environment: reward}; validation is
  greedy and runs every environment once, so each prompt is one environment.
- `paired_rise`: after-GRPO minus after-SFT reward, paired per environment, with its standard error
  over environments; `rise_line` says it in one line and says plainly when it is inside the noise.
- `golden_response_tokens`: how many response tokens each golden demonstration needs (assistant turns
  and tool results, as the chat template renders them), so the demo can check that its environments
  can be solved within the RL response budget at all.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from astra_foundation.stats import format_mean_se, mean_se

NOISE_SE = 2.0  # a rise within 2 standard errors of zero is called noise


@dataclass(frozen=True)
class Rise:
    before: float  # mean reward over the paired environments after SFT
    after: float  # ... after GRPO
    rise: float  # after - before
    se: float  # paired standard error of the rise over environments
    n: int  # paired environments

    @property
    def inside_noise(self) -> bool:
        # no change at all (rise 0, SE 0) shows nothing either: `0 < 2 * 0` alone would call it a signal
        return abs(self.rise) < NOISE_SE * self.se or self.n < 2 or self.rise == 0


def per_env_scores(rows: list[dict[str, Any]]) -> dict[str, float]:
    """{prompt: score} of one validation pass. Two rows with one prompt would be two samples of one
    environment, which a greedy pass over the train set never makes: that is an error, not an average."""
    scores: dict[str, float] = {}
    for row in rows:
        key = str(row["input"])
        if key in scores:
            raise ValueError(f"validation dump holds the prompt twice (not one greedy pass?): {key[:120]!r}")
        scores[key] = float(row["score"])
    return scores


def paired_rise(before: Mapping[str, float], after: Mapping[str, float]) -> Rise:
    """The rise over the environments both passes scored; SE = sd(after - before) / sqrt(n)."""
    keys = sorted(set(before) & set(after))
    if not keys:
        raise ValueError("no environment was scored both before and after GRPO")
    n = len(keys)
    rise, se = mean_se([after[k] - before[k] for k in keys])  # one environment: no SE (NaN)
    return Rise(before=sum(before[k] for k in keys) / n, after=sum(after[k] for k in keys) / n, rise=rise, se=se, n=n)


def rise_line(r: Rise) -> str:
    verdict = (
        f"inside the noise (|rise| < {NOISE_SE:g} SE): this run does not show GRPO improving the policy"
        if r.inside_noise
        else f"outside the noise (|rise| >= {NOISE_SE:g} SE)"
    )
    rise = format_mean_se((r.rise, r.se), "+.3f")
    return f"rise {rise} (paired SE over {r.n} environments; {r.before:.3f} -> {r.after:.3f}): {verdict}"


def _message(m: Mapping[str, Any]) -> dict[str, Any]:
    """A parquet message as the chat template expects it: lists, not arrays; arguments as objects."""
    out: dict[str, Any] = {"role": m["role"], "content": m.get("content") or ""}
    if m.get("tool_calls") is not None:
        calls = []
        for c in list(m["tool_calls"]):
            fn = dict(c["function"])
            args = fn.get("arguments")
            calls.append(
                {**dict(c), "function": {**fn, "arguments": json.loads(args) if isinstance(args, str) else args}}
            )
        out["tool_calls"] = calls
    return out


def golden_response_tokens(sft_parquet: Path, tokenizer_path: Path) -> list[int]:
    """Tokens after the prompt of every golden demonstration: what the policy's response must hold to
    solve it (verl counts tool results inside the response budget)."""
    import pandas as pd  # lazy: the demo's first stages run without them
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tokenizer_path))
    counts = []
    for _, row in pd.read_parquet(sft_parquet).iterrows():
        if row.get("recovery"):  # a demonstration of a failed call and its correction: longer than needed
            continue
        msgs = [_message(m) for m in row["messages"]]
        tools = json.loads(row["tools"]) if isinstance(row["tools"], str) else list(row["tools"])
        first = next(i for i, m in enumerate(msgs) if m["role"] == "assistant")
        prompt = tok.apply_chat_template(msgs[:first], tools=tools, tokenize=False, add_generation_prompt=True)
        full = tok.apply_chat_template(msgs, tools=tools, tokenize=False)
        counts.append(len(tok(full)["input_ids"]) - len(tok(prompt)["input_ids"]))
    return counts
