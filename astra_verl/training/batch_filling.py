"""Adaptive batch filling (docs/method.md §3.4), the pure core: which groups train, which are refilled.

A group is the G rollouts of one prompt. GRPO learns nothing from a group whose rewards are
all equal (every advantage is 0) and mostly noise from one whose rewards barely differ (the
advantages are divided by that tiny std). ASTRA keeps a group only when std(R) > delta,
refills the dropped ones with fresh prompts, accumulates valid groups until a full batch
exists, and carries the surplus over to the next step.

`std` is the population std (ddof = 0), as in verl's `algorithm.filter_groups`; a group of one
rollout is never valid. With delta = 0 the rule is exactly verl's (drop std == 0 groups).

`BatchFiller` holds one training step's state and is fed snapshots of the store (every
terminal group with its rewards, plus the count of prompts still generating); `plan` answers
what to do now: drop groups from the store, dispatch more prompts, wait, or take the batch.
It does no I/O; `astra_verl.training.sampler.AstraReplayBuffer` applies its plans to verl's
TransferQueue. The rules, in order:

1. Failed groups (a session raised) and carried-over groups older than `max_carry_steps` are
   dropped at once.
2. Enough valid groups: once nothing is still generating (verl's sync trainer sleeps the
   rollout replicas after sampling, so in-flight requests must finish first), take the
   `batch_size` oldest (carried-over first); keep the surplus for the next step when
   `carry_over`, else drop it; drop the invalid ones.
3. Not enough: every newly judged invalid or failed group of this step earns `refill_factor`
   prompts of credit (verl's sync DAPO uses 2); dispatch the credit within the in-flight cap
   (`max_inflight_batches * batch_size`) and the step's budget (`max_gen_batches * batch_size`
   prompts including the step's first batch). With nothing in flight, dispatch at least the
   deficit.
4. Budget spent, nothing in flight, still short: `on_exhausted: fill` completes the batch with
   the invalid groups of highest std (they train with ~0 advantage; `exhausted` and
   `filled_with_invalid_groups` in the step metrics say so); `on_exhausted: error` raises
   `BatchFillingExhausted`. Invalid groups stay in the store until the step's batch is taken
   only when `fill` may need them.

The reward of the trained batch (verl's `critic/score/mean`) is not the policy's reward: the
groups it dropped are mostly all-zero or all-one ones, so it sits nearer the middle. `metrics`
therefore reports both, side by side: `astra/<metric>_all_groups/mean` over every rollout of
every group this step generated (before anything is dropped; failed groups have no rewards) and
`astra/<metric>_trained_groups/mean` over the groups the batch holds (carried-over ones included).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field, field_validator

from astra_foundation.strict import StrictModel

__all__ = [
    "BatchFiller",
    "BatchFillingConfig",
    "BatchFillingExhausted",
    "FillPlan",
    "Group",
    "group_std",
    "is_valid_group",
    "reward_means",
]


class BatchFillingExhausted(RuntimeError):
    """A step generated its whole budget of prompts without finding enough valid groups."""


class BatchFillingConfig(StrictModel):
    """The `astra.batch_filling` section of a recipe."""

    section = "astra.batch_filling"

    enable: bool = True
    delta: float = Field(0.0, ge=0)  # a group is valid iff std(R) > delta
    metric: str = "reward"  # "reward": the trajectory's reward (rm_scores); else a reward_extra_info key
    carry_over: bool = True  # surplus valid groups train in the next step (docs/method.md §3.4)
    max_carry_steps: int = Field(1, ge=0)  # a carried group older than this many steps is dropped (off-policyness)
    refill_factor: float = Field(2.0, gt=0)  # prompts dispatched per dropped group while the batch is short
    max_inflight_batches: float = Field(1.0, gt=0)  # prompts pending or generating at once, in batches
    max_gen_batches: float = 8.0  # prompts one step may generate, in batches, before on_exhausted
    on_exhausted: Literal["fill", "error"] = "fill"

    @field_validator("max_gen_batches")
    @classmethod
    def _at_least_the_steps_batch(cls, value: float) -> float:
        if not value >= 1:
            raise ValueError(f"must be >= 1 (the step's own batch), got {value}")
        return value

    @field_validator("metric")
    @classmethod
    def _names_a_metric(cls, value: str) -> str:
        if not value:
            raise ValueError("must name 'reward' or a reward_extra_info key")
        return value


def group_std(rewards: Sequence[float]) -> float:
    """Population standard deviation (ddof = 0)."""
    if not rewards:
        return 0.0
    mean = sum(rewards) / len(rewards)
    return math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))


def is_valid_group(rewards: Sequence[float], delta: float) -> bool:
    """ASTRA's rule: the group trains iff it has at least two rollouts and std(R) > delta."""
    return len(rewards) >= 2 and group_std(rewards) > delta


@dataclass(frozen=True)
class Group:
    """A terminal group as the store holds it."""

    uid: str
    step: int  # the global step whose policy generated it
    rewards: tuple[float, ...] = ()
    failed: bool = False  # a session raised; its trajectories are incomplete


@dataclass(frozen=True)
class FillPlan:
    """What to do now. `select` is set once the batch is complete (and then `dispatch` is 0)."""

    drop: frozenset[str] = frozenset()
    dispatch: int = 0
    select: tuple[str, ...] | None = None

    @property
    def done(self) -> bool:
        return self.select is not None


@dataclass
class _Counts:
    judged: int = 0  # this step's groups seen terminal
    valid: int = 0  # ... of which valid
    invalid: int = 0  # dropped for std <= delta
    failed: int = 0
    expired: int = 0  # carried groups dropped for age
    dispatched: int = 0  # refill prompts requested
    carried_in: int = 0  # selected groups from earlier steps
    carried_out: int = 0  # surplus kept for the next step
    discarded_surplus: int = 0
    filled_with_invalid: int = 0
    exhausted: int = 0
    sampled_sum: float = 0.0  # rewards of every rollout of this step's judged groups
    sampled_count: int = 0
    trained_sum: float = 0.0  # rewards of every rollout of the selected groups
    trained_count: int = 0


@dataclass
class BatchFiller:
    """One training step's filling state (create one per step)."""

    config: BatchFillingConfig
    batch_size: int
    step: int
    counts: _Counts = field(default_factory=_Counts)
    _seen: set[str] = field(default_factory=set)
    _credit: float = 0.0

    def __post_init__(self) -> None:
        if self.batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {self.batch_size}")

    @property
    def budget(self) -> int:
        """Prompts this step may still dispatch (its first batch was submitted by the trainer)."""
        total = math.floor(self.config.max_gen_batches * self.batch_size)
        return max(0, total - self.batch_size - self.counts.dispatched)

    def plan(self, groups: Mapping[str, Group] | Sequence[Group], inflight: int) -> FillPlan:
        """Decide from a snapshot: every terminal group in the store, and the prompts in flight."""
        groups = list(groups.values()) if isinstance(groups, Mapping) else list(groups)
        cfg = self.config
        oldest_kept = self.step - (cfg.max_carry_steps if cfg.carry_over else 0)
        drop: set[str] = set()
        valid: list[Group] = []
        invalid: list[Group] = []
        for g in groups:
            new = g.uid not in self._seen
            self._seen.add(g.uid)
            this_step = g.step >= self.step
            if g.step < oldest_kept:
                drop.add(g.uid)
                if new:
                    self.counts.expired += 1
            elif g.failed:
                drop.add(g.uid)
                if new and this_step:
                    self.counts.judged += 1
                    self.counts.failed += 1
                    self._credit += cfg.refill_factor
            elif is_valid_group(g.rewards, cfg.delta):
                valid.append(g)
                if new and this_step:
                    self._judged(g)
                    self.counts.valid += 1
            else:
                invalid.append(g)
                if new and this_step:
                    self._judged(g)
                    self.counts.invalid += 1
                    self._credit += cfg.refill_factor
        if cfg.on_exhausted == "error":
            drop.update(g.uid for g in invalid)  # never needed again: free the store now

        valid.sort(key=lambda g: (g.step, g.uid))
        if len(valid) >= self.batch_size:
            if inflight > 0:
                return FillPlan(drop=frozenset(drop))  # drain before sampling (replicas sleep after)
            return self._take(valid, invalid, drop)

        deficit = self.batch_size - len(valid)
        slots = max(0, max(1, math.floor(cfg.max_inflight_batches * self.batch_size)) - inflight)
        want = math.floor(self._credit) if inflight > 0 else max(math.ceil(self._credit), deficit)
        dispatch = min(want, slots, self.budget)
        if dispatch > 0:
            self._credit = max(0.0, self._credit - dispatch)
            self.counts.dispatched += dispatch
            return FillPlan(drop=frozenset(drop), dispatch=dispatch)
        if inflight > 0:
            return FillPlan(drop=frozenset(drop))  # wait for what is generating
        return self._exhausted(valid, invalid, drop)

    def _judged(self, group: Group) -> None:
        self.counts.judged += 1
        self.counts.sampled_sum += sum(group.rewards)
        self.counts.sampled_count += len(group.rewards)

    def _take(self, valid: list[Group], invalid: list[Group], drop: set[str]) -> FillPlan:
        batch, surplus = valid[: self.batch_size], valid[self.batch_size :]
        self.counts.carried_in += sum(1 for g in batch if g.step < self.step)
        self.counts.trained_sum += sum(sum(g.rewards) for g in batch)
        self.counts.trained_count += sum(len(g.rewards) for g in batch)
        drop.update(g.uid for g in invalid)
        if self.config.carry_over:
            self.counts.carried_out += len(surplus)
        else:
            drop.update(g.uid for g in surplus)
            self.counts.discarded_surplus += len(surplus)
        return FillPlan(drop=frozenset(drop), select=tuple(g.uid for g in batch))

    def _exhausted(self, valid: list[Group], invalid: list[Group], drop: set[str]) -> FillPlan:
        short = self.batch_size - len(valid)
        c = self.counts
        summary = (
            f"step {self.step}: {len(valid)} of {self.batch_size} groups have std(R) > delta={self.config.delta} "
            f"after {self.batch_size + c.dispatched} prompts (max_gen_batches={self.config.max_gen_batches}); "
            f"this step: {c.valid} valid, {c.invalid} invalid, {c.failed} failed"
        )
        if self.config.on_exhausted == "error" or len(invalid) < short:
            hint = (
                "not enough finished groups to fill with either"
                if self.config.on_exhausted == "fill"
                else "set astra.batch_filling.on_exhausted=fill to train on the best invalid groups"
            )
            raise BatchFillingExhausted(
                f"batch filling gave up at {summary}: {hint}; or lower astra.batch_filling.delta, raise "
                "max_gen_batches, or check the reward (a reward that is constant on this data teaches nothing)"
            )
        invalid.sort(key=lambda g: (-group_std(g.rewards), g.step, g.uid))
        fill, rest = invalid[:short], invalid[short:]
        c.exhausted = 1
        c.filled_with_invalid += len(fill)
        return self._take(valid + fill, rest, drop)

    def metrics(self, prefix: str = "astra/batch_filling") -> dict[str, float]:
        """This step's counts, for the step's logged metrics (`valid_rate` only once a group was judged)."""
        c = self.counts
        out = {
            "valid_groups": c.valid,
            "invalid_groups": c.invalid,
            "failed_groups": c.failed,
            "expired_groups": c.expired,
            "dispatched_prompts": c.dispatched,
            "carried_in_groups": c.carried_in,
            "carried_out_groups": c.carried_out,
            "discarded_surplus_groups": c.discarded_surplus,
            "filled_with_invalid_groups": c.filled_with_invalid,
            "exhausted": c.exhausted,
        }
        if c.judged:
            out["valid_rate"] = c.valid / c.judged
        metrics = {f"{prefix}/{k}": float(v) for k, v in out.items()}
        metrics.update(reward_means(self.config.metric, c.sampled_sum, c.sampled_count, c.trained_sum, c.trained_count))
        return metrics


def reward_means(
    metric: str, all_sum: float, all_count: int, trained_sum: float, trained_count: int
) -> dict[str, float]:
    """`astra/<metric>_all_groups/mean` (every rollout generated) and `..._trained_groups/mean` (the batch)."""
    out = {}
    if all_count:
        out[f"astra/{metric}_all_groups/mean"] = all_sum / all_count
    if trained_count:
        out[f"astra/{metric}_trained_groups/mean"] = trained_sum / trained_count
    return out
