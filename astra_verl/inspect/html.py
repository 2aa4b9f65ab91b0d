"""Static HTML of a run's episode records: a training summary page and one page per step.

    index.html      per step: reward, F1, solved rate, turns, calls, invalid and distractor call
                    rates (a table, and one plot each over the steps, in plots/)
    step_<N>.html   one section per episode: the question, each assistant turn's calls with their
                    arguments, status, error kind and result, the final answer and what its answer channel
                    held (the parsed value, and why it counted or not), which sub-questions
                    were solved, why the episode ended; verl's decoded transcript when its dump is there

No script, no external resource: the pages open from disk in any browser. Everything shown comes
from the records and is escaped.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from astra_verl.calls.call_log import CallRecord, EpisodeLog  # noqa: E402
from astra_verl.inspect.records import EpisodeRecord  # noqa: E402
from astra_verl.reward.episode_metrics import episode_metrics  # noqa: E402
from env_registry.call_gate import CallStatus  # noqa: E402

__all__ = ["SUMMARY_SERIES", "StepSummary", "summarize_step", "write_site"]

MAX_OUTPUT_CHARS = 4000  # per tool result on the page; the record keeps what the model saw

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 1em 0; } td, th { border: 1px solid #ccc; padding: 4px 8px; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
section.episode { border: 1px solid #ddd; border-radius: 6px; padding: 0.5em 1em; margin: 1.5em 0; }
.meta { color: #555; font-size: 0.9em; }
.msg { margin: 0.6em 0; padding: 0.4em 0.8em; border-left: 4px solid #bbb; background: #fafafa; }
.user { border-color: #4c72b0; } .assistant { border-color: #55a868; } .tool { border-color: #8172b3; }
.badge { display: inline-block; padding: 0 6px; border-radius: 4px; font-size: 0.85em; color: #fff; }
.ok { background: #55a868; } .bad { background: #c44e52; } .warn { background: #dd8452; } .info { background: #4c72b0; }
pre { white-space: pre-wrap; word-break: break-word; background: #f6f6f6; padding: 6px; margin: 4px 0; }
div.plots img { width: 49%; border: 1px solid #eee; }
"""

# (metric key in `StepSummary.values`, label, bounded to [0, 1]); the reward is drawn on [0, 1]
# when its values lie there (astra's rewards), on its own scale otherwise (another reward manager)
SUMMARY_SERIES: tuple[tuple[str, str, bool], ...] = (
    ("reward", "reward (mean)", False),
    ("f1", "F1 (mean)", True),
    ("solved_rate", "solved rate (sub-questions)", True),
    ("turns", "assistant turns per episode (mean)", False),
    ("calls", "tool calls per episode (mean)", False),
    ("invalid_call_rate", "invalid call rate", True),
    ("distractor_call_rate", "distractor call rate", True),
)


@dataclass
class StepSummary:
    step: int
    episodes: int
    values: dict[str, float]


def summarize_step(step: int, records: Sequence[EpisodeRecord]) -> StepSummary:
    """The summary numbers of one step, computed as the trainer's `astra/*` step metrics are."""
    m = episode_metrics([r.scores for r in records])
    rewards = [r.reward for r in records if r.reward is not None]
    values = {
        "reward": sum(rewards) / len(rewards) if rewards else float("nan"),
        "f1": m.get("astra/f1/mean", float("nan")),
        "solved_rate": m.get("astra/solved_rate", float("nan")),
        "turns": m.get("astra/turns/mean", float("nan")),
        "calls": m.get("astra/calls_per_episode/mean", float("nan")),
        "invalid_call_rate": m.get("astra/invalid_call_rate", float("nan")),
        "distractor_call_rate": m.get("astra/distractor_call_rate", float("nan")),
    }
    return StepSummary(step=step, episodes=len(records), values=values)


# -- pieces ----------------------------------------------------------------------------------


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _page(title: str, body: str) -> str:
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
        f"<style>{_CSS}</style></head><body>\n<h1>{_e(title)}</h1>\n{body}\n</body></html>\n"
    )


def _badge(text: str, kind: str) -> str:
    return f'<span class="badge {kind}">{_e(text)}</span>'


def _fmt(value: float, spec: str = ".3f") -> str:
    return "n/a" if value != value else format(value, spec)  # NaN: a step without astra scores


def _message(role: str, content: str) -> str:
    return f'<div class="msg {_e(role)}"><b>{_e(role)}</b><pre>{_e(content)}</pre></div>'


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _call(call: CallRecord) -> str:
    status = _badge(call.status.value, "ok" if call.status is CallStatus.OK else "bad")
    extra = [status]
    if call.error_kind:
        extra.append(_badge(call.error_kind, "warn"))
    if call.distractor:
        extra.append(_badge("distractor", "warn"))
    if call.solved:
        extra.append(_badge("solved " + ", ".join(call.solved), "info"))
    if not call.seen:
        extra.append(_badge("not seen (over the response budget)", "warn"))
    args = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments, ensure_ascii=False)
    output = call.output if len(call.output) <= MAX_OUTPUT_CHARS else call.output[:MAX_OUTPUT_CHARS] + " [...]"
    return (
        f'<div class="msg tool"><b>{_e(call.tool or "(no tool name)")}</b> {" ".join(extra)}'
        f"<pre>{_e(args)}</pre><div class=meta>result</div><pre>{_e(output) or '(no output)'}</pre></div>"
    )


def _conversation(record: EpisodeRecord, log: EpisodeLog) -> str:
    parts = [_message(str(m.get("role", "?")), _text(m.get("content"))) for m in record.prompt]
    turns: dict[int, list[CallRecord]] = {}
    for call in log.calls:
        turns.setdefault(call.turn, []).append(call)
    for turn in sorted(turns):
        parts.append(f'<div class="msg assistant"><b>assistant, turn {turn}</b>: {len(turns[turn])} call(s)</div>')
        parts += [_call(c) for c in sorted(turns[turn], key=lambda c: c.index)]
    parts.append(_message("assistant", log.final_answer or "(no final answer)"))
    if record.answer is not None:  # what the reward read of it: the answer channel only
        a = record.answer
        read = _badge("counted", "ok") if a.counted else _badge("not counted", "bad")
        held = "(no single channel)" if a.content is None else a.content
        parts.append(f"<p class=meta>answer channel: <code>{_e(held)}</code> {read} {_e(a.why)}</p>")
    return "\n".join(parts)


def _sub_questions(record: EpisodeRecord) -> str:
    if not record.sub_questions:
        return "<p class=meta>no astra ground truth for this row: sub-questions unknown</p>"
    rows = "".join(
        f"<tr><td>{_e(q.id)}</td><td>{_e(q.answer)}</td><td>{_e(q.tool or ('-' if not q.needs_tool else 'any'))}</td>"
        f"<td>{_badge('solved', 'ok') if q.solved else _badge('not solved', 'bad')}</td></tr>"
        for q in record.sub_questions
    )
    return f"<table><tr><th>sub-question</th><th>answer</th><th>tool</th><th></th></tr>{rows}</table>"


def episode_section(record: EpisodeRecord, transcript: str | None) -> str:
    """One episode: header, conversation, sub-questions, and verl's transcript when known."""
    log = record.log()
    s = record.scores
    ended = log.terminated_by.value if log.terminated_by else "unknown"
    header = (
        f"reward {_fmt(record.reward if record.reward is not None else float('nan'))}; "
        f"F1 {_fmt(s.get('f1', float('nan')))}, precision {_fmt(s.get('precision', float('nan')))}, "
        f"recall {_fmt(s.get('recall', float('nan')))}; {log.assistant_turns} turns, {log.num_calls} calls "
        f"({log.num_invalid_calls} invalid, {log.num_distractor_calls} to distractors, {log.num_tool_errors} "
        f"tool errors); ended: {_badge(ended, 'info')}"
    )
    raw = (
        f"<details><summary>verl's decoded transcript</summary><pre>{_e(transcript)}</pre></details>"
        if transcript
        else ""
    )
    return (
        f'<section class="episode" id="{_e(record.uid)}"><h2>{_e(record.uid)}</h2>'
        f"<p class=meta>environment {_e(record.env_id)}</p><p>{header}</p>"
        f"{_conversation(record, log)}{_sub_questions(record)}{raw}</section>"
    )


def _plot(path: Path, steps: list[int], values: list[float], label: str, unit_range: bool) -> None:
    finite = [v for v in values if v == v]
    unit_range = unit_range or bool(finite and min(finite) >= 0 and max(finite) <= 1)
    fig, ax = plt.subplots(figsize=(5.5, 3.0))
    ax.plot(steps, values, marker="o", color="#4c72b0")
    ax.set_xlabel("training step")
    ax.set_title(label)
    ax.set_xticks(steps if len(steps) <= 20 else steps[:: max(1, len(steps) // 10)])
    if unit_range:
        ax.set_ylim(-0.02, 1.02)  # a rate: on its own scale, not around a single value
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def summary_page(summaries: Sequence[StepSummary], out: Path, source: str) -> str:
    steps = [s.step for s in summaries]
    (out / "plots").mkdir(parents=True, exist_ok=True)
    images = []
    for key, label, unit in SUMMARY_SERIES:
        _plot(out / "plots" / f"{key}.png", steps, [s.values[key] for s in summaries], label, unit)
        images.append(f'<img src="plots/{key}.png" alt="{_e(label)}">')
    head = "".join(f"<th>{_e(label)}</th>" for _, label, _ in SUMMARY_SERIES)
    rows = "".join(
        f'<tr><td><a href="step_{s.step}.html">step {s.step}</a></td><td class=num>{s.episodes}</td>'
        + "".join(f"<td class=num>{_fmt(s.values[k])}</td>" for k, _, _ in SUMMARY_SERIES)
        + "</tr>"
        for s in summaries
    )
    return _page(
        "Training summary",
        f"<p class=meta>episode records in {_e(source)}</p>"
        f"<table><tr><th>step</th><th>episodes</th>{head}</tr>{rows}</table>\n"
        f'<div class="plots">{"".join(images)}</div>',
    )


def step_page(step: int, records: Sequence[EpisodeRecord], transcripts: dict[str, str], shown: int) -> str:
    note = f"<p class=meta>{len(records)} episodes"
    if len(records) > shown:
        note += f"; the first {shown} by uid are shown (--per-step)"
    note += '. <a href="index.html">training summary</a></p>'
    sections = [episode_section(r, transcripts.get(r.uid)) for r in records[:shown]]
    return _page(f"Step {step}: episodes", note + "\n".join(sections))


def write_site(
    steps: dict[int, list[EpisodeRecord]],
    transcripts: dict[int, dict[str, str]],
    out: str | Path,
    *,
    source: str,
    per_step: int,
) -> Path:
    """index.html, step_<N>.html and plots/ in `out`; returns index.html's path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    summaries = []
    for step in sorted(steps):
        records = sorted(steps[step], key=lambda r: r.uid)
        summaries.append(summarize_step(step, records))
        page = step_page(step, records, transcripts.get(step, {}), per_step)
        (out / f"step_{step}.html").write_text(page, encoding="utf-8")
    index = out / "index.html"
    index.write_text(summary_page(summaries, out, source), encoding="utf-8")
    return index
