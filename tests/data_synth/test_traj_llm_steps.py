"""Every LLM step of the trajectory pipeline with the scripted backend, including malformed
output at each step (junk, truncated JSON, wrong keys, refusals, hallucinated tool names,
simulator junk, judge junk): each is rejected with its reason and nothing crashes."""

from __future__ import annotations

import asyncio
import json

import pytest

from astra_foundation.llm import LLMConfig, LLMOutputError, build_client
from data_synth.pipeline import Reject, process_one
from data_synth.prompts import PROMPT_DIR, load_prompt
from data_synth.traj import steps as S
from data_synth.traj.interact import InteractConfig, check_call, run_episode
from data_synth.traj.judge import DIMENSIONS, JudgeConfig, judge, unsupported_urls
from data_synth.traj.propose import ProposeConfig, propose
from data_synth.traj.query_checks import check_query, named_tools
from data_synth.traj.records import (
    AugmentJob,
    Chain,
    ScoredTask,
    Scores,
    Server,
    Source,
    Task,
    TaskSeed,
    ToolDoc,
    Trajectory,
)
from data_synth.traj.simulate import SimulatedTools, injects_failure, sees_query
from data_synth.traj.tasks import TaskConfig, augment, chain_queries, load_personas, pick, score_task, server_tasks
from data_synth.traj.verify_chains import VerifyConfig, verify_chain

STR = {"type": "string"}
SERVER = Server(
    key="shop",
    server_id="shop",
    title="Shop",
    name="shop",
    description="An online shop.",
    tools=[
        ToolDoc(
            name="search_products",
            description="Search the catalogue",
            parameters={"type": "object", "properties": {"query": STR}, "required": ["query"]},
        ),
        ToolDoc(
            name="get_product",
            description="Product details",
            parameters={"type": "object", "properties": {"product_id": STR}, "required": ["product_id"]},
        ),
        ToolDoc(
            name="add_to_cart",
            description="Add to the cart",
            parameters={
                "type": "object",
                "properties": {"product_id": STR, "quantity": {"type": "integer", "minimum": 1}},
                "required": ["product_id", "quantity"],
            },
        ),
    ],
    source=Source(file="f", record=0, format="astra"),
)
JUNK = "Sure! Here is what I think about that, in prose."
TRUNCATED = '{"chains": [{"tools": ["search_products", "get_pro'
REFUSAL = "I'm sorry, but I can't help with that request."


def client(responder):
    return build_client(LLMConfig(max_retries=0), responder=responder)


def by_step(table):
    """A responder answering from {step: response or callable(payload)}."""

    def respond(step, payload):
        r = table.get(step)
        return r(payload) if callable(r) else r

    return respond


def run(coro):
    return asyncio.run(coro)


# -- propose --------------------------------------------------------------------------------
def test_propose_keeps_valid_chains_and_drops_hallucinations():
    reply = json.dumps(
        {
            "chains": [
                {"tools": ["search_products", "get_product", "add_to_cart"], "confidence": 0.9},
                {"tools": ["search_products", "checkout"], "confidence": 0.8},  # hallucinated tool
                {"tools": ["get_product"], "confidence": 0.5},  # too short
                {"tools": ["get_product", "add_to_cart"], "confidence": "high"},  # not a number
            ]
        }
    )
    out = run(propose(client(by_step({"traj.propose": reply})), SERVER, ProposeConfig(samples=2)))
    assert len(out.samples) == 2 and all(len(s) == 1 for s in out.samples)
    reasons = " | ".join(d["reason"] for d in out.dropped)
    assert "unknown tools ['checkout']" in reasons and "outside 2..5" in reasons and "confidence 'high'" in reasons


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (JUNK, "no_json"),
        (TRUNCATED, "truncated"),
        (REFUSAL, "no_json"),
        ('{"paths": []}', "failed_check"),  # wrong key
        ('{"chains": [{"tools": ["teleport", "beam"], "confidence": 1}]}', "failed_check"),  # all hallucinated
    ],
)
def test_graph_step_rejects_unusable_proposals_with_the_reason(reply, kind):
    step = S.GraphStep(ProposeConfig(samples=1), S.GraphConfig())
    ctx = S.TrajContext(llm=client(by_step({"traj.propose": reply})))
    env = run(process_one(step, SERVER, ctx))
    assert env.status == "rejected" and env.reason == "no_usable_proposals"
    assert f"traj.propose:{kind}" in env.detail


def test_repair_round_rescues_a_bad_first_reply():
    replies = iter([TRUNCATED, '{"chains": [{"tools": ["search_products", "get_product"], "confidence": 0.7}]}'])
    out = run(propose(client(lambda step, p: next(replies)), SERVER, ProposeConfig()))
    assert out.samples[0][0].tools == ["search_products", "get_product"] and not out.failed


# -- verify ---------------------------------------------------------------------------------
CHAIN = ["search_products", "get_product"]
CODE = "please look up the blue kettle and give me its details"


def verifier(votes, planned, query=CODE):
    votes = iter(votes)
    return by_step(
        {
            "traj.vote": lambda p: next(votes),
            "traj.backtranslate_query": json.dumps({"query": query}),
            "traj.backtranslate_chain": json.dumps({"tools": planned}),
        }
    )


def test_vote_majority_counts_abstentions_against_the_chain():
    yes, no = '{"coherent": true, "reason": "ok"}', '{"coherent": false}'
    v = run(verify_chain(client(verifier([yes, yes, no], CHAIN)), SERVER, CHAIN, VerifyConfig(votes=3)))
    assert v.passed and v.vote.yes == 2 and v.back_translation.match
    # one yes, two junk votes (each fails its repair round too): abstentions, the chain fails.
    v = run(
        verify_chain(
            client(verifier([yes, JUNK, JUNK, '{"coherent": "yes"}', REFUSAL], CHAIN)),
            SERVER,
            CHAIN,
            VerifyConfig(votes=3),
        )
    )
    assert not v.passed and v.reason == "vote" and v.vote.abstain == 2


def test_back_translation_must_reproduce_the_chain():
    yes = '{"coherent": true}'
    v = run(
        verify_chain(client(verifier([yes] * 3, ["get_product", "search_products"])), SERVER, CHAIN, VerifyConfig())
    )
    assert not v.passed and v.reason == "back_translation_mismatch"
    assert run(
        verify_chain(
            client(verifier([yes] * 3, ["get_product", "search_products"])), SERVER, CHAIN, VerifyConfig(match="set")
        )
    ).passed
    # The generated query names a tool (twice, through the repair round): unusable, rejected.
    v = run(
        verify_chain(
            client(verifier([yes] * 3, CHAIN, query="call search_products then get_product")),
            SERVER,
            CHAIN,
            VerifyConfig(),
        )
    )
    assert not v.passed and v.reason == "back_translation_unusable" and "names tools" in v.detail
    # The planner hallucinates a tool.
    v = run(verify_chain(client(verifier([yes] * 3, ["search_products", "buy_now"])), SERVER, CHAIN, VerifyConfig()))
    assert not v.passed and "unknown tools ['buy_now']" in v.detail


def test_verify_step_rejects_with_reason():
    chain = Chain.create("shop", CHAIN, 0.5)
    ctx = S.TrajContext(llm=client(verifier(['{"coherent": false}'] * 3, CHAIN)), servers={"shop": SERVER})
    env = run(process_one(S.VerifyStep(VerifyConfig()), chain, ctx))
    assert (env.status, env.reason, env.detail) == ("rejected", "vote", "0 yes, 3 no, 0 abstain")


# -- query checks, tasks, augmentation, scores ----------------------------------------------
def test_traj_prompts_load_with_the_shared_loader():
    folder = PROMPT_DIR / "traj"
    names = sorted(f.stem for f in folder.glob("*.md"))
    assert len(names) == 15 and not list(folder.glob("*.txt"))
    for name in names:
        p = load_prompt(f"traj/{name}")
        assert p.name == f"traj.{name}" and p.strip and "system" in p.sections
        assert name == "agent_system" or "user" in p.sections
    # `strip: true`: no trailing newline, the same text as before the move to the shared loader
    system, user = load_prompt("traj/score_task").messages("user", tool_list="- t", query="Q?")
    assert system == {
        "role": "system",
        "content": "You grade user requests for a tool-use dataset strictly. You answer with JSON only.",
    }
    assert user["content"].startswith("Tools available to the assistant:\n- t\n\nUser request: Q?\n\nGrade")
    assert user["content"].endswith('"reason": "one sentence"}')


def test_task_records_carry_the_prompt_tag():
    good = "Find the blue kettle and put two of them in my cart."
    rewrite = "Could you find me the blue kettle and add a pair of them to my cart?"
    llm = client(
        by_step(
            {"traj.task_chain": json.dumps({"queries": [good]}), "traj.augment_diverse": json.dumps({"query": rewrite})}
        )
    )
    ctx = S.TrajContext(llm=llm, servers={"shop": SERVER})
    seed = TaskSeed(key="chain:c1", server_id="shop", source="chain", chain_id="c1", tools=CHAIN)
    env = run(process_one(S.TasksStep(TaskConfig(per_chain=1)), seed, ctx))
    (task,) = [Task.model_validate(o) for o in env.out]
    assert task.prompt == "traj.task_from_chain@1"
    env = run(process_one(S.AugmentStep(TaskConfig()), AugmentJob(key="a", task=task, mode="diverse"), ctx))
    assert env.status == "ok" and Task.model_validate(env.out[0]).prompt == "traj.augment_diverse@1"


def test_query_rules():
    names = ["get_product", "cat", "searchFlights"]
    assert named_tools("Please get_product for item 3", names) == ["get_product"]
    assert named_tools("My cat likes the product page", names) == []  # a plain word, not code
    assert named_tools("run `cat` on notes.txt", names) == ["cat"]
    assert named_tools("use searchflights to book", names) == ["searchFlights"]
    with pytest.raises(ValueError, match="asks for instructions"):
        check_query("How do I add three kettles to my cart?", names)
    with pytest.raises(ValueError, match="too short"):
        check_query("hi", names)
    assert check_query("  Add three   blue kettles to my cart. ", names) == "Add three blue kettles to my cart."


def test_chain_and_server_tasks_drop_bad_queries_and_reject_when_none_is_left():
    good = "Find the blue kettle and put two of them in my cart."
    reply = json.dumps({"queries": [good, "Use add_to_cart for the kettle.", 7]})
    qs, bad = run(chain_queries(client(by_step({"traj.task_chain": reply})), SERVER, CHAIN, 2))
    assert qs == [good] and len(bad) == 2
    with pytest.raises(LLMOutputError) as e:
        run(chain_queries(client(by_step({"traj.task_chain": '{"query": "x"}'})), SERVER, CHAIN, 2))
    assert e.value.reason == "traj.task_chain:failed_check"
    reply = json.dumps(
        {
            "tasks": [
                {"query": "What does the catalogue have for 'kettle'?", "tools": ["search_products"]},
                {"query": "Order a kettle for me please.", "tools": ["order"]},  # hallucinated
                {"query": "Do everything for the kettle order.", "tools": ["search_products"] * 4},  # too many
            ]
        }
    )
    tasks, bad = run(server_tasks(client(by_step({"traj.task_server": reply})), SERVER, 3))
    assert tasks == [("What does the catalogue have for 'kettle'?", ["search_products"])]
    assert "unknown tools ['order']" in bad[0] and "outside 1..3" in bad[1]


def test_augment_modes_and_personas(tmp_path):
    personas = load_personas()
    assert len(personas) >= 20 and pick(personas, "k") == pick(personas, "k")
    seen = {}

    def respond(step, payload):
        seen[step] = payload["messages"][-1]["content"]
        return json.dumps({"query": "As a nurse, please find the blue kettle and add two to my cart."})

    q = run(augment(client(respond), SERVER, "Find the blue kettle, add two to cart.", "persona", personas[0]))
    assert q.startswith("As a nurse") and personas[0].persona in seen["traj.augment_persona"]
    with pytest.raises(LLMOutputError, match="identical"):
        run(
            augment(
                client(lambda s, p: '{"query": "Find the blue kettle, add two to cart."}'),
                SERVER,
                "Find the blue kettle, add two to cart.",
                "diverse",
                None,
            )
        )
    own = tmp_path / "p.jsonl"
    own.write_text('{"id": "a", "persona": "A pilot."}\n{"oops": 1}\n')
    with pytest.raises(ValueError, match="p.jsonl:2"):
        load_personas(own)
    with pytest.raises(ValueError, match="unknown augmentation"):
        TaskConfig(augment=["shout"])


@pytest.mark.parametrize(
    "reply",
    [
        JUNK,
        '{"question_quality": 4, "scenario_realism": 4}',
        '{"question_quality": 9, "scenario_realism": 4, "tool_necessity": 4}',
        '{"question_quality": true, "scenario_realism": 4, "tool_necessity": 4}',
    ],
)
def test_unusable_task_scores_reject_the_task(reply):
    task = Task.create(
        server_id="shop", source="chain", tools=CHAIN, query="Find the blue kettle for me.", prompt="p@v1"
    )
    ctx = S.TrajContext(llm=client(lambda s, p: reply), servers={"shop": SERVER})
    env = run(process_one(S.ScoreStep(TaskConfig()), task, ctx))
    assert env.status == "rejected" and env.reason.startswith("traj.task_score:")


def test_task_thresholds_are_applied_per_dimension():
    task = Task.create(
        server_id="shop", source="chain", tools=CHAIN, query="Find the blue kettle for me.", prompt="p@v1"
    )
    reply = '{"question_quality": 5, "scenario_realism": 5, "tool_necessity": 3}'
    ctx = S.TrajContext(llm=client(lambda s, p: reply), servers={"shop": SERVER})
    env = run(process_one(S.ScoreStep(TaskConfig()), task, ctx))
    assert (env.status, env.reason, env.detail) == ("rejected", "below_task_threshold", "tool_necessity=3<4")
    env = run(process_one(S.ScoreStep(TaskConfig(thresholds={"tool_necessity": 3})), task, ctx))
    assert env.status == "ok"
    assert run(score_task(client(lambda s, p: reply), SERVER, task.query)).tool_necessity == 3


# -- interaction ----------------------------------------------------------------------------
def _scored(query="Find the blue kettle and add two to my cart."):
    task = Task.create(server_id="shop", source="chain", tools=CHAIN, query=query, prompt="p@v1")
    return ScoredTask(key=task.key, task=task, scores=Scores(question_quality=5, scenario_realism=5, tool_necessity=5))


def call(name, args):
    return {"name": name, "arguments": args}


def agent_script(turns):
    """Agent replies by the number of its own turns already in the conversation."""

    def respond(step, payload):
        n = sum(1 for m in payload["messages"] if m["role"] == "assistant")
        return turns[min(n, len(turns) - 1)] if step == "traj.agent" else None

    return respond


def sim_ok(step, payload):
    text = payload["messages"][-1]["content"]
    failing = "This call fails" in text
    return json.dumps(
        {"status": "error" if failing else "ok", "result": "timeout" if failing else {"product_id": "p-1"}}
    )


def episode(agent_turns, sim=sim_ok, cfg=None, item=None):
    cfg = cfg or InteractConfig(failure_rate=0.0)
    item = item or _scored()
    agent = client(agent_script(agent_turns))
    tools = SimulatedTools(
        client=client(sim), server=SERVER, task_key=item.key, query=item.task.query, failure_rate=cfg.failure_rate
    )
    return run(run_episode(agent, SERVER, item, tools, cfg))


def test_episode_runs_tool_calls_and_ends_on_a_turn_without_calls():
    t = episode(
        [
            {"content": "", "tool_calls": [call("search_products", {"query": "blue kettle"})]},
            {"content": "Found it.", "tool_calls": [call("add_to_cart", {"product_id": "p-1", "quantity": 2})]},
            "Two blue kettles (p-1) are in your cart.",
        ]
    )
    assert [c.name for c in t.calls] == ["search_products", "add_to_cart"] and t.llm_calls == 3
    assert [m["role"] for m in t.messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert [m["tool_calls"][0]["id"] for m in t.messages if m.get("tool_calls")] == ["call_0", "call_1"]
    assert [m["tool_call_id"] for m in t.messages if m["role"] == "tool"] == ["call_0", "call_1"]
    assert t.final_answer == "Two blue kettles (p-1) are in your cart." and t.backend == "simulated"


def test_invalid_calls_get_error_observations_and_are_never_simulated():
    simulated = []

    def sim(step, payload):
        simulated.append(payload)
        return sim_ok(step, payload)

    t = episode(
        [
            {"content": "", "tool_calls": [call("checkout", {}), {"name": "get_product", "arguments": "{not json"}]},
            {"content": "", "tool_calls": [call("add_to_cart", {"product_id": "p-1", "quantity": 0})]},
            {"content": "", "tool_calls": [call("get_product", {"product_id": "p-1"})]},
            "Done.",
        ],
        sim=sim,
    )
    assert [c.status.value for c in t.calls] == ["unknown_tool", "bad_json", "schema_error", "ok"]
    assert t.calls[0].observation.startswith("Error (unknown_tool): there is no tool named 'checkout'")
    assert t.calls[1].observation.startswith("Error (bad_json): arguments are not valid JSON")
    assert "quantity" in t.calls[2].observation and t.calls[2].error_kind == "minimum"
    assert len(simulated) == 1


def test_simulator_junk_rejects_the_episode_with_its_reason():
    item = _scored()
    ctx = S.TrajContext(
        llm=client(lambda s, p: JUNK),
        servers={"shop": SERVER},
        agent=client(agent_script([{"content": "", "tool_calls": [call("get_product", {"product_id": "x"})]}, "ok"])),
    )
    env = run(process_one(S.InteractStep(InteractConfig()), item, ctx))
    assert env.status == "rejected" and env.reason == "traj.simulate:no_json"


def test_no_final_answer_within_the_call_budget_and_empty_answers_are_rejected():
    loop = [{"content": "", "tool_calls": [call("get_product", {"product_id": "x"})]}]
    with pytest.raises(Reject) as e:
        episode(loop, cfg=InteractConfig(max_llm_calls=3, failure_rate=0.0))
    assert e.value.reason == "no_final_answer"
    with pytest.raises(Reject) as e:
        episode([""])
    assert e.value.reason == "empty_final_answer"


def test_episode_timeout_is_an_error_a_rerun_retries():
    async def slow():
        agent = client(lambda s, p: "x")
        orig = agent.complete

        async def complete(*a, **k):
            await asyncio.sleep(1.0)
            return await orig(*a, **k)

        agent.complete = complete
        ctx = S.TrajContext(llm=client(sim_ok), servers={"shop": SERVER}, agent=agent)
        return await process_one(S.InteractStep(InteractConfig(task_timeout_s=0.05)), _scored(), ctx)

    env = run(slow())
    assert env.status == "error" and env.reason == "exception:TimeoutError"


def test_failure_injection_and_query_visibility_are_deterministic_and_at_rate():
    keys = [f"task-{i}" for i in range(2000)]
    rate = sum(injects_failure(0, k, 0, 0.2) for k in keys) / len(keys)
    assert 0.17 < rate < 0.23
    assert [injects_failure(0, k, 3, 0.2) for k in keys[:50]] == [injects_failure(0, k, 3, 0.2) for k in keys[:50]]
    shown = sum(sees_query(0, k, 0.5) for k in keys) / len(keys)
    assert 0.45 < shown < 0.55
    # An injected failure the simulator does not honour is repaired, then rejected.
    fail_key = next(k for k in keys if injects_failure(0, k, 0, 1.0))
    tools = SimulatedTools(
        client=client(lambda s, p: '{"status": "ok", "result": 1}'),
        server=SERVER,
        task_key=fail_key,
        query="q",
        failure_rate=1.0,
    )
    with pytest.raises(LLMOutputError, match="must fail"):
        run(tools.call(SERVER.tool("get_product"), {"product_id": "x"}, 0))


def test_simulator_sees_schema_args_history_and_the_query_in_half_the_episodes():
    prompts = []

    def sim(step, payload):
        prompts.append(payload["messages"][-1]["content"])
        return json.dumps({"status": "ok", "result": {"n": len(prompts)}})

    key_with = next(f"k{i}" for i in range(100) if sees_query(0, f"k{i}", 0.5))
    key_without = next(f"k{i}" for i in range(100) if not sees_query(0, f"k{i}", 0.5))
    for key in (key_with, key_without):
        tools = SimulatedTools(
            client=client(sim), server=SERVER, task_key=key, query="QUERY-TEXT-123", failure_rate=0.0, history_window=2
        )
        for i in range(4):
            run(tools.call(SERVER.tool("get_product"), {"product_id": f"p{i}"}, i))
    first, last = prompts[0], prompts[3]
    assert '"product_id"' in first and "An online shop." in first and "QUERY-TEXT-123" in first
    assert 'get_product({"product_id": "p1"})' in last and 'get_product({"product_id": "p0"})' not in last  # window 2
    assert all("QUERY-TEXT-123" not in p for p in prompts[4:])


def test_check_call_uses_the_json_schema():
    from astra_foundation.llm import ToolCall

    ok = ToolCall.from_openai(
        {"function": {"name": "add_to_cart", "arguments": '{"product_id": "a", "quantity": 1}'}}, 0
    )
    assert check_call(ok, SERVER)[1] is None
    missing = ToolCall.from_openai({"function": {"name": "add_to_cart", "arguments": '{"product_id": "a"}'}}, 0)
    assert "'quantity' is a required property" in check_call(missing, SERVER)[1].text


# -- judge ----------------------------------------------------------------------------------
def _traj(
    final="Two kettles are in your cart.", observation='{"product_id": "p-1", "url": "https://shop.example/p-1"}'
):
    item = _scored()
    return Trajectory(
        key=item.key,
        task=item.task,
        server_id="shop",
        messages=[
            {"role": "user", "content": item.task.query},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "call_0", "type": "function", "function": {"name": "get_product", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "call_0", "name": "get_product", "content": observation},
            {"role": "assistant", "content": final},
        ],
        tools=SERVER.openai_tools(),
        calls=[],
        llm_calls=2,
        backend="simulated",
        final_answer=final,
    )


def scores(**over):
    s = {d: 0.9 for d in DIMENSIONS}
    s.update(over)
    return json.dumps({"scores": s, "reason": "fine"})


def test_judge_scores_mean_and_threshold():
    ctx = S.TrajContext(llm=client(lambda s, p: scores()), servers={"shop": SERVER})
    env = run(process_one(S.JudgeStep(JudgeConfig(threshold=0.7)), _traj(), ctx))
    assert env.status == "ok" and env.out[0]["judgement"]["score"] == pytest.approx(0.9)
    low = S.TrajContext(
        llm=client(lambda s, p: scores(conciseness=0.0, final_answer_quality=0.1)), servers={"shop": SERVER}
    )
    env = run(process_one(S.JudgeStep(JudgeConfig(threshold=0.8)), _traj(), low))
    assert env.status == "rejected" and env.reason == "below_judge_threshold"
    assert json.loads(env.detail)["scores"]["conciseness"] == 0.0
    env = run(process_one(S.JudgeStep(JudgeConfig(threshold=0.5, min_per_dim={"conciseness": 0.5})), _traj(), low))
    assert env.status == "rejected"


@pytest.mark.parametrize(
    "reply",
    [
        JUNK,
        REFUSAL,
        '{"scores": {"query_understanding": 1.0',  # truncated
        json.dumps({"score": 1.0}),  # wrong keys
        json.dumps({"scores": {d: 1.0 for d in DIMENSIONS[:-1]}}),  # a dimension missing
        scores(conciseness=1.5),
        scores(conciseness=True),
        scores(conciseness="high"),
    ],
)
def test_judge_fails_closed(reply):
    ctx = S.TrajContext(llm=client(lambda s, p: reply), servers={"shop": SERVER})
    env = run(process_one(S.JudgeStep(JudgeConfig(threshold=0.0)), _traj(), ctx))
    assert env.status == "rejected" and env.reason == "judge_unusable" and env.detail.startswith("traj.judge:")


def test_judge_errors_are_errors_not_scores():
    ctx = S.TrajContext(llm=client(lambda s, p: {"error": {"kind": "fatal"}}), servers={"shop": SERVER})
    env = run(process_one(S.JudgeStep(JudgeConfig(threshold=0.0)), _traj(), ctx))
    assert env.status == "error" and env.reason == "llm_unavailable" and not env.out


def test_an_answer_url_absent_from_the_conversation_scores_zero():
    assert unsupported_urls(_traj(final="See https://shop.example/p-1.")) == []
    t = _traj(final="Details: https://made-up.example/x")
    assert unsupported_urls(t) == ["https://made-up.example/x"]
    j = run(judge(client(lambda s, p: scores()), SERVER, t, JudgeConfig()))
    assert j.scores["final_answer_quality"] == 0.0 and j.overrides
    assert j.score == pytest.approx(0.9 * 6 / 7, abs=1e-4)
