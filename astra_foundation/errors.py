"""`UserError`: the one base class of every error a user can act on.

A settings file with a wrong key, a path that does not exist, an endpoint that does not serve the
model, a store another process holds, a record that cannot be read, a run directory made by the
other pipeline: each is raised as a subclass of `UserError` whose message says what is wrong,
where, and what to do. Every command line runs through `astra_foundation.clikit.run_cli`, which
catches `UserError` by type and prints that message as one line on stderr with exit status 2 (no
traceback). Errors that mean a bug in astra-verl are not `UserError`s and keep their traceback.

Imports nothing: every package may subclass it.
"""

from __future__ import annotations

__all__ = ["UserError"]


class UserError(Exception):
    """Something the user can fix: the message says what, where and what to do (one line)."""
