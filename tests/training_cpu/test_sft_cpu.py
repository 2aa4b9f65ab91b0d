"""verl's SFT trainer on CPU (`+recipe=astra_sft_cpu`): it trains, and its checkpoint is a loadable model."""

from __future__ import annotations

import math
import re

import pytest
import torch


@pytest.mark.slow
def test_sft_trains_on_golden_call_trajectories_and_saves_a_loadable_model(sft_run, tiny_model_dir):
    proc, checkpoint = sft_run.proc, sft_run.checkpoint
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    losses = [float(x) for x in re.findall(r"train/loss:([-\d.e+]+)", proc.stdout + proc.stderr)]
    assert len(losses) == sft_run.steps and all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0] / 2, losses  # it learns the golden calls

    from transformers import AutoModelForCausalLM

    trained = AutoModelForCausalLM.from_pretrained(checkpoint / "huggingface")
    initial = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    for (name, a), (_, b) in zip(trained.state_dict().items(), initial.state_dict().items(), strict=True):
        assert a.shape == b.shape, name
    assert not torch.equal(trained.state_dict()["model.norm.weight"], initial.state_dict()["model.norm.weight"])
