"""`python -m astra_verl.inspect`: episode records -> a training summary page and one page per step,
checked as text and in a real headless browser (Debian's chromium)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from testkit import in_ci

from astra_verl.calls.call_log import CallRecord, EpisodeLog, Termination
from astra_verl.inspect.cli import main
from astra_verl.inspect.html import summarize_step
from astra_verl.inspect.records import episode_record, read_records, write_records
from env_registry.call_gate import CallStatus
from env_registry.spec import RewardTarget, TargetSubQuestion

TARGET = RewardTarget(
    env_id="env-7",
    final_answer="Lyon is warmer",
    sub_questions=[
        TargetSubQuestion(id="q1", answer="21.5", needs_tool=True, tool="get_temperature"),
        TargetSubQuestion(id="q2", answer="18", needs_tool=True, tool="get_temperature"),
        TargetSubQuestion(id="q3", answer="Lyon", needs_tool=False),
    ],
)


def _log(good_calls: int) -> EpisodeLog:
    calls = [
        CallRecord(turn=1, index=0, tool="get_temperature", arguments={"city": "Lyon"}, status=CallStatus.OK,
                   output='{"celsius": 21.5} <script>alert(1)</script>', solved=["q1"]),
        CallRecord(turn=2, index=0, tool="get_stock_price", arguments={"ticker": "X"}, status=CallStatus.OK,
                   output="12.0", distractor=True, source_env="env-other"),
        CallRecord(turn=2, index=1, tool="get_temperature", arguments='{"city": "Porto"', status=CallStatus.BAD_JSON,
                   error_kind="bad_json"),
    ][: good_calls + 1]  # fmt: skip
    log = EpisodeLog(
        env_id="env-7", calls=calls, assistant_turns=3, final_answer="Lyon is warmer (21.5 C). <answer>Lyon</answer>"
    )
    log.terminated_by = Termination.NO_TOOL_CALL
    return log


def write_run(root: Path, steps: int = 2) -> Path:
    """What a training run leaves: verl's dump <dir>/<step>.jsonl and our <dir>/episodes/<step>.jsonl."""
    rollouts = root / "rollouts"
    rollouts.mkdir(parents=True)
    for step in range(1, steps + 1):
        records, dump = [], []
        for i in range(4):
            uid = f"u{i // 2}_{i % 2}_0"
            extra = {"astra_episode": _log(i % 3).to_dict()}
            question = [{"role": "user", "content": "Which is warmer, Lyon or Oslo?"}]  # the row's raw_prompt
            records.append(
                episode_record(step, uid, extra, {"ground_truth": TARGET.model_dump_json()}, 0.25 * i, question)
            )
            dump.append({"input": "Which is warmer?", "output": f"<tool_call>step {step} episode {i}</tool_call>",
                         "score": 0.25 * i, "step": step, "uid": uid})  # fmt: skip
        write_records(rollouts, step, records)
        (rollouts / f"{step}.jsonl").write_text("".join(json.dumps(d) + "\n" for d in dump))
    return rollouts


def test_a_record_says_what_the_episode_did():
    extra = {"astra_episode": _log(2).to_dict()}
    r = episode_record(
        4, "u_0_0", extra, {"ground_truth": TARGET.model_dump_json()}, 0.5, [{"role": "user", "content": "q"}]
    )
    assert r.prompt == [{"role": "user", "content": "q"}]
    assert [(q.id, q.solved) for q in r.sub_questions] == [("q1", True), ("q2", False), ("q3", True)]
    assert r.scores["calls"] == 3 and r.scores["invalid_calls"] == 1 and r.scores["distractor_calls"] == 1
    assert (
        r.answer is not None and r.answer.content == "Lyon" and r.answer.counted
    )  # the channel, as the reward read it
    assert "states the answer 'Lyon'" in r.answer.why
    assert r.log().terminated_by is Termination.NO_TOOL_CALL and r.reward == 0.5
    assert episode_record(4, "u", {"reward_extra_info": {}}, {}, 1.0) is None  # not an astra episode
    other = episode_record(4, "u", extra, {"ground_truth": '{"not": "an astra target"}'}, 1.0)
    assert other.sub_questions == [] and other.scores == {}


def test_pages_show_every_episode_and_the_summary(tmp_path, capsys):
    rollouts = write_run(tmp_path)
    assert main([str(tmp_path)]) == 0
    out = tmp_path / "inspect"
    assert "8 episodes of 2 steps" in capsys.readouterr().out
    index = (out / "index.html").read_text()
    assert 'href="step_1.html"' in index and 'href="step_2.html"' in index
    for key in ("reward", "f1", "solved_rate", "turns", "calls", "invalid_call_rate", "distractor_call_rate"):
        assert (out / "plots" / f"{key}.png").stat().st_size > 2000 and f'src="plots/{key}.png"' in index
    page = (out / "step_2.html").read_text()
    assert page.count('<section class="episode"') == 4
    assert page.count('<div class="msg user"><b>user</b><pre>Which is warmer, Lyon or Oslo?</pre>') == 4  # the question
    assert "get_stock_price" in page and "distractor" in page and "bad_json" in page and "no_tool_call" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>" not in page  # tool output is escaped
    assert "step 2 episode 3" in page  # verl's decoded transcript, joined by uid
    assert page.count("answer channel: <code>Lyon</code>") == 4 and "states the answer" in page  # what the reward read
    s = summarize_step(1, list(read_records(rollouts / "episodes" / "1.jsonl")))
    assert s.values["invalid_call_rate"] == pytest.approx(1 / 7) and s.values["reward"] == pytest.approx(0.375)


def test_bad_run_dirs_and_records_say_what_to_do(tmp_path, capsys):
    assert main([str(tmp_path / "missing")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no episode records under" in err and "trainer.rollout_data_dir=DIR" in err
    rollouts = write_run(tmp_path / "run")
    with open(rollouts / "episodes" / "2.jsonl", "a") as f:
        f.write('{"v": 1, "step": 2}\n')
    assert main([str(tmp_path / "run")]) == 2
    assert f"{rollouts / 'episodes' / '2.jsonl'}:5: not an episode record" in capsys.readouterr().err
    write_run(tmp_path / "other")
    assert main([str(tmp_path)]) == 2
    assert "several runs under" in capsys.readouterr().err


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def screenshot(page: Path, png: Path, profile: Path) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}"]  # fmt: skip
    return subprocess.run(
        [CHROMIUM, *flags, f"--screenshot={png}", "--window-size=1200,1600", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_the_pages_render_in_a_headless_browser(tmp_path):
    """Fails in CI without chromium (scripts/bootstrap.sh installs it there); skips elsewhere."""
    from PIL import Image

    if CHROMIUM is None:
        why = "no chromium on PATH (scripts/bootstrap.sh installs it as root with apt: apt-get install chromium)"
        if in_ci():
            pytest.fail(why)
        pytest.skip(why)
    write_run(tmp_path)
    assert main([str(tmp_path)]) == 0
    for name in ("index.html", "step_1.html"):
        png = tmp_path / f"{name}.png"
        proc = screenshot(tmp_path / "inspect" / name, png, tmp_path / f"profile-{name}")
        assert proc.returncode == 0 and png.stat().st_size > 10_000, proc.stderr[-2000:]
        image = Image.open(png).convert("RGB")
        assert image.size == (1200, 1600)
        colors = image.getcolors(maxcolors=1 << 20)
        assert colors is not None and len(colors) > 50, "a blank or single-colour screenshot"  # text, plots, badges
        dark = sum(n for n, (r, g, b) in colors if r + g + b < 200)
        assert dark > 2000, "no text drawn"
