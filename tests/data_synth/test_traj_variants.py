"""`data_synth traj` demonstrations of the other half of tool use (issue 49): tasks derived with a
tool removed (unanswerable, missing_function) or a value withheld (missing_value, answered by an
LLM user), the judge's rules for each, the `variant` column, and a rerun that adds nothing.

The pipeline's `FakeLLM` (test_traj_pipeline.py) answers every step; `VariantFakeLLM` adds the
withholding rewrite, the LLM user (it gives the value its system prompt holds when asked for the
customer) and an agent that asks, declines or answers in the channel as the task allows.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import sys
from pathlib import Path

import pandas as pd
import pytest

from astra_foundation.llm import LLMConfig, build_client
from data_synth.pipeline import Reject, read_envelopes, read_outputs, step_files
from data_synth.prompts import load_prompt
from data_synth.traj.config import TrajConfig
from data_synth.traj.records import ScoredTask, Trajectory, TrajectoryCall
from data_synth.traj.run import ContextFactory, Runner
from data_synth.traj.steps import JudgeStep
from data_synth.traj.variants import LLMUserHook, violation
from env_registry.call_gate import CallStatus
from env_registry.spec import Variant


def _pipeline_helpers():
    """test_traj_pipeline.py's fake model and inputs (tests run in importlib mode: no sibling imports)."""
    name = "traj_pipeline_helpers"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("test_traj_pipeline.py"))
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


_P = _pipeline_helpers()
FakeLLM, _args, config, decode, write_inputs = _P.FakeLLM, _P._args, _P.config, _P.decode, _P.write_inputs
VALUE = "c-42"  # the customer every fake query names


class VariantFakeLLM(FakeLLM):
    def _withhold_value(self, text, payload):
        original = re.search(r"^Original request: (.*)$", text, re.MULTILINE).group(1)
        rewritten = original.replace(f" for customer {VALUE}", "")
        return {"argument": "customer_id", "value": VALUE, "missing": "the customer's id", "query": rewritten}

    def _user(self, text, payload):
        held = re.search(r"it is (\S+)\.", payload["messages"][0]["content"]).group(1)
        return {"content": f"It is {held}." if "customer" in text else "I do not know."}

    def _agent(self, text, payload):
        messages = payload["messages"]
        users = [m["content"] for m in messages if m["role"] == "user"]
        plan, offered = decode(users[0]), {t["function"]["name"]: t for t in payload["tools"]}
        held = re.search(r"c-\d+", " ".join(users))
        if held is None:
            return {"content": "Which customer do you mean? Please give me the customer's id."}
        done = sum(1 for m in messages if m["role"] == "tool")
        if done < len(plan) and plan[done] not in offered:
            return {
                "content": f"None of my tools can {plan[done]}. <answer>cannot answer: no tool to {plan[done]}</answer>"
            }
        if done < len(plan):
            args = {**_args(offered[plan[done]]["function"]["parameters"]), "customer_id": held.group(0)}
            return {"content": "", "tool_calls": [{"name": plan[done], "arguments": args}]}
        return {"content": f"Finished {done} steps. <answer>{done} steps</answer>"}


def variant_config() -> TrajConfig:
    raw = config().to_dict()
    raw["tasks"]["augment"] = []
    raw["interact"]["failure_rate"] = 0.0
    raw["variants"] = {"unanswerable": 1.0, "missing_value": 1.0, "missing_function": 1.0}
    return TrajConfig.from_dict(raw)


def run(run_dir: Path, inputs: Path) -> Runner:
    factory = ContextFactory(str(run_dir), responders={"llm": VariantFakeLLM()})
    runner = Runner(run_dir, variant_config(), factory, progress=False)

    async def go():
        try:
            await runner.run_all([str(inputs)])
        finally:
            await runner.aclose()

    asyncio.run(go())
    return runner


@pytest.fixture(scope="module")
def done(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("variants")
    inputs = write_inputs(folder / "in")
    run(folder / "run", inputs)
    return folder / "run", inputs


def _trajectories(run_dir: Path, variant: Variant) -> list[Trajectory]:
    return [t for t in read_outputs(run_dir, "traj.interact", Trajectory) if t.task.behaviour is variant]


def test_a_declining_task_offers_every_tool_but_the_removed_one(done):
    run_dir, _ = done
    for variant, position in ((Variant.UNANSWERABLE, 0), (Variant.MISSING_FUNCTION, -1)):
        trajs = _trajectories(run_dir, variant)
        assert trajs, variant
        for t in trajs:
            offered = {s["function"]["name"] for s in t.tools}
            assert t.task.removed_tool == t.task.tools[position] and t.task.removed_tool not in offered
            assert len(offered) >= 2 and t.task.removed_tool not in {c.name for c in t.calls}
            assert "cannot answer:" in t.final_answer
    # a task of one tool has no earlier step to keep: rejected, with the reason counted
    reasons = Runner(run_dir, variant_config(), ContextFactory(str(run_dir))).funnel()
    assert {c.step: c for c in reasons.steps}["traj.variants"].rejection_reasons == {"single_step": 2}


def test_a_missing_value_query_lacks_the_value_and_the_user_gives_it_when_asked(done):
    run_dir, _ = done
    trajs = _trajectories(run_dir, Variant.MISSING_VALUE)
    assert trajs
    for t in trajs:
        assert VALUE not in t.task.query and t.task.withheld.value == VALUE
        assert t.task.withheld.argument == "customer_id" and t.task.withheld.tool == t.task.tools[0]
        ask, reply = t.messages[2], t.messages[3]  # system, query, the agent's question, the user's reply
        assert ask["role"] == "assistant" and not ask.get("tool_calls") and "<answer>" not in ask["content"]
        assert reply == {"role": "user", "content": f"It is {VALUE}."}
        assert t.calls and all(json.loads(c.arguments)["customer_id"] == VALUE for c in t.calls)


class _User:
    """A user model that counts what it is asked."""

    def __init__(self):
        self.asked: list[str] = []

    def __call__(self, step, payload):
        self.asked.append(payload["messages"][-1]["content"])
        return {"content": "It is c-42."}


def test_the_user_hook_speaks_only_when_asked_by_the_user_script(done):
    run_dir, _ = done
    task = _trajectories(run_dir, Variant.MISSING_VALUE)[0].task
    user = _User()

    async def go():
        client = build_client(LLMConfig(cache=False), responder=user)
        hook = LLMUserHook(client, task, "I know nothing else.")
        said = [await hook.on_start(None)]
        for content in ("Which customer?", "And the date?", "Anything else?"):
            action = await hook.on_assistant_end(None, content)
            said.append(action.user_message if action else None)
        answered = await LLMUserHook(client, task, "x").on_assistant_end(None, "Done. <answer>3</answer>")
        await client.aclose()
        return said, answered

    said, answered = asyncio.run(go())
    assert said == [None, "It is c-42.", "I know nothing else.", None]  # reply, otherwise once, then the end
    assert answered is None and user.asked == ["Which customer?"]  # an answer ends it: the user is never asked


def _trajectory(task, messages, calls, final) -> Trajectory:
    return Trajectory(
        key=task.key,
        task=task,
        server_id=task.server_id,
        messages=messages,
        tools=[],
        calls=calls,
        llm_calls=2,
        backend="simulated",
        final_answer=final,
    )


def _call(name: str, args: dict, turn: int = 2) -> TrajectoryCall:
    return TrajectoryCall(
        index=0, turn=turn, id="call_0", name=name, arguments=json.dumps(args), status=CallStatus.OK, observation="{}"
    )


def _tool_turn(call: TrajectoryCall) -> list[dict]:
    fn = {"name": call.name, "arguments": call.arguments}
    return [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_0", "type": "function", "function": fn}]},
        {"role": "tool", "tool_call_id": "call_0", "name": call.name, "content": "{}"},
    ]


def test_the_judges_rules_reject_an_invented_value_and_an_undeclared_inability(done):
    run_dir, _ = done
    kept = {t.task.behaviour: t for t in read_outputs(run_dir, "traj.interact", Trajectory)}
    mv, un = kept[Variant.MISSING_VALUE], kept[Variant.UNANSWERABLE]
    assert violation(mv) is None and violation(un) is None  # the pipeline's own trajectories keep the rules
    tool, final = mv.task.withheld.tool, "Done. <answer>1 steps</answer>"
    asked = [*mv.messages[:2], {"role": "assistant", "content": "Which customer?"}, {"role": "user", "content": "c-42"}]
    invented = _call(tool, {"customer_id": "c-99"})
    bad = _trajectory(
        mv.task, [*asked, *_tool_turn(invented), {"role": "assistant", "content": final}], [invented], final
    )
    assert violation(bad)[0] == "invented_value"
    guessed = _call(tool, {"customer_id": VALUE}, turn=1)  # the right value, called before asking: a guess
    early = [*mv.messages[:2], *_tool_turn(guessed), *asked[2:], {"role": "assistant", "content": final}]
    assert violation(_trajectory(mv.task, early, [guessed], final))[0] == "called_before_asking"
    never = [*mv.messages[:2], *_tool_turn(guessed), {"role": "assistant", "content": final}]
    assert violation(_trajectory(mv.task, never, [guessed], final))[0] == "never_asked"
    answered = _trajectory(un.task, un.messages, un.calls, "Here it is. <answer>42</answer>")
    assert violation(answered)[0] == "no_declared_inability"
    removed = _call(un.task.removed_tool, {"customer_id": VALUE})
    assert violation(_trajectory(un.task, un.messages, [removed], un.final_answer))[0] == "called_removed_tool"

    class NoJudge:  # the rule rejects before the LLM judge is asked
        async def complete_json(self, *a, **k):
            raise AssertionError("the LLM judge was asked about a trajectory a rule rejects")

    from data_synth.traj.steps import TrajContext  # the step's context, with the judge that must stay silent

    ctx = TrajContext(llm=NoJudge(), run_dir=run_dir, servers={})
    with pytest.raises(Reject) as rejected:
        asyncio.run(JudgeStep(variant_config().judge).process(bad, ctx))
    assert rejected.value.reason == "variant_invented_value"


def test_export_writes_the_variant_of_each_row(done):
    run_dir, _ = done
    df = pd.read_parquet(run_dir / "sft.parquet")
    by_task = {t.key: t.task.behaviour for t in read_outputs(run_dir, "traj.interact", Trajectory)}
    written = {(v if isinstance(v, str) else None) for v in df["variant"]}
    assert written == {None, "unanswerable", "missing_value", "missing_function"}
    for task_id, variant in zip(df["task_id"], df["variant"], strict=True):
        want = None if by_task[task_id] is Variant.ANSWERABLE else by_task[task_id].value
        assert (variant if isinstance(variant, str) else None) == want


def test_a_rerun_adds_nothing(done):
    run_dir, inputs = done
    before = {p.name: p.read_text() for p in run_dir.glob("traj.*.jsonl")}
    assert step_files(run_dir, "traj.variants") and read_outputs(run_dir, "traj.variants", ScoredTask)
    run(run_dir, inputs)
    after = {p.name: p.read_text() for p in run_dir.glob("traj.*.jsonl")}
    assert after == before
    assert len(read_envelopes(run_dir, "traj.variants")) == len(Runner(run_dir, variant_config(), None).variant_jobs())


def test_the_agent_prompt_states_each_behaviour_the_variant_judge_requires():
    """The judge keeps a declining trajectory only with a declared inability and a missing-value one
    only if the agent asked before calling and used the reply: a prompted model must be told both."""
    system = load_prompt("traj/agent_system").render("system")
    assert "<answer>cannot answer: the capability that is missing</answer>" in system
    assert "ask the user for it in a short\nmessage without tool calls and without <answer>" in system
    assert "use exactly what they reply; never make the\nvalue up" in system
