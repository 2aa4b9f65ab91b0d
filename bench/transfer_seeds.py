"""bench/transfer.py across SFT seeds: one run folder's reports (`transfer.json`, SFT seed 0, and
`transfer-train<N>.json`, `--train-seed N`) in one table, with the seed-to-seed spread in its SEs.

    .venv/bin/python bench/transfer_seeds.py --out runs/transfer49      # the seeds' reports the folder holds
    .venv/bin/python bench/transfer_seeds.py --out runs/transfer49 --seeds 0,1,2 -- --per-category 20 \
        --multi-turn-per-category 0 --models base,sft,sft_variants

With `--seeds`, bench/transfer.py first runs once per seed (`--out` and `--train-seed` added, the
arguments after `--` passed on), each resumable: a seed's finished stages are reused, not rerun. So
the table comes from one command; one seed of SmolLM2 is about 50 min per trained model on 2 idle
cores (80 SFT steps, BFCL single-turn at 20 per category, the held-out splits). Each seed's
invocation rewrites its own report with the models it measured (`--models`): pass the same to all.

Which models: those trained in every seed found (a model measured in fewer seeds is named, not
averaged); base is not trained, so every seed shares its one measurement.

Each row (a BFCL category or aggregate, a held-out split): each seed's paired difference from base,
as bench/transfer.py reports it, then their mean ± SE. The mean is the difference of the
seed-averaged model (each entry's score averaged over the seeds, paired with base over entries).
Its SE adds two sources: the entries' (the paired SE of that seed-averaged difference: which entries
were drawn) and the seeds' (the SD of the seeds' differences over sqrt(seeds): how the training run
fell), as sqrt(SE_entries² + SE_seeds²). A seed's training noise that moves every entry together is
only in the second; the two overlap a little where seed noise is independent across entries, so the
sum errs wide. It needs two seeds at least: with one, the seeds' spread is unknown.

The targets are bench/transfer.py's (issues 33, 49), judged with these SEs. Writes
`<out>/transfer-seeds.md`, `.json` and `.png`; without `--seeds` it reads only.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling scripts
import benchkit  # noqa: E402
import transfer  # noqa: E402
import transfer_table as tt  # noqa: E402

from astra_foundation.stats import format_mean_se, mean_se  # noqa: E402

BASE = "base"
REPORT = re.compile(r"transfer(?:-train(\d+))?\.json")


def load_reports(out: Path) -> dict[int, dict]:
    """SFT seed -> bench/transfer.py's JSON report in `out` (seed 0: `transfer.json`)."""
    found = {}
    for path in sorted(out.glob("transfer*.json")):
        if m := REPORT.fullmatch(path.name):
            found[int(m.group(1) or 0)] = json.loads(path.read_text())
    if not found:
        raise SystemExit(
            f"bench/transfer_seeds.py: no transfer.json or transfer-train<N>.json in {out}; run bench/transfer.py "
            f"--out {out} (and with --train-seed N) first"
        )
    if len(found) < 2:
        raise SystemExit(
            f"bench/transfer_seeds.py: only SFT seed {next(iter(found))}'s report in {out} (its table is "
            f"{out}/transfer.md); with one seed there is no seed-to-seed spread: run bench/transfer.py --out {out} "
            "--train-seed 1 (and 2) first"
        )
    if lacking := [s for s, r in found.items() if BASE not in r["info"]["results"]]:
        raise SystemExit(
            f"bench/transfer_seeds.py: the report of SFT seed {lacking[0]} in {out} has no base model, and every "
            "difference here is from base: rerun that seed's bench/transfer.py with base among --models"
        )
    return dict(sorted(found.items()))


def seeds_of(reports: Mapping[int, dict]) -> dict[str, list[int]]:
    """Trained model -> the seeds whose report measured it."""
    out: dict[str, list[int]] = {}
    for seed, report in reports.items():
        for model in report["info"]["results"]:
            if model != BASE:
                out.setdefault(model, []).append(seed)
    return out


def _mean_of(scores: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Each key's mean over the mappings that all hold it (an entry some seed lacks is left out)."""
    keys = set.intersection(*(set(s) for s in scores))
    return {k: math.fsum(s[k] for s in scores) / len(scores) for k in sorted(keys)}


def averaged_results(results: Sequence[Mapping[str, dict]], model: str) -> dict:
    """One model's results (bench/transfer.py's `measure` shape: bfcl, multi, heldout) with each
    entry's score averaged over the seeds' results."""
    first = results[0][model]
    bfcl = {
        style: {cat: _mean_of([r[model]["bfcl"][style][cat] for r in results]) for cat in cats}
        for style, cats in first["bfcl"].items()
    }
    multi = {cat: _mean_of([r[model]["multi"][cat] for r in results]) for cat in first["multi"]}
    heldout = {split: _mean_of([r[model]["heldout"][split] for r in results]) for split in first["heldout"]}
    return {"bfcl": bfcl, "multi": multi, "heldout": heldout}


def combined(per_seed: Sequence[tuple[float, float]], averaged: tuple[float, float]) -> tuple[float, float]:
    """(mean, SE) of a difference over seeds: the seed-averaged difference, its entries' SE and the
    seeds' SE added in quadrature (module docstring)."""
    _, seed_se = mean_se([d for d, _ in per_seed])
    return averaged[0], math.sqrt(averaged[1] ** 2 + seed_se**2)


def combine_rows(per_seed: Mapping[int, list[tt.Row]], averaged: list[tt.Row], models: Sequence[str]) -> list[dict]:
    """Each averaged row with, per model, its seeds' differences and their combination."""
    out = []
    for i, row in enumerate(averaged):
        seeds = {s: rows[i] for s, rows in per_seed.items()}
        assert all(r.name == row.name for r in seeds.values()), "every seed's table has the same rows"
        diffs = {m: {s: r.diffs[m] for s, r in seeds.items() if m in r.diffs} for m in models}
        out.append(
            {
                "row": row,
                "per_seed": diffs,
                "combined": {m: combined(list(d.values()), row.diffs[m]) for m, d in diffs.items() if m in row.diffs},
            }
        )
    return out


def judged_rows(table: list[dict]) -> list[tt.Row]:
    """The rows with each model's difference SE replaced by the combined one (what the verdicts use)."""
    return [tt.Row(t["row"].name, t["row"].n, t["row"].scores, dict(t["combined"]), t["row"].kind) for t in table]


def format_table(table: list[dict], models: Sequence[str], seeds: Sequence[int], labels: Mapping[str, str]) -> str:
    """Markdown: n, base, each model's seed-averaged score, its seeds' differences, their mean ± SE."""
    head = ["category", "n", labels.get(BASE, BASE)]
    for m in models:
        head += [f"{labels[m]} (mean of seeds)", *(f"seed {s} − base" for s in seeds), "mean − base ± SE"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for t in table:
        row = t["row"]
        cells = [
            f"**{row.name}**" if row.kind == "aggregate" else row.name,
            str(row.n),
            f"{100 * row.scores[BASE]:.1f}",
        ]
        for m in models:
            cells.append(f"{100 * row.scores[m]:.1f}")
            cells += [format_mean_se(t["per_seed"][m].get(s, (math.nan, math.nan)), "+.1f", scale=100) for s in seeds]
            cells.append(format_mean_se(t["combined"].get(m, (math.nan, math.nan)), "+.1f", scale=100))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def heldout_against_sft(results: Mapping[int, dict], model: str, label: str) -> list[str]:
    """Issue 49's held-out target over seeds: `model`'s F1 on each answerable split not below plain
    SFT's beyond 2 SE, paired per seed over environments, combined as the rows are."""
    seeds = [s for s, r in results.items() if "sft" in r and model in r]
    if not seeds:
        return [f"- {label}, held-out F1 against plain SFT: n/a (no seed measured both)"]
    out = []
    for split in transfer.ANSWERABLE_SPLITS:
        if not all(split in results[s]["sft"]["heldout"] for s in seeds):
            out.append(f"- {label}, held-out {split} F1 against plain SFT: n/a (held-out not run)")
            continue
        pair = {s: {m: results[s][m]["heldout"][split] for m in ("sft", model)} for s in seeds}
        per_seed = [tt.paired_row(split, p, "sft", "heldout").diffs[model] for p in pair.values()]
        avg = {m: _mean_of([p[m] for p in pair.values()]) for m in ("sft", model)}
        averaged = tt.paired_row(split, avg, "sft", "heldout").diffs[model]
        # one seed measured both: its entries' SE alone (no spread to add), and the line says so
        mean, se = combined(per_seed, averaged) if len(seeds) > 1 else averaged
        which = f"seeds {', '.join(map(str, seeds))}" if len(seeds) > 1 else f"seed {seeds[0]} only: entries' SE"
        out.append(tt.heldout_verdict(label, split, (mean, se), which))
    return out


def summarize(reports: Mapping[int, dict]) -> tuple[str, dict]:
    """The markdown report and its JSON of `reports` (seed -> bench/transfer.py's JSON)."""
    first = next(iter(reports.values()))
    sizes, styles = first["info"]["sizes"], first["args"]["styles"]
    measured = seeds_of(reports)
    models = [m for m, s in measured.items() if len(s) == len(reports)]
    seeds = list(reports)
    results = {s: r["info"]["results"] for s, r in reports.items()}
    labels = {BASE: "base", **{m: first["info"]["labels"].get(m, m).split(", SFT seed")[0] for m in models}}
    lines = [f"# Transfer over SFT seeds {', '.join(map(str, seeds))}: {', '.join(labels[m] for m in models)}", ""]
    lines += ["`.venv/bin/python bench/transfer_seeds.py --out <run folder>` over:", ""]
    lines += [f"- seed {s}: `{r['info']['command']}`" for s, r in reports.items()]
    if fewer := {m: s for m, s in measured.items() if m not in models}:
        lines += [
            "",
            "Not in every seed, so not in this table: "
            + "; ".join(f"{m} (seeds {', '.join(map(str, s))})" for m, s in fewer.items()),
        ]
    as_json: dict = {"seeds": seeds, "models": models, "labels": labels, "styles": {}}
    for style in styles:
        per_seed = {s: tt.build_rows({m: results[s][m] for m in (BASE, *models)}, style, BASE, sizes) for s in seeds}
        avg = {BASE: results[seeds[0]][BASE], **{m: averaged_results([results[s] for s in seeds], m) for m in models}}
        table = combine_rows(per_seed, tt.build_rows(avg, style, BASE, sizes), models)
        rows = judged_rows(table)
        lines += [
            "",
            f"## BFCL call style `{style}`",
            "",
            format_table(table, models, seeds, labels),
            "",
            "Verdicts:",
            "",
        ]
        for m in models:
            lines += tt.verdicts(rows, m, f"{labels[m]} ({len(seeds)} seeds)")
        if transfer.VARIANTS in models:
            variants = transfer.VARIANTS
            lines.append(tt.irrelevance_verdict(rows, f"{labels[variants]} ({len(seeds)} seeds)", BASE, variants))
            lines += heldout_against_sft(results, variants, f"{labels[variants]} ({len(seeds)} seeds)")
        behaviour = {m: summed_behaviour([results[s][m]["behaviour"][style] for s in seeds]) for m in (BASE, *models)}
        lines += ["", f"What each model did (`{style}`), summed over the seeds (base: once per seed):", ""]
        lines += [tt.format_behaviours(behaviour, labels)]
        as_json["styles"][style] = [
            {"name": t["row"].name, "n": t["row"].n, "scores": t["row"].scores, "per_seed": t["per_seed"], "combined": t["combined"]}
            for t in table
        ]  # fmt: skip
    lines += ["", "SEs: the entries' and the seeds' in quadrature (bench/transfer_seeds.py's docstring)."]
    return "\n".join(lines) + "\n", as_json


def summed_behaviour(counts: Sequence[Mapping[str, Mapping[str, int]]]) -> dict[str, dict[str, int]]:
    """group -> behaviour -> count, added over the seeds' counts."""
    return {g: {b: sum(c[g][b] for c in counts) for b in tt.BEHAVIOURS} for g in tt.GROUPS}


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """This script's own arguments, and those after `--` (bench/transfer.py's, for each seed)."""
    own, passed = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="runs/transfer", help="bench/transfer.py's run folder (default runs/transfer)")
    p.add_argument(
        "--seeds",
        default="",
        help="comma-separated SFT seeds (e.g. 0,1,2): run bench/transfer.py for each first (what is done is reused); "
        "without it, only the reports the folder holds are combined",
    )
    args = p.parse_args(own)
    try:
        args.seeds = sorted({int(x) for x in args.seeds.split(",") if x.strip()})
    except ValueError:
        p.error(f"--seeds {args.seeds!r}: comma-separated whole numbers, e.g. 0,1,2")
    if args.seeds and (len(args.seeds) < 2 or args.seeds[0] < 0):
        p.error(f"--seeds {args.seeds}: at least two seeds, none negative (one seed has no spread)")
    if passed and not args.seeds:
        p.error("the arguments after -- are bench/transfer.py's for each seed: give --seeds too")
    if taken := sorted({"--out", "--train-seed"} & {a.split("=")[0] for a in passed}):
        p.error(f"{', '.join(taken)} after --: this script sets them (--out once, --train-seed per seed)")
    if not args.seeds and not Path(args.out).is_dir():
        p.error(f"--out {args.out}: no such folder; give bench/transfer.py's --out, or --seeds to measure them")
    return args, passed


def plot(as_json: dict, labels: Mapping[str, str], path: Path) -> Path:
    """Per row and model: each seed's difference from base (dots) and their mean ± 2 SE (a bar)."""
    import matplotlib

    matplotlib.use("Agg")  # files only
    import matplotlib.pyplot as plt

    styles = as_json["styles"]
    fig, axes = plt.subplots(1, len(styles), figsize=(7 * len(styles), 8), squeeze=False)
    for ax, (style, rows) in zip(axes[0], styles.items(), strict=True):
        ys = list(range(len(rows)))[::-1]
        for k, m in enumerate(as_json["models"]):
            shift = (k - (len(as_json["models"]) - 1) / 2) * 0.3
            for y, r in zip(ys, rows, strict=True):
                mean, se = r["combined"].get(m, (math.nan, math.nan))
                ax.errorbar(100 * mean, y + shift, xerr=200 * se, fmt="s", color=f"C{k}", capsize=3,
                            label=labels[m] if y == ys[0] else None)  # fmt: skip
                ax.plot([100 * d for d, _ in r["per_seed"][m].values()], [y + shift] * len(r["per_seed"][m]), ".",
                        color=f"C{k}", alpha=0.5)  # fmt: skip
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_yticks(ys, [f"{r['name']} (n={r['n']})" for r in rows], fontsize=7)
        ax.set_xlabel("model − base, points (dots: seeds; squares: mean ± 2 SE)")
        ax.set_title(f"BFCL call style {style}, SFT seeds {', '.join(map(str, as_json['seeds']))}", fontsize=9)
        ax.legend(fontsize=7, loc="lower right")
    return benchkit.save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    args, passed = parse(list(sys.argv[1:] if argv is None else argv))
    out = Path(args.out)
    for seed in args.seeds:  # each resumable: bench/transfer.py reuses a finished stage
        print(f"== bench/transfer.py, SFT seed {seed} ==", flush=True)
        transfer.main(["--out", str(out), "--train-seed", str(seed), *passed])
    text, as_json = summarize(load_reports(out))
    (out / "transfer-seeds.md").write_text(text)
    (out / "transfer-seeds.json").write_text(json.dumps(as_json, indent=1, default=str))
    plot(as_json, as_json["labels"], out / "transfer-seeds.png")
    print(text + f"written: {out / 'transfer-seeds.md'}, {out / 'transfer-seeds.json'}, {out / 'transfer-seeds.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
