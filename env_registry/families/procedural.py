"""The procedural family: seeded, LLM-free environments (the embedded default).

Each environment gets its own invented world (`_world.build_world`): countries, cities,
companies, people, products, events, road distances and exchange rates. A task is a walk over
the world's relations ("the maker of the Zentra X2" -> "its headquarters city" -> "that
city's country") ending in a measured attribute, optionally transformed (unit conversion,
currency conversion, weekday, age) or joined with a second branch (distance, percentage
change, density, statistics, durations). Every step is one sub-question answered by one tool
call.

The family, bottom-up:
- `_world`: the world model and its entity types;
- `_values`: answer values and the exact arithmetic deriving them;
- `_vocabulary`: what can be asked, as table rows carrying their behaviour (record tables with
  their fields, measured attributes, relations, post-transforms);
- `tool_templates` and `_tools`: the tools, real Python modules rendered with a world's data;
- `_tasks`: the scenario builders and the domains;
- this module: the generation loop and the assembly into `EnvSpec`s.

Answers are derived from the world model, not by running the tool code: integers and dates
exactly, decimals with sympy rationals, rounded half-up, with rounding ties rejected (a
float-based tool could round a tie either way). The tool sources compute the same values
independently; `python -m env_registry validate` (golden-call replay in the sandbox) and the
tests check that both agree.

Determinism: environment i of seed s is drawn from `Random("procedural/v1/{s}/{i}/{attempt}")`,
so `generate(n, s)` is a prefix of `generate(n + k, s)` and independent of the machine.

Domains (`DOMAINS`): geography, finance, people, retail, climate, events. Scenario types: all
four (see `env_registry.shape`); hops (longest tool chain) from 1 to `max_hops`.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal

from env_registry.families._tasks import DOMAINS, Builder, Task, multi_hop, parallel_single_hop, single_hop
from env_registry.families._values import Retry, Value, fmt, rule_for
from env_registry.families._variants import PROCEDURAL_MAKERS
from env_registry.families._vocabulary import Vocabulary
from env_registry.families._world import build_world
from env_registry.shape import classify
from env_registry.spec import (
    AnswerType,
    EnvSpec,
    GoldenCall,
    Provenance,
    ScenarioType,
    SubQuestion,
    ToolSpec,
    Variant,
)
from env_registry.variants import VariantShares

GENERATOR = "procedural"
FAMILY_VERSION = "v1"
SCENARIO_TYPES = tuple(ScenarioType)
_ATTEMPTS = 200
_BUILDERS = {
    ScenarioType.SINGLE_HOP: single_hop,
    ScenarioType.MULTI_HOP: multi_hop,
    ScenarioType.PARALLEL_SINGLE_HOP: parallel_single_hop,
}
# The answer type of each kind of value a task's final answer is (its channel's type).
_ANSWER_TYPES: dict[type, AnswerType] = {
    int: AnswerType.NUMBER,
    Decimal: AnswerType.NUMBER,
    dt.date: AnswerType.DATE,
    str: AnswerType.NAME,
}


def _with_unit(v: Value, unit: str) -> str:
    return fmt(v) + unit if unit == "%" else f"{fmt(v)} {unit}".strip()


# -- assembly ---------------------------------------------------------------------------


def _assemble(b: Builder, task: Task, stype: ScenarioType, seed: int, index: int | str) -> EnvSpec:
    names = {key: kind.name for key, kind in b.kinds.items()}
    golden: dict[str, list[GoldenCall]] = {key: [] for key in b.kinds}
    for n in b.nodes:
        if n.kind is None:
            continue
        same = [g for g in golden[n.kind] if g.args == n.args and g.expected == fmt(n.value)]
        if same:
            same[0].answers.append(n.id)  # one call answers several sub-questions
        else:
            golden[n.kind].append(GoldenCall(args=n.args, expected=fmt(n.value), answers=[n.id]))
    tools = []
    for key, kind in b.kinds.items():
        d = kind.draft()
        tools.append(
            ToolSpec(
                name=d.name,
                description=d.description,
                parameters=json.loads(json.dumps(d.parameters)),
                source=d.source,
                golden_calls=golden[key],
                call_key=kind.call_key(),
            )
        )
    subs = [
        SubQuestion(
            id=n.id,
            question=n.question,
            answer=fmt(n.value),
            depends_on=list(n.deps),
            needs_tool=n.kind is not None,
            tool=names[n.kind] if n.kind else None,
            hop_level=n.hop,
            match=rule_for(n.value, n.rivals),
        )
        for n in b.nodes
    ]
    tool_nodes = [n for n in b.nodes if n.kind]
    hops = max(n.hop for n in tool_nodes)
    if classify(len(tool_nodes), hops) is not stype:
        raise Retry(f"built {classify(len(tool_nodes), hops)} for {stype}")
    return EnvSpec.create(
        domain=b.domain.name,
        question=task.question,
        final_answer=_with_unit(task.final, task.unit),
        scenario_type=stype,
        sub_questions=subs,
        tools=tools,
        final_match=rule_for(task.final, task.rivals),
        answer_type=_ANSWER_TYPES[type(task.final)],
        provenance=Provenance(generator=GENERATOR, seed=seed, source=f"{GENERATOR}:{FAMILY_VERSION}:{seed}:{index}"),
    )


def _one(
    seed: int, index: int | str, max_hops: int, domains: Sequence[str], types: Sequence[ScenarioType], vocab: Vocabulary
) -> EnvSpec:
    # Domain, type and depth are drawn once per index, so a combination that often needs redraws
    # is not under-represented; after half the attempts the depth is redrawn too (a domain's
    # relations may not allow chains as long as max_hops).
    pick = random.Random(f"{GENERATOR}/{FAMILY_VERSION}/{seed}/{index}")
    domain, stype = pick.choice(list(domains)), pick.choice(list(types))
    multi = stype in (ScenarioType.MULTI_HOP, ScenarioType.PARALLEL_MULTI_HOP)
    depth = pick.randint(2, max_hops) if multi else 1
    for attempt in range(_ATTEMPTS):
        rng = random.Random(f"{GENERATOR}/{FAMILY_VERSION}/{seed}/{index}/{attempt}")
        if multi and attempt >= _ATTEMPTS // 2:
            depth = rng.randint(2, max_hops)
        b = Builder(build_world(rng), rng, DOMAINS[domain], vocab)
        build = _BUILDERS.get(stype) or rng.choice(DOMAINS[domain].parallel_multi)
        try:
            task = build(b, depth)
            return _assemble(b, task, stype, seed, index)
        except Retry:
            continue
    raise RuntimeError(
        f"procedural generator found no {stype.value} task in {domain} for seed {seed}, index {index} in "
        f"{_ATTEMPTS} attempts (max_hops {max_hops}); this is a bug"
    )


def iter_generate(
    n: int,
    seed: int = 0,
    max_hops: int = 4,
    domains: Sequence[str] | None = None,
    *,
    scenario_types: Sequence[ScenarioType | str] | None = None,
    variants: VariantShares | None = None,
) -> Iterator[EnvSpec]:
    """Yield `n` distinct environments (see `generate`)."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if max_hops < 1:
        raise ValueError(f"max_hops must be >= 1, got {max_hops}")
    domains = list(domains or DOMAINS)
    unknown = [d for d in domains if d not in DOMAINS]
    if unknown:
        raise ValueError(f"unknown domain(s) {unknown}; the procedural family has {list(DOMAINS)}")
    types = [ScenarioType(t) for t in (scenario_types or SCENARIO_TYPES)]
    if max_hops == 1:
        multi = [t for t in types if t in (ScenarioType.MULTI_HOP, ScenarioType.PARALLEL_MULTI_HOP)]
        types = [t for t in types if t not in multi]
        if not types:
            raise ValueError(f"{[t.value for t in multi]} need max_hops >= 2")
    vocab = Vocabulary.build()
    shares = variants or VariantShares()
    seen: set[str] = set()
    index = 0
    while len(seen) < n:
        env = _of_variant(shares, seed, index, lambda i: _one(seed, i, max_hops, domains, types, vocab))
        index += 1
        if env.id not in seen:
            seen.add(env.id)
            yield env


def generate(
    n: int,
    seed: int = 0,
    max_hops: int = 4,
    domains: Sequence[str] | None = None,
    *,
    scenario_types: Sequence[ScenarioType | str] | None = None,
    variants: VariantShares | None = None,
) -> list[EnvSpec]:
    """`n` distinct procedural environments, deterministic per seed (same seed: same envs, same
    ids, in the same order). `max_hops` bounds the longest tool chain; `domains` is a subset of
    `DOMAINS`; `scenario_types` restricts the four types (default: all, drawn uniformly);
    `variants` the shares of each variant (default: answerable only, as before variants)."""
    return list(iter_generate(n, seed, max_hops, domains, scenario_types=scenario_types, variants=variants))


def _of_variant(shares: VariantShares, seed: int, index: int, one: Callable[[int | str], EnvSpec]) -> EnvSpec:
    """Environment `index` in the variant its own draw gives. An answerable one is exactly the
    environment of `index` without variants (ids do not change); another is made from answerable
    environments drawn for it until one can carry the variant (a single-hop question has no
    missing function)."""
    draw = random.Random(f"{GENERATOR}/{FAMILY_VERSION}/{seed}/{index}/variant").random()
    variant = shares.pick(draw) if set(shares.shares) != {Variant.ANSWERABLE} else Variant.ANSWERABLE
    if variant is Variant.ANSWERABLE:
        return one(index)
    for attempt in range(_ATTEMPTS):
        made = PROCEDURAL_MAKERS[variant](one(f"{index}/{variant.value}/{attempt}"))
        if made is not None:
            return made
    raise RuntimeError(
        f"procedural generator made no {variant.value} environment for seed {seed}, index {index} in {_ATTEMPTS} "
        "attempts (the domains or scenario types allowed may not carry it: missing_value needs single- or "
        "multi-hop questions, missing_function multi-hop ones, no_tool comparisons)"
    )
