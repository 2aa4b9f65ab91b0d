"""The batch-filling core (astra_verl/training/batch_filling.py) on synthetic groups, step by step."""

from __future__ import annotations

import pytest

from astra_verl.training.batch_filling import (
    BatchFiller,
    BatchFillingConfig,
    BatchFillingExhausted,
    Group,
    group_std,
    is_valid_group,
)

VALID = (0.0, 0.5, 1.0, 1.0)
FLAT = (0.8, 0.8, 0.8, 0.8)
NEAR_FLAT = (0.8, 0.8, 0.8, 0.75)  # std ~0.0217


def groups(prefix: str, rewards, step: int = 1, count: int = 1) -> list[Group]:
    return [Group(uid=f"{prefix}{i}", step=step, rewards=tuple(rewards)) for i in range(count)]


def test_validity_is_std_above_delta_with_population_std():
    assert group_std((0.0, 1.0)) == pytest.approx(0.5)
    assert not is_valid_group(FLAT, 0.0)  # delta = 0 is verl's std == 0 rule
    assert is_valid_group(NEAR_FLAT, 0.0)
    assert not is_valid_group(NEAR_FLAT, 0.05)
    assert is_valid_group(NEAR_FLAT, 0.02)
    assert not is_valid_group((1.0,), 0.0)  # one rollout carries no comparison


def test_a_full_valid_batch_is_taken_once_nothing_is_in_flight():
    f = BatchFiller(BatchFillingConfig(), batch_size=3, step=1)
    snap = groups("v", VALID, count=3)
    assert not f.plan(snap, inflight=1).done  # drain first: sync replicas sleep after sampling
    plan = f.plan(snap, inflight=0)
    assert plan.select == ("v0", "v1", "v2") and plan.dispatch == 0 and not plan.drop


def test_invalid_groups_earn_refills_and_are_dropped_when_the_batch_is_taken():
    cfg = BatchFillingConfig(delta=0.05, refill_factor=2.0, max_inflight_batches=2.0)
    f = BatchFiller(cfg, batch_size=4, step=1)
    snap = groups("v", VALID, count=2) + groups("x", NEAR_FLAT, count=1)
    plan = f.plan(snap, inflight=1)
    assert plan.dispatch == 2 and not plan.done  # one invalid group: 2 prompts of credit
    # the refills come back: one valid, one flat
    snap += groups("r", VALID, count=1) + groups("f", FLAT, count=1)
    plan = f.plan(snap, inflight=1)
    assert plan.dispatch == 2  # the flat one earns two more
    snap += groups("s", VALID, count=2)
    plan = f.plan(snap, inflight=0)
    assert plan.done and len(plan.select) == 4
    assert {"x0", "f0"} <= plan.drop  # invalid groups leave the store with the batch
    m = f.metrics()
    assert m["astra/batch_filling/invalid_groups"] == 2 and m["astra/batch_filling/dispatched_prompts"] == 4
    assert m["astra/batch_filling/valid_rate"] == pytest.approx(5 / 7)


def test_the_reward_of_all_sampled_groups_is_reported_beside_the_trained_groups_reward():
    f = BatchFiller(BatchFillingConfig(max_inflight_batches=2.0), batch_size=2, step=2)
    carried = groups("c", VALID, step=1)  # judged in step 1: trains now, but was sampled then
    snap = carried + groups("v", (0.0, 1.0, 1.0, 1.0), step=2)
    snap += groups("z", (0.0,) * 4, step=2, count=2) + groups("o", (1.0,) * 4, step=2)
    plan = f.plan(snap, inflight=0)
    assert plan.select == ("c0", "v0")
    m = f.metrics()
    # every rollout this step generated, the dropped all-zero and all-one groups included
    assert m["astra/reward_all_groups/mean"] == pytest.approx((0.75 + 0 + 0 + 1) / 4)
    # what the batch trains on (verl's critic/score/mean): the groups batch filling kept
    assert m["astra/reward_trained_groups/mean"] == pytest.approx((0.625 + 0.75) / 2)
    named = BatchFiller(BatchFillingConfig(metric="f1"), batch_size=1, step=1)
    named.plan(groups("v", VALID), inflight=0)
    assert set(named.metrics()) >= {"astra/f1_all_groups/mean", "astra/f1_trained_groups/mean"}


def test_surplus_carries_over_oldest_first_and_expires_after_max_carry_steps():
    cfg = BatchFillingConfig(carry_over=True, max_carry_steps=1)
    step1 = BatchFiller(cfg, batch_size=2, step=1)
    plan = step1.plan(groups("a", VALID, step=1, count=3), inflight=0)
    assert plan.select == ("a0", "a1") and "a2" not in plan.drop
    assert step1.metrics()["astra/batch_filling/carried_out_groups"] == 1
    # step 2: the carried group trains first, next to one new group
    step2 = BatchFiller(cfg, batch_size=2, step=2)
    plan = step2.plan(groups("a2", VALID, step=1) + groups("b", VALID, step=2, count=2), inflight=0)
    assert plan.select[0] == "a20" and step2.metrics()["astra/batch_filling/carried_in_groups"] == 1
    # step 3: a group from step 1 is too old
    step3 = BatchFiller(cfg, batch_size=1, step=3)
    plan = step3.plan(groups("old", VALID, step=1) + groups("c", VALID, step=3), inflight=0)
    assert plan.select == ("c0",) and "old0" in plan.drop
    assert step3.metrics()["astra/batch_filling/expired_groups"] == 1


def test_without_carry_over_the_surplus_is_discarded_like_verls_sync_dapo():
    f = BatchFiller(BatchFillingConfig(carry_over=False), batch_size=2, step=5)
    plan = f.plan(groups("a", VALID, step=5, count=3) + groups("old", VALID, step=4), inflight=0)
    assert len(plan.select) == 2 and {"a2", "old0"} <= plan.drop
    assert f.metrics()["astra/batch_filling/discarded_surplus_groups"] == 1


def test_failed_groups_are_dropped_at_once_and_refilled():
    f = BatchFiller(BatchFillingConfig(), batch_size=2, step=1)
    plan = f.plan(groups("v", VALID) + [Group(uid="bad", step=1, failed=True)], inflight=0)
    assert "bad" in plan.drop and plan.dispatch == 2
    assert f.metrics()["astra/batch_filling/failed_groups"] == 1


def test_refills_respect_the_inflight_cap_and_dispatch_the_deficit_when_idle():
    cfg = BatchFillingConfig(refill_factor=3.0, max_inflight_batches=1.0)
    f = BatchFiller(cfg, batch_size=4, step=1)
    plan = f.plan(groups("x", FLAT, count=2), inflight=3)
    assert plan.dispatch == 1  # 6 prompts of credit, 1 slot of 4
    f2 = BatchFiller(BatchFillingConfig(refill_factor=0.5), batch_size=4, step=1)
    plan = f2.plan(groups("v", VALID, count=1) + groups("x", FLAT, count=1), inflight=0)
    assert plan.dispatch == 3  # credit 0.5 but nothing generating: ask for the whole deficit


def test_an_exhausted_budget_fills_with_the_best_invalid_groups():
    cfg = BatchFillingConfig(delta=0.05, max_gen_batches=1.0, on_exhausted="fill")
    f = BatchFiller(cfg, batch_size=3, step=1)
    snap = groups("v", VALID) + groups("flat", FLAT) + groups("near", NEAR_FLAT)
    plan = f.plan(snap, inflight=0)
    assert plan.select == ("v0", "near0", "flat0")  # highest std first
    m = f.metrics()
    assert m["astra/batch_filling/exhausted"] == 1 and m["astra/batch_filling/filled_with_invalid_groups"] == 2


def test_an_exhausted_budget_raises_when_asked_to_or_when_nothing_can_fill():
    cfg = BatchFillingConfig(max_gen_batches=1.0, on_exhausted="error")
    f = BatchFiller(cfg, batch_size=2, step=7)
    assert f.plan(groups("flat", FLAT, step=7), inflight=1).drop == {"flat0"}  # error mode drops eagerly
    with pytest.raises(BatchFillingExhausted, match=r"step 7: 0 of 2 groups .* 1 invalid.*on_exhausted=fill"):
        f.plan([], inflight=0)
    fill = BatchFiller(BatchFillingConfig(max_gen_batches=1.0), batch_size=2, step=1)
    with pytest.raises(BatchFillingExhausted, match="not enough finished groups"):
        fill.plan([Group(uid="bad", step=1, failed=True)], inflight=0)


def test_the_budget_counts_the_steps_first_batch():
    f = BatchFiller(BatchFillingConfig(max_gen_batches=1.5, max_inflight_batches=4.0), batch_size=4, step=1)
    assert f.budget == 2
    plan = f.plan(groups("x", FLAT, count=4), inflight=0)
    assert plan.dispatch == 2 and f.budget == 0


def test_config_refuses_typos_and_nonsense():
    with pytest.raises(ValueError, match=r"unknown keys \['detla'\]"):
        BatchFillingConfig.from_mapping({"detla": 0.1})
    with pytest.raises(ValueError, match="delta must be >= 0"):
        BatchFillingConfig(delta=-1)
    with pytest.raises(ValueError, match="on_exhausted"):
        BatchFillingConfig(on_exhausted="ignore")
    assert BatchFillingConfig.from_mapping({"delta": 0.1, "carry_over": False}).delta == 0.1
