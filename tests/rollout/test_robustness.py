"""Junk in, clean episodes out: a tiny random model (real sampling) and a fragment fuzzer."""

from __future__ import annotations

import random
import zlib

import pytest

from astra_verl.calls.call_log import EpisodeLog
from astra_verl.rollout.testing import ModelServer, ScriptedServer, make_loop, run
from astra_verl.rollout.tool_parser import HermesReportingParser, split_reasoning

FRAGMENTS = [
    "<tool_call>",
    "</tool_call>",
    "<tool_call>\n",
    '{"name": "get_area"',
    '{"name": "get_population", "arguments": {"city": "Paris"}}',
    '{"name": "bump_counter", "arguments": {}}',
    ', "arguments": ',
    '{"city": "Lyon"}',
    '{"city": 7}',
    "[1, 2]",
    "null",
    "}",
    "{",
    '"',
    "\\",
    "<think>",
    "</think>",
    "<tool_response>",
    "<|im_start|>",
    "The answer is 42. ",
    "é漢字 ",
    "\n",
]


def fuzz_text(rng: random.Random) -> str:
    return "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(0, 14)))


def mask_runs(out):
    runs, cur = [], []
    for tok, m in zip(out.response_ids, out.response_mask, strict=True):
        if m:
            cur.append(tok)
        elif cur:
            runs.append(cur)
            cur = []
    return runs + ([cur] if cur else [])


def assert_mask_matches(out, turns, cap):
    """Mask-1 runs are exactly the generated turns (the last one cut when the response hit the cap)."""
    runs, turns = mask_runs(out), [t for t in turns if t]
    if len(out.response_ids) < cap:
        assert runs == turns
    else:
        assert runs[:-1] == turns[: len(runs) - 1]
        assert turns[len(runs) - 1][: len(runs[-1])] == runs[-1]


@pytest.fixture(scope="module")
def cfg(trainer_config):
    return trainer_config(
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=4",
        "actor_rollout_ref.rollout.response_length=768",
    )


def test_parser_counts_every_opening_tag():
    parser = HermesReportingParser(tokenizer=None)
    rng = random.Random(0)
    for _ in range(2000):
        text = fuzz_text(rng)
        turn = parser.parse_text(text)
        assert len(turn.calls) == split_reasoning(text)[1].count("<tool_call>")
        assert all(c.ok == (c.arguments is not None) for c in turn.calls)


def test_fuzzed_turns_never_break_the_loop(cfg, tiny_tokenizer, envs, kit):
    def script(prompt: str, k: int) -> str:
        return fuzz_text(random.Random(zlib.crc32(prompt.encode()) + k))

    for i in range(24):
        env = [envs.city, envs.counter][i % 2]
        row = kit.row_kwargs(env, envs.store)
        row["raw_prompt"] = [{"role": "user", "content": f"{env.question} (variant {i})"}]
        server = ScriptedServer(tiny_tokenizer, script)
        out = run(make_loop(cfg, server, tiny_tokenizer).run({}, **row))
        log = EpisodeLog.from_extra_fields(out.extra_fields)
        (turns,) = server.emitted.values()
        assert_mask_matches(out, turns, cap=768)
        assert log.terminated_by is not None and log.assistant_turns == len(turns)


def test_tiny_random_model_episodes(cfg, tiny_model_dir, tiny_tokenizer, envs, kit):
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir)).eval()
    server = ModelServer(model, tiny_tokenizer, max_new_tokens=40, seed=0)
    for env in (envs.city, envs.counter, envs.city):
        out = run(make_loop(cfg, server, tiny_tokenizer).run({"temperature": 1.0}, **kit.row_kwargs(env, envs.store)))
        log = EpisodeLog.from_extra_fields(out.extra_fields)
        assert log.terminated_by is not None
        assert_mask_matches(out, list(server.emitted.values())[-1], cap=768)
        lp = out.response_logprobs
        assert len(lp) == len(out.response_ids)
        assert all(p == 0.0 for p, m in zip(lp, out.response_mask, strict=True) if not m)
        assert all(p <= 0.0 for p in lp)
