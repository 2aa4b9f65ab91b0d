"""`python -m env_registry derive-variants` (issue 49): variants of synthesized and imported
environments, made by the family-agnostic makers, validated as `add` validates, added once.

The store is real: synthesized environments from a `data_synth env run` dry run (canned replies,
so `provenance.scripted`), ASTRA's released pipeline records through `import-astra`, two
ASTRA-RL-1k rows imported under the plain rule (a tool without a golden call), and a few
procedural ones; the variants are replayed in the sandbox."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from astra_foundation.sandbox import SandboxError
from env_registry import validate
from env_registry.answer_channel import channel, is_inability, judge, root_question, type_of
from env_registry.cli import main
from env_registry.families import variant_hints
from env_registry.families._variants import HINTS as PROCEDURAL_HINTS
from env_registry.families._variants import PROCEDURAL_MAKERS
from env_registry.families.procedural import generate
from env_registry.family_rules import PLAIN_RL_GENERATOR
from env_registry.spec import AnswerType, CallKey, EnvSpec, Variant
from env_registry.store import EnvStore
from env_registry.validate import validate_envs
from env_registry.variant_makers import CannotCarry, VariantHints, make

REPO = Path(__file__).resolve().parents[2]
ASTRA_RECORDS = Path(__file__).parent / "data" / "astra_env_synthesis.jsonl"
RL_ROWS = Path(__file__).parent / "data" / "astra_rl_recovery.jsonl"
PLAIN_ROWS = (4, 6)  # lines of RL_ROWS whose golden calls are not recovered: imported plain, tools without one
OTHER_FAMILIES = ("astra_env_synth", "astra_import", PLAIN_RL_GENERATOR)
# variant -> (made, cannot) on this store: 8 synthesized + 2 ASTRA records + 2 plain-rule RL rows
PINNED = {"unanswerable": (12, 0), "missing_value": (4, 8), "missing_function": (3, 9), "no_tool": (0, 12)}
CANNOT = re.compile(r"^  (\w+) cannot: (.+): (\d+)$", re.M)
ROW = re.compile(r"^(\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$", re.M)


def _run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def _table(out: str) -> dict[str, dict[str, int]]:
    """The per-variant table the command prints: variant -> made, already, added, failed, cannot."""
    names = ("made", "already", "added", "failed", "cannot")
    return {m.group(1): dict(zip(names, map(int, m.groups()[1:]), strict=True)) for m in ROW.finditer(out)}


@pytest.fixture(scope="module")
def synthesized_store(tmp_path_factory) -> Path:
    """8 synthesized environments (a dry run of the environment pipeline), then ASTRA's records,
    then two ASTRA-RL-1k rows under the plain rule."""
    run = tmp_path_factory.mktemp("synth") / "run"
    cmd = [
        sys.executable, "-m", "data_synth", "env", "run", "--out", str(run), "--mode", "domain", "--bundled-input",
        "--responder", "data_synth.env.canned:respond", "--percentile", "0", "--quiet", "--sandbox-workers", "1",
        "--allow-scripted", "--limit", "8", "--model", "Qwen3-32B",
    ]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    store = run / "envs"
    # some of ASTRA's fixture records are broken on purpose: rejected (exit 1), the rest imported
    assert main(["--store", str(store), "-q", "import-astra", str(ASTRA_RECORDS)]) in (0, 1)
    lines = RL_ROWS.read_text().splitlines()
    plain = run.parent / "plain_rows.jsonl"
    plain.write_text("".join(lines[n - 1] + "\n" for n in PLAIN_ROWS))
    assert main(["--store", str(store), "-q", "import-astra", str(plain), "--reward-rule", "plain"]) == 0
    return store


@pytest.fixture
def store(tmp_path, synthesized_store) -> Path:
    path = tmp_path / "envs"
    shutil.copytree(synthesized_store, path)
    return path


def _envs(path: Path) -> dict[str, EnvSpec]:
    with EnvStore.open(path) as s:
        return {e.id: e for e in s}


def test_variants_of_synthesized_and_imported_envs_are_made_validated_and_added_once(store, capsys):
    before = _envs(store)
    sources = [e for e in before.values() if e.variant is Variant.ANSWERABLE]
    assert {e.provenance.generator for e in sources} == set(OTHER_FAMILIES)
    code, out = _run(capsys, "--store", str(store), "-q", "derive-variants", "--allow-scripted")
    assert code == 0, out
    table = _table(out)
    assert set(table) == {v.value for v in Variant if v is not Variant.ANSWERABLE}, out
    # every source has a first step to take away; the others need more of an environment
    assert table["unanswerable"]["made"] == len(sources)
    # the counts docs/environments.md cites (the dry run and the imports are deterministic)
    assert {v: (r["made"], r["cannot"]) for v, r in table.items()} == PINNED, out
    for variant in ("unanswerable", "missing_value", "missing_function"):
        row = table[variant]
        assert row["made"] >= 1 and row["added"] == row["made"] and row["failed"] == 0, (variant, out)
        assert row["made"] + row["cannot"] == len(sources), (variant, out)
    after = _envs(store)
    new = [after[i] for i in set(after) - set(before)]
    assert len(new) == sum(r["added"] for r in table.values())
    assert {e.provenance.generator for e in new} <= set(OTHER_FAMILIES)
    for e in new:  # each names the environment it was made from
        made_from = re.search(rf"{e.variant.value} of ([0-9a-f]{{32}})$", e.provenance.source or "")
        assert made_from and made_from.group(1) in before, e.provenance.source
    report = validate_envs(new, progress=False)  # structure + golden replay, twice
    assert report.ok and report.replayed == len(new) and report.determinism, report.by_rule()

    again, out2 = _run(capsys, "--store", str(store), "-q", "derive-variants", "--allow-scripted")
    assert again == 0, out2
    assert {v: (r["added"], r["already"]) for v, r in _table(out2).items()} == {
        v: (0, r["made"]) for v, r in table.items()
    }
    assert set(_envs(store)) == set(after)


def test_an_environment_that_cannot_carry_a_variant_is_counted_with_its_reason(store, capsys):
    code, out = _run(capsys, "--store", str(store), "-q", "derive-variants", "--allow-scripted")
    assert code == 0, out
    # "What do 3 Aurora desk lamps cost?": the product's name is stated only inside "lamps"
    assert re.search(r"missing_value cannot: no identifying value is stated once, as a whole word, in the "
                     r"question: [1-9]", out), out  # fmt: skip
    # "How much warmer is Denver than Accra?": its last step subtracts, which the agent can do itself
    assert re.search(r"missing_function cannot: the last step's tool only computes .*: [1-9]", out), out
    assert re.search(r"missing_value cannot: parallel: .*: [1-9]", out), out
    # the plain-rule RL rows: their tools' golden calls were not recovered, so no value is known
    assert "missing_value cannot: the first step's tool has no golden call: 2" in out, out
    # every reason printed is one of the makers' fixed reasons
    assert {m.group(2) for m in CANNOT.finditer(out)} <= {c.value for c in CannotCarry}, out
    assert len(CANNOT.findall(out)) >= 6, out


def test_nothing_to_derive_from_is_exit_2_saying_what_matched_nothing(store, capsys, tmp_path):
    # without --allow-scripted the dry run's environments are not read: nothing is, and it says why
    code = main(["--store", str(store), "-q", "derive-variants", "--family", "astra_env_synth"])
    err = capsys.readouterr().err
    assert code == 2 and "none of the 8 answerable environments read is a source of variants" in err, err
    assert "made by a dry run (--allow-scripted to derive from it): 8" in err, err
    empty = tmp_path / "empty"
    EnvStore.open(empty, "a", durable=False).close()
    assert main(["--store", str(empty), "-q", "derive-variants"]) == 2
    err = capsys.readouterr().err
    assert "holds no answerable environment to derive variants from; add some first" in err, err


def test_a_plain_rule_tool_without_a_golden_call_is_a_reason_not_a_crash(store, capsys, tmp_path):
    """An ASTRA-RL-1k row under the plain rule keeps tools whose golden calls were not recovered;
    one that declares its identifying parameters used to reach `golden_calls[0]` (IndexError)."""
    plain = next(e for e in _envs(store).values() if e.provenance.generator == PLAIN_RL_GENERATOR)
    (tool,) = plain.tools
    assert not tool.golden_calls
    assert make(Variant.MISSING_VALUE, plain, VariantHints()) is CannotCarry.NO_GOLDEN_CALL
    keyed = tool.model_copy(update={"call_key": CallKey(params=list(tool.parameters["required"]))})
    env = EnvSpec.create(**plain.model_dump(exclude={"id"}) | {"tools": [keyed.model_dump()]})
    assert make(Variant.MISSING_VALUE, env, VariantHints()) is CannotCarry.NO_GOLDEN_CALL
    src, fresh = tmp_path / "plain.jsonl", tmp_path / "fresh"
    src.write_text(env.to_json() + "\n")
    assert main(["--store", str(fresh), "-q", "add", str(src)]) == 0
    code, out = _run(capsys, "--store", str(fresh), "-q", "derive-variants")
    assert code == 0 and _table(out)["unanswerable"]["added"] == 1, out
    assert "missing_value cannot: the first step's tool has no golden call: 1" in out, out


class _NoWorker:
    """A sandbox pool that cannot start, as `SandboxPool` fails where no backend works here."""

    error: Exception = SandboxError("no sandbox worker could start: bwrap: setting up uid map: Permission denied")

    def __init__(self, config) -> None:
        pass

    async def __aenter__(self):
        raise self.error

    async def __aexit__(self, *exc) -> None:
        pass


@pytest.mark.parametrize("command", ["add", "import-astra", "derive-variants"])
def test_a_sandbox_that_cannot_start_says_what_to_do_and_a_bug_keeps_its_traceback(
    command, tmp_path, capsys, monkeypatch
):
    path = tmp_path / "procedural"
    with EnvStore.open(path, "a", durable=False) as s:
        s.add_many(generate(1, seed=2))
    records = tmp_path / "envs.jsonl"
    records.write_text(generate(2, seed=3)[1].to_json() + "\n")
    files = {"add": [str(records)], "import-astra": [str(ASTRA_RECORDS)], "derive-variants": []}[command]
    argv = ["--store", str(path), "-q", command, *files]
    monkeypatch.setattr(validate, "SandboxPool", _NoWorker)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "the sandbox that replays golden calls failed: no sandbox worker could start" in err, err
    assert "install bubblewrap" in err and "--no-replay" in err, err
    monkeypatch.setattr(_NoWorker, "error", RuntimeError("a bug"))
    with pytest.raises(RuntimeError, match="a bug"):
        main(argv)


def test_each_family_registers_its_variant_hints_and_the_package_imports_nothing():
    assert variant_hints("procedural") == PROCEDURAL_HINTS
    assert variant_hints("astra_env_synth") == VariantHints()  # read from the data alone
    # sandbox workers import `families.tau_sandbox` with the standard library only
    probe = "import sys, env_registry.families.tau_sandbox; print(sorted(m for m in sys.modules if m in ('pydantic', 'sympy')))"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "[]", (r.stdout, r.stderr)


def test_made_variants_ask_for_their_behaviour(store, capsys):
    assert _run(capsys, "--store", str(store), "-q", "derive-variants", "--allow-scripted")[0] == 0
    made = [e for e in _envs(store).values() if e.variant is not Variant.ANSWERABLE]
    declining = [e for e in made if e.variant in (Variant.UNANSWERABLE, Variant.MISSING_FUNCTION)]
    assert declining
    for env in declining:
        target = env.reward_target()
        root = root_question(target)
        assert is_inability(root.answer) and not root.needs_tool and type_of(target, root) is AnswerType.INABILITY
        assert judge(
            channel("cannot answer: no tool looks it up"), root.answer, root.match, AnswerType.INABILITY
        ).counted
        assert not judge(channel(env.question), root.answer, root.match, AnswerType.INABILITY).counted
    missing = [e for e in made if e.variant is Variant.MISSING_VALUE]
    assert missing
    for env in missing:
        assert env.user.value not in env.question and "I have in mind" in env.question, env.question
        assert env.user.value in env.user.reply


def test_a_variant_that_fails_validation_is_counted_and_not_added(store, capsys, tmp_path):
    """A source whose later tool now raises, added without replay: its variants that keep that tool
    fail the replay (exit 1, written to the rejects file); the one that takes it away passes."""
    env = next(e for e in _envs(store).values() if e.provenance.generator == "astra_env_synth"
               and e.scenario_type.value == "multi_hop")  # fmt: skip
    last = env.tools[-1]
    broken_tool = last.model_copy(update={"source": f"def {last.name}(**kwargs):\n    raise RuntimeError('down')\n"})
    body = env.model_dump(exclude={"id"}) | {"tools": [*env.tools[:-1], broken_tool]}
    broken = EnvSpec.create(**body)
    src = tmp_path / "broken.jsonl"
    src.write_text(broken.to_json() + "\n")
    fresh = tmp_path / "fresh"
    args = ("-q", "add", str(src), "--no-replay", "--allow-scripted")
    assert _run(capsys, "--store", str(fresh), *args)[0] == 0
    rejects = tmp_path / "rejected.jsonl"
    code, out = _run(
        capsys, "--store", str(fresh), "-q", "derive-variants", "--allow-scripted", "--rejects", str(rejects)
    )
    table = _table(out)
    assert code == 1, out
    assert table["unanswerable"]["failed"] == 1 and table["missing_value"]["failed"] == 1, out
    assert table["missing_function"] == {"made": 1, "already": 0, "added": 1, "failed": 0, "cannot": 0}, out
    assert [e.variant for e in _envs(fresh).values()] == [Variant.ANSWERABLE, Variant.MISSING_FUNCTION]
    issues = [json.loads(line)["issues"][0]["rule"] for line in rejects.read_text().splitlines()]
    assert issues == ["replay_error", "replay_error"], issues


def test_procedural_environments_get_the_generators_own_variants(tmp_path, capsys):
    envs = generate(6, seed=2)
    path = tmp_path / "procedural"
    with EnvStore.open(path, "a", durable=False) as s:
        s.add_many(envs)
    code, out = _run(capsys, "--store", str(path), "-q", "derive-variants", "--limit", "2", "--make", "unanswerable")
    assert code == 0 and set(_table(out)) == {"unanswerable"} and _table(out)["unanswerable"]["added"] == 2, out
    code, out = _run(capsys, "--store", str(path), "-q", "derive-variants", "--family", "procedural")
    assert code == 0 and _table(out)["unanswerable"]["already"] == 2, out  # the first run's are not made again
    expected = {m.id for e in envs for v in Variant if v is not Variant.ANSWERABLE if (m := PROCEDURAL_MAKERS[v](e))}
    assert expected and set(_envs(path)) - {e.id for e in envs} == expected


def test_bad_arguments_are_usage_errors_and_create_no_store(tmp_path, capsys, store):
    assert main(["--store", str(tmp_path / "none"), "derive-variants"]) == 2
    assert not (tmp_path / "none").exists()
    assert main(["--store", str(store), "derive-variants", "--make", "sometimes"]) == 2
    assert main(["--store", str(store), "derive-variants", "--family", "nope"]) == 2
    err = capsys.readouterr().err
    assert "['sometimes'] are not variants to make" in err and f"its families: {sorted(OTHER_FAMILIES)}" in err
