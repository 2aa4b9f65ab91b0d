"""LLM chain proposals for a server's graph (the LLM half of step 2, docs/method.md §1.1).

The model reads the server's tools and proposes call chains with a confidence each
(`prompts/traj/propose_chains.md`). `parse_proposals` keeps the well-formed ones and drops,
with a reason each, chains that name a tool the server lacks (hallucinations), have fewer than
two tools or carry no confidence in [0, 1]. A reply with nothing usable goes back to the model
once (the client's repair round) and then counts as a failed sample.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from astra_foundation.llm import LLMClient, LLMOutputError
from astra_foundation.strict import StrictModel
from data_synth.prompts import load_prompt
from data_synth.traj import describe
from data_synth.traj.graph import ChainProposal
from data_synth.traj.records import Server


class ProposeConfig(StrictModel):
    section = "propose"

    samples: int = 1  # 0 = schema-only graphs (no LLM)
    max_chains: int = 12
    max_len: int = 5
    temperature: float | None = None  # None: the client's default


@dataclass
class Proposals:
    samples: list[list[ChainProposal]] = field(default_factory=list)
    dropped: list[dict[str, Any]] = field(default_factory=list)  # {"tools", "reason"}
    failed: list[str] = field(default_factory=list)  # one reason per failed sample


def parse_proposals(value: Any, tool_names: set[str], max_len: int) -> tuple[list[ChainProposal], list[dict[str, Any]]]:
    """(valid proposals, dropped ones with reasons). Raises ValueError when the reply has no
    `chains` list or no usable chain (a message the model sees in the repair round)."""
    if not isinstance(value, dict) or not isinstance(value.get("chains"), list):
        raise ValueError('expected {"chains": [...]} with a list under "chains"')
    valid, dropped = [], []
    for i, raw in enumerate(value["chains"]):
        tools = raw.get("tools") if isinstance(raw, dict) else None
        conf = raw.get("confidence") if isinstance(raw, dict) else None
        if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
            dropped.append({"tools": tools, "reason": f"chain {i}: 'tools' is not a list of names"})
            continue
        unknown = [t for t in tools if t not in tool_names]
        if unknown:
            dropped.append({"tools": tools, "reason": f"chain {i}: unknown tools {unknown}"})
            continue
        if not 2 <= len(tools) <= max_len:
            dropped.append({"tools": tools, "reason": f"chain {i}: {len(tools)} tools, outside 2..{max_len}"})
            continue
        if isinstance(conf, bool) or not isinstance(conf, int | float) or not 0.0 <= conf <= 1.0:
            dropped.append({"tools": tools, "reason": f"chain {i}: confidence {conf!r} is not a number in [0, 1]"})
            continue
        valid.append(ChainProposal(tools=tools, confidence=float(conf), reason=str(raw.get("reason", ""))[:300]))
    if not valid:
        why = "; ".join(d["reason"] for d in dropped[:5]) or "the list is empty"
        raise ValueError(f"no usable chain ({why}); use only the listed tool names")
    return valid, dropped


async def propose(client: LLMClient, server: Server, cfg: ProposeConfig) -> Proposals:
    """`cfg.samples` independent proposal samples. `LLMUnavailable` propagates (the record
    errors and a rerun retries it); unusable replies become `failed` entries."""
    prompt = load_prompt("traj/propose_chains")
    messages = prompt.messages(
        "user",
        **describe.server_fields(server),
        tool_list=describe.tool_list(server.tools),
        max_chains=cfg.max_chains,
        max_len=cfg.max_len,
    )
    names = set(server.tool_names())
    out = Proposals()
    for sample in range(cfg.samples):
        dropped: list[dict[str, Any]] = []

        def check(value: Any, _dropped=dropped) -> list[ChainProposal]:
            valid, bad = parse_proposals(value, names, cfg.max_len)
            _dropped[:] = bad
            return valid

        try:
            reply = await client.complete_json(
                messages, step="traj.propose", check=check, sample=sample, temperature=cfg.temperature
            )
        except LLMOutputError as e:
            out.failed.append(f"{e.reason}: {e.detail}")
            continue
        out.samples.append(reply.value)
        out.dropped.extend(dropped)
    return out
