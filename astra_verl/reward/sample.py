"""One sample as a reward manager reads it: its ground truth, its episode log, what to call it.

Every astra reward manager reads its samples through `manager_base.AstraRewardManagerBase`, which
calls these readers and guards (`read_sample`, `refuse_custom_reward_function`,
`require_rule_based`). No verl import here: the managers are registered by verl's plugin loader,
and a module they share must not import verl (see `astra_verl.plugin`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from astra_verl.calls.call_log import CallLogError, EpisodeLog
from astra_verl.trainer_config import select_key
from env_registry.spec import READABLE_SPEC_VERSIONS, RewardTarget

if TYPE_CHECKING:
    from verl import DataProto

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


class RewardInputError(ValueError):
    """A sample lacks what the astra reward needs, or carries it malformed."""


@lru_cache(maxsize=8192)
def _parse_json(model: type[BaseModel], text: str) -> BaseModel:
    # The G rollouts of a prompt share one ground-truth string: parse it once.
    return model.model_validate_json(text)


def parse_ground_truth(ground_truth: Any, model: type[M], how_to_fix: str) -> M:
    """A row's `reward_model.ground_truth` as `model`: its JSON (str or bytes) or its already-decoded dict."""
    name = model.__name__
    try:
        if isinstance(ground_truth, bytes):
            ground_truth = ground_truth.decode("utf-8")
        if isinstance(ground_truth, str):
            return _parse_json(model, ground_truth)  # type: ignore[return-value]
        if isinstance(ground_truth, dict):
            return model.model_validate(ground_truth)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise RewardInputError(
            f"reward_model.ground_truth is not a {name} ({exc.error_count()} errors: {first['msg']} "
            f"at {'.'.join(map(str, first['loc'])) or '<root>'}); {how_to_fix}"
        ) from exc
    raise RewardInputError(f"reward_model.ground_truth must be a {name} JSON string, got {type(ground_truth).__name__}")


REWARD_TARGET_EXPORT = "re-export the rows with `python -m env_registry export-parquet`"


def parse_target(ground_truth: Any) -> RewardTarget:
    """A row's `reward_model.ground_truth` (RewardTarget JSON, or its already-decoded dict)."""
    target = parse_ground_truth(ground_truth, RewardTarget, REWARD_TARGET_EXPORT)
    check_reward_target(target)
    return target


def check_reward_target(target: RewardTarget) -> None:
    """Raise RewardInputError on a RewardTarget this reader cannot score (its spec version, no sub-questions)."""
    if target.spec_version not in READABLE_SPEC_VERSIONS:
        raise RewardInputError(
            f"reward_model.ground_truth has spec_version {target.spec_version}; this reader knows "
            f"{list(READABLE_SPEC_VERSIONS)}"
        )
    if not target.sub_questions:
        raise RewardInputError(f"reward_model.ground_truth of env {target.env_id} has no sub_questions")


def check_version(kind: str, version: int, known: int) -> None:
    """Raise RewardInputError on a target written in a version of `kind` this reader does not know."""
    if version != known:
        raise RewardInputError(
            f"reward_model.ground_truth is a {kind} of version {version}; this reader knows version {known}: "
            "export the rows again with this checkout"
        )


def read_sample(non_tensor: dict, parse: Callable[[Any], T], hook: str | None = None) -> tuple[str, T, EpisodeLog]:
    """One sample's description (for errors), its parsed ground truth and its episode log.

    `parse` turns `reward_model.ground_truth` into a target with an `env_id`. An episode run with
    another hook than `hook` (None: any hook), or in another environment than its ground truth
    names, is an error, not a zero: the row and the manager do not belong together.
    """
    where = _describe(non_tensor)
    reward_model = non_tensor.get("reward_model")
    if not isinstance(reward_model, dict) or "ground_truth" not in reward_model:
        raise RewardInputError(f"{where}: reward_model.ground_truth is missing (got {type(reward_model).__name__})")
    try:
        target = parse(reward_model["ground_truth"])
        log = EpisodeLog.from_extra_fields(non_tensor.get("tool_extra_fields"))
    except (RewardInputError, CallLogError) as exc:
        raise RewardInputError(f"{where}: {exc}") from exc
    if hook is not None and log.hook != hook:
        raise RewardInputError(
            f"{where}: the episode ran with hook {log.hook!r}, not {hook!r}; rows this manager scores carry "
            f"extra_info.interaction_kwargs.name={hook} (their export writes it)"
        )
    if log.env_id != target.env_id:  # type: ignore[attr-defined]
        raise RewardInputError(
            f"{where}: the episode ran env {log.env_id!r} but reward_model.ground_truth is for env "
            f"{target.env_id!r}; the row's extra_info.astra and its ground truth disagree"  # type: ignore[attr-defined]
        )
    return where, target, log


def last_outputs(data: DataProto) -> dict:
    """The non-tensor fields of a sample's last output, where multi-output agent loops put the episode."""
    # As verl's naive manager assumes; only non-tensor fields are read: no decoding, no tensor indexing.
    if len(data) == 0:
        raise RewardInputError("run_single got an empty DataProto")
    return {key: values[-1] for key, values in data.non_tensor_batch.items()}


def refuse_custom_reward_function(config: Any, manager: str) -> None:
    """Refuse `reward.custom_reward_function.path`, which verl hands `manager` as `compute_score` and
    `manager` never calls: the run would train on the astra reward while the config names another."""
    path = select_key(config, "reward.custom_reward_function.path")
    if path:
        raise ValueError(
            f"reward.custom_reward_function.path={path!r} is set, but reward manager {manager} computes its "
            "reward itself and would silently ignore that function; unset reward.custom_reward_function.path, "
            "or select a manager that calls it (reward.reward_manager.name=naive)"
        )


def require_rule_based(config: Any, manager: str) -> None:
    """Refuse a config in which verl's reward loop would score with a reward model and bypass `manager`."""
    if select_key(config, "reward.reward_model.enable"):
        raise ValueError(
            "reward.reward_model.enable=True makes verl's reward loop score with the reward model and bypass "
            f"reward manager {manager}, whose reward is rule-based: set reward.reward_model.enable=False"
        )


def _describe(non_tensor: dict) -> str:
    extra = non_tensor.get("extra_info")
    index = extra.get("index") if isinstance(extra, dict) else None
    parts = [f"{k}={v!r}" for k, v in (("uid", non_tensor.get("uid")), ("index", index)) if v is not None]
    parts.append(f"data_source={non_tensor.get('data_source')!r}")
    return "sample " + " ".join(parts)
