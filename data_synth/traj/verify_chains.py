"""Chain verification that filters (step 4, docs/method.md §1.3; the released scripts record the checks
but never filter on them: **fix**).

1. *Vote.* `votes` independent samples judge whether the chain is one coherent task
   (`prompts/traj/vote_chain.md`). The chain passes when the "yes" votes are a strict
   majority of **all** samples: a vote that cannot be parsed (after the repair round) abstains,
   and abstentions count against the chain, so junk can never vote a chain through.
2. *Back-translation* (only for chains that won the vote). One call writes a user query for the
   chain (`chain_to_query`; a query that names a tool is sent back for repair, since it would
   make the round trip trivial); a second, fresh call plans the tools for that query from the
   server's whole tool list (`query_to_chain`). It must reproduce the chain: the same tools in
   the same order (`match="exact"`, default) or the same set (`match="set"`).

A chain that fails either check is rejected with the reason and the evidence.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from astra_foundation.llm import LLMClient, LLMOutputError
from astra_foundation.strict import StrictModel
from data_synth.prompts import load_prompt
from data_synth.traj import describe
from data_synth.traj.query_checks import check_query
from data_synth.traj.records import BackTranslation, Server, Vote


class VerifyConfig(StrictModel):
    section = "verify"

    votes: int = 3
    vote_temperature: float | None = 0.7
    back_translate: bool = True
    match: Literal["exact", "set"] = "exact"


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    vote: Vote
    back_translation: BackTranslation | None = None
    passed: bool
    reason: str | None = None  # short code when not passed
    detail: str | None = None


def _parse_vote(value: Any) -> tuple[bool, str]:
    if not isinstance(value, dict) or not isinstance(value.get("coherent"), bool):
        raise ValueError('expected {"coherent": true|false, "reason": "..."} with a JSON boolean')
    return value["coherent"], str(value.get("reason", ""))[:200]


def _parse_planned(value: Any, names: set[str]) -> list[str]:
    tools = value.get("tools") if isinstance(value, dict) else None
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        raise ValueError('expected {"tools": ["tool_a", ...]} with a list of tool names')
    unknown = [t for t in tools if t not in names]
    if unknown:
        raise ValueError(f"unknown tools {unknown}; use only the listed names")
    return tools


def chains_match(chain: list[str], predicted: list[str], mode: str) -> bool:
    return chain == predicted if mode == "exact" else set(chain) == set(predicted)


async def vote(client: LLMClient, server: Server, tools: list[str], cfg: VerifyConfig) -> Vote:
    messages = load_prompt("traj/vote_chain").messages(
        "user", **describe.server_fields(server), chain_tools=describe.tool_list([server.tool(t) for t in tools])
    )
    yes = no = abstain = 0
    reasons: list[str] = []
    for sample in range(cfg.votes):
        try:
            reply = await client.complete_json(
                messages, step="traj.vote", check=_parse_vote, sample=sample, temperature=cfg.vote_temperature
            )
        except LLMOutputError as e:
            abstain += 1
            reasons.append(f"abstain ({e.reason})")
            continue
        coherent, why = reply.value
        yes, no = yes + coherent, no + (not coherent)
        reasons.append(("yes" if coherent else "no") + f": {why}")
    return Vote(yes=yes, no=no, abstain=abstain, reasons=reasons)


async def back_translate(client: LLMClient, server: Server, tools: list[str], cfg: VerifyConfig) -> BackTranslation:
    """Raises `LLMOutputError` when either call yields nothing usable."""
    names = set(server.tool_names())
    fields = describe.server_fields(server)
    ask = load_prompt("traj/chain_to_query").messages(
        "user", **fields, chain_tools=describe.tool_list([server.tool(t) for t in tools])
    )

    def query_of(value: Any) -> str:
        q = value.get("query") if isinstance(value, dict) else None
        if not isinstance(q, str):
            raise ValueError('expected {"query": "..."}')
        return check_query(q, server.tool_names())

    q = (await client.complete_json(ask, step="traj.backtranslate_query", check=query_of)).value
    plan = load_prompt("traj/query_to_chain").messages("user", tool_list=describe.tool_list(server.tools), query=q)
    predicted = (
        await client.complete_json(plan, step="traj.backtranslate_chain", check=lambda v: _parse_planned(v, names))
    ).value
    return BackTranslation(query=q, predicted=predicted, match=chains_match(tools, predicted, cfg.match))


async def verify_chain(client: LLMClient, server: Server, tools: list[str], cfg: VerifyConfig) -> Verdict:
    v = await vote(client, server, tools, cfg)
    if not v.passed:
        return Verdict(vote=v, passed=False, reason="vote", detail=f"{v.yes} yes, {v.no} no, {v.abstain} abstain")
    if not cfg.back_translate:
        return Verdict(vote=v, passed=True)
    try:
        bt = await back_translate(client, server, tools, cfg)
    except LLMOutputError as e:
        return Verdict(vote=v, passed=False, reason="back_translation_unusable", detail=f"{e.reason}: {e.detail}")
    if not bt.match:
        return Verdict(
            vote=v,
            back_translation=bt,
            passed=False,
            reason="back_translation_mismatch",
            detail=f"predicted {bt.predicted} for chain {tools}",
        )
    return Verdict(vote=v, back_translation=bt, passed=True)
