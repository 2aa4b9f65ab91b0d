"""Malformed calls are judged as BFCL judges them, for both handler styles, on real BFCL entries.

The same scripted responses go through our runners and scorer (PROMPT: `astra_tool_agent` with
hermes text, FC: the eval chat rollout with OpenAI tool calls) and through BFCL run directly
(`bfcl_direct.py`: BFCL's own decoders, turn rule and `multi_turn_checker`); the verdicts must
be identical. The perturbations are the malformed calls models write: a block or an argument
string that is not JSON, `arguments: ""`, a JSON-string argument object, a block without a name,
a step of nothing but malformed blocks.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from astra_foundation.llm import LLMClient, ScriptedBackend
from astra_verl.benchmarks.bfcl_score import (
    BfclScoringError,
    CallStyle,
    score_episode,
    step_calls,
    trainer_sandbox_config,
)
from astra_verl.calls.call_log import CallRecord, EpisodeLog
from astra_verl.eval import bfcl_replay
from astra_verl.eval.chat_rollout import ChatRollout
from astra_verl.rollout.call_parsing import BFCL_DROPPED, BFCL_SKIPPED
from astra_verl.rollout.context import worker_context
from astra_verl.rollout.testing import run
from env_registry.call_gate import CallStatus

DIRECT = Path(__file__).with_name("bfcl_direct.py")
PROMPT_IDS = ["multi_turn_base_0", "multi_turn_miss_func_0", "multi_turn_miss_param_0", "multi_turn_long_context_1"]


# -- the rule, record by record ------------------------------------------------------------------


def rec(kind: str | None = None, raw: str = "", status: CallStatus = CallStatus.BAD_JSON) -> CallRecord:
    if status is not CallStatus.BAD_JSON:
        return CallRecord(turn=1, index=0, tool="cd", arguments={"folder": "a"}, status=status)
    return CallRecord(turn=1, index=0, tool=None, arguments=raw, status=status, error_kind=kind)


GOOD = rec(status=CallStatus.OK)


@pytest.mark.parametrize(
    "bad, prompt",
    [
        (rec(BFCL_SKIPPED, '{"name": "ls", "arguments": {"a": tru'), ["cd(folder='a')"]),  # skipped alone
        (rec(BFCL_DROPPED, '{"name": "ls", "arguments": [1]}'), None),  # BFCL's decoder raises: step dropped
        (rec(status=CallStatus.SKIPPED), ["cd(folder='a')", "cd(folder='a')"]),  # past our cap: BFCL runs it
    ],
)
def test_step_decoding_follows_bfcls_handlers(bad, prompt):
    assert step_calls([GOOD, bad], CallStyle.PROMPT) == prompt
    assert step_calls([GOOD], CallStyle.FC) == ["cd(folder='a')"]
    if bad.status is CallStatus.BAD_JSON:  # one argument string that is not an object drops the step
        assert step_calls([GOOD, bad], CallStyle.FC) is None


def test_a_prompt_step_read_by_another_parser_is_not_scored_as_bfcl():
    lenient = rec("arguments_not_object", '{"name": "ls", "arguments": [1]}')  # the hermes parser's kind
    with pytest.raises(BfclScoringError, match="astra_bfcl_qwen"):
        step_calls([GOOD, lenient], CallStyle.PROMPT)


def test_an_episode_recorded_without_a_call_style_cannot_be_scored():
    from astra_verl.benchmarks.bfcl_score import decode_episode

    log = EpisodeLog(env_id="e", hook="bfcl_multi_turn", hook_state={"turn_starts": [1]})
    with pytest.raises(BfclScoringError, match="call_style None"):
        decode_episode(log)


# -- the scenarios -------------------------------------------------------------------------------


def block(body: str) -> str:
    return f"<tool_call>\n{body}\n</tool_call>"


def call_block(name: str, args: dict) -> str:
    return block(json.dumps({"name": name, "arguments": args}, ensure_ascii=False))


def _first_calls(steps: list[list]) -> int:
    return next(i for i, s in enumerate(steps) if s)


def prompt_scenarios(turns) -> dict[str, list[str]]:
    """Assistant texts (hermes) per scenario: BFCL's QwenFCHandler reads the same text."""
    steps = bfcl_replay.steps(turns)
    k = _first_calls(steps)
    name = steps[k][0][0]
    extras = {
        "ground_truth": [],
        "plus_invalid_json_block": [block(f'{{"name": "{name}", "arguments": {{"a": tru')],
        "plus_string_arguments": [block(json.dumps({"name": name, "arguments": json.dumps(steps[k][0][1])}))],
        "plus_unparsable_string_arguments": [block(json.dumps({"name": name, "arguments": '{"a": tr'}))],
        "plus_block_without_name": [block(json.dumps({"arguments": {}}))],
    }
    out = {}
    for label, extra in extras.items():
        texts = [bfcl_replay.DONE_TEXT if not s else "\n".join(call_block(n, a) for n, a in s) for s in steps]
        texts[k] = "\n".join([texts[k], *extra])
        out[label] = texts
    out["malformed_step_first"] = [block('{"name": "' + name + '", "arguments": {'), *out["ground_truth"]]
    gt = out["ground_truth"]
    whole = {  # the step's whole text rewritten (the audit's kinds); BFCL decodes the full generated text
        "no_newlines_inside_tags": gt[k]
        .replace("<tool_call>\n", "<tool_call>")
        .replace("\n</tool_call>", "</tool_call>"),
        "crlf_line_ends": gt[k].replace("\n", "\r\n"),
        "first_block_unterminated": gt[k].replace("\n</tool_call>", "</tool_call>", 1),
        "unclosed_think": "<think>\nLet me act.\n" + gt[k],
        "think_close_without_open": "Plan first.\n</think>\n\n" + gt[k],
        "two_think_blocks": "<think>a</think>\n" + gt[k] + "\n<think>b</think>\nDone.",
        "name_is_a_list": gt[k] + "\n" + block(json.dumps({"name": [name], "arguments": {}})),
        "64_unknown_calls_first": "\n".join([block(json.dumps({"name": "peek", "arguments": {}}))] * 64 + [gt[k]]),
    }
    for label, text in whole.items():
        out[label] = [*gt[:k], text, *gt[k + 1 :]]
    return out


def fc_scenarios(turns) -> dict[str, list[dict]]:
    """Chat replies (OpenAI tool calls with raw argument strings) per scenario."""
    steps = bfcl_replay.steps(turns)
    k = _first_calls(steps)
    name = steps[k][0][0]
    extras = {
        "ground_truth": [],
        "plus_truncated_arguments": [{"name": name, "arguments": '{"a": tr'}],
        "plus_empty_arguments": [{"name": name, "arguments": ""}],
        "plus_list_arguments": [{"name": name, "arguments": "[1]"}],
    }
    out = {}
    for label, extra in extras.items():
        replies = [
            {"content": bfcl_replay.DONE_TEXT}
            if not s
            else {"content": "", "tool_calls": [{"name": n, "arguments": json.dumps(a)} for n, a in s]}
            for s in steps
        ]
        replies[k] = {**replies[k], "tool_calls": replies[k]["tool_calls"] + extra}
        out[label] = replies
    return out


def as_bfcl_fc(reply: dict):
    """What BFCL's OpenAI handler records for a reply: [{name: arguments}] or the content."""
    calls = reply.get("tool_calls")
    return [{c["name"]: c["arguments"]} for c in calls] if calls else reply["content"]


def bfcl_verdicts(cases: list[dict], tmp_path: Path) -> dict[str, dict]:
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases))
    done = subprocess.run([sys.executable, str(DIRECT), str(path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {v["case"]: v for v in lines}


def case(label: str, style: str, target, responses: list) -> dict:
    return {
        "name": label,
        "style": style,
        "category": target.category,
        "entry": target.checker_entry(),
        "ground_truth": target.ground_truth,
        "responses": responses,
    }


async def score(config, target, log):
    """Our verdict, on the pool the agent loop used (as `astra_bfcl` scores)."""
    return await score_episode(worker_context().sandbox(config), target, log)


def verdict_of(v) -> tuple[bool, str | None]:
    return (v.valid, v.error_type) if hasattr(v, "valid") else (v["valid"], v["error_type"])


def test_prompt_style_verdicts_equal_bfcls(loop_kit, bfcl_sample, tmp_path):
    """astra_tool_agent (hermes text) + our scorer vs BFCL's QwenFCHandler + checker, run directly."""
    config, tokenizer = loop_kit
    ours, cases = {}, []
    for entry_id in PROMPT_IDS:
        i = bfcl_sample.index[entry_id]
        entry, target, row = bfcl_sample.data.entries[i], bfcl_sample.data.targets[i], bfcl_sample.data.rows[i]
        for label, texts in prompt_scenarios(bfcl_replay.turn_calls(entry)).items():
            key = f"{entry.id}/{label}"
            out = run(bfcl_replay.run_loop_episode(config, tokenizer, row, texts, i))
            log = EpisodeLog.from_extra_fields(out.extra_fields)
            assert log.hook_state["call_style"] == "prompt"
            ours[key] = verdict_of(run(score(trainer_sandbox_config(config), target, log)))
            cases.append(case(key, "prompt", target, texts))
    theirs = {k: verdict_of(v) for k, v in bfcl_verdicts(cases, tmp_path).items()}
    assert ours == theirs
    assert all(ours[f"{e}/ground_truth"] == (True, None) for e in PROMPT_IDS)
    assert all(ours[f"{e}/plus_invalid_json_block"] == (True, None) for e in PROMPT_IDS)  # dropped alone
    assert sum(not valid for valid, _ in ours.values()) >= 2 * len(PROMPT_IDS)  # the scenarios bite


def test_fc_style_verdicts_equal_bfcls(bfcl_sample, bfcl_sandbox_config, tmp_path):
    """The eval chat rollout (OpenAI tool calls) + our scorer vs BFCL's OpenAI handler + checker."""
    from astra_foundation.sandbox import SandboxPool

    plans = {}
    for i, entry in enumerate(bfcl_sample.data.entries):
        for label, replies in fc_scenarios(bfcl_replay.turn_calls(entry)).items():
            plans[f"{entry.id}/{label}"] = (i, replies)

    def respond(step: str, payload: dict) -> dict:
        replies = plans[step][1]
        k = sum(1 for m in payload["messages"] if m["role"] == "assistant")
        return replies[k] if k < len(replies) else {"content": bfcl_replay.DONE_TEXT}

    async def main() -> dict:
        client = LLMClient(ScriptedBackend(responder=respond), model="scripted")
        out = {}
        async with SandboxPool(bfcl_sandbox_config) as pool:
            rollout = ChatRollout(client, pool, hook_overrides={"call_style": "fc"})
            for key, (i, _) in plans.items():
                result = await rollout.run(bfcl_sample.data.rows[i], step=key)
                assert result.log.hook_state["call_style"] == "fc"
                out[key] = verdict_of(await score_episode(pool, bfcl_sample.data.targets[i], result.log))
        return out

    ours = asyncio.run(main())
    cases = [
        case(key, "fc", bfcl_sample.data.targets[i], [as_bfcl_fc(r) for r in replies])
        for key, (i, replies) in plans.items()
    ]
    theirs = {k: verdict_of(v) for k, v in bfcl_verdicts(cases, tmp_path).items()}
    assert ours == theirs
    assert all(ours[f"{e}/ground_truth"] == (True, None) for e in bfcl_sample.ids)
    # the case: correct calls plus one truncated-JSON call drop the whole step, as in BFCL
    assert all(not ours[f"{e}/plus_truncated_arguments"][0] for e in bfcl_sample.ids)
