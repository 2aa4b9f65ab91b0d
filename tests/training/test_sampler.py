"""AstraReplayBuffer inside verl's machinery: built by verl's own `PPOTrainer._build_replay_buffer`
from the composed recipe, sampling from a real TransferQueue (Ray, in-process), fed by a scripted
rollout that writes groups the way verl's `AgentLoopWorkerTQ` does (prompt tags, trajectories
`{uid}_{session}_0` with `rm_scores` and `extra_fields.reward_extra_info`).

What is not exercised here: a whole `main_ppo` run (needs a rollout backend; see scripts/gpu_smoke.sh).
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
import torch
from testkit import ray_session

from astra_verl.training.batch_filling import is_valid_group

pytestmark = pytest.mark.slow

B = 4
VALID = (0.0, 0.5, 1.0, 1.0)
FLAT = (0.8, 0.8, 0.8, 0.8)
NEAR_FLAT = (0.8, 0.8, 0.8, 0.75)


@pytest.fixture(scope="module")
def tq():
    import transfer_queue
    from omegaconf import OmegaConf

    with ray_session(num_cpus=4, include_dashboard=False, log_to_driver=False):
        transfer_queue.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
        yield transfer_queue
        transfer_queue.close()


def info(reward: float) -> dict:
    return {
        "f1": reward, "precision": reward, "recall": reward, "n": 4.0, "solved": 4.0 * reward, "calls": 3.0,
        "invalid_calls": 1.0, "tool_errors": 0.0, "distractor_calls": 0.0, "skipped_calls": 0.0, "turns": 4.0,
        "final_answer_correct": 0.0,
    }  # fmt: skip


class ScriptedRollout:
    """Writes finished groups into TransferQueue as verl's TQ agent-loop worker does."""

    def __init__(self, tq, patterns):
        self.tq, self.patterns, self.count, self.step, self.dispatched = tq, list(patterns), 0, 1, 0

    def new_uid(self) -> str:
        self.count += 1
        return f"g{self.count:03d}"

    def put(self, rewards=None, *, status="finished", partition="train", uid=None) -> str:
        from verl.utils.tensordict_utils import list_of_dict_to_tensordict

        uid = uid or self.new_uid()
        if rewards is not None:
            fields = [
                {"rm_scores": torch.tensor([0.0, 0.0, r]), "extra_fields": {"reward_extra_info": info(r)}}
                for r in rewards
            ]
            self.tq.kv_batch_put(
                keys=[f"{uid}_{i}_0" for i in range(len(rewards))],
                partition_id=partition,
                fields=list_of_dict_to_tensordict(fields),
                tags=[{"status": "success", "min_global_steps": self.step, "max_global_steps": self.step}]
                * len(rewards),
            )
        self.tq.kv_put(
            key=uid, partition_id=partition, tag={"is_prompt": True, "status": status, "global_steps": self.step}
        )
        return uid

    def refill(self, n: int) -> int:
        """The trainer's `_add_prompts_to_generate`, answered at once from the script."""
        self.dispatched += n
        for _ in range(n):
            self.put(self.patterns.pop(0))
        return n


def build_sampler(refill, overrides=()):
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    GlobalHydra.instance().clear()
    with initialize_config_module("verl.trainer.config", version_base=None):
        cfg = compose(
            "ppo_trainer",
            overrides=[
                "+recipe=astra_grpo",
                f"data.train_batch_size={B}",
                "astra.batch_filling.max_inflight_batches=2.0",
                "+trainer.v1.sampler.sampler_kwargs.poll_interval=0.05",
                *overrides,
            ],
        )
    trainer = SimpleNamespace(config=cfg, trainer_mode=cfg.trainer.v1.trainer_mode, _add_prompts_to_generate=refill)
    return PPOTrainer._build_replay_buffer(trainer)  # verl's own construction path for a custom sampler


def uids_of(batch) -> set[str]:
    return {k.split("_")[0] for k in batch.keys}


def test_filled_batches_carry_over_and_report_metrics_through_verls_hook(tq):
    from astra_verl.training.sampler import AstraReplayBuffer

    rollout = ScriptedRollout(tq, [VALID, FLAT, VALID, VALID])
    sampler = build_sampler(rollout.refill, ["astra.batch_filling.delta=0.05"])
    assert isinstance(sampler, AstraReplayBuffer) and sampler.filling.delta == 0.05

    # step 1: the trainer's first batch of B prompts, one still generating
    good = [rollout.put(VALID), rollout.put(VALID)]
    near, failed = rollout.put(NEAR_FLAT), rollout.put(status="failure")
    late = rollout.put(status="running")
    finish = threading.Timer(0.5, lambda: rollout.put(VALID, uid=late))
    finish.start()
    t0 = time.time()
    batch, metrics = sampler.sample(global_steps=1, partition_id="train", batch_size=B)
    assert time.time() - t0 >= 0.45  # drained the running group before taking the batch
    assert len(uids_of(batch)) == B and len(batch.keys) == B * 4
    assert set(good) <= uids_of(batch) and near not in uids_of(batch) and failed not in uids_of(batch)
    assert rollout.dispatched == 4  # near-flat and failed: 2 prompts each
    m = {k.removeprefix("astra/batch_filling/"): v for k, v in metrics.items() if "batch_filling" in k}
    assert (m["valid_groups"], m["invalid_groups"], m["failed_groups"], m["dispatched_prompts"]) == (6, 2, 1, 4)
    assert m["carried_out_groups"] == 2
    # the policy's reward (every group sampled, 6 valid + near-flat + flat) beside the batch's
    assert metrics["astra/reward_all_groups/mean"] == pytest.approx((6 * 0.625 + 0.7875 + 0.8) / 8)
    assert metrics["astra/reward_trained_groups/mean"] == pytest.approx(0.625)
    # episode metrics of the trained batch reach the step metrics
    assert metrics["astra/turns/mean"] == 4.0 and metrics["astra/invalid_call_rate"] == pytest.approx(1 / 3)
    assert metrics["astra/episodes"] == B * 4

    store = tq.kv_list("train")["train"]
    prompts = {k for k, tag in store.items() if tag.get("is_prompt")}
    assert near not in prompts and failed not in prompts and not prompts & uids_of(batch)
    carried = prompts
    assert len(carried) == 2 and all(store[u]["status"] == "finished" for u in carried)
    tq.kv_clear(keys=batch.keys, partition_id="train")  # what the trainer does at the end of a step

    # step 2: carried groups train first, next to the new ones
    rollout.step = 2
    fresh = [rollout.put(VALID) for _ in range(B)]
    batch, metrics = sampler.sample(global_steps=2, partition_id="train", batch_size=B)
    assert carried <= uids_of(batch) and len(uids_of(batch) & set(fresh)) == 2
    assert metrics["astra/batch_filling/carried_in_groups"] == 2 and rollout.dispatched == 4
    tq.kv_clear(keys=batch.keys, partition_id="train")

    # validation goes through verl's own sampling
    val = rollout.put(FLAT, partition="val")
    vbatch, vmetrics = sampler.sample(global_steps=2, partition_id="val", batch_size=1)
    assert uids_of(vbatch) == {val} and not any(k.startswith("astra/") for k in vmetrics)
    tq.kv_clear(keys=vbatch.keys, partition_id="val")
    remaining = tq.kv_list("train")["train"]
    tq.kv_clear(keys=list(remaining), partition_id="train")


def test_delta_zero_drops_exactly_what_verls_filter_groups_drops(tq):
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    rollout = ScriptedRollout(tq, [])
    rollout.step = 5
    groups = {rollout.put(r): r for r in (VALID, FLAT, NEAR_FLAT, (0.0, 0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0))}
    ours = build_sampler(rollout.refill, ["astra.batch_filling.delta=0.0"])
    ours._sync_metadata_from_transfer_queue()
    read = {g.uid: g.rewards for g in ours._terminal_groups("train")}
    assert read.keys() == groups.keys()  # one reward per session, summed from rm_scores (float32)
    assert all(read[u] == pytest.approx(groups[u]) for u in groups)
    dropped_by_us = {u for u, r in read.items() if not is_valid_group(r, ours.filling.delta)}

    verl = ReplayBuffer(
        trainer_mode="sync", trainer_config={}, max_off_policy_threshold=None, max_off_policy_strategy="drop",
        sampler_kwargs={}, refill_fn=lambda n: n, filter_groups_metric="reward", train_batch_size=B, gen_batch_size=1,
    )  # fmt: skip
    verl._sync_metadata_from_transfer_queue()
    dropped_by_verl, _ = verl._dapo_filtered_keys("train")
    assert dropped_by_us == dropped_by_verl and len(dropped_by_us) == 2
    tq.kv_clear(keys=list(tq.kv_list("train")["train"]), partition_id="train")


def test_the_sampled_batch_leaves_one_episode_record_per_episode_beside_verls_dump(tq, tmp_path):
    """With trainer.rollout_data_dir set, the recipe's `episode_dir` makes the sampler write
    <dir>/episodes/<step>.jsonl: per episode its calls (status, error kind, distractor), what was
    solved, why it ended, keyed by the TransferQueue key verl's own dump uses as `uid`."""
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    from astra_verl.calls.call_log import CallRecord, EpisodeLog, Termination
    from astra_verl.inspect.records import read_records
    from env_registry.call_gate import CallStatus
    from env_registry.spec import RewardTarget, TargetSubQuestion

    target = RewardTarget(
        env_id="env1",
        final_answer="12",
        sub_questions=[
            TargetSubQuestion(id="q1", answer="7", needs_tool=True, tool="lookup"),
            TargetSubQuestion(id="q2", answer="12", needs_tool=False),
        ],
    )
    ok = CallRecord(turn=1, index=0, tool="lookup", arguments={"x": 1}, status=CallStatus.OK, output="value 7")
    bad = CallRecord(turn=1, index=1, tool="nope", arguments={}, status=CallStatus.UNKNOWN_TOOL, distractor=True)
    log = EpisodeLog(env_id="env1", calls=[ok, bad], assistant_turns=2, final_answer="It is <answer>12</answer>.")
    log.terminated_by = Termination.NO_TOOL_CALL
    rollout = ScriptedRollout(tq, [])
    uid = rollout.new_uid()
    fields = [
        {
            "rm_scores": torch.tensor([0.0, r]),
            "reward_model": {"style": "rule", "ground_truth": target.model_dump_json()},
            "raw_prompt": [{"role": "user", "content": "What is 5 + 7?"}],  # verl puts the row's prompt here
            "extra_fields": {"reward_extra_info": info(r), "astra_episode": log.to_dict()},
        }
        for r in VALID
    ]
    keys = [f"{uid}_{i}_0" for i in range(B)]
    tq.kv_batch_put(keys=keys, partition_id="train", fields=list_of_dict_to_tensordict(fields),
                    tags=[{"status": "success", "min_global_steps": 1, "max_global_steps": 1}] * B)  # fmt: skip
    tq.kv_put(key=uid, partition_id="train", tag={"is_prompt": True, "status": "finished", "global_steps": 1})
    sampler = build_sampler(
        rollout.refill, ["astra.batch_filling.enable=false", f"trainer.rollout_data_dir={tmp_path}"]
    )
    batch, _ = sampler.sample(global_steps=3, partition_id="train", batch_size=1)
    records = list(read_records(tmp_path / "episodes" / "3.jsonl"))
    assert sorted(r.uid for r in records) == sorted(batch.keys) == keys
    r = records[0]
    assert r.step == 3 and r.env_id == "env1" and r.prompt[0]["content"] == "What is 5 + 7?"
    assert [(q.id, q.solved) for q in r.sub_questions] == [("q1", True), ("q2", True)]
    assert r.scores["calls"] == 2 and r.scores["invalid_calls"] == 1 and r.scores["distractor_calls"] == 1
    calls = r.log().calls
    assert [(c.tool, c.status, c.distractor) for c in calls] == [
        ("lookup", CallStatus.OK, False),
        ("nope", CallStatus.UNKNOWN_TOOL, True),
    ]
    assert r.log().terminated_by is Termination.NO_TOOL_CALL and r.log().assistant_turns == 2
    assert sorted(x.reward for x in records) == pytest.approx(sorted(VALID))
    tq.kv_clear(keys=batch.keys, partition_id="train")
    remaining = list(tq.kv_list("train")["train"])
    if remaining:
        tq.kv_clear(keys=remaining, partition_id="train")
