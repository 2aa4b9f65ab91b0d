"""bench/transfer.py's pure parts: paired differences and their SE, BFCL's aggregates as weights,
the table, the verdicts, and that the samples are the same for the same seed."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from env_registry.variants import Variant, VariantShares

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))  # the scripts import their siblings; only for this import
try:
    import transfer
    import transfer_table as tt
finally:
    sys.path.remove(str(BENCH))

SIZES = {"live_simple": 258, "live_multiple": 1053, "live_parallel": 16, "live_parallel_multiple": 24}
CATEGORIES = (*tt.SIMPLE, *tt.NON_LIVE_OTHER, "irrelevance", *tt.LIVE_AST, "live_irrelevance", "live_relevance")


def test_paired_difference_is_the_mean_of_per_entry_differences_with_its_standard_error():
    base = {"a": 0.0, "b": 0.0, "c": 1.0, "d": 0.0}
    sft = {"a": 1.0, "b": 0.0, "c": 0.0, "d": 1.0, "e": 1.0}  # "e": not scored by base, not paired
    row = tt.paired_row("x", {"base": base, "sft": sft}, "base")
    diffs = [1.0, 0.0, -1.0, 1.0]
    mean = sum(diffs) / 4
    se = math.sqrt(sum((d - mean) ** 2 for d in diffs) / 3 / 4)
    assert row.n == 4
    assert row.scores == {"base": 0.25, "sft": 0.5}
    assert row.diffs["sft"] == pytest.approx((mean, se))
    assert "base" not in row.diffs


def test_a_constant_difference_has_zero_se_and_one_entry_has_none():
    row = tt.paired_row("x", {"base": {"a": 1.0, "b": 1.0}, "sft": {"a": 0.0, "b": 0.0}}, "base")
    assert row.diffs["sft"] == (-1.0, 0.0)
    one = tt.paired_row("x", {"base": {"a": 1.0}, "sft": {"a": 0.0}}, "base")
    assert one.diffs["sft"][0] == -1.0 and math.isnan(one.diffs["sft"][1])


def _per_model(valid: dict[str, dict[str, int]]) -> dict[str, dict[str, dict[str, float]]]:
    """model -> category -> 4 entries, the first `k` valid."""
    return {m: {c: {f"{c}_{i}": float(i < k) for i in range(4)} for c, k in cats.items()} for m, cats in valid.items()}


def test_aggregates_match_the_single_turn_report_and_bfcl_formulas():
    from astra_verl.eval import bfcl_single_report as rep

    base = {c: i % 4 for i, c in enumerate(CATEGORIES)}
    sft = {c: (i * 3) % 5 % 4 for i, c in enumerate(CATEGORIES)}
    rows = {r.name: r for r in tt.bfcl_rows(_per_model({"base": base, "sft": sft}), "base", SIZES)}
    records = [
        rep.SingleResult(category=c, status="scored", valid=bool(v), id=i, style="fc", model="sft")
        for c, ids in _per_model({"sft": sft})["sft"].items()
        for i, v in ids.items()
    ]
    theirs = {a.name: a.accuracy for a in rep.aggregates(rep.category_scores(records), SIZES.__getitem__)}
    for name, acc in theirs.items():
        assert rows[name].scores["sft"] == pytest.approx(acc), name
    overall = (theirs["Non-Live overall"] + theirs["Live overall"] + theirs["Irrelevance"]) / 3
    assert rows["Single-turn overall"].scores["sft"] == pytest.approx(overall)
    # the aggregate's difference is the same combination of the category differences
    for name in theirs:
        d = rows[name].scores["sft"] - rows[name].scores["base"]
        assert rows[name].diffs["sft"][0] == pytest.approx(d), name


def test_aggregate_se_propagates_the_category_ses():
    rows = {c: tt.Row(c, 4, {"base": 0.0, "sft": 0.5}, {"sft": (0.5, 0.2)}) for c in tt.IRRELEVANCE}
    agg = tt.aggregate_row("Irrelevance", {c: 0.5 for c in tt.IRRELEVANCE}, rows)
    assert agg.diffs["sft"] == pytest.approx((0.5, math.sqrt(2 * 0.1**2)))
    assert tt.aggregate_row("Irrelevance", {"irrelevance": 0.5, "absent": 0.5}, rows) is None


def test_weights_of_each_aggregate_sum_to_one():
    for name, weights in tt.aggregate_weights(SIZES).items():
        assert sum(weights.values()) == pytest.approx(1.0), name


def test_table_and_verdicts_report_a_lowered_category():
    cats = {c: 4 for c in CATEGORIES}  # base: every entry valid
    sft = {c: 4 for c in CATEGORIES} | {"irrelevance": 0, "live_irrelevance": 0}
    rows = tt.bfcl_rows(_per_model({"base": cats, "sft": sft}), "base", SIZES)
    table = tt.format_table(rows, "base", {"base": "base", "sft": "SFT"})
    lines = table.splitlines()
    assert lines[0] == "| category | n | base | SFT | SFT − base ± SE |"
    assert "| irrelevance | 4 | 100.0 | 0.0 | -100.0 ± 0.0 |" in lines
    assert "| **Single-turn overall** | 48 | 100.0 | 66.7 | -33.3 ± 0.0 |" in lines
    said = "\n".join(tt.verdicts(rows, "sft", "SFT"))
    assert "single-turn overall raised beyond 2 SE: -33.3 ± 0.0 points: MISSED" in said
    assert "lowered beyond 2 SE: MISSED (irrelevance -100.0" in said
    raised = tt.bfcl_rows(_per_model({"base": sft, "sft": cats}), "base", SIZES)
    said = "\n".join(tt.verdicts(raised, "sft", "SFT"))
    assert "points: met" in said and "no BFCL category lowered beyond 2 SE: met" in said


def test_multi_turn_sample_is_seeded_and_per_category():
    fits = [f"multi_turn_{c}_{i}" for c in transfer.MULTI_TURN for i in range(10)]
    a = transfer.multi_turn_sample(fits, 2, seed=0)
    assert a == transfer.multi_turn_sample(list(reversed(fits)), 2, seed=0)
    assert len(a) == 8 and all(sum(i.startswith(f"multi_turn_{c}_") for i in a) == 2 for c in transfer.MULTI_TURN)
    assert a != transfer.multi_turn_sample(fits, 2, seed=1)
    assert transfer.multi_turn_sample(fits[:1], 3, seed=0) == fits[:1]


def test_bfcl_single_sample_is_the_same_entries_for_the_same_seed():
    pytest.importorskip("bfcl_eval")
    from astra_verl.eval import bfcl_single as bs

    first = [e.id for e in bs.load_entries(["simple_python", "live_irrelevance"], sample=5, seed=3)]
    assert first == [e.id for e in bs.load_entries(["simple_python", "live_irrelevance"], sample=5, seed=3)]
    assert first != [e.id for e in bs.load_entries(["simple_python", "live_irrelevance"], sample=5, seed=4)]
    assert len(first) == 10


def test_results_reader_keeps_the_last_record_of_an_id_and_counts_errors_as_failures(tmp_path):
    from astra_verl.eval.bfcl_single import SingleResult

    path = tmp_path / "results.jsonl"
    run = {"style": "fc", "model": "m", "version": 1}
    recs = [
        {"id": "a", "category": "c", "status": "error", "valid": False, **run},
        {"id": "a", "category": "c", "status": "scored", "valid": True, **run},
        {"id": "b", "category": "c", "status": "error", "valid": False, **run},
        {"id": "z", "category": "c", "status": "scored", "valid": True, **run},
    ]
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    assert transfer.valid_by_category(path, SingleResult, {"a", "b"}) == {"c": {"a": 1.0, "b": 0.0}}
    assert transfer.valid_by_category(tmp_path / "absent.jsonl", SingleResult) == {}


def test_each_no_tool_share_is_its_own_model_with_its_own_folders(capsys):
    args = transfer.parse(["--no-tool-share", "0.5,1"])
    models = transfer.no_tool_models(args)
    assert [(m.key, m.label, m.folder(0)) for m in models] == [
        ("sft_notool0.5", "SFT + no-tool 0.5", "seed0-notool0.5"),
        ("sft_notool1", "SFT + no-tool 1", "seed0-notool1"),
    ]
    assert [(m.tier().no_tool_share, m.tier().sft_mixing) for m in models] == [(0.5, "none"), (1.0, "none")]
    assert transfer.labels(args)["sft_notool1"] == "SFT + no-tool 1" and transfer.labels(args)["sft"] == "SFT"
    # `--models sft_notool` selects every share; another mixing is another model
    assert {transfer.family(m.key) for m in models} == {"sft_notool"} and transfer.family("sft") == "sft"
    banded = transfer.no_tool_models(transfer.parse(["--no-tool-share", "0.5", "--sft-mixing", "banded"]))[0]
    assert (banded.key, banded.folder(0)) == ("sft_notool0.5_banded", "seed0-notool0.5_banded")


@pytest.mark.parametrize("value", ["0", "1.5", "half", ""])
def test_a_share_outside_zero_to_one_is_refused(value, capsys):
    with pytest.raises(SystemExit) as exc:
        transfer.parse(["--no-tool-share", value])
    assert exc.value.code == 2 and "--no-tool-share" in capsys.readouterr().err


def test_the_sft_models_train_from_the_base_model_given(tmp_path, monkeypatch):
    """`--base-model` is the model measured as base and the one SFT starts from (not SmolLM2)."""
    seen = {}

    def build_model(*a):
        raise AssertionError("SmolLM2 built although --base-model was given")

    def sft(tier, seed, model, demos, out):
        seen["sft"] = model
        return out / "ckpt", 1.0, tier.sft_steps

    def build_data(tier, model, root):
        seen["data"] = model
        return {}

    def build_demonstrations(tier, model, root):
        seen["demos"] = model
        demos = root / "demos.parquet"
        transfer.pd.DataFrame({"messages": [[]]}).to_parquet(demos)
        return demos

    for name, fn in [("build_model", build_model), ("sft", sft), ("build_data", build_data)]:
        monkeypatch.setattr(transfer.stages, name, fn)
    monkeypatch.setattr(transfer.stages, "build_demonstrations", build_demonstrations)
    base = tmp_path / "qwen"
    args = transfer.parse(["--base-model", str(base), "--models", "base,sft"])
    model, checkpoints, _, _ = transfer.train(tmp_path / "out", args)
    assert model == base.resolve() and seen == {"sft": base.resolve(), "data": base.resolve(), "demos": base.resolve()}
    assert set(checkpoints) == {"sft"}


def fake_stages(monkeypatch, sft) -> None:
    """SFT replaced by `sft`, no data built, each tier's demonstrations an empty file of its name."""

    def build_demonstrations(tier, model, root):
        demos = transfer.stages.demonstrations_file(tier, root)
        demos.parent.mkdir(parents=True, exist_ok=True)
        transfer.pd.DataFrame({"messages": [[]]}).to_parquet(demos)
        return demos

    monkeypatch.setattr(transfer.stages, "sft", sft)
    monkeypatch.setattr(transfer.stages, "build_data", lambda tier, model, root: {})
    monkeypatch.setattr(transfer.stages, "build_demonstrations", build_demonstrations)


def test_the_other_half_is_its_own_model_trained_on_the_same_steps_with_variant_demonstrations(tmp_path, monkeypatch):
    """`sft_variants`: the real tier's `sft()` (same steps, same seed) on the plain demonstrations plus
    those of `--variant-envs` environments of the other variants; its own folder and label."""
    trained = {}

    def sft(tier, seed, model, demos, out):
        trained[out.name] = (tier.variant_envs, tier.sft_steps, seed)
        return out / "ckpt", 1.0, tier.sft_steps

    fake_stages(monkeypatch, sft)
    args = transfer.parse(
        ["--base-model", str(tmp_path / "m"), "--models", "base,sft,sft_variants", "--variant-envs", "8"]
    )
    _, checkpoints, _, lines = transfer.train(tmp_path / "out", args)
    steps = transfer.stages.REAL.sft_steps
    assert trained == {"seed0": (0, steps, 0), "seed0-variants8": (8, steps, 0)}
    assert set(checkpoints) == {"sft", "sft_variants"}
    assert transfer.labels(args)["sft_variants"] == "SFT + other half (8 envs)"
    assert any("sft-mix_none-notool_0-variants_8.parquet" in line for line in lines)
    # the held-out data the models are measured on holds the other variants in unseen worlds
    split = transfer.TRANSFER.splits[-1]
    assert split.name == "heldout_variants" and "answerable=" not in split.variants.replace("unanswerable=", "")
    assert split.seed not in {s.seed for s in transfer.stages.REAL.splits} | {transfer.stages.VARIANT_SEED}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--models", "sft,sft_variants"], "--reference base: not among --models"),
        (["--variants-checkpoint", "x"], "--variants-checkpoint needs --checkpoint"),
        (["--variant-envs", "0"], "--variant-envs 0"),
        (["--checkpoint", "x", "--models", "base,sft_worlds"], "--models sft_worlds is trained here"),
    ],
)
def test_refused_combinations_say_what_to_do(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        transfer.parse(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_the_other_half_verdicts_compare_irrelevance_with_base_and_held_out_with_sft():
    cats = {c: 4 for c in CATEGORIES}
    base = cats | {c: 0 for c in tt.SIMPLE}  # base: irrelevance 100, no simple call right
    mixed = dict(cats)  # simple rises, irrelevance kept
    rows = tt.bfcl_rows(_per_model({"base": base, "sft_variants": mixed}), "base", SIZES)
    heldout = {f"e{i}": 0.5 + 0.1 * (i % 2) for i in range(8)}
    results = {
        "base": {"heldout": {}},
        "sft": {"heldout": {"heldout_data": heldout, "heldout_shape": heldout}},
        "sft_variants": {"heldout": {"heldout_data": heldout, "heldout_shape": {k: 0.0 for k in heldout}}},
    }
    said = "\n".join(
        tt.other_half_verdicts(rows, results, "mix", "base", transfer.ANSWERABLE_SPLITS, transfer.VARIANTS)
    )
    assert "irrelevance within 2 SE of base (+0.0 ± 0.0) while Non-Live Simple rises beyond 2 SE" in said
    assert said.count(": met") == 2 and "heldout_shape F1 not below plain SFT's beyond 2 SE: -55.0" in said
    assert "MISSED" in said.splitlines()[-1]
    said = "\n".join(tt.other_half_verdicts(rows, results, "mix", "sft", transfer.ANSWERABLE_SPLITS, transfer.VARIANTS))
    assert "n/a (reference sft)" in said


def test_what_a_model_did_is_counted_per_group_from_its_results():
    """Outputs seen in the other-half run (runs of bench/transfer.py): a decoded call, an ask where
    the values were in the question, a declared inability, a call block BFCL could not decode."""
    entries = [
        ("simple_python", "scored", [{"get_song_lyrics": '{"song_title": "Bohemian Rhapsody"}'}]),
        (
            "simple_javascript",
            "scored",
            "To look this up I need to know which one you mean. Which is the list element?",
        ),
        ("simple_java", "scored", '<tool_call>\n{"name": "f", "arguments": {"a": x}}\n</tool_call>'),
        ("live_simple", "error", None),
        ("irrelevance", "scored", "<answer>cannot answer: no tool gives the weather</answer>"),
        ("live_irrelevance", "scored", "Paris is the capital of France."),
        ("irrelevance", "scored", "I cannot answer this with the tools I have: no tool for this."),
        ("irrelevance", "scored", [{"f": "{}"}]),
    ]
    counts = tt.behaviour_counts(entries)
    assert counts["should call"] == {
        "call": 1,
        "ask": 1,
        "decline": 0,
        "malformed call": 1,
        "other text": 0,
        "error": 1,
    }
    assert counts["should not call"] == {"call": 1, "ask": 0, "decline": 2, "malformed call": 0, "other text": 1, "error": 0}  # fmt: skip
    table = tt.format_behaviours({"sft": counts}, {"sft": "SFT"})
    assert "| SFT | should call | 4 | 1 (25%) | 1 (25%) | 0 (0%) | 1 (25%) | 0 (0%) | 1 (25%) |" in table


def test_a_run_folder_refuses_another_base_model(tmp_path):
    """Stages are reused by folder: a Qwen run in SmolLM2's folder would get SmolLM2's scores."""
    transfer.claim_folder(tmp_path, None)
    transfer.claim_folder(tmp_path, None)  # the same model again: reused
    with pytest.raises(SystemExit, match=r"holds the measurements of base model SmolLM2.*its own --out"):
        transfer.claim_folder(tmp_path, str(tmp_path / "qwen"))


def test_another_sft_seed_trains_its_own_checkpoints_and_measures_them_in_their_own_folders(tmp_path, monkeypatch):
    """`--train-seed 1`: the same models, trainer.seed 1, in folders of their own beside seed 0's
    (whose names do not change, so runs made before seeds are reused); base is measured once."""
    trained, used = {}, []

    def sft(tier, seed, model, demos, out):
        trained[out.name] = seed
        used.append(demos)
        return out / "ckpt", 1.0, tier.sft_steps

    fake_stages(monkeypatch, sft)
    args = transfer.parse(["--base-model", str(tmp_path / "m"), "--train-seed", "1", "--no-tool-share", "0.5"])
    args.models |= {"sft_notool"}
    _, _, _, lines = transfer.train(tmp_path / "out", args)
    assert trained == {"seed1": 1, "seed1-variants16": 1, "seed1-notool0.5": 1}
    assert all("seed 1," in line for line in lines)
    # verl's SFT trainer ignores trainer.seed: the seed is the demonstrations' order, each seed's file
    # in its own folder (without it, seeds 0 and 1 trained byte-identical checkpoints)
    assert set(used) == {tmp_path / "out" / "learning" / name / "sft.parquet" for name in trained}
    assert [transfer.measured_as(m, args) for m in ("base", "sft", "sft_variants")] == ["base", "sft_train1", "sft_variants_train1"]  # fmt: skip
    assert transfer.labels(args)["sft"] == "SFT, SFT seed 1" and transfer.labels(args)["base"] == "base"
    assert transfer.report_stem(args) == "transfer-train1"
    seed0 = transfer.parse([])
    assert (transfer.measured_as("sft", seed0), transfer.report_stem(seed0)) == ("sft", "transfer")
    # a table against another reference is another report: it used to overwrite the one against base
    vs_sft = transfer.parse(["--models", "sft,sft_variants", "--reference", "sft"])
    assert transfer.report_stem(vs_sft) == "transfer-vs-sft"


def test_another_sft_lr_trains_and_measures_in_folders_of_its_own(tmp_path, monkeypatch):
    """`--sft-lr 1e-5` (Qwen2.5-Coder-0.5B: the real tier's 1e-4 broke its calls): the same models
    at that lr, in folders, served names and a report of their own, so a rerun never reuses the
    checkpoints or scores of the tier's lr."""
    trained = {}

    def sft(tier, seed, model, demos, out):
        trained[out.name] = (tier.sft_lr, tier.sft_steps)
        return out / "ckpt", 1.0, tier.sft_steps

    fake_stages(monkeypatch, sft)
    args = transfer.parse(["--base-model", str(tmp_path / "m"), "--models", "base,sft_variants", "--sft-lr", "1e-5"])
    transfer.train(tmp_path / "out", args)
    assert trained == {"seed0-variants16-lr1e-05": (1e-5, transfer.stages.REAL.sft_steps)}
    assert (transfer.measured_as("base", args), transfer.measured_as("sft_variants", args)) == ("base", "sft_variants_lr1e-05")  # fmt: skip
    assert (
        transfer.labels(args)["sft_variants"].endswith(", lr 1e-05")
        and transfer.report_stem(args) == "transfer-lr1e-05"
    )
    both = transfer.parse(["--train-seed", "2", "--sft-lr", "1e-5"])
    assert (transfer.measured_as("sft", both), transfer.report_stem(both)) == (
        "sft_train2_lr1e-05",
        "transfer-train2-lr1e-05",
    )
    for bad in (["--sft-lr", "0"], ["--sft-lr", "1e-5", "--checkpoint", str(tmp_path)]):
        with pytest.raises(SystemExit):
            transfer.parse(bad)


def test_distinct_tokens_trains_from_the_distinguished_base_in_folders_of_its_own(tmp_path, monkeypatch):
    """`--distinct-tokens`: the SFT starts from what `distinct_tokens.distinguish` returns, in
    folders, served names and a report of their own; the report says which tokens it changed."""
    trained = {}

    def sft(tier, seed, model, demos, out):
        trained[out.name] = (model, tier.sft_lr)
        return out / "ckpt", 1.0, tier.sft_steps

    fix = transfer.distinct_tokens.TokenFix(token="<tool_call>", token_id=7, twin="</tool_call>", cosine=1.0, pieces=["<", "tool", ">"])  # fmt: skip
    made = {}

    def distinguish(model, out):
        made[Path(out).name] = model
        return Path(out), [fix]

    fake_stages(monkeypatch, sft)
    monkeypatch.setattr(transfer.distinct_tokens, "distinguish", distinguish)
    args = transfer.parse(["--base-model", str(tmp_path / "m"), "--models", "base,sft_variants", "--sft-lr", "1e-5", "--distinct-tokens"])  # fmt: skip
    _, _, _, lines = transfer.train(tmp_path / "out", args)
    start = tmp_path / "out" / "learning" / "base-distinct-tokens"
    assert made == {"base-distinct-tokens": (tmp_path / "m").resolve()}
    assert trained == {"seed0-variants16-lr1e-05-distinct": (start, 1e-5)}
    assert transfer.measured_as("sft_variants", args) == "sft_variants_lr1e-05_distinct"
    assert transfer.report_stem(args) == "transfer-lr1e-05-distinct"
    assert transfer.labels(args)["sft_variants"].endswith(", lr 1e-05, distinct tool tags")
    assert "`<tool_call>` (cosine 1.000 to `</tool_call>`) from < + tool + >" in lines[0]
    # without the flag the SFT starts from the base itself, in the folders it always had
    trained.clear()
    transfer.train(
        tmp_path / "out", transfer.parse(["--base-model", str(tmp_path / "m"), "--models", "base,sft_variants"])
    )
    assert trained == {"seed0-variants16": ((tmp_path / "m").resolve(), transfer.stages.REAL.sft_lr)}
    with pytest.raises(SystemExit):
        transfer.parse(["--distinct-tokens", "--checkpoint", str(tmp_path)])


def test_another_variant_mix_trains_on_its_own_variants_in_folders_of_its_own(tmp_path, monkeypatch):
    """`--variant-mix`: the other half's extra environments come in that mix (the generator reads it),
    in data, checkpoint and measurement folders, a served name and a report of their own; the
    default mix keeps the names older run folders have."""
    trained = {}

    def sft(tier, seed, model, demos, out):
        trained[out.name] = (tier.variant_envs, tier.variant_mix, tier.sft_steps, demos.name)
        return out / "ckpt", 1.0, tier.sft_steps

    fake_stages(monkeypatch, sft)
    mix = "unanswerable=0.5,no_tool=0.25,missing_value=0.25"
    argv = ["--base-model", str(tmp_path / "m"), "--models", "base,sft_variants", "--variant-envs", "24"]
    args = transfer.parse([*argv, "--variant-mix", mix])
    transfer.train(tmp_path / "out", args)
    tag = "unanswerable_0.5_no_tool_0.25_missing_value_0.25"
    demos = f"sft-mix_none-notool_0-{tag}_24.parquet"
    assert trained == {f"seed0-variants24-{tag}": (24, mix, transfer.stages.REAL.sft_steps, demos)}
    assert transfer.measured_as("sft_variants", args) == f"sft_variants_{tag}"
    assert transfer.report_stem(args) == f"transfer-{tag}"
    assert transfer.labels(args)["sft_variants"] == f"SFT + other half (24 envs: {mix})"
    tier = transfer.trained_models(args)["sft_variants"][0]
    assert transfer.stages.variant_split(tier).name == f"train_{tag}_24"
    assert VariantShares.parse(transfer.stages.variant_split(tier).variants).shares == {
        Variant.UNANSWERABLE: 0.5, Variant.NO_TOOL: 0.25, Variant.MISSING_VALUE: 0.25,
    }  # fmt: skip
    # no other model reads the mix: plain SFT keeps its folder and served name, so it is reused
    assert transfer.trained_models(args)["sft"][1] == "seed0" and transfer.measured_as("sft", args) == "sft"
    default = transfer.parse(argv)
    assert (transfer.measured_as("sft_variants", default), transfer.report_stem(default)) == (
        "sft_variants",
        "transfer",
    )


@pytest.mark.parametrize("mix", ["unanswerable=0.5", "asking=1", "unanswerable"])
def test_a_variant_mix_the_generator_cannot_read_is_refused(mix, capsys):
    with pytest.raises(SystemExit) as exc:
        transfer.parse(["--variant-mix", mix])
    assert exc.value.code == 2 and "--variant" in capsys.readouterr().err


def test_the_worlds_control_trains_on_as_many_answerable_demonstrations_of_the_variant_worlds(tmp_path, monkeypatch):
    """`sft_worlds`: the same `sft()` on the 24 plus `--variant-envs` answerable environments of the
    variants' worlds (`VARIANT_SEED`, the same shapes and count); files and folders of its own."""
    trained = {}

    def sft(tier, seed, model, demos, out):
        trained[out.name] = (tier, seed, demos.name)
        return out / "ckpt", 1.0, tier.sft_steps

    fake_stages(monkeypatch, sft)
    args = transfer.parse(["--base-model", str(tmp_path / "m"), "--models", "sft,sft_variants,sft_worlds",
                           "--reference", "sft", "--variant-envs", "8"])  # fmt: skip
    _, checkpoints, _, _ = transfer.train(tmp_path / "out", args)
    assert set(checkpoints) == {"sft", "sft_variants", "sft_worlds"} and len(set(checkpoints.values())) == 3
    (variants, seed_v, file_v), (worlds, seed_w, file_w) = trained["seed0-variants8"], trained["seed0-worlds8"]
    assert (worlds.sft_steps, seed_w) == (variants.sft_steps, seed_v) == (transfer.stages.REAL.sft_steps, 0)
    assert file_w != file_v and file_w != "sft.parquet"
    control, other = transfer.stages.variant_split(worlds), transfer.stages.variant_split(variants)
    assert control.name != other.name  # its data folder: `<out>/learning/data/<name>`
    assert control.variants == "answerable=1" and other.variants == transfer.stages.OTHER_HALF
    assert (control.envs, control.seed, control.scenario_types) == (8, transfer.stages.VARIANT_SEED, other.scenario_types)  # fmt: skip
    assert transfer.labels(args)["sft_worlds"] == "SFT + 8 answerable envs of the variant worlds"
    assert "sft_worlds" not in transfer.parse([]).models  # not in the default run


def test_the_worlds_control_is_answerable_only_as_the_generator_reads_its_mix():
    tier = transfer.trained_models(transfer.parse([]))["sft_worlds"][0]
    assert VariantShares.parse(transfer.stages.variant_split(tier).variants).shares == {Variant.ANSWERABLE: 1.0}


def test_the_worlds_control_demonstrations_come_from_the_variant_split_and_reuse_their_file(tmp_path, monkeypatch):
    """`build_demonstrations` with the control's tier: the 24's export plus the golden demonstrations
    of the control's split, generated with its mix; a second call reuses the file."""
    generated, runs = [], []

    def run(cmd, cwd, **kw):
        runs.append(cmd)
        if "--output-file" in cmd:
            path = Path(cmd[cmd.index("--output-file") + 1])
            path.parent.mkdir(parents=True, exist_ok=True)
            transfer.pd.DataFrame({"messages": [[{"role": "user", "content": str(len(runs))}]]}).to_parquet(path)

    def build_split(tier, split, folder, tokenizer, root):
        generated.append(split)
        return folder / "rl" / "train.parquet"

    monkeypatch.setattr(transfer.stages, "run", run)
    monkeypatch.setattr(transfer.stages, "build_split", build_split)
    (tmp_path / "data" / "train" / "rl" / "mix_none").mkdir(parents=True)
    (tmp_path / "data" / "train" / "rl" / "mix_none" / "train.parquet").touch()
    tier = transfer.trained_models(transfer.parse(["--variant-envs", "5"]))["sft_worlds"][0]
    path = transfer.stages.build_demonstrations(tier, tmp_path / "m", tmp_path)
    assert [(s.envs, s.seed, s.variants) for s in generated] == [(5, transfer.stages.VARIANT_SEED, "answerable=1")]
    assert len(transfer.pd.read_parquet(path)) == 2 and path.name.endswith("-answerable_1_5.parquet")
    assert transfer.stages.build_demonstrations(tier, tmp_path / "m", tmp_path) == path and len(generated) == 1


def _report_results(models: list[str]) -> dict[str, dict]:
    """Fake measurements: every BFCL category one entry, held-out F1 per environment; the other half
    0.2 above the control on heldout_data, the control 0.3 above SFT."""
    f1 = {"sft": 0.1, "sft_variants": 0.6, "sft_worlds": 0.4}
    counts = tt.behaviour_counts([])
    out = {}
    for m in models:
        heldout = {s: {f"e{i}": f1[m] + (0.05 * (i % 2) if m == "sft_variants" else 0) for i in range(6)} for s in ("heldout_data", "heldout_shape")}  # fmt: skip
        out[m] = {"bfcl": {"fc": {c: {f"{c}_0": 0.0} for c in CATEGORIES}}, "behaviour": {"fc": counts}, "multi": {},
                  "heldout": heldout, "seconds": {"heldout": (1.0, True)}}  # fmt: skip
    return out


def _report(tmp_path, models: list[str]) -> str:
    args = transfer.parse(["--models", ",".join(models), "--reference", "sft"])
    info = {"labels": {m: transfer.labels(args)[m] for m in models}, "sizes": SIZES, "command": "x",
            "multi_turn": {"tokens": {}, "fits": []}, "mt_ids": [], "budget": 1, "wall_s": 0.0, "train_lines": []}  # fmt: skip
    return transfer.write_report(_report_results(models), info, args, tmp_path)


def test_the_report_shows_the_control_and_says_which_explanation_the_held_out_f1_supports(tmp_path):
    text = _report(tmp_path, ["sft", "sft_variants", "sft_worlds"])
    label = "SFT + 16 answerable envs of the variant worlds"
    assert f"| SFT | SFT + other half (16 envs) | {label} |" in text
    for split in transfer.ANSWERABLE_SPLITS:  # other half - control: +22.5 ± 1.1; control - SFT: +30.0 ± 0.0
        assert (
            f"- held-out {split} F1, SFT + other half (16 envs) − {label}: +22.5 ± 1.1; {label} − plain SFT: "
            "+30.0 ± 0.0: supports the other half (it beats the control" in text
        )


def test_no_control_verdict_without_the_control_or_the_other_half(tmp_path):
    for models in (["sft", "sft_variants"], ["sft", "sft_worlds"]):
        text = _report(tmp_path, models)
        assert "- held-out heldout_data F1, " not in text and "supports" not in text


@pytest.mark.parametrize(
    "half, worlds, supports",
    [
        ((0.3, 0.1), (0.0, 0.1), "the other half"),
        ((-0.3, 0.1), (0.3, 0.1), "more worlds (the control beats"),
        ((0.1, 0.1), (0.3, 0.1), "more worlds (the control rises"),
        ((0.1, 0.1), (0.1, 0.1), "neither"),
        ((0.1, 0.1), None, "neither"),
    ],
)
def test_which_explanation_two_paired_differences_support(half, worlds, supports):
    assert tt._explanation(half, worlds).startswith(supports)
