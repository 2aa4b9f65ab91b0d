"""The determinism rule runs for the BFCL family in `env_registry validate`: each entry's
ground-truth calls replayed twice in fresh sessions give the same observations."""

from __future__ import annotations

from env_registry.families.bfcl import ground_truth_replay
from env_registry.store import EnvStore
from env_registry.structure import Rule
from env_registry.validate import validate_envs


def test_bfcl_environments_replay_their_ground_truth_twice_and_pass(bfcl_sample):
    specs = list(EnvStore.open(bfcl_sample.store))
    report = validate_envs(specs, progress=False, concurrency=4)
    assert report.ok, [str(i) for i in report.all_issues()[:5]]  # BFCL's missing QA parts are waived, not failed
    assert report.replayed == len(specs) == len(bfcl_sample.ids) and report.determinism


def test_a_bfcl_tool_that_answers_differently_each_session_is_rejected(bfcl_sample):
    spec = next(s for s in EnvStore.open(bfcl_sample.store) if s.provenance.source.endswith(":multi_turn_base_0"))
    broken = spec.model_copy(deep=True)
    tool = broken.tools[ground_truth_replay(spec)[0].tool]  # the first tool BFCL's ground truth calls
    name = tool.name
    tool.source += f"\n\n_bfcl_{name} = {name}\n\n\ndef {name}(**kwargs):\n    import uuid\n    return _bfcl_{name}(**kwargs) + uuid.uuid4().hex\n"
    broken = broken.with_id()
    report = validate_envs([broken], progress=False)
    issues = report.issues[broken.id]
    assert {i.rule for i in issues} == {Rule.DETERMINISM} and issues[0].field.startswith("ground_truth[")
    assert f"{name}(" in issues[0].message
