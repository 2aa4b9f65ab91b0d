"""Real input: BFCL's multi-turn function docs (from the installed bfcl-eval package, in place)
-> servers -> graph (scripted LLM proposals + schema scores) -> chains."""

from __future__ import annotations

import asyncio
import json
import re

from testkit import bfcl_func_doc_dir

from data_synth.pipeline import read_envelopes, read_outputs
from data_synth.traj.config import TrajConfig
from data_synth.traj.records import Chain, GraphRecord, Server
from data_synth.traj.run import ContextFactory, Runner

# What a model would propose for the file system; the rest of the servers get their listed
# tools paired in order. Every server also gets one hallucinated chain, which must be dropped.
FS_CHAINS = [
    ["cd", "ls"],
    ["find", "cat"],
    ["cd", "ls", "cat"],
    ["pwd", "ls"],
    ["ls", "cat", "grep"],
    ["mkdir", "cd", "touch"],
]


def proposer(step, payload):
    assert step == "traj.propose"
    text = payload["messages"][-1]["content"]
    names = re.findall(r"^- ([A-Za-z0-9_-]+): ", text, re.MULTILINE)
    chains = FS_CHAINS if "Gorilla file system" in text else [names[i : i + 2] for i in range(0, len(names) - 1, 2)]
    body = [{"tools": c, "confidence": 0.9} for c in chains] + [{"tools": [names[0], "open_file"], "confidence": 0.9}]
    return json.dumps({"chains": body})


def test_bfcl_func_docs_give_sensible_chains_of_known_tools(tmp_path):
    cfg = TrajConfig.from_dict({"chains": {"per_start": 4, "seed": 0}})
    runner = Runner(tmp_path, cfg, ContextFactory(str(tmp_path), responders={"llm": proposer}), progress=False)

    async def go():
        try:
            await runner.ingest([str(bfcl_func_doc_dir())])
            await runner.graph()
            await runner.chains()
        finally:
            await runner.aclose()

    asyncio.run(go())
    servers = {s.server_id: s for s in read_outputs(tmp_path, "traj.ingest", Server)}
    graphs = {g.server_id: g for g in read_outputs(tmp_path, "traj.graph", GraphRecord)}
    chains = read_outputs(tmp_path, "traj.chains", Chain)
    assert len(servers) == 11 and set(graphs) == set(servers)
    assert (
        read_envelopes(tmp_path, "traj.ingest")[f"{bfcl_func_doc_dir() / 'web_search.json'}#0"].reason
        == "too_few_tools"
    )

    for g in graphs.values():
        names = set(servers[g.server_id].tool_names())
        assert {e.source for e in g.edges} | {e.target for e in g.edges} <= names
        assert any("open_file" in d["reason"] for d in g.dropped_proposals)
    for c in chains:
        assert set(c.tools) <= set(servers[c.server_id].tool_names()), c
        assert len(set(c.tools)) == len(c.tools) and 2 <= len(c.tools) <= 5

    fs = {(e.source, e.target): e for e in graphs["gorilla-file-system"].edges}
    assert fs[("cd", "ls")].origin == ["llm"]  # a state dependency: no schema can see it
    assert fs[("find", "cat")].origin == ["llm", "schema"]  # find's matches feed cat's file_name
    assert fs[("find", "cat")].weight > fs[("cd", "ls")].weight
    fs_chains = [c.tools for c in chains if c.server_id == "gorilla-file-system"]
    assert any(c[:2] == ["cd", "ls"] for c in fs_chains)
    assert any(c[:2] == ["find", "cat"] for c in fs_chains)
    assert len({c.server_id for c in chains}) == 11
