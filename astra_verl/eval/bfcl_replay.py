"""Ground-truth replay: the proof that the BFCL adapter is faithful.

BFCL's possible answers are call strings per turn (`cd(folder='document')`, positional arguments
allowed: `sort('final_report.pdf')`). A replay turns each into the tool call a model would
write (name + JSON arguments; positional arguments named from the API method's signature) and
emits, per user turn, one step with that turn's calls and then a step without calls, which ends
the turn. Run through the adapter (sandbox, hook, scorer), a faithful adapter makes BFCL's
checker accept every entry; `wrong_calls` breaks each entry (drops the last call of the last
turn that has any) so the checker must reject it.

Two drivers share the scripts:
- `responder(...)`: a `astra_foundation.llm` scripted-backend responder for `ChatRollout` (the CLI);
- `hermes_script(...)`: the assistant texts (hermes `<tool_call>` blocks) for a scripted verl
  server manager driving `astra_tool_agent`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from astra_foundation.clikit import run_async
from astra_foundation.llm import LLMClient, ScriptedBackend
from astra_foundation.sandbox import SandboxPool
from astra_verl.benchmarks import bfcl_hook  # noqa: F401  - registers the hook
from astra_verl.benchmarks.bfcl_score import BfclScoringError, call_string, execute_steps, trainer_sandbox_config
from astra_verl.calls.call_log import EpisodeLog
from astra_verl.eval.bfcl_run import evaluate, prepare, results_file
from astra_verl.eval.chat_rollout import ChatRollout
from astra_verl.rollout.context import drop_worker_context, worker_context
from env_registry.call_gate import CallStatus
from env_registry.families.bfcl import BfclEntry, Call, ReplayError, parse_call, turn_calls  # noqa: F401

# ReplayError and parse_call (imported above) are re-exported: the family parses ground truth (env
# validation replays it too).

DONE_TEXT = "Done."


def wrong_calls(entry: BfclEntry) -> list[list[Call]]:
    """The ground truth with the last call of its last non-empty turn removed."""
    turns = turn_calls(entry)
    for turn in reversed(turns):
        if turn:
            turn.pop()
            return turns
    raise ReplayError(f"{entry.id}: no ground-truth call to remove")


def steps(turns: list[list[Call]]) -> list[list[Call]]:
    """The assistant steps of a replay, in order: per turn, its calls (if any), then a step without."""
    out: list[list[Call]] = []
    for calls in turns:
        if calls:
            out.append(list(calls))
        out.append([])
    return out


def responder(plans: dict[str, list[list[Call]]]):
    """A scripted-backend responder answering `ChatRollout` episodes with their replay steps.

    `plans` maps the step label each episode's requests carry (`replay_step(bfcl_id)`) to its
    turns; the position in the replay is the number of assistant messages so far."""
    scripted = {label: steps(turns) for label, turns in plans.items()}

    def respond(step: str, payload: dict[str, Any]) -> dict[str, Any]:
        if step not in scripted:
            raise KeyError(f"replay: no ground truth for requests labelled {step!r}")
        plan = scripted[step]
        k = sum(1 for m in payload["messages"] if m["role"] == "assistant")
        calls = plan[k] if k < len(plan) else []
        if not calls:
            return {"content": DONE_TEXT}
        return {"content": "", "tool_calls": [{"name": n, "arguments": a} for n, a in calls]}

    return respond


def replay_step(bfcl_id: str) -> str:
    return f"bfcl.replay/{bfcl_id}"


def hermes_script(turns: list[list[Call]]) -> list[str]:
    """The assistant texts of a replay in hermes format (one `<tool_call>` block per call)."""
    texts = []
    for calls in steps(turns):
        if not calls:
            texts.append(DONE_TEXT)
            continue
        texts.append(
            "\n".join(
                "<tool_call>\n" + json.dumps({"name": n, "arguments": a}, ensure_ascii=False) + "\n</tool_call>"
                for n, a in calls
            )
        )
    return texts


# -- running a replay -----------------------------------------------------------------------


@dataclass
class ReplaySummary:
    results: Any  # a ResultsFile of bfcl_run.BfclResult
    observations: tuple[int, list[str]] | None  # (calls compared, mismatch descriptions)


async def observation_mismatches(sandbox: Any, target: Any, log: Any) -> tuple[int, list[str]]:
    """Compare the observations of an episode's executed calls with what BFCL's own executor
    returns for the same calls, in the same order, from the same initial state."""
    steps_: list[list[str]] = []
    ours: list[str] = []
    last = None
    for record in log.calls:
        if record.status not in (CallStatus.OK, CallStatus.TOOL_ERROR):
            continue
        if record.turn != last:
            steps_.append([])
            last = record.turn
        steps_[-1].append(call_string(record.tool, record.arguments))
        ours.append(record.output)
    try:
        theirs = [r for step in await execute_steps(sandbox, target, steps_) for r in step]
    except BfclScoringError as exc:
        return len(ours), [f"{target.id}: not compared: {exc}"]
    calls = [c for step in steps_ for c in step]
    mismatches = [
        f"{target.id} #{i} {calls[i]}: ours {a[:160]!r} != BFCL {b[:160]!r}"
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True))
        if a != b
    ]
    return len(ours), mismatches


def run_replay(
    out: str | Path,
    categories: Sequence[str],
    *,
    ids: Sequence[str] | None = None,
    limit: int | None = None,
    wrong: bool = False,
    via: str = "chat",
    model_dir: str | None = None,
    overrides: Sequence[str] = (),
    concurrency: int = 8,
    sandbox: Any = None,
    observations: bool = True,
    progress: bool = True,
) -> ReplaySummary:
    """Replay ground truth (or `wrong` sequences) for the selected entries into `<out>/results.jsonl`."""
    out = Path(out)
    data = prepare(out / "store", categories, ids=ids, limit=limit)
    plans = [wrong_calls(e) if wrong else turn_calls(e) for e in data.entries]
    label = "ground-truth" + ("-wrong" if wrong else "")
    results = results_file(out / "results.jsonl", label)
    checked: list[tuple[int, list[str]]] = []

    async def finish(pool: Any, run_episode: Any) -> None:
        async def episode(i: int):
            log, messages, usage = await run_episode(i)
            if observations:
                checked.append(await observation_mismatches(pool, data.targets[i], log))
            return log, messages, usage

        await evaluate(data, episode, pool, results, model=label, concurrency=concurrency, progress=progress)

    if via == "chat":
        run_async(_chat_replay(data, plans, sandbox, finish))
    elif via == "agent-loop":
        if not model_dir:
            raise ValueError("--via agent-loop needs --model-path (a tokenizer + model directory)")
        # Lazy: verl is heavy and importing it loads our plugin; only --via agent-loop needs it.
        from verl.utils.ray_utils import get_event_loop

        get_event_loop().run_until_complete(_loop_replay(data, plans, model_dir, sandbox, overrides, finish))
    else:
        raise ValueError(f"via must be 'chat' or 'agent-loop', not {via!r}")
    summary = None
    if observations:
        summary = (sum(n for n, _ in checked), [m for _, ms in checked for m in ms])
    return ReplaySummary(results=results, observations=summary)


async def _chat_replay(data: Any, plans: list[list[list[Call]]], sandbox: Any, finish: Any) -> None:
    labels = [replay_step(e.id) for e in data.entries]
    client = LLMClient(ScriptedBackend(responder=responder(dict(zip(labels, plans, strict=True)))), model="replay")
    async with SandboxPool(sandbox) as pool:
        rollout = ChatRollout(client, pool, hook_overrides={"call_style": "fc"})  # OpenAI-style tool calls

        async def run_episode(i: int):
            result = await rollout.run(data.rows[i], step=labels[i])
            return result.log, result.messages, result.usage

        await finish(pool, run_episode)


LOOP_SAMPLING = {"temperature": 0.0, "top_p": 1.0}


def loop_config(model_dir: str, sandbox: Any = None, overrides: Sequence[str] = ()) -> Any:
    """verl's trainer config with `+recipe=astra_bfcl_eval` (what validation through main_ppo uses)."""
    # Lazy: the harness imports verl (heavy; loads our plugin); only --via agent-loop needs it.
    from astra_verl.rollout.testing import compose_trainer_config

    extra = [f"++astra.sandbox.{k}={v}" for k, v in _sandbox_overrides(sandbox).items()]
    return compose_trainer_config(model_dir, ["+recipe=astra_bfcl_eval", *extra, *overrides])


def _sandbox_overrides(sandbox: Any) -> dict[str, Any]:
    if sandbox is None:
        return {}
    return {"call_timeout_s": sandbox.call_timeout_s, "workers": sandbox.workers, "max_sessions": sandbox.max_sessions}


async def run_loop_episode(config: Any, tokenizer: Any, row: dict[str, Any], script: list[str], index: int = 0):
    """One row through `astra_tool_agent`, its assistant turns scripted (hermes text); returns
    the loop's `AgentLoopOutput`. Must run on verl's event loop."""
    # Lazy: the harness imports verl (heavy; loads our plugin); only --via agent-loop needs it.
    from astra_verl.rollout.testing import ScriptedServer, make_loop

    loop = make_loop(config, ScriptedServer(tokenizer, script), tokenizer)
    prompt = row["prompt"].tolist() if hasattr(row["prompt"], "tolist") else list(row["prompt"])
    return await loop.run(
        dict(LOOP_SAMPLING), raw_prompt=prompt, extra_info=row["extra_info"], tools_kwargs={}, index=index
    )


async def _loop_replay(
    data: Any, plans: list[list[list[Call]]], model_dir: str, sandbox: Any, overrides: Sequence[str], finish: Any
) -> None:
    from transformers import AutoTokenizer  # lazy: heavy, only --via agent-loop tokenizes

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    config = loop_config(model_dir, sandbox, overrides)
    context = worker_context()  # the loops built below take this context: it is their event loop's
    pool = context.sandbox(trainer_sandbox_config(config))

    async def run_episode(i: int):
        out = await run_loop_episode(config, tokenizer, data.rows[i], hermes_script(plans[i]), i)
        return EpisodeLog.from_extra_fields(out.extra_fields), None, {}

    try:
        await finish(pool, run_episode)
    finally:
        await context.aclose()
        drop_worker_context(asyncio.get_running_loop())
