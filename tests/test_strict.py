"""One way to do each thing: every settings section and record is a StrictModel; one name, one meaning."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pydantic
import pytest

from astra_foundation.sandbox import SandboxConfig
from astra_foundation.strict import RecordModel, SettingsError, StrictModel
from astra_verl.calls.call_log import CallRecord, EpisodeLog
from astra_verl.eval.bfcl_run import BfclResult
from astra_verl.eval.bfcl_single import SingleResult
from astra_verl.eval.chat_rollout import ChatEpisode
from astra_verl.eval.envs import EnvEpisode
from astra_verl.eval.tau_report import TauResult
from astra_verl.platform.hf_rollout import HFRolloutOptions
from astra_verl.reward.managers import RewardSettings
from astra_verl.rollout.agent_loop import LoopEpisode
from astra_verl.rollout.config import AstraRolloutConfig, RolloutSettings
from astra_verl.rollout.episode import Episode
from astra_verl.training.batch_filling import BatchFillingConfig
from astra_verl.training.sampler import SamplerKwargs
from data_synth.traj.config import TrajConfig
from env_registry.episode_driver import EpisodeLimits
from env_registry.export import ExportConfig
from env_registry.rows import RowInfo, ToolRef
from env_registry.sft_record import SFTRecord

SECTIONS = [
    SandboxConfig,
    AstraRolloutConfig,
    RewardSettings,
    HFRolloutOptions,
    BatchFillingConfig,
    SamplerKwargs,
    TrajConfig,
    ExportConfig,
    EpisodeLimits,
]
# one strict record per boundary: episode logs, RL rows, SFT rows, each evaluation's results line
RECORDS = [
    EpisodeLog,
    CallRecord,
    RowInfo,
    ToolRef,
    RolloutSettings,
    SFTRecord,
    BfclResult,
    SingleResult,
    EnvEpisode,
    TauResult,
]


@pytest.mark.parametrize("model", SECTIONS + RECORDS, ids=lambda m: m.__name__)
def test_every_settings_section_and_record_is_a_strict_model(model):
    assert issubclass(model, StrictModel)
    assert model.model_config["extra"] == "forbid"


@pytest.mark.parametrize("model", SECTIONS, ids=lambda m: m.__name__)
def test_a_section_names_the_unknown_key_and_the_known_ones(model):
    with pytest.raises(SettingsError) as err:
        model.from_mapping({"not_a_key": 1})
    text = str(err.value)
    assert "unknown keys ['not_a_key']; known keys: [" in text
    assert all(name in text for name in model.model_fields)
    assert isinstance(err.value, ValueError) and isinstance(err.value, TypeError)


@pytest.mark.parametrize("model", SECTIONS, ids=lambda m: m.__name__)
def test_a_section_is_frozen(model):
    settings = model()
    name = next(iter(model.model_fields))
    with pytest.raises(Exception, match="frozen"):
        setattr(settings, name, getattr(settings, name))


@pytest.mark.parametrize(
    "model",
    [
        "env_registry.spec:EnvSpec",
        "env_registry.spec:ToolSpec",
        "env_registry.families.bfcl:BfclTarget",
        "env_registry.families.tau:TauTarget",
        "data_synth.pipeline.records:Record",
        "data_synth.pipeline.records:Envelope",
        "data_synth.traj.records:Server",
        "data_synth.traj.records:ToolDoc",
    ],
)
def test_persisted_records_read_back_from_json_are_record_models(model):
    """The other base the strict module names: unknown keys refused, pydantic's own errors."""
    module, name = model.split(":")
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, RecordModel) and not issubclass(cls, StrictModel)
    with pytest.raises(pydantic.ValidationError, match="not_a_field|Extra inputs"):
        cls.model_validate({"not_a_field": 1})


def test_types_are_checked_without_coercion_but_yaml_ints_are_numbers():
    assert SandboxConfig.from_mapping({"call_timeout_s": 5}).call_timeout_s == 5.0
    with pytest.raises(SettingsError, match=r"astra.sandbox.workers must be int, got '2'"):
        SandboxConfig.from_mapping({"workers": "2"})
    with pytest.raises(SettingsError, match=r"astra.rollout.stop_when_all_solved must be true or false, got 1"):
        AstraRolloutConfig.from_mapping({"stop_when_all_solved": 1})
    with pytest.raises(SettingsError, match=r"chains: unknown keys \['per_strat'\]"):
        TrajConfig.from_dict({"chains": {"per_strat": 1}})


def test_the_episode_is_implemented_once():
    assert issubclass(LoopEpisode, Episode) and issubclass(ChatEpisode, Episode)
    for view_member in ("shown_tools", "tool_schemas", "reveal", "tool_needing"):
        assert view_member not in vars(LoopEpisode) and view_member not in vars(ChatEpisode)


def _classes_named(name: str) -> list[str]:
    found = []
    for package in ("astra_verl", "env_registry", "data_synth"):
        for info in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
            if info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            found += [
                f"{info.name}.{n}" for n, c in vars(module).items() if inspect.isclass(c) and c.__module__ == info.name
                and n == name
            ]  # fmt: skip
    return found


@pytest.mark.parametrize("name", ["CallRecord", "ExportConfig", "Episode"])
def test_one_name_one_meaning(name):
    assert len(_classes_named(name)) == 1, _classes_named(name)


# a module may share its name with an environment record's field only when it computes that field
FIELD_NAMED_MODULES = {
    "call_key": "env_registry.call_key infers ToolSpec.call_key for synthesized tools",
    "tools": "data_synth.env.tools synthesizes an environment's tools",
}


def test_no_module_is_named_like_a_field_of_another_meaning():
    """`call_check` once named both the pre-call gate (a module) and the reward target's field of
    identifying arguments: two meanings, one word. Now the gate is `env_registry.call_gate`."""
    from env_registry.spec import CallCheck, EnvSpec, RewardTarget, SubQuestion, TargetSubQuestion, ToolSpec

    fields = set().union(*(m.model_fields for m in (RewardTarget, TargetSubQuestion, CallCheck, EnvSpec, SubQuestion, ToolSpec)))  # fmt: skip
    modules = set()
    for name in ("env_registry", "astra_verl", "data_synth", "astra_foundation"):
        package = importlib.import_module(name)
        modules |= {m.name.rsplit(".", 1)[1] for m in pkgutil.walk_packages(package.__path__, f"{name}.")}
    assert "call_check" in fields  # the field keeps its name: RL rows are unchanged
    assert sorted((fields & modules) - set(FIELD_NAMED_MODULES)) == []
