"""The demo's own plumbing (the demo itself is `make demo`): stage logs are plain text, and its
closing pointer to TensorBoard is checked against the event files verl wrote."""

from __future__ import annotations

import pytest

from astra_verl.demo import DemoError, check_tensorboard, py, run

# What Ray's log prefixes and verl's console look like on a terminal.
COLOURED = "print('\\x1b[36m(TaskRunner pid=7)\\x1b[0m step:1 - \\x1b[1;32mreward\\x1b[0m:0.5\\x1b[?25h')"


def test_stage_logs_keep_no_ansi_codes(tmp_path):
    out = run(py("-c", COLOURED), tmp_path, log=tmp_path / "grpo.log")
    text = (tmp_path / "grpo.log").read_text()
    assert text == out and "\x1b" not in text
    assert "(TaskRunner pid=7) step:1 - reward:0.5" in text


def test_a_failed_stage_shows_its_plain_tail_and_names_its_log(tmp_path):
    with pytest.raises(DemoError, match=r"(?s)exit 3.*\(TaskRunner pid=7\) step:1.*full log: .*sft.log"):
        run(py("-c", f"{COLOURED}; raise SystemExit(3)"), tmp_path, log=tmp_path / "sft.log")


def test_the_tensorboard_pointer_needs_event_files(tmp_path):
    with pytest.raises(DemoError, match="no TensorBoard events under"):
        check_tensorboard(tmp_path / "tensorboard")
    run_dir = tmp_path / "tensorboard" / "astra" / "grpo"
    run_dir.mkdir(parents=True)
    (run_dir / "events.out.tfevents.1.host").write_bytes(b"x")
    check_tensorboard(tmp_path / "tensorboard")
