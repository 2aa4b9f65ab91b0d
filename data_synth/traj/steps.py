"""The pipeline's steps: one `data_synth.pipeline.Step` per job, configuration only in the
object, every record in and out typed (`records.py`).

What a step may use besides its input lives in its `TrajContext`:
`ctx.llm` (the synthesis model: proposals, votes, tasks, tool simulation),
`ctx.agent`, `ctx.judge` and `ctx.user` (their own models; None: `ctx.llm`; the user words the
missing-value tasks' LLM user),
`ctx.servers` (server id -> `Server`, from the ingest step's outputs),
`ctx.personas` (the augment step's personas; None: `tasks.personas` of the settings).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from astra_foundation.llm import LLMClient, LLMOutputError
from data_synth.pipeline import Reject, Step, StepContext
from data_synth.prompts import load_prompt
from data_synth.traj import judge as judge_mod
from data_synth.traj import tasks as tasks_mod
from data_synth.traj import variants as variants_mod
from data_synth.traj.chains import ChainConfig, sample_chains
from data_synth.traj.graph import GraphConfig, build_graph
from data_synth.traj.ingest import IngestConfig, build_server
from data_synth.traj.interact import InteractConfig, run_episode
from data_synth.traj.judge import JudgeConfig
from data_synth.traj.mcp_tools import MCPTools
from data_synth.traj.propose import ProposeConfig, propose
from data_synth.traj.records import (
    AugmentJob,
    Chain,
    GraphRecord,
    JudgedTrajectory,
    ScoredTask,
    Server,
    SourceRecord,
    Task,
    TaskSeed,
    Trajectory,
    VariantJob,
    VerifiedChain,
)
from data_synth.traj.simulate import SimulatedTools
from data_synth.traj.tasks import Persona, TaskConfig
from data_synth.traj.variants import VariantsConfig
from data_synth.traj.verify_chains import VerifyConfig, verify_chain
from env_registry.episode_driver import EpisodeHook
from env_registry.spec import Variant


@dataclass
class TrajContext(StepContext):
    agent: LLMClient | None = None
    judge: LLMClient | None = None
    user: LLMClient | None = None
    servers: dict[str, Server] = field(default_factory=dict)
    personas: list[Persona] | None = None

    async def aclose(self) -> None:
        """Close every client once (agent and judge may be the synthesis client)."""
        clients = {id(c): c for c in (self.llm, self.agent, self.judge, self.user) if c is not None}
        for c in clients.values():
            await c.aclose()


def _llm(ctx: TrajContext, role: str = "llm") -> LLMClient:
    client = {"agent": ctx.agent, "judge": ctx.judge, "user": ctx.user}.get(role) or ctx.llm
    if client is None:
        raise RuntimeError(f"no LLM client in the step context for {role!r}")
    return client


def _server(ctx: TrajContext, server_id: str) -> Server:
    if server_id not in ctx.servers:
        raise Reject("unknown_server", f"server {server_id!r} is not among the ingested servers")
    return ctx.servers[server_id]


class IngestStep(Step[SourceRecord, Server]):
    name = "traj.ingest"
    input_type, output_type = SourceRecord, Server

    def __init__(self, cfg: IngestConfig):
        self.cfg = cfg

    async def process(self, record: SourceRecord, ctx: TrajContext) -> Server:
        return build_server(record, self.cfg)


class GraphStep(Step[Server, GraphRecord]):
    """LLM proposals (unless `propose.samples == 0`) + schema scores -> the weighted graph. A
    server whose every proposal sample is unusable is rejected (`no_usable_proposals`), never
    silently built from the schemas alone."""

    name = "traj.graph"
    input_type, output_type = Server, GraphRecord

    def __init__(self, propose_cfg: ProposeConfig, graph_cfg: GraphConfig):
        self.propose_cfg = propose_cfg
        self.graph_cfg = graph_cfg

    async def process(self, record: Server, ctx: TrajContext) -> GraphRecord:
        if self.propose_cfg.samples == 0:
            return build_graph(record, [], self.graph_cfg)
        p = await propose(_llm(ctx), record, self.propose_cfg)
        if not p.samples:
            raise Reject("no_usable_proposals", " | ".join(p.failed))
        rec = build_graph(record, p.samples, self.graph_cfg)
        return rec.model_copy(update={"proposal_failures": p.failed, "dropped_proposals": p.dropped})


class ChainsStep(Step[GraphRecord, Chain]):
    name = "traj.chains"
    input_type, output_type = GraphRecord, Chain

    def __init__(self, cfg: ChainConfig):
        self.cfg = cfg

    async def process(self, record: GraphRecord, ctx: TrajContext) -> list[Chain]:
        chains = sample_chains(record.to_nx(), record.server_id, self.cfg)
        if not chains:
            raise Reject(
                "no_chains", f"the graph has {len(record.edges)} edges; no walk of >= {self.cfg.min_len} tools"
            )
        return chains


class VerifyStep(Step[Chain, VerifiedChain]):
    name = "traj.verify"
    input_type, output_type = Chain, VerifiedChain

    def __init__(self, cfg: VerifyConfig):
        self.cfg = cfg

    async def process(self, record: Chain, ctx: TrajContext) -> VerifiedChain:
        v = await verify_chain(_llm(ctx), _server(ctx, record.server_id), record.tools, self.cfg)
        if not v.passed:
            raise Reject(v.reason or "unverified", v.detail or "")
        return VerifiedChain(
            key=record.key,
            server_id=record.server_id,
            tools=record.tools,
            weight=record.weight,
            vote=v.vote,
            back_translation=v.back_translation,
        )


class TasksStep(Step[TaskSeed, Task]):
    """Base tasks: `per_chain` per verified chain, `per_server` per server."""

    name = "traj.tasks"
    input_type, output_type = TaskSeed, Task

    def __init__(self, cfg: TaskConfig):
        self.cfg = cfg

    async def process(self, record: TaskSeed, ctx: TrajContext) -> list[Task]:
        server = _server(ctx, record.server_id)
        llm = _llm(ctx)
        common: dict[str, Any] = {"server_id": server.server_id, "source": record.source, "chain_id": record.chain_id}
        if record.source == "chain":
            queries, _ = await tasks_mod.chain_queries(llm, server, record.tools, self.cfg.per_chain)
            prompt = "traj/task_from_chain"
            items = [(q, record.tools) for q in queries]
        else:
            items, _ = await tasks_mod.server_tasks(llm, server, self.cfg.per_server)
            prompt = "traj/task_from_server"
        tag = load_prompt(prompt).tag
        return [Task.create(**common, tools=tools, query=q, prompt=tag) for q, tools in items]


class AugmentStep(Step[AugmentJob, Task]):
    name = "traj.augment"
    input_type, output_type = AugmentJob, Task

    def __init__(self, cfg: TaskConfig):
        self.cfg = cfg

    async def process(self, record: AugmentJob, ctx: TrajContext) -> Task:
        base = record.task
        persona = None
        if record.mode == "persona":
            personas = ctx.personas or tasks_mod.load_personas(self.cfg.personas)
            persona = tasks_mod.pick(personas, base.key)
        query = await tasks_mod.augment(_llm(ctx), _server(ctx, base.server_id), base.query, record.mode, persona)
        return Task.create(
            server_id=base.server_id,
            source=base.source,
            chain_id=base.chain_id,
            tools=base.tools,
            query=query,
            augmentation=record.mode,
            parent=base.key,
            persona_id=persona.id if persona else None,
            prompt=load_prompt(f"traj/augment_{record.mode}").tag,
        )


class ScoreStep(Step[Task, ScoredTask]):
    name = "traj.score"
    input_type, output_type = Task, ScoredTask

    def __init__(self, cfg: TaskConfig):
        self.cfg = cfg

    async def process(self, record: Task, ctx: TrajContext) -> ScoredTask:
        scores = await tasks_mod.score_task(_llm(ctx), _server(ctx, record.server_id), record.query)
        failing = scores.failing(self.cfg.thresholds)
        if failing:
            raise Reject("below_task_threshold", ", ".join(failing))
        return ScoredTask(key=record.key, task=record, scores=scores)


class VariantsStep(Step[VariantJob, ScoredTask]):
    """A task of another behaviour from a scored answerable one (`variants.py`); a task that
    cannot carry the variant is rejected with the reason."""

    name = "traj.variants"
    input_type, output_type = VariantJob, ScoredTask

    def __init__(self, cfg: VariantsConfig):
        self.cfg = cfg

    async def process(self, record: VariantJob, ctx: TrajContext) -> ScoredTask:
        return await variants_mod.derive(_llm(ctx), _server(ctx, record.item.task.server_id), record)


class InteractStep(Step[ScoredTask, Trajectory]):
    """One episode per task: offered the task's tools (all the server's but a removed one), with
    the LLM user of a missing-value task as the episode's hook."""

    name = "traj.interact"
    input_type, output_type = ScoredTask, Trajectory

    def __init__(self, cfg: InteractConfig, variants: VariantsConfig | None = None):
        self.cfg = cfg
        self.variants = variants or VariantsConfig()

    def _hook(self, record: ScoredTask, ctx: TrajContext) -> EpisodeHook | None:
        if record.task.behaviour is not Variant.MISSING_VALUE:
            return None
        return variants_mod.LLMUserHook(_llm(ctx, "user"), record.task, self.variants.otherwise)

    async def process(self, record: ScoredTask, ctx: TrajContext) -> Trajectory:
        server = variants_mod.offered(_server(ctx, record.task.server_id), record.task)
        hook = self._hook(record, ctx)
        if self.cfg.backend == "mcp":
            async with MCPTools.connect(server) as backend:
                return await run_episode(_llm(ctx, "agent"), server, record, backend, self.cfg, hook=hook)
        backend = SimulatedTools(
            client=_llm(ctx),
            server=server,
            task_key=record.key,
            query=record.task.query,
            failure_rate=self.cfg.failure_rate,
            history_window=self.cfg.history_window,
            show_query_fraction=self.cfg.show_query_fraction,
            seed=self.cfg.seed,
            temperature=self.cfg.simulator_temperature,
        )
        return await run_episode(_llm(ctx, "agent"), server, record, backend, self.cfg, hook=hook)


class JudgeStep(Step[Trajectory, JudgedTrajectory]):
    """Kept trajectories carry their judgement; a rejection's detail holds the scores as JSON,
    so the report can plot the whole distribution."""

    name = "traj.judge"
    input_type, output_type = Trajectory, JudgedTrajectory

    def __init__(self, cfg: JudgeConfig):
        self.cfg = cfg

    async def process(self, record: Trajectory, ctx: TrajContext) -> JudgedTrajectory:
        broken = variants_mod.violation(record)  # a behaviour's clear rule, before the LLM judge
        if broken is not None:
            raise Reject(f"variant_{broken[0]}", broken[1])
        try:
            j = await judge_mod.judge(_llm(ctx, "judge"), _server(ctx, record.server_id), record, self.cfg)
        except LLMOutputError as e:
            raise Reject("judge_unusable", f"{e.reason}: {e.detail}") from None
        failing = judge_mod.failing(j, self.cfg)
        if failing:
            raise Reject("below_judge_threshold", j.model_dump_json())
        return JudgedTrajectory(key=record.key, trajectory=record, judgement=j)
