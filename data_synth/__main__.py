"""Synthesis pipelines: `python -m data_synth {env,traj} <step|run> ...`.

Each pipeline's `--help` lists its steps; every step is resumable.
"""

from __future__ import annotations

import importlib
import sys

PIPELINES = {
    "env": ("data_synth.env.cli", "QA traces -> verified, code-executable RL environments (docs/method.md §2)"),
    "traj": (
        "data_synth.traj.cli",
        "tool docs -> tool-call graph -> verified multi-turn SFT trajectories (docs/method.md §1)",
    ),
}


def _usage() -> str:
    lines = [f"  {name:5s} {what}" for name, (_, what) in PIPELINES.items()]
    return "\n".join(["usage: python -m data_synth {env,traj} ...", "", __doc__.strip(), "", *lines])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["-h"], ["--help"]):
        print(_usage())
        return 0
    if not argv or argv[0] not in PIPELINES:
        said = f"unknown pipeline {argv[0]!r}" if argv else "no pipeline named"
        print(f"{_usage()}\n\nerror: {said}; choose one of: {', '.join(PIPELINES)}", file=sys.stderr)
        return 2
    module, _ = PIPELINES[argv[0]]
    try:
        pipeline = importlib.import_module(module)
    except KeyboardInterrupt:  # Ctrl-C while Python loads the pipeline: one line and 130, as run_cli answers
        print("\ninterrupted", file=sys.stderr)
        return 130
    return int(pipeline.main(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
