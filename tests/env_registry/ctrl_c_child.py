"""The child process of `test_clikit_ctrl_c.py` (signal dispositions are per process, so each case
runs in a fresh interpreter). `python ctrl_c_child.py MODE`:

    plain | run_async   wait on an event loop with nothing scheduled (as while a slow LLM server
                        has not answered) while another thread takes a SIGINT; exit 130 and print
                        "interrupted" when the runner raised KeyboardInterrupt
    restores            run_async returns the coroutine's value and leaves SIGINT's disposition
                        as it found it, ignored included; prints "ok"
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import time

from astra_foundation.clikit import run_async


def ctrl_c_to_another_thread() -> None:
    time.sleep(0.5)
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # this thread, not the main one


async def wait_for_a_server_that_never_answers() -> None:
    threading.Thread(target=ctrl_c_to_another_thread, daemon=True).start()
    await asyncio.get_running_loop().create_future()


async def answer() -> int:
    await asyncio.sleep(0)
    return 42


def restores() -> None:
    assert run_async(answer()) == 42
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a background job: Ctrl-C stays ignored
    assert run_async(answer()) == 42
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    print("ok")


def main(mode: str) -> int:
    # Start as a command typed at a terminal does. A process started in the background by a shell
    # without job control (`cmd &` in a script, as a CI runner may start the suite) inherits SIGINT
    # ignored, and then run_async rightly leaves it ignored: the cases below would test that instead.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if mode == "restores":
        restores()
        return 0
    runner = {"plain": asyncio.run, "run_async": run_async}[mode]
    try:
        runner(wait_for_a_server_that_never_answers())
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
