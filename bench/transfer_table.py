"""The transfer table's arithmetic (bench/transfer.py): paired differences over entries, BFCL's
single-turn aggregates as linear weights over categories, the markdown table and the verdicts.

Pure functions only (no model, no server), so tests/bench/test_transfer.py can check them.

Paired: each BFCL entry (or held-out environment) is scored by both models, so the difference of
two accuracies is the mean of per-entry differences d_i = trained_i - base_i, and its standard
error is the sample SD of the d_i over sqrt(n). An aggregate is a fixed linear combination of
category means (weights below), so its difference is the same combination of the category
differences and its SE is sqrt(sum w_c^2 SE_c^2) (the categories are independent samples).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from astra_foundation.stats import format_mean_se, mean_se
from env_registry.answer_channel import DECLINE_PROSE, INABILITY

SIMPLE = ("simple_python", "simple_java", "simple_javascript")
NON_LIVE_OTHER = ("multiple", "parallel", "parallel_multiple")
LIVE_AST = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
IRRELEVANCE = ("irrelevance", "live_irrelevance")


@dataclass
class Row:
    """One line of the table: a category (or split, or aggregate) and each model's score on it."""

    name: str
    n: int
    scores: dict[str, float]  # model label -> mean score
    diffs: dict[str, tuple[float, float]] = field(default_factory=dict)  # trained label -> (mean diff, SE)
    kind: str = "category"  # category | aggregate | heldout | multi_turn


def paired_row(name: str, per_model: Mapping[str, Mapping[str, float]], base: str, kind: str = "category") -> Row:
    """`per_model`: label -> {entry id -> score}. The entries every model scored are paired;
    each non-base model gets (mean of trained - base, SE of that mean)."""
    ids = sorted(set.intersection(*(set(v) for v in per_model.values()))) if per_model else []
    scores = {m: (sum(v[i] for i in ids) / len(ids) if ids else float("nan")) for m, v in per_model.items()}
    diffs = {m: mean_se([v[i] - per_model[base][i] for i in ids]) for m, v in per_model.items() if m != base and ids}
    return Row(name, len(ids), scores, diffs, kind)


def aggregate_weights(sizes: Mapping[str, int]) -> dict[str, dict[str, float]]:
    """BFCL's single-turn aggregates as weights over categories (`generate_leaderboard_csv`):
    Non-Live Simple = mean of the three simple ones; Non-Live overall = mean of Simple, multiple,
    parallel, parallel_multiple; Live overall = live AST categories weighted by BFCL's full entry
    counts `sizes`; Irrelevance = mean of irrelevance, live_irrelevance; Relevance = live_relevance;
    Single-turn overall = BFCL's overall (weights 10 non-live, 10 live, 10 irrelevance, 30
    multi-turn, 40 agentic) restricted to its single-turn parts: the mean of the first three."""
    simple = {c: 1 / 3 for c in SIMPLE}
    non_live = {c: w / 4 for c, w in simple.items()} | {c: 1 / 4 for c in NON_LIVE_OTHER}
    total = sum(sizes[c] for c in LIVE_AST)
    live = {c: sizes[c] / total for c in LIVE_AST}
    irrelevance = {c: 1 / 2 for c in IRRELEVANCE}
    overall: dict[str, float] = {}
    for part in (non_live, live, irrelevance):
        for c, w in part.items():
            overall[c] = overall.get(c, 0.0) + w / 3
    return {
        "Non-Live Simple": simple,
        "Non-Live overall": non_live,
        "Live overall": live,
        "Irrelevance": irrelevance,
        "Relevance": {"live_relevance": 1.0},
        "Single-turn overall": overall,
    }


def aggregate_row(name: str, weights: Mapping[str, float], rows: Mapping[str, Row]) -> Row | None:
    """The aggregate of category rows `rows` under `weights`; None when a member did not run (BFCL
    would count it as 0: the row would not be its aggregate)."""
    if any(c not in rows for c in weights):
        return None
    members = [rows[c] for c in weights]
    models = list(members[0].scores)
    scores = {m: sum(w * rows[c].scores[m] for c, w in weights.items()) for m in models}
    diffs = {}
    for m in members[0].diffs:
        mean = sum(w * rows[c].diffs[m][0] for c, w in weights.items())
        var = sum((w * rows[c].diffs[m][1]) ** 2 for c, w in weights.items() if not math.isnan(rows[c].diffs[m][1]))
        diffs[m] = (mean, math.sqrt(var))
    return Row(name, sum(r.n for r in members), scores, diffs, "aggregate")


def bfcl_rows(
    per_model: Mapping[str, Mapping[str, Mapping[str, float]]], base: str, sizes: Mapping[str, int]
) -> list[Row]:
    """`per_model`: label -> category -> {id -> 1.0 valid / 0.0 not}. Category rows in BFCL's
    order, then the aggregates whose members all ran."""
    categories = [c for c in (*SIMPLE, *NON_LIVE_OTHER, "irrelevance", *LIVE_AST, "live_irrelevance", "live_relevance")]
    cats = {}
    for c in categories:
        if all(c in v for v in per_model.values()):
            cats[c] = paired_row(c, {m: v[c] for m, v in per_model.items()}, base)
    aggs = [aggregate_row(n, w, cats) for n, w in aggregate_weights(sizes).items()]
    return [*cats.values(), *(a for a in aggs if a is not None)]


def _cell(value: float, scale: float) -> str:
    return "n/a" if math.isnan(value) else f"{scale * value:.1f}"


def _diff(cell: tuple[float, float], scale: float) -> str:
    return format_mean_se(cell, "+.1f", scale=scale)


def format_table(rows: Sequence[Row], base: str, labels: Mapping[str, str]) -> str:
    """Markdown. BFCL rows in % (accuracy), held-out rows as F1 x 100, so every column reads alike."""
    models = list(rows[0].scores) if rows else []
    trained = [m for m in models if m != base]
    head = [
        "category",
        "n",
        *(labels.get(m, m) for m in models),
        *(f"{labels.get(m, m)} − {labels.get(base, base)} ± SE" for m in trained),
    ]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for r in rows:
        name = f"**{r.name}**" if r.kind == "aggregate" else r.name
        cells = [name, str(r.n), *(_cell(r.scores[m], 100) for m in models)]
        cells += [_diff(r.diffs.get(m, (float("nan"), float("nan"))), 100) for m in trained]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def verdicts(rows: Sequence[Row], trained: str, label: str) -> list[str]:
    """The issue's targets for one trained model: BFCL single-turn overall raised beyond 2 SE; no
    BFCL category (nor aggregate) lowered beyond 2 SE."""
    out = []
    overall = next((r for r in rows if r.name == "Single-turn overall"), None)
    if overall is None or trained not in overall.diffs:
        out.append(f"- {label}: single-turn overall n/a (a category did not run)")
    else:
        mean, se = overall.diffs[trained]
        met = mean > 2 * se
        out.append(
            f"- {label}, BFCL single-turn overall raised beyond 2 SE: {100 * mean:+.1f} ± {100 * se:.1f} "
            f"points: {'met' if met else 'MISSED'}"
        )
    lowered = [
        r
        for r in rows
        if r.kind in ("category", "aggregate") and trained in r.diffs and r.diffs[trained][0] < -2 * r.diffs[trained][1]
    ]
    if lowered:
        names = ", ".join(
            f"{r.name} {100 * r.diffs[trained][0]:+.1f} ± {100 * r.diffs[trained][1]:.1f}" for r in lowered
        )
        out.append(f"- {label}, no BFCL category lowered beyond 2 SE: MISSED ({names})")
    else:
        out.append(f"- {label}, no BFCL category lowered beyond 2 SE: met")
    return out


# What a model did on an entry, whatever BFCL's checker says of it: a score tells that the other
# half of tool use changed something, these counts tell what (asked where it should have called?).
BEHAVIOURS = ("call", "ask", "decline", "malformed call", "other text", "error")
GROUPS = ("should call", "should not call")


def behaviour(status: str, result: object) -> str:
    """One of BEHAVIOURS for a single-turn result: decoded calls (a list) are a call; text that
    declares an inability (the answer channel's words, or the golden answer's prose before them) a decline; text holding a call block BFCL
    could not decode a malformed call; text ending in a question an ask."""
    if status != "scored":
        return "error"
    if isinstance(result, list):
        return "call"
    text = str(result or "")
    if INABILITY in text.casefold() or DECLINE_PROSE.casefold() in text.casefold():
        return "decline"
    if "<tool_call>" in text or '"arguments"' in text:
        return "malformed call"
    return "ask" if text.rstrip().endswith("?") else "other text"


def behaviour_counts(entries: Sequence[tuple[str, str, object]]) -> dict[str, dict[str, int]]:
    """(category, status, result) entries -> group -> behaviour -> count; an irrelevance entry
    should not call, every other single-turn entry should."""
    out = {g: dict.fromkeys(BEHAVIOURS, 0) for g in GROUPS}
    for category, status, result in entries:
        out[GROUPS[category in IRRELEVANCE]][behaviour(status, result)] += 1
    return out


def format_behaviours(counts: Mapping[str, Mapping[str, Mapping[str, int]]], labels: Mapping[str, str]) -> str:
    """Markdown: one line per model and group, each behaviour as count (% of the group)."""
    lines = ["| model | entries | n | " + " | ".join(BEHAVIOURS) + " |", "|---|---|---:|" + "---:|" * len(BEHAVIOURS)]
    for model, groups in counts.items():
        for group in GROUPS:
            n = sum(groups[group].values())
            cells = [f"{groups[group][b]} ({100 * groups[group][b] / n:.0f}%)" if n else "0" for b in BEHAVIOURS]
            lines.append(f"| {labels.get(model, model)} | {group} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def build_rows(results: dict[str, dict], style: str, base: str, sizes: dict[str, int]) -> list[Row]:
    """BFCL single-turn rows of one call style, then multi-turn and held-out rows (paired)."""
    rows = bfcl_rows({m: r["bfcl"][style] for m, r in results.items()}, base, sizes)
    multi = {m: {i: v for cat in r["multi"].values() for i, v in cat.items()} for m, r in results.items()}
    if all(multi.values()):
        rows.append(paired_row("BFCL multi-turn (first prompt fits)", multi, base, "multi_turn"))
    splits = next(iter(results.values()))["heldout"]
    for split in splits:
        # the train split is measured too (what SFT fitted), but it is not held out: say so in its name
        name = "train environments (F1, seen in SFT)" if split == "train" else f"held-out: {split} (F1)"
        rows.append(paired_row(name, {m: r["heldout"][split] for m, r in results.items()}, base, "heldout"))
    return rows


def irrelevance_verdict(rows: Sequence[Row], label: str, reference: str, model: str) -> str:
    """Issue 49's first target for `model`: irrelevance within 2 SE of base while Non-Live Simple
    rises beyond 2 SE (the SEs are the rows' own: entries, or entries and seeds)."""
    by_name = {r.name: r for r in rows}
    if reference != "base" or not all(n in by_name for n in ("Irrelevance", "Non-Live Simple")):
        return f"- {label}, irrelevance and Non-Live Simple against base: n/a (reference {reference})"
    irr, simple = by_name["Irrelevance"].diffs[model], by_name["Non-Live Simple"].diffs[model]
    met = abs(irr[0]) <= 2 * irr[1] and simple[0] > 2 * simple[1]
    return (
        f"- {label}, irrelevance within 2 SE of base ({100 * irr[0]:+.1f} ± {100 * irr[1]:.1f}) while Non-Live "
        f"Simple rises beyond 2 SE ({100 * simple[0]:+.1f} ± {100 * simple[1]:.1f}): {'met' if met else 'MISSED'}"
    )


def other_half_verdicts(
    rows: list[Row], results: dict[str, dict], label: str, reference: str, answerable: Sequence[str], model: str
) -> list[str]:
    """Issue 49's targets for the model trained with the other half: irrelevance within 2 SE of base
    while Non-Live Simple rises beyond 2 SE; held-out F1 on the `answerable` splits not below SFT's
    by more than 2 SE.
    `model`: the key of that model in `results` and the rows."""
    out = [irrelevance_verdict(rows, label, reference, model)]
    if "sft" not in results:
        return [*out, f"- {label}, held-out F1 against plain SFT: n/a (SFT not measured)"]
    for split in answerable:
        if split not in results["sft"]["heldout"]:
            out.append(f"- {label}, held-out {split} F1 against plain SFT: n/a (held-out not run)")
            continue
        per = {m: results[m]["heldout"][split] for m in ("sft", model)}
        out.append(heldout_verdict(label, split, paired_row(split, per, "sft", "heldout").diffs[model]))
    return out


def heldout_verdict(label: str, split: str, diff: tuple[float, float], how: str = "") -> str:
    """Issue 49's held-out target on one answerable split: the model's F1 - plain SFT's (mean, SE)
    not below zero by more than 2 SE. `how`: where the SE comes from, when not one seed's entries."""
    mean, se = diff
    where = f" ({how})" if how else ""
    return (
        f"- {label}, held-out {split} F1 not below plain SFT's beyond 2 SE{where}: {100 * mean:+.1f} ± {100 * se:.1f}: "
        + ("met" if mean >= -2 * se else "MISSED")
    )


def worlds_control_verdicts(
    results: dict[str, dict], labels: Mapping[str, str], answerable: Sequence[str], model: str, control: str
) -> list[str]:
    """Issue 49's confound: the other half's extra demonstrations also come from unseen worlds. Per
    `answerable` split, held-out F1 of `model` (SFT + the other half) - `control` (SFT + as many
    answerable demonstrations of the same worlds), paired over environments, and of the control -
    plain SFT where SFT was measured; which explanation of the rise over SFT the numbers support."""
    out = []
    for split in answerable:
        if not all(split in results[m]["heldout"] for m in (model, control)):
            out.append(f"- {labels[model]} against {labels[control]}, held-out {split} F1: n/a (held-out not run)")
            continue
        half = _paired_diff(results, split, model, control)
        sft_ran = split in results.get("sft", {}).get("heldout", {})
        worlds = _paired_diff(results, split, control, "sft") if sft_ran else None
        against_sft = "n/a (SFT not measured)" if worlds is None else format_mean_se(worlds, "+.1f", scale=100)
        out.append(
            f"- held-out {split} F1, {labels[model]} − {labels[control]}: {format_mean_se(half, '+.1f', scale=100)}; "
            f"{labels[control]} − plain SFT: {against_sft}: supports {_explanation(half, worlds)}"
        )
    return out


def _paired_diff(results: dict[str, dict], split: str, model: str, reference: str) -> tuple[float, float]:
    per = {m: results[m]["heldout"][split] for m in (reference, model)}
    return paired_row(split, per, reference, "heldout").diffs.get(model, (float("nan"), float("nan")))


def _explanation(half: tuple[float, float], worlds: tuple[float, float] | None) -> str:
    """Which explanation a split's two paired differences (each mean, SE) support, 2 SE the bar."""
    if half[0] > 2 * half[1]:
        return "the other half (it beats the control of the same worlds beyond 2 SE)"
    if half[0] < -2 * half[1]:
        return "more worlds (the control beats the other half beyond 2 SE: the other half costs answerable F1)"
    if worlds is not None and worlds[0] > 2 * worlds[1]:
        return "more worlds (the control rises over plain SFT beyond 2 SE; the other half adds nothing beyond 2 SE)"
    return "neither separately (no difference beyond 2 SE: the SEs do not separate the two)"
