"""Makes named packages look uninstalled to this interpreter and every Python it starts.

tests/test_optional_parts.py puts this folder on PYTHONPATH with ASTRA_HIDE_MODULES set to
top-level names ("tau_bench,litellm"): Python imports `sitecustomize` at start-up, and this one
swaps the import system's path finder for one that finds nothing under those names. Then
`import tau_bench` raises ModuleNotFoundError and `importlib.util.find_spec("tau_bench")` is None,
exactly as on a machine where it was never installed (its files stay where they are).
"""

import os
import sys
from importlib.machinery import PathFinder

HIDDEN = frozenset(name for name in os.environ.get("ASTRA_HIDE_MODULES", "").split(",") if name)


class HidingPathFinder(PathFinder):
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname.partition(".")[0] in HIDDEN:
            return None
        return super().find_spec(fullname, path, target)


if HIDDEN:
    sys.meta_path[:] = [HidingPathFinder if finder is PathFinder else finder for finder in sys.meta_path]
