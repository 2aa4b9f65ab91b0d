"""`AstraReplayBuffer`: ASTRA's batch filling and episode metrics inside verl 0.9.1's trainer.

In verl 0.9.1 (`trainer.use_v1=true`, the default) group filtering lives in the replay buffer
that samples each step's batch out of TransferQueue (`verl.trainer.ppo.v1.replay_buffer`), and
the trainer takes a user class in its place through

    trainer.v1.sampler.custom_sampler.path=pkg://astra_verl.training.sampler
    trainer.v1.sampler.custom_sampler.name=AstraReplayBuffer
    trainer.v1.sampler.sampler_kwargs={batch_filling: ${astra.batch_filling}, gen_batch_size: ..., ...}

(`PPOTrainer._build_replay_buffer`). This subclass of verl's sync `ReplayBuffer`:

- fills the batch with groups whose std(R) > delta (`batch_filling.BatchFiller` decides; this
  class only applies its plans to TransferQueue: drop groups, dispatch prompts through the
  trainer's `refill_fn`, wait, take the batch), carrying surplus groups over when configured;
- returns the episode metrics of the batch it hands out (`metrics.episode_metrics` over each
  trajectory's `reward_extra_info`) with the filling counts, and the mean reward of every group
  sampled beside that of the trained groups (`astra/reward_all_groups/mean`,
  `astra/reward_trained_groups/mean`: equal without batch filling). `sample`'s metrics are the one
  channel from a sampler into verl's logged step metrics (`PPOTrainer._step_once`).

Validation batches, and training batches with `batch_filling.enable: false`, are sampled by
verl's own code unchanged (episode metrics are still added for training).

verl passes a custom sampler none of `algorithm.filter_groups`, so the recipe hands over what is
needed in `sampler_kwargs`: `batch_filling` (the `astra.batch_filling` section),
`gen_batch_size` (`data.gen_batch_size`, which must be 1 so refills can ask for any number of
prompts, as verl's own group filtering forces), `verl_filter_groups`
(`algorithm.filter_groups.enable`, refused when true: verl would silently ignore it here), and
optionally `poll_interval` (seconds between TransferQueue polls, verl's default 2) and
`episode_dir` (`${trainer.rollout_data_dir}`: each training batch's episode records go to
`<dir>/episodes/<step>.jsonl`, beside verl's dump; `astra_verl.inspect`).

Only `trainer.v1.trainer_mode=sync` is supported: ASTRA trains on-policy, and verl's sync
trainer sleeps the rollout replicas after sampling, which this class respects by draining
in-flight prompts before it takes a batch. Carried-over surplus lives in TransferQueue, which
the sync trainer does not checkpoint: after a resume those few groups are regenerated.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

import transfer_queue as tq
from omegaconf import DictConfig, OmegaConf
from verl.trainer.ppo.v1.replay_buffer import FILTER_GROUPS_REWARD_METRIC, ReplayBuffer
from verl.utils.skip import SkipManager

from astra_foundation.strict import StrictModel
from astra_verl.inspect.records import episode_record, write_records
from astra_verl.reward.episode_metrics import episode_metrics
from astra_verl.training.batch_filling import BatchFiller, BatchFillingConfig, Group, reward_means

__all__ = ["AstraReplayBuffer", "final_keys"]

logger = logging.getLogger(__name__)


class SamplerKwargs(StrictModel):
    """`trainer.v1.sampler.sampler_kwargs` as the recipe hands them over (see the module docstring)."""

    section = "trainer.v1.sampler.sampler_kwargs"

    batch_filling: dict[str, Any] | None = None  # the `astra.batch_filling` section, read by BatchFillingConfig
    gen_batch_size: int | None = None
    verl_filter_groups: bool = False
    poll_interval: float = 2.0
    episode_dir: str | None = None  # ${trainer.rollout_data_dir}: where episode records go (None: none)


def final_keys(keys: Iterable[str]) -> list[str]:
    """The last output of every session: trajectory keys are `{uid}_{session}_{index}`, and a
    multi-output loop repeats the episode's reward on every output of a session."""
    last: dict[tuple[str, str], tuple[int, str]] = {}
    for key in keys:
        uid, session, index = key.rsplit("_", 2)
        if (uid, session) not in last or int(index) > last[(uid, session)][0]:
            last[(uid, session)] = (int(index), key)
    return [key for _, key in last.values()]


def _as_dict(kwargs: Any) -> dict[str, Any]:
    if isinstance(kwargs, DictConfig):
        return OmegaConf.to_container(kwargs, resolve=True)
    return dict(kwargs or {})


class AstraReplayBuffer(ReplayBuffer):
    """verl's sync replay buffer with ASTRA's std(R) > delta batch filling and episode metrics."""

    def __init__(
        self,
        trainer_mode: str,
        trainer_config: Any,
        max_off_policy_threshold: int | None,
        max_off_policy_strategy: str,
        sampler_kwargs: Any,
        refill_fn=None,
        **kwargs: Any,
    ):
        if trainer_mode != "sync":
            raise ValueError(
                f"AstraReplayBuffer supports trainer.v1.trainer_mode=sync only (got {trainer_mode!r}): ASTRA trains "
                "on-policy; for async modes unset trainer.v1.sampler.custom_sampler"
            )
        options = SamplerKwargs.from_mapping(_as_dict(sampler_kwargs))
        self.filling = BatchFillingConfig.from_mapping(options.batch_filling)
        if options.verl_filter_groups:
            raise ValueError(
                "algorithm.filter_groups.enable=True is ignored by verl when a custom sampler is set; "
                "AstraReplayBuffer does the filtering: set algorithm.filter_groups.enable=False and use "
                "astra.batch_filling (delta=0 drops exactly the groups verl's filter_groups drops)"
            )
        if self.filling.enable and options.gen_batch_size != 1:
            raise ValueError(
                f"astra.batch_filling needs data.gen_batch_size=1 (got {options.gen_batch_size!r}): "
                "refills ask the trainer for any number of prompts, in gen_batch_size chunks"
            )
        if self.filling.enable and refill_fn is None:
            raise ValueError("astra.batch_filling needs the trainer's refill_fn to replace dropped groups")
        super().__init__(
            trainer_mode=trainer_mode,
            trainer_config=trainer_config,
            max_off_policy_threshold=max_off_policy_threshold,
            max_off_policy_strategy=max_off_policy_strategy,
            sampler_kwargs=sampler_kwargs,
            poll_interval=options.poll_interval,
            refill_fn=refill_fn,
            **kwargs,
        )
        self._rewards: dict[str, tuple[float, ...]] = {}  # finished groups are immutable: read once
        self.episode_dir: str | None = options.episode_dir or None  # None: no episode records

    @SkipManager.annotate_tq(role="rollout_tq", phase="sample")
    def sample(self, global_steps: int, partition_id: str, batch_size: int):
        if partition_id == "val" or not self.filling.enable:
            # verl's own sampling, undecorated (this method carries the rollout-skip decorator once)
            batch, metrics = ReplayBuffer.sample.__wrapped__(self, global_steps, partition_id, batch_size)
        else:
            batch, metrics = self._sample_filled(global_steps, partition_id, batch_size)
        if partition_id != "val":
            metrics.update(self._episode_metrics(batch, global_steps, with_rewards=not self.filling.enable))
        return batch, metrics

    # -- batch filling ------------------------------------------------------------------
    def _sample_filled(self, global_steps: int, partition_id: str, batch_size: int):
        filler = BatchFiller(self.filling, batch_size=batch_size, step=global_steps)
        last_debug_time = time.time()
        while True:
            self._sync_metadata_from_transfer_queue()
            groups = self._terminal_groups(partition_id)
            inflight = len(self.pending_keys[partition_id]) + len(self.running_keys[partition_id])
            plan = filler.plan(groups, inflight)
            if plan.drop:
                self._clear_groups(partition_id, set(plan.drop))
                for uid in plan.drop:
                    self._rewards.pop(uid, None)
            if plan.dispatch:
                self.refill_fn(plan.dispatch)
                continue
            if plan.done:
                break
            last_debug_time = self._wait_for_next_poll(partition_id, last_debug_time)

        batch = self._materialize_batch(partition_id, list(plan.select), dict(self.partitions[partition_id]))
        for uid in plan.select:
            self._rewards.pop(uid, None)
        metrics = filler.metrics()
        if metrics.get("astra/batch_filling/exhausted"):
            logger.warning(
                "astra batch filling: step %s filled %d of %d groups with std(R) <= delta=%s after its prompt budget",
                global_steps,
                int(metrics["astra/batch_filling/filled_with_invalid_groups"]),
                batch_size,
                self.filling.delta,
            )
        return batch, metrics

    def _terminal_groups(self, partition_id: str) -> list[Group]:
        steps = self.prompt_global_steps[partition_id]
        finished = self.finished_keys[partition_id]
        unread = finished - self._rewards.keys()
        if unread:
            self._rewards.update(self._read_rewards(partition_id, unread))
        groups = [Group(uid=uid, step=steps.get(uid, 0), rewards=self._rewards[uid]) for uid in finished]
        groups += [Group(uid=uid, step=steps.get(uid, 0), failed=True) for uid in self.failure_keys[partition_id]]
        return groups

    def _read_rewards(self, partition_id: str, uids: set[str]) -> dict[str, tuple[float, ...]]:
        """One reward per session of each group: the trajectory reward, or a reward_extra_info key."""
        keys = final_keys(k for k in self.partitions[partition_id] if k.rsplit("_", 2)[0] in uids)
        by_uid: dict[str, list[float]] = {uid: [] for uid in uids}
        if not keys:
            return {uid: () for uid in uids}
        metric = self.filling.metric
        use_reward = metric == FILTER_GROUPS_REWARD_METRIC
        field = "rm_scores" if use_reward else "extra_fields"
        values = list(tq.kv_batch_get(keys=keys, partition_id=partition_id, select_fields=[field])[field])
        for key, value in zip(keys, values, strict=True):
            uid = key.rsplit("_", 2)[0]
            if use_reward:
                by_uid[uid].append(float(value.sum().item()))
                continue
            info = _reward_extra_info(value)
            if metric not in info:
                raise RuntimeError(
                    f"astra.batch_filling.metric={metric!r} is not in the reward_extra_info of trajectory {key} "
                    f"(it has {sorted(info)}); use 'reward' or a key the reward manager reports"
                )
            by_uid[uid].append(float(info[metric]))
        return {uid: tuple(v) for uid, v in by_uid.items()}

    # -- metrics ------------------------------------------------------------------------
    def _episode_metrics(self, batch, global_steps: int, with_rewards: bool) -> dict[str, float]:
        """The batch's episode metrics; `with_rewards`: also its reward means (the batch is every
        group); with `episode_dir`, also its episode records (one read)."""
        keys = final_keys(k for k, tag in zip(batch.keys, batch.tags, strict=True) if not tag.get("is_padding"))
        if not keys:
            return {}
        fields = ["extra_fields"]
        if with_rewards or self.episode_dir:
            fields.append("rm_scores")
        if self.episode_dir:
            fields += ["reward_model", "raw_prompt"]
        data = tq.kv_batch_get(keys=keys, partition_id=batch.partition_id, select_fields=fields)
        extra = list(data["extra_fields"])
        rewards = [float(s.sum().item()) for s in data["rm_scores"]] if "rm_scores" in fields else []
        if self.episode_dir:
            rows = zip(keys, extra, list(data["reward_model"]), rewards, list(data["raw_prompt"]), strict=True)
            found = (episode_record(global_steps, k, e, rm, r, prompt) for k, e, rm, r, prompt in rows)
            write_records(self.episode_dir, global_steps, [r for r in found if r is not None])
        metrics = episode_metrics([_reward_extra_info(v) for v in extra])
        if with_rewards:
            total = sum(rewards)
            metrics.update(reward_means(FILTER_GROUPS_REWARD_METRIC, total, len(keys), total, len(keys)))
        return metrics


def _reward_extra_info(extra_fields: Any) -> Mapping[str, Any]:
    extra_fields = getattr(extra_fields, "data", extra_fields)
    info = extra_fields.get("reward_extra_info") if isinstance(extra_fields, Mapping) else None
    return info if isinstance(info, Mapping) else {}
