"""The episode record: what one training episode did, written next to verl's rollout dump.

verl 0.9.1 dumps each step's trajectories as decoded text and a score (`trainer.rollout_data_dir`,
`<dir>/<step>.jsonl`, one line per trajectory with its TransferQueue key as `uid`). What the
episode did as astra sees it (each call with its status and error kind, distractors, what was
solved, why it ended) lives only in TransferQueue until the step ends. `AstraReplayBuffer` hands
each sampled batch to `episode_records` and `write_records` puts them in
`<dir>/episodes/<step>.jsonl`, one `EpisodeRecord` per episode, joined to verl's lines by `uid`.

The scores are recomputed with the reward's own function (`score_episode`) from the call log and
the row's ground truth, so the record says which sub-questions were solved, not only how many.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from astra_foundation.errors import UserError
from astra_foundation.strict import SettingsError, StrictModel
from astra_verl.calls.call_log import EXTRA_FIELDS_KEY, CallLogError, EpisodeLog
from astra_verl.calls.solved import root_verdict
from astra_verl.reward.f1 import score_episode
from astra_verl.reward.sample import RewardInputError, parse_target

__all__ = [
    "EPISODES_DIR",
    "RECORD_VERSION",
    "EpisodeRecord",
    "RecordError",
    "SubQuestionView",
    "dump_uids",
    "episode_record",
    "episodes_file",
    "read_records",
    "write_records",
]

RECORD_VERSION = 2  # 2: `answer`, the answer channel's reading (version-1 records still read)
_READABLE = (1, 2)
EPISODES_DIR = "episodes"


class RecordError(UserError, ValueError):
    """An episode file or line that is not a valid episode record."""


class SubQuestionView(StrictModel):
    section = "episode record sub_questions[]"

    id: str
    answer: str
    needs_tool: bool
    tool: str | None = None
    solved: bool


class AnswerView(StrictModel):
    """What the final answer's channel held for the root, and why it counted or not."""

    section = "episode record answer"

    content: str | None  # the channel's content (None: no single channel)
    counted: bool
    why: str


class EpisodeRecord(StrictModel):
    """One episode of one training step."""

    section = "episode record"

    v: int = RECORD_VERSION
    step: int
    uid: str = Field(description="TransferQueue key {uid}_{session}_{index}: the `uid` of verl's dump line")
    env_id: str
    reward: float | None = Field(default=None, description="the trajectory's reward as the trainer got it")
    scores: dict[str, float] = Field(default_factory=dict, description="f1, precision, recall, counts (the reward's)")
    sub_questions: list[SubQuestionView] = Field(default_factory=list)
    answer: AnswerView | None = None  # None: no astra ground truth (or a version-1 record)
    prompt: list[dict[str, Any]] = Field(default_factory=list, description="the messages the episode started from")
    episode: dict[str, Any] = Field(description="the call log (astra_verl.calls.call_log.EpisodeLog.to_dict)")

    def log(self) -> EpisodeLog:
        return EpisodeLog.from_dict(self.episode)


def _plain(value: Any) -> Any:
    """numpy scalars and arrays (how verl carries non-tensor fields) as JSON-able Python values."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def episode_record(
    step: int, uid: str, extra_fields: Mapping[str, Any], reward_model: Any, reward: float | None, prompt: Any = None
) -> EpisodeRecord | None:
    """The record of one trajectory, or None when no astra episode ran it (another agent loop).
    `prompt` is the row's `raw_prompt` (the messages the episode started from).

    A ground truth that is not an astra `RewardTarget` (BFCL rows, say) gives a record without
    sub-questions or scores; a malformed call log raises CallLogError, as it does in the reward.
    """
    extra_fields = getattr(extra_fields, "data", extra_fields)
    if not isinstance(extra_fields, Mapping) or EXTRA_FIELDS_KEY not in extra_fields:
        return None
    log = EpisodeLog.from_extra_fields(dict(extra_fields))
    reward_model = getattr(reward_model, "data", reward_model)
    sub_questions: list[SubQuestionView] = []
    scores: dict[str, float] = {}
    answer = None
    ground_truth = reward_model.get("ground_truth") if isinstance(reward_model, Mapping) else None
    try:
        target = parse_target(ground_truth)
    except RewardInputError:
        target = None
    if target is not None and target.env_id == log.env_id:
        score = score_episode(log, target)
        scores = score.extra_info()
        solved = set(score.solved_ids)
        sub_questions = [
            SubQuestionView(id=q.id, answer=q.answer, needs_tool=q.needs_tool, tool=q.tool, solved=q.id in solved)
            for q in target.sub_questions
        ]
        if target.sub_questions:
            verdict = root_verdict(log.final_answer, target)
            answer = AnswerView(content=verdict.content, counted=verdict.counted, why=verdict.why)
    return EpisodeRecord(
        step=step,
        uid=uid,
        env_id=log.env_id,
        reward=reward,
        scores=scores,
        sub_questions=sub_questions,
        answer=answer,
        prompt=_plain(list(getattr(prompt, "data", prompt) or [])),
        episode=_plain(log.to_dict()),
    )


def episodes_file(rollout_dir: str | Path, step: int) -> Path:
    return Path(rollout_dir) / EPISODES_DIR / f"{step}.jsonl"


def write_records(rollout_dir: str | Path, step: int, records: Iterable[EpisodeRecord]) -> Path:
    """`<rollout_dir>/episodes/<step>.jsonl`, written whole and renamed into place (a reader never
    sees half a step; a resumed run that redoes a step replaces its file)."""
    path = episodes_file(rollout_dir, step)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".jsonl.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for record in records:
            f.write(record.model_dump_json() + "\n")
    os.replace(tmp, path)
    return path


def read_records(path: str | Path) -> Iterator[EpisodeRecord]:
    """The records of one episodes file; RecordError names the file and line of a bad one."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = EpisodeRecord.model_validate_json(line)
                record.log()  # the call log must read too
            except (ValidationError, SettingsError, CallLogError) as e:
                first = e.errors()[0]["msg"] if isinstance(e, ValidationError) else str(e)
                raise RecordError(f"{path}:{n}: not an episode record ({first})") from None
            if record.v not in _READABLE:
                raise RecordError(f"{path}:{n}: record version {record.v}; this viewer reads {list(_READABLE)}")
            yield record


def dump_uids(path: str | Path) -> dict[str, dict[str, Any]]:
    """verl's rollout dump lines (`<dir>/<step>.jsonl`) by uid: input, output, score."""
    out: dict[str, dict[str, Any]] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                if "uid" in row:
                    out[str(row["uid"])] = row
    return out
