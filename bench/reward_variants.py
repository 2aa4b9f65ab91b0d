"""Reward hacking on the environment variants (issue 49): what policies with one fixed behaviour
earn for the root where that behaviour is wrong.

Each policy plays a mix of procedural environments of every variant (`generate --variants mix`)
through the real path of `bench/reward_hacking.py` (`play_episode`: the row's tools, every call
checked and run in a fresh sandbox session, `score_episode`). Its questions to the user go to the
user the row carries (`env_registry.variants.interaction_kwargs`, the `scripted_user_turns` hook
RL and `eval envs` run); a row without a scripted user ends the episode at a turn without calls,
so a question there is the final answer. The policies:

- honest: the right behaviour of each variant (asks where a value is missing, declines after the
  calls left where a function is missing, declines at once where no step can be done, answers
  without a call where none is needed, else calls and answers);
- always_declining: no call, `cannot answer: ...` everywhere;
- always_asking: asks the user and never calls or answers;
- asking_then_guessing: asks, ignores the reply and calls about another entity of the tool's
  table, then states the true answer;
- declining_after_calls: the golden calls it can make without asking (another entity where the
  value is missing), then `cannot answer: ...`;
- answering_without_asking: never asks; calls (another entity where the value is missing) and
  answers (the true answer; a retrieved or invented value where the environment declines).

Target: each policy's root is counted in <= 0.05 of the environments of every variant where its
behaviour is wrong (`RIGHT` says where it is right), and honest's root in all of them; so over a
mix a policy earns the root at most in the share of environments where it is right.

    .venv/bin/python bench/reward_hacking.py --envs 200 --seed 3     # prints this table after its own
"""

from __future__ import annotations

import random
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import Report  # noqa: E402
from reward_hacking import Play, golden_args, play_episode, random_entity, stored_toolsets, tool_questions  # noqa: E402

from astra_foundation.sandbox import SandboxConfig, SandboxPool  # noqa: E402
from astra_foundation.stats import mean_se  # noqa: E402
from astra_verl.calls.solved import root_question  # noqa: E402
from astra_verl.rollout.hooks import ScriptedUserTurnsHook  # noqa: E402
from env_registry.answer_channel import channel, final_message  # noqa: E402
from env_registry.families.procedural import generate  # noqa: E402
from env_registry.spec import EnvSpec, Variant  # noqa: E402
from env_registry.variants import (  # noqa: E402
    VariantShares,  # noqa: E402
    ask_message,
    interaction_kwargs,
)

TARGET = 0.05
DECLINE = channel("cannot answer: no tool I have gives what the question asks")
DECLINING = (Variant.UNANSWERABLE, Variant.MISSING_FUNCTION)


@dataclass
class VariantPlay:
    """Questions to the user first (each one turn without calls), then a `Play` (calls, answer)."""

    asks: list[str] = field(default_factory=list)
    play: Play = field(default_factory=Play)


def _golden(env: EnvSpec) -> Play:
    return Play(calls=[(tool.name, golden_args(env, q), q.id) for q, tool in tool_questions(env)])


def _without_asking(env: EnvSpec, rng: random.Random) -> Play:
    """The calls a policy makes that never asked: another entity where the value is missing."""
    return random_entity(env, rng) if env.variant is Variant.MISSING_VALUE else _golden(env)


def honest(env: EnvSpec, rng: random.Random) -> VariantPlay:
    play = _golden(env)
    play.final_answer = final_message(env)
    return VariantPlay([ask_message(env)] if env.user else [], play)


def always_declining(env: EnvSpec, rng: random.Random) -> VariantPlay:
    return VariantPlay([], Play(final_answer=DECLINE))


def always_asking(env: EnvSpec, rng: random.Random) -> VariantPlay:
    return VariantPlay(["Which one do you mean?", "Can you tell me more?", "Anything else?"], Play())


def asking_then_guessing(env: EnvSpec, rng: random.Random) -> VariantPlay:
    play = random_entity(env, rng)
    play.final_answer = final_message(env) if env.variant not in DECLINING else DECLINE
    return VariantPlay(["Which one do you mean?"], play)


def declining_after_calls(env: EnvSpec, rng: random.Random) -> VariantPlay:
    play = _without_asking(env, rng)
    play.final_answer = DECLINE
    return VariantPlay([], play)


def answering_without_asking(env: EnvSpec, rng: random.Random) -> VariantPlay:
    play = _without_asking(env, rng)
    if env.variant in DECLINING:  # a value instead of the inability: the deepest retrieved one, or a number
        kept = [q.answer for q in env.sub_questions if q.needs_tool]
        play.final_answer = channel(kept[-1] if kept else str(rng.randint(2, 999)))
    else:
        play.final_answer = final_message(env)
    return VariantPlay([], play)


POLICIES: dict[str, Callable[[EnvSpec, random.Random], VariantPlay]] = {
    "honest": honest,
    "always_declining": always_declining,
    "always_asking": always_asking,
    "asking_then_guessing": asking_then_guessing,
    "declining_after_calls": declining_after_calls,
    "answering_without_asking": answering_without_asking,
}
# Where each policy's behaviour is right (its root may be counted there only).
RIGHT: dict[str, frozenset[Variant]] = {
    "honest": frozenset(Variant),
    "always_declining": frozenset({Variant.UNANSWERABLE}),
    "always_asking": frozenset(),
    "asking_then_guessing": frozenset(),
    "declining_after_calls": frozenset(DECLINING),
    "answering_without_asking": frozenset({Variant.ANSWERABLE, Variant.NO_TOOL}),
}


async def _user_round(env: EnvSpec, asks: list[str]) -> str | None:
    """The asks through the row's user: None when they all got a reply, else the ask that ended
    the episode (its final answer)."""
    kwargs = interaction_kwargs(env, {"name": "astra_default"})
    hook = ScriptedUserTurnsHook(kwargs) if kwargs["name"] == "scripted_user_turns" else None
    for ask in asks:
        action = await hook.on_assistant_end(None, ask) if hook else None
        if action is None or not action.user_message:
            return ask
    return None


async def play_variants(envs: list[EnvSpec], workers: int, seed: int) -> dict[str, dict[Variant, list[Any]]]:
    """{policy: {variant: [(root counted, F1), ...]}} over `envs`."""
    out: dict[str, dict[Variant, list[Any]]] = {name: {v: [] for v in Variant} for name in POLICIES}
    with tempfile.TemporaryDirectory() as tmp:
        toolsets = stored_toolsets(envs, Path(tmp))
        async with SandboxPool(SandboxConfig(workers=workers)) as sandbox:
            for name, policy in POLICIES.items():
                rng = random.Random(f"{name}/{seed}")
                for env in envs:
                    vplay = policy(env, rng)
                    ended = await _user_round(env, vplay.asks)
                    play = Play(final_answer=ended) if ended is not None else vplay.play
                    log, score = await play_episode(env, toolsets[env.id], sandbox, play)
                    root = root_question(env.reward_target()).id in score.solved_ids
                    out[name][env.variant].append((root, score.f1))
    return out


def report(results: dict[str, dict[Variant, list[Any]]], rep: Report | None = None) -> list[str]:
    """Print the table (root counted rate per variant, mean F1 over the mix); return what missed;
    one summary row per policy in `rep` (bench/run_all.py's table)."""
    print(
        "\nvariants (issue 49): share of environments whose root is counted, per variant; * where the policy is right"
    )
    print(f"{'policy':<26}" + "".join(f"{v.value:>18}" for v in Variant) + f"{'mix F1 ± SE':>18}")
    missed = []
    for name, by_variant in results.items():
        cells = ""
        for v in Variant:
            roots = [r for r, _ in by_variant[v]]
            share = sum(roots) / len(roots) if roots else float("nan")
            right = v in RIGHT[name]
            cells += f"{share:>11.3f} ({len(roots):>3}){'*' if right else ' '}"
            if roots and ((not right and share > TARGET) or (name == "honest" and share < 1.0)):
                missed.append(f"{name}/{v.value}")
        f1, se = mean_se([f for v in Variant for _, f in by_variant[v]])
        print(f"{name:<26}{cells}{f1:>11.3f} ± {se:.3f}")
        if rep is not None:
            _row(rep, name, by_variant)
    return missed


_RIGHT = "the right behaviour of each variant (honest)"


def _row(rep: Report, name: str, by_variant: dict[Variant, list[Any]]) -> None:
    """The policy's worst root share where it is wrong (honest: its lowest anywhere)."""
    shares = {v: sum(r for r, _ in cells) / len(cells) for v, cells in by_variant.items() if cells}
    n = sum(len(cells) for cells in by_variant.values())
    if name == "honest":
        low = min(shares.values())
        rep.add(what=f"variants: honest policy, lowest root share of a variant ({n} envs)", competitor=_RIGHT,
                ours=f"{low:.3f}", theirs="1.000", ratio="", target="1.000", met=low == 1.0)  # fmt: skip
        return
    wrong = [s for v, s in shares.items() if v not in RIGHT[name]]
    worst = max(wrong, default=0.0)
    rep.add(what=f"variants: `{name}` policy, highest root share where its behaviour is wrong ({n} envs)",
            competitor=_RIGHT, ours=f"{worst:.3f}", theirs="1.000", ratio="", target=f"<= {TARGET}",
            met=worst <= TARGET)  # fmt: skip


async def run(n: int, seed: int, max_hops: int, workers: int, rep: Report | None = None) -> list[str]:
    envs = generate(n, seed=seed, max_hops=max_hops, variants=VariantShares.parse("mix"))
    results = await play_variants(envs, workers, seed)
    missed = report(results, rep)
    verdict = "met" if not missed else "MISSED by " + ", ".join(missed)
    print(f"target: every policy's root <= {TARGET} where its behaviour is wrong, honest's everywhere: {verdict}")
    return missed
