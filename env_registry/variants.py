"""Environment variants: what the right behaviour in an environment is (issue 49).

Every environment used to have one right behaviour: call the tools, then answer. A variant
(`EnvSpec.variant`, spec version 4) says which other one it asks for; each row of `VARIANTS`
carries what that means for validation, export and demonstrations:

- answerable: call, then answer in the channel;
- unanswerable: the tool of the first step is not offered and no offered tool replaces it; the
  right final answer declares the inability (`<answer>cannot answer: CAPABILITY</answer>`);
- missing_value: the question leaves out one identifying argument that a scripted user holds
  (`EnvSpec.user`); the agent asks (a turn without calls and without a channel), the user answers,
  then the calls and the answer as in an answerable environment;
- missing_function: the last step's tool is not offered; the earlier steps' calls, then the
  declared inability naming the missing capability;
- no_tool: the question states what the answer needs; the answer without a call.

The reward needs nothing new: a declining environment's root sub-question expects a declared
inability (`answer_channel.is_inability`, read in the `inability` type); a missing-value
environment's golden calls carry the value the user holds, so a call with an invented one is a
wrong-entity call; a no-tool environment has no tool sub-question, so any call costs precision.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import Field, model_validator

from astra_foundation.strict import StrictModel
from env_registry.answer_channel import INABILITY, final_message, has_channel, is_inability, root_question
from env_registry.spec import EnvSpec, Variant

__all__ = [
    "LLM_USER_HOOK",
    "MIX",
    "OTHERWISE",
    "VARIANTS",
    "LLMUserConfig",
    "UserScript",
    "VariantRule",
    "VariantShares",
    "ask_message",
    "interaction_kwargs",
    "select_shares",
    "variant_problems",
]

SCRIPTED_USER_HOOK = "scripted_user_turns"  # astra_verl.rollout.hooks.ScriptedUserTurnsHook
LLM_USER_HOOK = "llm_user_turns"  # astra_verl.rollout.hooks.LLMUserTurnsHook: UserScript's turns, an LLM's words
OTHERWISE = "otherwise"  # UserScript.next: the user's "I know nothing else"


@dataclass
class UserScript:
    """When the scripted user speaks: the one rule the `scripted_user_turns` hook follows in RL and
    `eval envs`, and validation replays on a missing-value environment's golden conversation.

    After a turn without calls: with `answer_ends`, a turn holding an answer channel is the final
    answer (None: the episode ends); otherwise the next listed turn (its index), then `OTHERWISE`
    once where the user has such a line, then None."""

    listed: int  # the user turns listed after the prompt's
    otherwise: str | None = None
    answer_ends: bool = False
    delivered: int = 0
    said_otherwise: bool = False

    def next(self, content: str) -> int | str | None:
        if self.answer_ends and has_channel(content):
            return None
        if self.delivered < self.listed:
            self.delivered += 1
            return self.delivered - 1
        if self.otherwise is None or self.said_otherwise:
            return None
        self.said_otherwise = True
        return OTHERWISE


def _declining(env: EnvSpec) -> list[tuple[str, str]]:
    root = root_question(env.reward_target())
    if not is_inability(root.answer) or root.needs_tool:
        return [("sub_questions", f"the root {root.id!r} of a {env.variant.value} environment must expect a "
                 f"declared inability ('{INABILITY} CAPABILITY') and need no tool, not {root.answer!r}")]  # fmt: skip
    return []


def _answers_a_value(env: EnvSpec) -> list[tuple[str, str]]:
    root = root_question(env.reward_target())
    if is_inability(root.answer):
        return [("sub_questions", f"a {env.variant.value} environment's root {root.id!r} expects a declared "
                 "inability; only unanswerable and missing_function environments decline")]  # fmt: skip
    return []


def _unanswerable(env: EnvSpec) -> list[tuple[str, str]]:
    problems = _declining(env)
    if any(q.needs_tool for q in env.sub_questions):
        problems.append(("sub_questions", "an unanswerable environment has no tool sub-question (no step can be done)"))
    return problems


def _missing_function(env: EnvSpec) -> list[tuple[str, str]]:
    problems = _declining(env)
    if not any(q.needs_tool for q in env.sub_questions):
        problems.append(
            ("sub_questions", "a missing_function environment keeps the earlier steps' tool sub-questions; it has none")
        )
    return problems


def _no_tool(env: EnvSpec) -> list[tuple[str, str]]:
    problems = _answers_a_value(env)
    if any(q.needs_tool or q.depends_on for q in env.sub_questions):
        problems.append(("sub_questions", "a no_tool environment's sub-questions need no tool and depend on nothing"))
    return problems


def _golden_values(env: EnvSpec) -> list[Any]:
    first = {q.tool for q in env.sub_questions if q.needs_tool and not q.depends_on}
    values: list[Any] = []
    for t in env.tools:
        if t.name in first:
            for g in t.golden_calls:
                for v in g.args.values():
                    values += v if isinstance(v, list) else [v]
    return values


def _missing_value(env: EnvSpec) -> list[tuple[str, str]]:
    problems = _answers_a_value(env)
    user = env.user
    if user is None:  # the spec itself refuses this; kept for a clear message
        return [*problems, ("user", "a missing_value environment needs its scripted user")]
    if user.value.casefold() in env.question.casefold():
        problems.append(("question", f"the question still states the value the user holds ({user.value!r})"))
    if user.value not in user.reply:
        problems.append(("user.reply", f"the user's reply {user.reply!r} does not give the value {user.value!r}"))
    if user.value not in _golden_values(env):
        problems.append(("user.value", f"{user.value!r} is no argument of a first step's golden call"))
    return problems + _user_replay(env)


def _user_replay(env: EnvSpec) -> list[tuple[str, str]]:
    """The golden conversation's user turns, replayed with the row's own user (`UserScript` on the
    `interaction_kwargs` export writes): the question gets the reply, the final answer ends it."""
    kwargs = interaction_kwargs(env, {})
    script = UserScript(len(kwargs["turns"]), kwargs["otherwise"], kwargs["answer_ends"])
    asked = script.next(ask_message(env))
    if asked != 0 or kwargs["turns"][0] != env.user.reply:  # type: ignore[union-attr]
        return [("user", f"the golden question to the user got {asked!r}, not the user's reply")]
    if script.next(final_message(env)) is not None:
        return [("user", "the golden final answer did not end the episode (no answer channel?)")]
    return []


@dataclass(frozen=True)
class VariantRule:
    """What a variant means for the environment's checks and its episodes."""

    problems: Callable[[EnvSpec], list[tuple[str, str]]]  # (field, why) of what breaks the variant
    tool_shape: bool  # the trace's shape is checked (at least one tool node; scenario_type is its shape)
    user: bool  # a scripted user answers the agent's questions (its turns travel in the row)


VARIANTS: dict[Variant, VariantRule] = {
    Variant.ANSWERABLE: VariantRule(_answers_a_value, tool_shape=True, user=False),
    Variant.UNANSWERABLE: VariantRule(_unanswerable, tool_shape=False, user=False),
    Variant.MISSING_VALUE: VariantRule(_missing_value, tool_shape=True, user=True),
    # the scenario type describes the question asked, not the steps left once the last tool is gone
    Variant.MISSING_FUNCTION: VariantRule(_missing_function, tool_shape=False, user=False),
    Variant.NO_TOOL: VariantRule(_no_tool, tool_shape=False, user=False),
}


def variant_problems(env: EnvSpec) -> list[tuple[str, str]]:
    """(field, why) of every way `env` breaks its variant's rules (structure's `variant` rule)."""
    return VARIANTS[env.variant].problems(env)


class LLMUserConfig(StrictModel):
    """An LLM that words the user of missing-value rows (`--user-base-url/--user-model` of
    `export-parquet` and `eval envs`): WHEN the user speaks stays `UserScript`'s rule, WHAT it says
    at a listed turn is the model's reply (the hook `llm_user_turns`)."""

    section = "LLM user (--user-base-url, --user-model)"

    base_url: str = Field(min_length=1)  # an OpenAI-compatible endpoint (.../v1)
    model: str = Field(min_length=1)

    def describe(self) -> str:
        """The user's name in results and manifests (`scripted` is the other)."""
        return f"llm:{self.model}"


def interaction_kwargs(env: EnvSpec, default: dict[str, Any], user: LLMUserConfig | None = None) -> dict[str, Any]:
    """The hook configuration a row of `env` carries: the scripted user of a missing-value
    environment (so RL, `eval envs` and SFT run the same user), else `default`. With `user`, the
    missing-value row's user is worded by that LLM (`llm_user_turns`): its turns stay the scripted
    ones (they say when it speaks), and the row adds the endpoint and the facts the user holds."""
    if not VARIANTS[env.variant].user or env.user is None:
        return dict(default)
    scripted = {
        "name": SCRIPTED_USER_HOOK,
        "turns": env.user.turns(),
        "otherwise": env.user.otherwise,
        "answer_ends": True,
    }
    if user is None:
        return scripted
    return {
        **scripted,
        "name": LLM_USER_HOOK,
        "user_base_url": user.base_url,
        "user_model": user.model,
        "user_question": env.question,
        "user_missing": env.user.missing,
        "user_value": env.user.value,
    }


def ask_message(env: EnvSpec) -> str:
    """The golden demonstration's question to the user (no call, no channel)."""
    if env.user is None:
        raise ValueError(f"environment {env.id} ({env.variant.value}) has no scripted user to ask")
    return f"To look this up I need to know which one you mean. Which is {env.user.missing}?"


class VariantShares(StrictModel):
    """How many environments of each variant `generate` makes, or `export-parquet` keeps (shares
    summing to 1)."""

    section = "--variants"

    shares: dict[Variant, float] = Field(default_factory=lambda: {Variant.ANSWERABLE: 1.0})

    @model_validator(mode="after")
    def _sum_to_one(self) -> VariantShares:
        if any(v < 0 for v in self.shares.values()) or abs(sum(self.shares.values()) - 1) > 1e-6:
            raise ValueError(f"variant shares must be >= 0 and sum to 1, got {self.describe()}")
        return self

    @classmethod
    def parse(cls, text: str) -> VariantShares:
        """`mix` (the recommended mix, `MIX`) or `answerable=0.6,unanswerable=0.1,...`."""
        if text.strip() == "mix":
            return cls(shares=dict(MIX))
        shares: dict[Variant, float] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, sep, share = part.partition("=")
            try:
                shares[Variant(name.strip())] = float(share)
            except ValueError as exc:
                raise ValueError(
                    f"--variants {text!r}: {part!r} is not VARIANT=SHARE with VARIANT one of "
                    f"{[v.value for v in Variant]} (or write 'mix')"
                ) from exc
        return cls(shares=shares)

    def describe(self) -> str:
        return ",".join(f"{v.value}={s:g}" for v, s in self.shares.items())

    def pick(self, draw: float) -> Variant:
        """The variant a uniform draw in [0, 1) falls on (shares in `Variant` order)."""
        total = 0.0
        for variant in Variant:
            total += self.shares.get(variant, 0.0)
            if draw < total:
                return variant
        return max(self.shares, key=self.shares.__getitem__)


# The recommended mix (docs/training.md): most environments still ask for calls and an answer.
MIX = {
    Variant.ANSWERABLE: 0.6,
    Variant.UNANSWERABLE: 0.1,
    Variant.MISSING_VALUE: 0.1,
    Variant.MISSING_FUNCTION: 0.1,
    Variant.NO_TOOL: 0.1,
}


def select_shares(envs: Iterable[EnvSpec], shares: VariantShares, seed: int = 0) -> list[EnvSpec]:
    """The largest subset of `envs` whose variants come in `shares` (each variant's environments
    taken in an order fixed by `seed` and their ids; a variant of share 0 left out). ValueError
    when a variant with a share has no environment."""
    groups: dict[Variant, list[EnvSpec]] = {v: [] for v in Variant}
    for env in envs:
        groups[env.variant].append(env)
    wanted = {v: s for v, s in shares.shares.items() if s > 0}
    empty = [v.value for v in wanted if not groups[v]]
    if empty:
        raise ValueError(
            f"--variants {shares.describe()}: the environments hold no {empty}; make them (procedural: "
            "python -m env_registry generate --variants mix; a store of synthesized or imported environments: "
            "python -m env_registry --store STORE derive-variants) or give those variants no share"
        )
    total = min(len(groups[v]) / s for v, s in wanted.items())
    rank = lambda e: hashlib.sha256(f"{seed}/variants/{e.id}".encode()).hexdigest()  # noqa: E731
    return [e for v, s in wanted.items() for e in sorted(groups[v], key=rank)[: int(total * s + 1e-9)]]
