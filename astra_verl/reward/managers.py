"""verl reward managers `astra_f1` (default), `astra_recall`, `astra_precision`.

Thin adapters around `f1.score_episode`: one `run_single` reads the sample's ground truth
(`reward_model.ground_truth`, a `RewardTarget` JSON written by `env_registry export-parquet`) and
its episode log (`tool_extra_fields["astra_episode"]`, written by `astra_tool_agent`), scores it,
and reports the counts in `reward_extra_info` (numeric, the same keys for every sample):
f1, precision, recall, n, solved, calls, invalid_calls, tool_errors, distractor_calls,
skipped_calls, turns, final_answer_correct. `astra_verl.training.batch_filling` turns them into
step metrics; verl's validation logs them itself (`val-aux/<data_source>/<key>/mean@N`).

Select with `reward.reward_manager.name=astra_f1` (source `register`, the default). Registered
when `astra_verl.reward.managers` is imported, which the verl plugin does in every process.
Settings come from the config's `astra.reward` section (`RewardSettings`).

A sample that cannot be scored (no episode log, a malformed one, a ground truth that is not a
`RewardTarget`, an episode from another environment) raises `RewardInputError` naming the
field and the sample: a broken rollout must stop the run, not train on silent zeros.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any, ClassVar, TypeVar

from omegaconf import DictConfig, OmegaConf
from pydantic import BaseModel, ValidationError
from verl import DataProto
from verl.experimental.reward_loop.reward_manager import register
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from astra_verl.reward.f1 import DEFAULT_EPS, RewardMode, score_episode
from astra_verl.rollout.call_log import CallLogError, EpisodeLog
from env_registry.spec import READABLE_SPEC_VERSIONS, RewardTarget

__all__ = [
    "AstraF1RewardManager",
    "AstraPrecisionRewardManager",
    "AstraRecallRewardManager",
    "AstraRewardManager",
    "RewardInputError",
    "RewardSettings",
    "last_outputs",
    "parse_ground_truth",
    "parse_target",
    "read_sample",
    "require_rule_based",
]

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


class RewardInputError(ValueError):
    """A sample lacks what the astra reward needs, or carries it malformed."""


@dataclass(frozen=True)
class RewardSettings:
    """The `astra.reward` section of a recipe."""

    eps: float = DEFAULT_EPS  # guards precision's n_hat / (c + eps) at c = 0

    @classmethod
    def from_config(cls, config: Any) -> RewardSettings:
        section = _select(config, "astra.reward") or {}
        if isinstance(section, DictConfig):
            section = OmegaConf.to_container(section, resolve=True)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(section) - known)
        if unknown:
            raise ValueError(f"astra.reward has unknown keys {unknown}; known: {sorted(known)}")
        settings = cls(**section)
        if not settings.eps > 0:
            raise ValueError(f"astra.reward.eps must be > 0, got {settings.eps}")
        return settings


def _select(config: Any, key: str) -> Any:
    if config is None:
        return None
    if isinstance(config, DictConfig):
        return OmegaConf.select(config, key, default=None)
    node = config
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


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


def parse_target(ground_truth: Any) -> RewardTarget:
    """A row's `reward_model.ground_truth` (RewardTarget JSON, or its already-decoded dict)."""
    target = parse_ground_truth(
        ground_truth, RewardTarget, "re-export the rows with `python -m env_registry export-parquet`"
    )
    if target.spec_version not in READABLE_SPEC_VERSIONS:
        raise RewardInputError(
            f"reward_model.ground_truth has spec_version {target.spec_version}; this reader knows "
            f"{list(READABLE_SPEC_VERSIONS)}"
        )
    if not target.sub_questions:
        raise RewardInputError(f"reward_model.ground_truth of env {target.env_id} has no sub_questions")
    return target


def read_sample(
    non_tensor: dict, parse: Callable[[Any], T], check_log: Callable[[str, EpisodeLog], None] | None = None
) -> tuple[str, T, EpisodeLog]:
    """One sample's description (for errors), its parsed ground truth and its episode log.

    `parse` turns `reward_model.ground_truth` into a target with an `env_id`; a sample whose
    episode ran another environment than its ground truth names is an error, not a zero.
    `check_log(where, log)` raises on a log the manager cannot score (checked first).
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
    if check_log is not None:
        check_log(where, log)
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


def require_rule_based(config: Any, manager: str) -> None:
    """Refuse a config in which verl's reward loop would score with a reward model and bypass `manager`."""
    if _select(config, "reward.reward_model.enable"):
        raise ValueError(
            "reward.reward_model.enable=True makes verl's reward loop score with the reward model and bypass "
            f"{manager}; its reward is rule-based: set reward.reward_model.enable=False"
        )


def _describe(non_tensor: dict) -> str:
    extra = non_tensor.get("extra_info")
    index = extra.get("index") if isinstance(extra, dict) else None
    parts = [f"{k}={v!r}" for k, v in (("uid", non_tensor.get("uid")), ("index", index)) if v is not None]
    parts.append(f"data_source={non_tensor.get('data_source')!r}")
    return "sample " + " ".join(parts)


class AstraRewardManager(RewardManagerBase):
    """Scores one astra episode; subclasses fix the reward mode."""

    mode: ClassVar[RewardMode] = RewardMode.F1

    def __init__(
        self, config, tokenizer, compute_score, reward_router_address=None, reward_model_tokenizer=None, **kwargs
    ):
        super().__init__(config, tokenizer, compute_score)
        if _select(config, "reward.custom_reward_function.path"):
            raise ValueError(
                "astra reward managers compute the ASTRA reward themselves and would ignore "
                "reward.custom_reward_function.path; unset it, or use reward.reward_manager.name=naive"
            )
        require_rule_based(config, type(self).__name__)
        self.settings = RewardSettings.from_config(config)

    def score(self, non_tensor: dict) -> dict:
        """Score one sample's non-tensor fields (what `run_single` reads); pure and synchronous."""
        _, target, log = read_sample(non_tensor, parse_target)
        result = score_episode(log, target, self.mode, eps=self.settings.eps)
        return {"reward_score": result.reward, "reward_extra_info": result.extra_info()}

    async def run_single(self, data: DataProto) -> dict:
        return self.score(last_outputs(data))


@register("astra_f1")
class AstraF1RewardManager(AstraRewardManager):
    """ASTRA's trajectory-level F1 of sub-question recall and call precision (the default)."""

    mode = RewardMode.F1


@register("astra_recall")
class AstraRecallRewardManager(AstraRewardManager):
    """Ablation: recall of sub-questions only (ASTRA reports turn explosion with it)."""

    mode = RewardMode.RECALL


@register("astra_precision")
class AstraPrecisionRewardManager(AstraRewardManager):
    """Ablation: call precision only (ASTRA reports turn collapse with it)."""

    mode = RewardMode.PRECISION
