"""Synthesis pipelines: `python -m data_synth {env,traj} <step|run> ...`.

    env   QA traces -> verified, code-executable RL environments (docs/method.md §2)
    traj  tool docs -> tool-call graph -> verified multi-turn SFT trajectories (docs/method.md §1)

Each pipeline's `--help` lists its steps; every step is resumable.
"""

from __future__ import annotations

import importlib
import sys

PIPELINES = {
    "env": ("data_synth.env.cli", "QA traces -> verified RL environments (docs/method.md §2)"),
    "traj": ("data_synth.traj.cli", "tool docs -> verified multi-turn SFT trajectories (docs/method.md §1)"),
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in PIPELINES:
        print(__doc__.strip())
        for name, (_, what) in PIPELINES.items():
            print(f"  {name:5s} {what}")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    module, _ = PIPELINES[argv[0]]
    return int(importlib.import_module(module).main(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
