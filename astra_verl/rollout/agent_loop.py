"""`astra_tool_agent`: verl's multi-turn tool rollout with per-sample, sandboxed tool code.

verl's `ToolAgentLoop` loads one tool set per worker; ASTRA gives every sample its own
environment, whose tools are model-written code. This loop builds each sample's tools from the
environment its row references (`extra_info.astra`, see `env_registry.rows`), runs every call
in a fresh sandbox session of that episode (the G rollouts of a group never share tool state),
and writes an `EpisodeLog` (`call_log.py`) for the reward.

States (an explicit machine, as in verl's loop):

    PENDING ──> GENERATING ──(calls)──> PROCESSING_TOOLS ──> GENERATING ...
                    │                         └──(hook: end / all solved / length)──> TERMINATED
                    └──(no calls)──> INTERACTING ──(hook gives a user turn)──> GENERATING
                                          └──(otherwise)──> TERMINATED

- PENDING: hook `on_start`, initial tokens with the shown tools' schemas.
- GENERATING: one assistant turn (mask 1), parsed by a reporting parser; ends the episode at
  `rollout.response_length` or, for a turn that has calls, at `multi_turn.max_assistant_turns`.
- PROCESSING_TOOLS: every call attempt in order: unknown tool, malformed call, schema
  violation or a failed sandbox call becomes a tool message the model reads and a log entry;
  calls beyond `max_parallel_calls` are answered "not executed" (`skipped`, not charged).
  Calls of one turn run sequentially, in the order written (tool state is deterministic).
  Hooks `on_tool_result` (each call) and `on_tool_round_end` (the turn's calls) may end the
  episode or add a user turn after the tool messages.
- INTERACTING: hook `on_assistant_end`; it may deliver another user turn (mask 0).
Injected tokens (tool messages, user turns) have mask 0; `response_mask` is 1 exactly on the
tokens the model generated (verl's continuous-token bookkeeping keeps that exact).

Each call's `solved` is `astra_verl.calls.solved.solved_by_call` (the reward's definition) on
the observation the model saw, i.e. after `max_tool_response_length` truncation, and only once
the turn's tool messages entered the context: when they overflow `rollout.response_length` they
are dropped, the episode ends (`max_length`) and those calls are logged `seen=False`, solving
nothing (the model never read them).
Termination reasons: `no_tool_call`, `max_turns`, `max_length`, `all_solved`, `hook`.
With `astra.rollout.stop_when_all_solved`, once every tool-needing sub-question is solved the
episode ends (`all_solved`) right after that tool round if the final answer already solves the
sub-questions that need no tool and commits to the root's answer (which the reward counts only
in the final answer, docs/reward.md); otherwise the model gets one more turn
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
from verl.experimental.agent_loop.tool_parser import ToolParser
from verl.utils.profiler import simple_timer
from verl.workers.rollout.replica import TokenOutput

from astra_verl.calls.call_log import CallRecord, Termination
from astra_verl.calls.solved import root_question, solved_by_call, solved_by_final_answer
from env_registry.call_check import CallStatus
from env_registry.commit import commits

# chatml as a module reference, not a name: chatml imports verl, whose plugin loader imports
# this module, so when chatml is imported first it is still half-initialised here.
from . import chatml
from .call_parsing import ParsedCall, ParsedTurn, reporting_parser
from .context import RolloutContext, worker_context
from .episode import Episode
from .hooks import HookAction
from .toolset import MAX_LOGGED_RAW_CHARS, digest

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "WARN"))

AGENT_NAME = "astra_tool_agent"


class PromptTooLong(ValueError):
    """A row's prompt (with its tool list) does not fit `rollout.prompt_length`."""


class State(Enum):
    PENDING = "pending"
    GENERATING = "generating"
    PROCESSING_TOOLS = "processing_tools"
    INTERACTING = "interacting"
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
    turn: ParsedTurn | None = None
    solved: set[str] = field(default_factory=set)
    answer_turn: bool = False  # stop_when_all_solved: the next turn is only for the final answer
    context_rounds: int = 0  # tool-result rounds and injected user turns (verl's num_turns counts them)
    turn_scores: list[float] = field(default_factory=list)
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
        self.parser_name = self.settings.tool_parser or f"astra_{self.limits.parser_format}"
        # the parsers register into verl's registry (astra_verl.rollout.tool_parser, loaded by the plugin)
        self.parser = reporting_parser(self.parser_name, self.tokenizer, ToolParser._registry)
        self.sandbox: Any = None  # the worker's pool, bound to the running event loop in `run`

    # -- entry point ---------------------------------------------------------------------
    async def run(self, sampling_params: dict[str, Any], priority: int = 0, **kwargs) -> AgentLoopOutput:
        self.sandbox = self.context.sandbox(self.sandbox_config)
        ep = await self._new_episode(int(priority), kwargs)  # verl hands np.int64 from non_tensor_batch
        # The session's process starts while the prompt is tokenized and the first turn is
        # generated; the first call awaits it (`_session`).
        ep.session = asyncio.ensure_future(self.sandbox.open_session(ep.toolset.program))
        try:
            state = State.PENDING
            while state is not State.TERMINATED:
                state = await self._step(state, ep, sampling_params)
            ep.log.hook_state = await ep.hook.on_end(ep)
        finally:
            await self._close_session(ep)
        return self._output(ep)

    async def _session(self, ep: LoopEpisode) -> Any:
        """The episode's sandbox session (an infrastructure failure to open it raises here)."""
        return await ep.session

    async def _close_session(self, ep: LoopEpisode) -> None:
        try:
            session = await ep.session
        except Exception as exc:  # noqa: BLE001 - a call would have raised it; report, do not mask the episode's own
            logger.error("astra_tool_agent: the sandbox session of env %s never opened: %s", ep.row.env_id, exc)
            return
        await self.sandbox.close_session(session)

    async def _step(self, state: State, ep: LoopEpisode, sampling_params: dict[str, Any]) -> State:
        if state is State.PENDING:
            return await self._handle_pending(ep)
        if state is State.GENERATING:
            return await self._handle_generating(ep, sampling_params)
        if state is State.PROCESSING_TOOLS:
            return await self._handle_processing_tools(ep)
        if state is State.INTERACTING:
            return await self._handle_interacting(ep)
        raise RuntimeError(f"astra_tool_agent: no handler for state {state}")

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
    async def _handle_pending(self, ep: LoopEpisode) -> State:
        action = self._take(ep, await ep.hook.on_start(ep))
        if action.user_message:
            ep.messages.append({"role": "user", "content": action.user_message})
        schemas = self._schemas(ep)
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
        if action.terminate:
            return self._terminate(ep, Termination.HOOK)
        return State.GENERATING

    # -- GENERATING ----------------------------------------------------------------------
    async def _handle_generating(self, ep: LoopEpisode, sampling_params: dict[str, Any]) -> State:
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
        self._absorb_server_output(ep, output)
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
        ep.log.assistant_turns += 1

        if len(ep.response_mask) >= self.limits.response_length:
            return self._terminate(ep, Termination.MAX_LENGTH)
        ep.turn = self.parser.parse(output.token_ids)
        ep.messages.append(self._assistant_message(ep.turn))
        answer_turn, ep.answer_turn = ep.answer_turn, False
        if not ep.turn.has_calls:
            ep.log.final_answer = ep.turn.content
            return State.INTERACTING
        if answer_turn:
            return self._terminate(ep, Termination.ALL_SOLVED)
        if self._turns_exhausted(ep):
            return self._terminate(ep, Termination.MAX_TURNS)
        return State.PROCESSING_TOOLS

    def _absorb_server_output(self, ep: LoopEpisode, output: TokenOutput) -> None:
        preempted = output.num_preempted if output.num_preempted is not None else 0
        ep.metrics["num_preempted"] = ep.metrics.get("num_preempted", 0) + preempted
        if not ep.server_fields:
            ep.server_fields.update(output.extra_fields)
        elif output.extra_fields.get("max_global_steps") is not None:
            ep.server_fields["max_global_steps"] = output.extra_fields["max_global_steps"]
        if output.routed_experts is not None:
            ep.routed_experts = output.routed_experts

    @staticmethod
    def _assistant_message(turn: ParsedTurn) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": turn.content}
        calls = [
            {"type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in turn.calls if c.ok
        ]
        if calls:
            message["tool_calls"] = calls
        return message

    def _turns_exhausted(self, ep: LoopEpisode) -> bool:
        cap = self.limits.max_assistant_turns
        return cap is not None and ep.log.assistant_turns >= cap

    # -- PROCESSING_TOOLS ----------------------------------------------------------------
    async def _handle_processing_tools(self, ep: LoopEpisode) -> State:
        assert ep.turn is not None
        previous = list(ep.messages)
        pending_user: list[str] = []
        terminate = False
        records: list[CallRecord] = []
        with simple_timer("tool_calls", ep.metrics):
            for index, call in enumerate(ep.turn.calls):
                record, text = await self._run_call(ep, index, call)
                records.append(record)
                ep.log.calls.append(record)
                message = {"role": "tool", "content": text}
                if record.tool:
                    message["name"] = record.tool
                ep.messages.append(message)
                if record.status is CallStatus.SKIPPED:
                    continue
                terminate |= self._apply_midturn(ep, await ep.hook.on_tool_result(ep, record), pending_user)
        terminate |= self._apply_midturn(ep, await ep.hook.on_tool_round_end(ep, records), pending_user)
        for content in pending_user:
            ep.messages.append({"role": "user", "content": content})
            ep.log.user_turns += 1
        if not await self._merge_context(ep, previous):
            for record in records:
                record.seen = False  # its tool message was dropped: the model never read it
            return self._terminate(ep, Termination.MAX_LENGTH)
        self._credit(ep, records)
        if terminate:
            return self._terminate(ep, Termination.HOOK)
        if self.settings.stop_when_all_solved and ep.tool_needing and ep.tool_needing <= ep.solved:
            if not self._leaves_pending(ep):
                return self._terminate(ep, Termination.ALL_SOLVED)
            ep.answer_turn = True
        return State.GENERATING

    @staticmethod
    def _credit(ep: LoopEpisode, records: list[CallRecord]) -> None:
        """Record what each call solved, now that its observation is in the model's context."""
        for record in records:
            record.solved = [q for q in solved_by_call(record, ep.target) if q not in ep.solved]
            ep.solved.update(record.solved)

    @staticmethod
    def _leaves_pending(ep: LoopEpisode) -> bool:
        """Some sub-question still waits for the final answer: one that needs no tool and is not
        yet solved by it, or the root, which the reward counts only when the final answer commits
        to it (`astra.reward.root_answer`, docs/reward.md)."""
        leaves = {q.id for q in ep.target.sub_questions if not q.needs_tool}
        if leaves - set(solved_by_final_answer(ep.log.final_answer, ep.target)):
            return True
        root = root_question(ep.target)
        return not commits(root.answer, ep.log.final_answer, root.match)

    @staticmethod
    def _take(ep: LoopEpisode, action: HookAction | None) -> HookAction:
        """What a hook action does wherever it comes: its tools become callable and its turn score
        is recorded. Where its user message goes and what `terminate` ends depend on the point of
        the episode, so the caller handles those. None (nothing to say) is an empty action."""
        if action is None:
            return HookAction()
        ep.reveal(action.add_tools)
        if action.turn_score is not None:
            ep.turn_scores.append(action.turn_score)
        return action

    def _apply_midturn(self, ep: LoopEpisode, action: HookAction | None, pending_user: list[str]) -> bool:
        action = self._take(ep, action)
        if action.user_message:
            pending_user.append(action.user_message)  # after this turn's tool messages
        return action.terminate

    async def _run_call(self, ep: LoopEpisode, index: int, call: ParsedCall) -> tuple[CallRecord, str]:
        """Validate and execute one call attempt; returns its log record and the tool message text."""
        if index >= self.limits.max_parallel_calls:
            text = f"Not executed: at most {self.limits.max_parallel_calls} tool calls are run per turn."
            args = call.arguments if call.arguments is not None else call.raw[:MAX_LOGGED_RAW_CHARS]
            record = CallRecord(
                turn=ep.log.assistant_turns,
                index=index,
                tool=call.name,
                arguments=args,
                status=CallStatus.SKIPPED,
                error_kind=call.error_kind,  # a malformed attempt stays recognisable (BFCL's scorer reads it)
                output=text,
                output_sha=digest(text),
            )
            return record, self._format(call.name, False, text)
        record = await ep.toolset.execute(
            call,
            ep.shown,
            self.sandbox,
            lambda: self._session(ep),
            turn=ep.log.assistant_turns,
            index=index,
            observe=lambda text: truncate(text, self.limits.max_tool_response_length, self.limits.truncate_side),
        )
        return record, self._format(record.tool, record.status is CallStatus.OK, record.output)

    def _format(self, tool: str | None, ok: bool, observed: str) -> str:
        if self.settings.tool_message_format == "text":
            return observed
        body: dict[str, Any] = {"tool": tool, "status": "ok" if ok else "error"}
        body["output" if ok else "error"] = observed
        return json.dumps(body, ensure_ascii=False)

    # -- INTERACTING ---------------------------------------------------------------------
    async def _handle_interacting(self, ep: LoopEpisode) -> State:
        assert ep.turn is not None
        action = await ep.hook.on_assistant_end(ep, ep.log.final_answer)
        if action is None:
            return self._terminate(ep, Termination.NO_TOOL_CALL)
        self._take(ep, action)
        if not action.terminate and not action.user_message:
            return self._terminate(ep, Termination.NO_TOOL_CALL)
        if not action.terminate and (self._turns_exhausted(ep) or self._user_turns_exhausted(ep)):
            return self._terminate(ep, Termination.MAX_TURNS)
        if action.user_message:
            previous = list(ep.messages)
            ep.messages.append({"role": "user", "content": action.user_message})
            ep.log.user_turns += 1
            if not await self._merge_context(ep, previous):
                return self._terminate(ep, Termination.MAX_LENGTH)
        if action.terminate:
            return self._terminate(ep, Termination.HOOK)
        return State.GENERATING

    def _user_turns_exhausted(self, ep: LoopEpisode) -> bool:
        cap = self.limits.max_user_turns
        return cap is not None and ep.log.user_turns >= cap

    # -- shared pieces -------------------------------------------------------------------
    def _schemas(self, ep: LoopEpisode) -> list[dict[str, Any]]:
        return ep.toolset.schemas(ep.shown)

    async def _merge_context(self, ep: LoopEpisode, previous: list[dict[str, Any]]) -> bool:
        """Append the new context messages' tokens (mask 0); False when they overflow the response."""
        merge, mask, logprobs = await self.ct_merge_context_msg(
            previous,
            ep.messages,
            ep.prompt_ids,
            ep.response_mask,
            ep.response_logprobs or None,
            tools=self._schemas_at_start(ep),
        )
        if len(mask) >= self.limits.response_length:
            return False
        ep.prompt_ids, ep.response_mask = merge.token_ids, mask
        if ep.response_logprobs:
            ep.response_logprobs = logprobs or []
        ep.context_rounds += 1
        return True

    @staticmethod
    def _schemas_at_start(ep: LoopEpisode) -> list[dict[str, Any]]:
        # Context deltas are rendered against a synthetic prefix; the tool list only has to be the
        # same for both renders of one merge, and the prompt's own list is what the model saw.
        return ep.toolset.schemas(ep.toolset.initially_shown)

    @staticmethod
    def _terminate(ep: LoopEpisode, reason: Termination) -> State:
        ep.log.terminated_by = reason
        return State.TERMINATED

    def _output(self, ep: LoopEpisode) -> AgentLoopOutput:
        n_resp = len(ep.response_mask)
        prompt_ids = ep.prompt_ids[: len(ep.prompt_ids) - n_resp]
        response_ids = ep.prompt_ids[len(ep.prompt_ids) - n_resp :]
        cap = self.limits.response_length
        ep.metrics.setdefault("num_preempted", -1)
        extra = dict(ep.server_fields)
        extra.update(ep.log.to_extra_fields())
        extra.update(turn_scores=ep.turn_scores, tool_rewards=[])
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
