"""The one way this process imports the optional `bfcl_eval` package: `bfcl_module(name)`.

bfcl-eval's `constants.eval_config` creates result, score and lock folders under
BFCL_PROJECT_ROOT when it is imported, by default beside the package, inside site-packages (a
read-only or shared install gets folders it should not, or the import fails). Every module of
bfcl_eval imports that config, directly or not, so before the first import of any of them the
root is pointed at astra-verl's cache (`~/.cache/astra_verl/bfcl`; a root the user set is kept).
The sandbox's own sources (the BFCL checkers run there) set their own root: they cannot import
this module.

bfcl-eval is optional (installed apart, --no-deps): callers import it on use, through here.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType

__all__ = ["ROOT_VARIABLE", "bfcl_module", "project_root"]

ROOT_VARIABLE = "BFCL_PROJECT_ROOT"


def project_root() -> Path:
    """Where bfcl_eval writes its folders: the user's BFCL_PROJECT_ROOT, else astra-verl's cache."""
    return Path(os.environ.get(ROOT_VARIABLE) or Path.home() / ".cache" / "astra_verl" / "bfcl")


def bfcl_module(name: str = "bfcl_eval.utils") -> ModuleType:
    """The module `name` of bfcl_eval (e.g. `bfcl_eval.constants.eval_config`), its project root
    set first (see the module docstring)."""
    if not name == "bfcl_eval" and not name.startswith("bfcl_eval."):
        raise ValueError(f"{name!r} is not a module of bfcl_eval")
    os.environ.setdefault(ROOT_VARIABLE, str(project_root()))
    return importlib.import_module(name)
