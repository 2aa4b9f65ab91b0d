"""`astra_tool_agent`: verl's multi-turn tool rollout with per-sample, sandboxed tool code.

verl's `ToolAgentLoop` loads one tool set per worker; ASTRA gives every sample its own
environment, whose tools are model-written code. This loop builds each sample's tools from the
environment its row references (`extra_info.astra`, see `env_registry.rows`), runs every call
in a fresh sandbox session of that episode (the G rollouts of a group never share tool state),
and writes an `EpisodeLog` (`call_log.py`) for the reward.

The episode's rules (where a user message goes, what ends it, every cap, what is logged) are
`env_registry.episode_driver`'s, shared with the chat evaluation and trajectory synthesis; this
loop is the driver's token transport:

    PENDING ──(driver.reset: hook on_start; the prompt)──> GENERATING ──(driver.step)──> GENERATING ...
                                                                 └──(the driver ends it)──> TERMINATED

- GENERATING: one assistant turn (mask 1), parsed by a reporting parser, then handed to the
  driver; the turn is `at_limit` once the response holds `rollout.response_length` tokens.
- The driver's calls run here (`LoopTransport.run_call`): unknown tool, malformed call, schema
  violation or a failed sandbox call becomes a tool message the model reads and a log entry;
  calls of one turn run sequentially, in the order written (tool state is deterministic).
- `LoopTransport.admit` merges the driver's new messages (tool messages, user turns) as tokens
  with mask 0; `response_mask` is 1 exactly on the tokens the model generated (verl's
  continuous-token bookkeeping keeps that exact).
- Caps: `multi_turn.max_assistant_turns`, `multi_turn.max_parallel_calls`,
  `astra.rollout.max_user_turns` (astra_verl.rollout.config says why not verl's key).

Each call's `solved` is `astra_verl.calls.solved.solved_by_call` (the reward's definition) on
the observation the model saw, i.e. after `max_tool_response_length` truncation, and only once
the turn's tool messages entered the context: when they overflow `rollout.response_length` they
are dropped, the episode ends (`max_length`) and those calls are logged `seen=False`, solving
nothing (the model never read them).
With `astra.rollout.stop_when_all_solved`, once every tool-needing sub-question is solved the
episode ends (`all_solved`) right after that tool round if the final answer already solves the
sub-questions that need no tool and its answer channel states the root's answer (which the
reward counts only in the final answer, docs/reward.md); otherwise the model gets one more turn
for its final answer (a turn without calls ends as usual; calls written in it are not executed
or logged and the episode ends `all_solved`).

Request ids follow verl's own loops: `det-{priority}` under `rollout.full_determinism`, else a
fresh uuid4 per episode (one id for all of its turns: the server manager routes a request id to
the same server, which keeps its prefix cache); `priority` is passed to the server.

The episode's sandbox session opens in the background at the start (its process starts while
the prompt is tokenized and the first turn generated); the first call awaits it.

Data and infrastructure errors raise, naming the row's environment: a row without
`extra_info.astra` (`RowError`), tools the store cannot provide or that clash (`ToolsetError`),
an unknown hook (`HookError`), a prompt longer than `rollout.prompt_length` (`PromptTooLong`:
verl would left-truncate it and cut off the tool list), a sandbox that cannot run sessions
(scoring that as a model error would train on noise).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from dataclasses import dataclass, field
from enum import Enum
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register
from verl.experimental.agent_loop.tool_agent_loop import SPEC_DECODE_EXTRA_KEYS
from verl.experimental.agent_loop.tool_parser import ToolParser
from verl.utils.profiler import simple_timer
from verl.workers.rollout.replica import TokenOutput

from astra_verl.calls.call_log import CallRecord
from astra_verl.calls.solved import root_answered, solved_by_call, solved_by_final_answer
from env_registry.call_gate import CallStatus
from env_registry.episode_driver import AssistantTurn, CallResult, EpisodeDriver, ParsedCall, Settled

# chatml as a module reference, not a name: chatml imports verl, whose plugin loader imports
# this module, so when chatml is imported first it is still half-initialised here.
from . import chatml
from .call_parsing import reporting_parser
from .context import RolloutContext, worker_context
from .episode import Episode

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "WARN"))

AGENT_NAME = "astra_tool_agent"


class PromptTooLong(ValueError):
    """A row's prompt (with its tool list) does not fit `rollout.prompt_length`."""


class State(Enum):
    PENDING = "pending"
    GENERATING = "generating"
    TERMINATED = "terminated"


def truncate(text: str, limit: int, side: str) -> str:
    """At most `limit` characters of `text` (plus a marker), cut on `side` (left, right, middle)."""
    if limit <= 0 or len(text) <= limit:
        return text
    if side == "left":
        return "...(truncated)" + text[-limit:]
    if side == "right":
        return text[:limit] + "...(truncated)"
    head = limit // 2
    return text[:head] + "...(truncated)..." + text[len(text) - (limit - head) :]


@dataclass
class LoopEpisode(Episode):
    """One rollout's token-level state on top of the shared `Episode` (the hooks' `EpisodeView`)."""

    priority: int = 0  # verl's per-sample priority (vLLM schedules by it)
    session: Any = None  # a future of the sandbox Session, opened in the background
    prompt_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    response_logprobs: list[float] = field(default_factory=list)
    solved: set[str] = field(default_factory=set)
    context_rounds: int = 0  # tool-result rounds and injected user turns (verl's num_turns counts them)
    metrics: dict[str, Any] = field(default_factory=dict)
    server_fields: dict[str, Any] = field(default_factory=dict)
    routed_experts: Any = None


@register(AGENT_NAME)
class AstraToolAgentLoop(AgentLoopBase):
    """See the module docstring. Built by verl per trajectory; what outlives it is in its `RolloutContext`."""

    def __init__(self, *args, tools: Any = None, context: RolloutContext | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        # a ChatML template on an architecture verl maps to its generic builder (SmolLM2's llama)
        self.continuous_token_builder = chatml.chatml_builder(
            self.continuous_token_builder, self.tokenizer, self.apply_chat_template_kwargs
        )
        # verl passes no context: the worker's one is that of its event loop (see context.py)
        self.context = context or worker_context(self.loop)
        if tools is not None and getattr(tools, "tools", None) and not self.context.warned_worker_tools:
            self.context.warned_worker_tools = True
            logger.warning(
                "astra_tool_agent ignores the %d worker-wide tools of multi_turn.tool_config_path/"
                "function_tool_path: its tools come from each row's environment",
                len(tools.tools),
            )
        settings = self.context.settings(self.config)
        self.settings, self.limits, self.sandbox_config = settings.rollout, settings.limits, settings.sandbox
        self.episode_limits = settings.episode_limits()
        self.parser_name = self.settings.tool_parser or f"astra_{self.limits.parser_format}"
        # the parsers register into verl's registry (astra_verl.rollout.tool_parser, loaded by the plugin)
        self.parser = reporting_parser(self.parser_name, self.tokenizer, ToolParser._registry)
        self.sandbox: Any = None  # the worker's pool, bound to the running event loop in `run`

    # -- entry point ---------------------------------------------------------------------
    async def run(self, sampling_params: dict[str, Any], priority: int = 0, **kwargs) -> AgentLoopOutput:
        self.sandbox = self.context.sandbox(self.sandbox_config)
        ep = await self._new_episode(int(priority), kwargs)  # verl hands np.int64 from non_tensor_batch
        # The session's process starts while the prompt is tokenized and the first turn is
        # generated; the first call awaits it (`LoopTransport.run_call`).
        ep.session = asyncio.ensure_future(self.sandbox.open_session(ep.toolset.program))
        driver = EpisodeDriver(ep, LoopTransport(self, ep), self.episode_limits, ep.hook)
        try:
            state = State.PENDING
            while state is not State.TERMINATED:
                state = await self._step(state, ep, driver, sampling_params)
            await driver.close()
        finally:
            await self._close_session(ep)
        return self._output(ep, driver.turn_scores)

    async def _close_session(self, ep: LoopEpisode) -> None:
        try:
            session = await ep.session
        except Exception as exc:  # noqa: BLE001 - a call would have raised it; report, do not mask the episode's own
            logger.error("astra_tool_agent: the sandbox session of env %s never opened: %s", ep.row.env_id, exc)
            return
        await self.sandbox.close_session(session)

    async def _step(
        self, state: State, ep: LoopEpisode, driver: EpisodeDriver, sampling_params: dict[str, Any]
    ) -> State:
        if state is State.PENDING:
            await self._handle_pending(ep, driver)
        elif state is State.GENERATING:
            await driver.step(await self._generate(ep, sampling_params))
        else:
            raise RuntimeError(f"astra_tool_agent: no handler for state {state}")
        return State.TERMINATED if driver.done else State.GENERATING

    async def _new_episode(self, priority: int, kwargs: dict[str, Any]) -> LoopEpisode:
        extra_info = kwargs.get("extra_info") or {}
        ep = LoopEpisode.open(
            self.context.catalog,
            extra_info,
            kwargs.get("interaction_kwargs") or extra_info.get("interaction_kwargs") or {},
            kwargs["raw_prompt"],
            request_id=f"det-{priority}" if self.rollout_config.full_determinism else uuid4().hex,
            default_hook=self.settings.default_hook,
            interaction_config_path=self.settings.interaction_config_path,
            interactions=self.context.interactions,
            priority=priority,
        )
        ep.log.parser = self.parser_name  # a hook may need to know how turns were read (bfcl_multi_turn does)
        return ep

    # -- PENDING -------------------------------------------------------------------------
    async def _handle_pending(self, ep: LoopEpisode, driver: EpisodeDriver) -> None:
        """The hook's opening (it may add the user's first message), then the prompt's tokens."""
        await driver.reset()
        schemas = ep.toolset.schemas(ep.shown)
        ep.prompt_ids = await self.loop.run_in_executor(
            None, lambda: self.continuous_token_builder.build_initial_tokens(ep.messages, tools=schemas)
        )
        if len(ep.prompt_ids) > self.rollout_config.prompt_length:
            # verl would left-truncate, cutting off the system turn that lists the tools
            raise PromptTooLong(
                f"row of environment {ep.row.env_id}: the prompt with its {len(ep.shown)} tools is "
                f"{len(ep.prompt_ids)} tokens, over actor_rollout_ref.rollout.prompt_length="
                f"{self.rollout_config.prompt_length}; export with --tokenizer --max-prompt-length to drop such "
                "rows, or raise prompt_length"
            )

    # -- GENERATING ----------------------------------------------------------------------
    async def _generate(self, ep: LoopEpisode, sampling_params: dict[str, Any]) -> AssistantTurn:
        """One assistant turn, merged as tokens (mask 1) and parsed for the driver."""
        if self.parser.stop_token_ids:
            stops = sorted(set((sampling_params.get("stop_token_ids") or []) + self.parser.stop_token_ids))
            sampling_params = {**sampling_params, "stop_token_ids": stops}
        with simple_timer("generate_sequences", ep.metrics):
            output: TokenOutput = await self.server_manager.generate(
                request_id=ep.request_id,
                prompt_ids=ep.prompt_ids,
                sampling_params=sampling_params,
                priority=ep.priority,
            )
        absorb_server_output(ep, output)
        use_logprobs = bool(ep.response_logprobs or output.log_probs)
        merge, mask, logprobs = await self.ct_merge_assistant_token(
            ep.prompt_ids,
            output.token_ids,
            ep.response_mask,
            ep.response_logprobs if use_logprobs else None,
            assistant_logprobs=output.log_probs or None,
        )
        ep.prompt_ids, ep.response_mask = merge.token_ids, mask
        if logprobs is not None:
            ep.response_logprobs = logprobs
        # parsed before the length check: a final answer ending exactly at the limit is kept
        parsed = self.parser.parse(output.token_ids)
        at_limit = len(ep.response_mask) >= self.limits.response_length
        return AssistantTurn(content=parsed.content, calls=tuple(parsed.calls), at_limit=at_limit)

    # -- shared pieces -------------------------------------------------------------------
    def _format(self, tool: str | None, ok: bool, observed: str) -> str:
        if self.settings.tool_message_format == "text":
            return observed
        body: dict[str, Any] = {"tool": tool, "status": "ok" if ok else "error"}
        body["output" if ok else "error"] = observed
        return json.dumps(body, ensure_ascii=False)

    def _output(self, ep: LoopEpisode, turn_scores: list[float]) -> AgentLoopOutput:
        n_resp = len(ep.response_mask)
        prompt_ids = ep.prompt_ids[: len(ep.prompt_ids) - n_resp]
        response_ids = ep.prompt_ids[len(ep.prompt_ids) - n_resp :]
        cap = self.limits.response_length
        ep.metrics.setdefault("num_preempted", -1)  # no turn generated: unknown, verl's -1
        extra = dict(ep.server_fields)
        extra.update(ep.log.to_extra_fields())
        extra.update(turn_scores=turn_scores, tool_rewards=[])
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids[:cap],
            response_mask=ep.response_mask[:cap],
            response_logprobs=ep.response_logprobs[:cap] if ep.response_logprobs else None,
            routed_experts=(ep.routed_experts[: len(prompt_ids) + cap] if ep.routed_experts is not None else None),
            num_turns=1 + ep.log.assistant_turns + ep.context_rounds,
            metrics=ep.metrics,
            extra_fields=extra,
        )


def absorb_server_output(ep: LoopEpisode, output: TokenOutput) -> None:
    """A turn's server fields, as verl's `ToolAgentLoop` keeps them: preemptions summed (unknown on
    the first turn is verl's -1, later unknowns add 0), the first turn's extra fields, the largest
    `max_global_steps`, and the speculative-decoding counters summed over turns."""
    if ep.metrics.get("num_preempted") is None:
        ep.metrics["num_preempted"] = output.num_preempted if output.num_preempted is not None else -1
    else:
        ep.metrics["num_preempted"] += output.num_preempted if output.num_preempted is not None else 0
    if not ep.server_fields:
        ep.server_fields.update(output.extra_fields)
    else:
        if output.extra_fields.get("max_global_steps") is not None:
            ep.server_fields["max_global_steps"] = output.extra_fields["max_global_steps"]
        for key in SPEC_DECODE_EXTRA_KEYS:
            if key in output.extra_fields and key in ep.server_fields:
                ep.server_fields[key] = int(ep.server_fields[key]) + int(output.extra_fields[key])
    if output.routed_experts is not None:
        ep.routed_experts = output.routed_experts


@dataclass
class LoopTransport:
    """The driver's transport inside verl: calls in the episode's sandbox session, messages as tokens."""

    loop: AstraToolAgentLoop
    ep: LoopEpisode

    async def run_call(self, turn: int, index: int, call_id: str, call: ParsedCall) -> CallResult:
        limits = self.loop.limits
        with simple_timer("tool_calls", self.ep.metrics):
            record = await self.ep.toolset.execute(
                call,
                self.ep.shown,
                self.loop.sandbox,
                self._session,
                turn=turn,
                index=index,
                call_id=call_id,
                observe=lambda text: truncate(text, limits.max_tool_response_length, limits.truncate_side),
            )
        text = self.loop._format(record.tool, record.status is CallStatus.OK, record.output)
        return CallResult(record.status, text, record)

    async def _session(self) -> Any:
        """The episode's sandbox session (an infrastructure failure to open it raises here)."""
        return await self.ep.session

    def skipped(self, turn: int, index: int, call_id: str, call: ParsedCall, text: str) -> CallResult:
        record = self.ep.toolset.skipped(call, text, turn=turn, index=index, call_id=call_id)
        return CallResult(CallStatus.SKIPPED, self.loop._format(call.name, False, text), record)

    async def admit(self, previous: list[dict[str, Any]], records: list[CallRecord]) -> bool:
        """Merge the new context messages' tokens (mask 0); False when they overflow the response,
        and then the round's calls were never read (`seen=False`)."""
        ep = self.ep
        merge, mask, logprobs = await self.loop.ct_merge_context_msg(
            previous,
            ep.messages,
            ep.prompt_ids,
            ep.response_mask,
            ep.response_logprobs or None,
            # Context deltas are rendered against a synthetic prefix; the tool list only has to be
            # the same for both renders of one merge, and the prompt's own list is what the model saw.
            tools=ep.toolset.schemas(ep.toolset.initially_shown),
        )
        if len(mask) >= self.loop.limits.response_length:
            for record in records:
                record.seen = False  # its tool message was dropped: the model never read it
            return False
        ep.prompt_ids, ep.response_mask = merge.token_ids, mask
        if ep.response_logprobs:
            ep.response_logprobs = logprobs or []
        ep.context_rounds += 1
        return True

    async def settle(self, records: list[CallRecord]) -> Settled:
        """Credit what each call solved, now that its observation is in the model's context; with
        `stop_when_all_solved`, end the episode or give one last answer turn once all are solved."""
        ep = self.ep
        for record in records:
            record.solved = [q for q in solved_by_call(record, ep.target) if q not in ep.solved]
            ep.solved.update(record.solved)
        if not (self.loop.settings.stop_when_all_solved and ep.tool_needing and ep.tool_needing <= ep.solved):
            return Settled.GO_ON
        return Settled.ANSWER_TURN if self._leaves_pending() else Settled.END

    def _leaves_pending(self) -> bool:
        """Some sub-question still waits for the final answer: one that needs no tool and is not
        yet solved by it, or the root, which the reward counts only when the final answer's channel
        states it (`astra.reward.root_answer`, docs/reward.md): the reward's own definition."""
        ep = self.ep
        leaves = {q.id for q in ep.target.sub_questions if not q.needs_tool}
        if leaves - set(solved_by_final_answer(ep.log.final_answer, ep.target)):
            return True
        return not root_answered(ep.log.final_answer, ep.target)
