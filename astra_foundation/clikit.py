"""What the three command lines share (`env_registry`, `data_synth env|traj`, `astra_verl.eval`).

Exit status, the same everywhere:

    0    everything asked for was done
    1    the command ran, but some record, environment or episode failed or was rejected, or
         the run produced nothing; the output says which and where (a rerun retries errors)
    2    the command could not start: a usage error, an input that cannot be read, an output
         that cannot be written, an LLM endpoint that cannot serve the run
    130  interrupted (Ctrl-C); a command that resumes (it declares so to `run_cli`) keeps its
         finished work and the same command goes on from there; any other starts again

`run_cli` is each CLI's one top-level handler: a `UserError` (`astra_foundation.errors`, the base
class of every error a user can act on) and a failed file operation print one line on stderr
saying what was wrong, where, and what to do, never a traceback. `run_async` is the CLIs' `asyncio.run`:
one Ctrl-C stops it at once. `-q/--quiet` is the one progress flag.

This module sits in the foundation because every package with a command line uses it.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import signal
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from astra_foundation.errors import UserError

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "UsageError",
    "UserError",
    "add_output_file",
    "add_quiet",
    "describe_os_error",
    "interrupted_line",
    "refuse_renamed",
    "run_async",
    "run_cli",
]

T = TypeVar("T")

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(UserError):
    """The command cannot run as given (flags that do not fit together, an input that is not
    there): a `UserError` raised by the command-line code itself."""


def add_quiet(parser: argparse.ArgumentParser, **kwargs) -> None:
    """`-q/--quiet`: no progress bars (results and errors are still printed)."""
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars", **kwargs)


class _Renamed(argparse.Action):
    """An old flag name: parsing it is a usage error naming the new one (never a silent alias, and
    declared so that argparse's prefix matching cannot read it as a longer flag)."""

    def __init__(self, option_strings, dest, *, new: str, why: str, **kwargs):
        self.new, self.why = new, why
        super().__init__(option_strings, dest, nargs="?", default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(f"{option_string} is now {self.new}: {self.why}")


def refuse_renamed(parser: argparse.ArgumentParser, old: str, new: str, why: str) -> None:
    """`old` (hidden from --help) makes the parser exit 2 with `old is now new: why`."""
    parser.add_argument(old, dest=f"_renamed_{old.lstrip('-').replace('-', '_')}", action=_Renamed, new=new, why=why)


def add_output_file(parser: argparse.ArgumentParser, what: str, *, required: bool = True) -> None:
    """`--output-file FILE` (`args.output_file`, a Path; None when optional and not given) for a
    command whose result is one file: `--out` names a folder in every command line (docs/cli.md),
    so here it is refused."""
    from pathlib import Path  # only here: the rest of the module needs no paths

    parser.add_argument("--output-file", required=required, type=Path, metavar="FILE", help=what)
    refuse_renamed(parser, "--out", "--output-file FILE", "--out names an output folder; this command writes one file")


_OS_FIXES = {
    errno.ENOENT: "it does not exist; check the path",
    errno.ENOTDIR: "a part of the path is a file, not a directory; choose another path",
    errno.EISDIR: "it is a directory, not a file; name a file",
    errno.EEXIST: "it already exists and is in the way; choose another path or remove it",
    errno.EACCES: "permission denied; choose a path you can write to, or fix its permissions",
    errno.EPERM: "operation not permitted; choose a path you can write to",
    errno.EROFS: "the file system is read-only; choose another path",
    errno.ENOSPC: "the disk is full; free space or choose another path",
}


def describe_os_error(exc: OSError) -> str:
    """`<path>: <what went wrong and what to do>` for a failed file operation."""
    where = exc.filename if exc.filename is not None else "(no path)"
    if exc.filename2 is not None:
        where = f"{where} -> {exc.filename2}"
    return f"{where}: {_OS_FIXES.get(exc.errno or 0, exc.strerror or str(exc))}"


def interrupted_line(*, resumes: bool, saved: str = "") -> str:
    """What Ctrl-C tells the user: a command that `resumes` keeps `saved` (what it says is kept)
    and goes on from there when rerun; any other starts again."""
    if resumes:
        return f"{saved or 'finished work is saved'}; rerun the same command to resume where it stopped"
    return "nothing of this run is kept; rerun the same command to start again"


def run_cli(command: Callable[[], int], *, resumes: bool, saved: str = "") -> int:
    """Run one command and turn what can go wrong into a line on stderr and an exit status. Each
    command declares whether a rerun `resumes` it (and what is `saved`): Ctrl-C's line says so."""
    try:
        return command()
    except UserError as exc:
        _say(f"error: {exc}")
        return EXIT_USAGE
    except BrokenPipeError:  # `... | head` closed the pipe: not an error
        return EXIT_OK
    except OSError as exc:
        if exc.filename is None:  # not a file operation (a socket, a bug): keep the traceback
            raise
        _say(f"error: {describe_os_error(exc)}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        _say(f"\ninterrupted: {interrupted_line(resumes=resumes, saved=saved)}")
        return EXIT_INTERRUPTED


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_async(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)`, where Ctrl-C cancels `main` at once and then raises KeyboardInterrupt.

    Why not plain `asyncio.run`: its SIGINT handler is a Python-level handler, which runs only
    when the main thread wakes up. The kernel may hand a Ctrl-C to any thread of the process (an
    executor thread, jemalloc's background thread); the event loop, asleep in `epoll_wait` on a
    slow server, then hears of it only when that server answers, minutes later (CI saw this). A
    loop signal handler also writes to the loop's wake-up pipe, so the loop wakes whichever
    thread took the signal. Where SIGINT is ignored (a background job) it stays ignored."""
    wanted = threading.current_thread() is threading.main_thread() and (
        signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )
    return asyncio.run(_interruptible(main) if wanted else main)


async def _interruptible(main: Coroutine[Any, Any, T]) -> T:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None  # asyncio.run runs this coroutine as a task
    interrupted = False

    def on_sigint() -> None:
        nonlocal interrupted
        interrupted = True
        task.cancel()

    loop.add_signal_handler(signal.SIGINT, on_sigint)
    try:
        result = await main
    except asyncio.CancelledError:
        if interrupted:
            raise KeyboardInterrupt from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGINT)
    if interrupted:  # `main` swallowed the cancellation: the user still asked to stop
        raise KeyboardInterrupt
    return result
