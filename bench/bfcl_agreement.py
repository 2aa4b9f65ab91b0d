"""Agreement with BFCL's own handlers and checker on a replay corpus of malformed steps, both call styles.

    python bench/bfcl_agreement.py                     # both styles, 4 entries (one per category)
    python bench/bfcl_agreement.py --style fc --ids multi_turn_base_0,multi_turn_base_1

Each entry's ground truth is replayed with one step rewritten into a malformed one (one corpus
kind per episode: the kinds are listed in PROMPT_KINDS and FC_KINDS), and the episode is scored
two ways:
- ours: the real runners and scorer. PROMPT, `astra_tool_agent` (the `astra_bfcl_eval` recipe,
  parser `astra_bfcl_qwen`) on a tiny random model whose turns are the scripted texts; FC, the
  eval chat rollout (OpenAI tool calls through the LLM client). Then `bfcl_score.score_episode`
  (BFCL's checker in the sandbox);
- BFCL's: the same responses through BFCL's own `QwenFCHandler` / OpenAI handler, its turn rule
  and `multi_turn_checker`, run directly (`tests/eval/bfcl_direct.py`, its own process).
Printed: per style, the cases, how many verdicts (valid, error type) agree, the verdict mix, and
every disagreement. Exit status 1 when any verdict differs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchkit import machine_line

from astra_verl.benchmarks.bfcl_score import REQUIRED_PACKAGES, score_episode
from astra_verl.eval import bfcl_replay
from astra_verl.eval.bfcl_run import prepare

DIRECT = Path(__file__).resolve().parents[1] / "tests" / "eval" / "bfcl_direct.py"
IDS = ["multi_turn_base_0", "multi_turn_miss_func_0", "multi_turn_miss_param_0", "multi_turn_long_context_1"]
DEEP = "[" * 100_000 + "]" * 100_000


def block(body: str) -> str:
    return f"<tool_call>\n{body}\n</tool_call>"


def call_block(name, args) -> str:
    return block(json.dumps({"name": name, "arguments": args}, ensure_ascii=False))


def _string_args(name: str, args: dict) -> str:
    """The call with its arguments as a JSON string over 4,096 characters (padding inside the JSON)."""
    return block(json.dumps({"name": name, "arguments": json.dumps(args) + " " * 5000}))


def prompt_kinds(calls: list) -> dict[str, str]:
    """Rewrites of one step (its well-formed text is `gt`) into the malformed kinds models write."""
    name, args = calls[0]
    gt = "\n".join(call_block(n, a) for n, a in calls)
    extra = lambda body: gt + "\n" + block(body)  # noqa: E731 - one more block after the good ones
    return {
        "ground_truth": gt,
        "invalid_json_block": extra(f'{{"name": "{name}", "arguments": {{"a": tru'),
        "string_arguments": "\n".join(block(json.dumps({"name": n, "arguments": json.dumps(a)})) for n, a in calls),
        "string_arguments_over_4096_chars": "\n".join(
            [_string_args(name, args)] + [call_block(n, a) for n, a in calls[1:]]
        ),
        "unparsable_string_arguments": extra(json.dumps({"name": name, "arguments": '{"a": tr'})),
        "block_without_name": extra(json.dumps({"arguments": {}})),
        "name_is_a_list": extra(json.dumps({"name": [name], "arguments": {}})),
        "name_is_an_object": extra(json.dumps({"name": {"n": name}, "arguments": {}})),
        "numeric_name": extra(json.dumps({"name": 7, "arguments": {}})),
        "arguments_a_list": extra(json.dumps({"name": name, "arguments": [1]})),
        "arguments_missing": extra(json.dumps({"name": name})),
        "no_newlines_inside_tags": gt.replace("<tool_call>\n", "<tool_call>").replace("\n</tool_call>", "</tool_call>"),
        "crlf_line_ends": gt.replace("\n", "\r\n"),
        "first_block_unterminated": gt.replace("\n</tool_call>", "</tool_call>", 1),
        "unclosed_block_first": "<tool_call>\n{\n" + gt,
        "close_tag_inside_a_string": extra(json.dumps({"name": name, "arguments": {"x": "a</tool_call>b"}})),
        "unclosed_think": "<think>\nLet me act.\n" + gt,
        "think_close_without_open": "Plan first.\n</think>\n\n" + gt,
        "two_think_blocks": "<think>a</think>\n" + gt + "\n<think>b</think>\nDone.",
        "calls_inside_think_only": "<think>\n" + gt + "\n</think>\n\nDone.",
        "64_unknown_calls_first": "\n".join([call_block("peek", {})] * 64 + [gt]),
        # 2,000 levels: past Python's JSON decoder (about 1,000), within the episode's token budget
        "deeply_nested_block": extra('{"name": "ls", "arguments": {"a": ' + "[" * 2000 + "]" * 2000 + "}}"),
        "lone_surrogate_argument": extra('{"name": "' + name + '", "arguments": {"x": "\\ud83d"}}'),
        "control_characters": "\x00\x1b[2J" + gt + "\u2028",
        "prose_only": "I would call " + name + " now.",
    }


def fc_kinds(calls: list) -> dict[str, list[dict]]:
    """Rewrites of one step's OpenAI tool calls (arguments as the raw strings a server sends)."""
    name = calls[0][0]
    gt = [{"name": n, "arguments": json.dumps(a)} for n, a in calls]
    return {
        "ground_truth": gt,
        "truncated_arguments": gt + [{"name": name, "arguments": '{"a": tr'}],
        "empty_arguments": gt + [{"name": name, "arguments": ""}],
        "list_arguments": gt + [{"name": name, "arguments": "[1]"}],
        "string_encoded_object": gt + [{"name": name, "arguments": json.dumps(json.dumps({"a": 1}))}],
        "deeply_nested_arguments": gt + [{"name": name, "arguments": DEEP}],
        "deeply_nested_object": gt + [{"name": name, "arguments": '{"a": ' + DEEP + "}"}],
        "lone_surrogate_argument": gt + [{"name": name, "arguments": '{"x": "\\ud83d"}'}],
        "integer_over_4300_digits": gt + [{"name": name, "arguments": '{"a": ' + "9" * 5000 + "}"}],
        "whitespace_around_arguments": [{**c, "arguments": "  \n" + c["arguments"] + "\n "} for c in gt],
        "unknown_function": gt + [{"name": "peek", "arguments": "{}"}],
        "long_string_argument": gt + [{"name": name, "arguments": json.dumps({"x": "y" * 5000})}],
    }


def episodes(entry, kinds) -> dict[str, list]:
    """Per kind, the replay's step responses with the first step that has calls rewritten."""
    steps = bfcl_replay.steps(bfcl_replay.turn_calls(entry))
    k = next(i for i, s in enumerate(steps) if s)
    return {kind: (k, steps, text) for kind, text in kinds(steps[k]).items()}


def prompt_responses(k: int, steps: list, text: str) -> list[str]:
    texts = [bfcl_replay.DONE_TEXT if not s else "\n".join(call_block(n, a) for n, a in s) for s in steps]
    texts[k] = text
    return texts


def fc_responses(k: int, steps: list, tool_calls: list[dict]) -> list[dict]:
    replies = [
        {"content": bfcl_replay.DONE_TEXT}
        if not s
        else {"content": "", "tool_calls": [{"name": n, "arguments": json.dumps(a)} for n, a in s]}
        for s in steps
    ]
    replies[k] = {"content": "", "tool_calls": tool_calls}
    return replies


def as_bfcl_fc(reply: dict):
    """What BFCL's OpenAI handler records for a reply: [{name: arguments}] or the content."""
    calls = reply.get("tool_calls")
    return [{c["name"]: c["arguments"]} for c in calls] if calls else reply["content"]


def verdict(v) -> tuple[bool, str | None]:
    return (v.valid, v.error_type) if hasattr(v, "valid") else (v["valid"], v["error_type"])


def theirs(cases: list[dict], work: Path) -> dict[str, tuple]:
    path = work / "cases.json"
    path.write_text(json.dumps(cases))
    done = subprocess.run([sys.executable, str(DIRECT), str(path)], capture_output=True, text=True, timeout=3600)
    if done.returncode:
        raise SystemExit(f"BFCL run directly failed:\n{done.stderr[-3000:]}")
    return {v["case"]: verdict(v) for v in map(json.loads, (ln for ln in done.stdout.splitlines() if ln[:1] == "{"))}


def ours_prompt(data, plan: dict[str, tuple[int, list[str]]], work: Path) -> dict[str, tuple]:
    """astra_tool_agent (recipe astra_bfcl_eval) on the scripted texts, scored by our scorer."""
    from transformers import AutoTokenizer

    from astra_verl.benchmarks.bfcl_score import trainer_sandbox_config
    from astra_verl.calls.call_log import EpisodeLog
    from astra_verl.rollout.context import worker_context
    from astra_verl.rollout.testing import run
    from astra_verl.tiny_model import build

    model_dir = build(work / "tiny-model")
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    # the tiny BPE is verbose: long-context episodes need room
    config = bfcl_replay.loop_config(
        str(model_dir), overrides=["data.max_prompt_length=32768", "data.max_response_length=32768"]
    )

    async def scored(i: int, log: EpisodeLog):  # on the pool the loop used (as `astra_bfcl` scores)
        return await score_episode(worker_context().sandbox(trainer_sandbox_config(config)), data.targets[i], log)

    out = {}
    for key, (i, texts) in plan.items():
        result = run(bfcl_replay.run_loop_episode(config, tokenizer, data.rows[i], texts, i))
        out[key] = verdict(run(scored(i, EpisodeLog.from_extra_fields(result.extra_fields))))
    return out


def ours_fc(data, plan: dict[str, tuple[int, list[dict]]]) -> dict[str, tuple]:
    """The eval chat rollout (OpenAI tool calls through the LLM client), scored by our scorer."""
    from astra_foundation.llm import LLMClient, ScriptedBackend
    from astra_foundation.sandbox import SandboxConfig, SandboxPool
    from astra_verl.eval.chat_rollout import ChatRollout

    def respond(step: str, payload: dict) -> dict:
        replies = plan[step][1]
        k = sum(1 for m in payload["messages"] if m["role"] == "assistant")
        return replies[k] if k < len(replies) else {"content": bfcl_replay.DONE_TEXT}

    async def main() -> dict:
        client = LLMClient(ScriptedBackend(responder=respond), model="scripted")
        config = SandboxConfig(
            workers=2, packages=list(REQUIRED_PACKAGES), call_timeout_s=30.0, max_output_chars=200_000
        )
        out = {}
        async with SandboxPool(config) as pool:
            rollout = ChatRollout(client, pool, hook_overrides={"call_style": "fc"})
            for key, (i, _) in plan.items():
                result = await rollout.run(data.rows[i], step=key)
                out[key] = verdict(await score_episode(pool, data.targets[i], result.log))
        return out

    return asyncio.run(main())


def compare(style: str, ours: dict, bfcl: dict) -> int:
    agree = sum(ours[k] == bfcl.get(k) for k in ours)
    mix = Counter("valid" if v[0] else v[1] for v in bfcl.values())
    kinds = {k.split("/", 1)[1] for k in ours}
    print(
        f"{style}: {agree}/{len(ours)} verdicts agree with BFCL's handler + checker "
        f"({100 * agree / max(1, len(ours)):.1f}%), {len(kinds)} kinds x {len(ours) // max(1, len(kinds))} entries"
    )
    print(f"  BFCL's verdicts: {', '.join(f'{k} {n}' for k, n in mix.most_common())}")
    for k in sorted(ours):
        if ours[k] != bfcl.get(k):
            print(f"  DIFFERS {k}: ours {ours[k]} vs BFCL {bfcl.get(k)}")
    return len(ours) - agree


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ids", default=",".join(IDS), help="BFCL entry ids (comma-separated)")
    ap.add_argument("--style", choices=["prompt", "fc", "both"], default="both")
    args = ap.parse_args()
    print(machine_line())
    t0 = time.perf_counter()
    differ = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = prepare(work / "store", ids=args.ids.split(","))
        for style in ["prompt", "fc"] if args.style == "both" else [args.style]:
            kinds, build = (prompt_kinds, prompt_responses) if style == "prompt" else (fc_kinds, fc_responses)
            plan = {
                f"{e.id}/{kind}": (i, build(*spec))
                for i, e in enumerate(data.entries)
                for kind, spec in episodes(e, kinds).items()
            }
            ours = ours_prompt(data, plan, work) if style == "prompt" else ours_fc(data, plan)
            cases = [
                {
                    "name": key,
                    "style": style,
                    "category": data.targets[i].category,
                    "entry": data.targets[i].checker_entry(),
                    "ground_truth": data.targets[i].ground_truth,
                    "responses": responses if style == "prompt" else [as_bfcl_fc(r) for r in responses],
                }
                for key, (i, responses) in plan.items()
            ]
            differ += compare(style, ours, theirs(cases, work))
    print(f"{time.perf_counter() - t0:.0f} s")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
