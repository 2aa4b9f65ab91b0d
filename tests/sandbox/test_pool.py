"""The pool's ordinary behaviour: results, state per session, error kinds, restarts, batch helpers."""

from __future__ import annotations

import asyncio
import json

import pytest

from astra_foundation.sandbox import (
    ErrorKind,
    Module,
    Program,
    SandboxError,
    SandboxPool,
    run_calls,
)
from astra_foundation.sandbox.config import SandboxConfig

pytestmark = pytest.mark.asyncio(loop_scope="module")


def program(**modules: str) -> Program:
    return Program(tuple(Module(name, source) for name, source in modules.items()))


COUNTER = """
import json, math, datetime, re, random, copy, collections
_state = {"n": 0}
def bump(by=1):
    _state["n"] += by
    return _state["n"]
def info(city: str, days: int = 1):
    print("looking up", city)
    return {"city": city, "days": days, "sqrt": math.sqrt(days), "ok": True}
def nothing():
    return None
def text():
    return "plain text"
def fails():
    return {"a": 1}["b"]
"""


async def test_results_are_rendered_as_text(pool):
    s = await pool.open_session(program(counter=COUNTER))
    r = await pool.call(s, "counter", "info", {"city": "Zürich", "days": 4})
    assert r.ok, r
    assert json.loads(r.output) == {"city": "Zürich", "days": 4, "sqrt": 2.0, "ok": True}
    assert "Zürich" in r.output  # ensure_ascii=False
    assert r.stdout == "looking up Zürich\n"
    assert r.text == "looking up Zürich\n" + r.output
    assert (await pool.call(s, "counter", "nothing", {})).output == "None"
    assert (await pool.call(s, "counter", "text", {})).output == "plain text"
    assert r.elapsed_s > 0
    await pool.close_session(s)


async def test_state_lives_in_the_session_and_only_there(pool):
    prog = program(counter=COUNTER)
    group = [await pool.open_session(prog) for _ in range(4)]  # the G rollouts of one GRPO group
    for i, s in enumerate(group):
        for _ in range(i + 1):
            r = await pool.call(s, "counter", "bump", {})
        assert r.output == str(i + 1)
    for s in group:
        await pool.close_session(s)


async def test_error_kinds_and_messages(pool):
    s = await pool.open_session(program(counter=COUNTER))
    r = await pool.call(s, "counter", "fails", {})
    assert (
        r.error_kind is ErrorKind.EXCEPTION
        and "KeyError: 'b'" in r.message
        and 'line 15, in fails: return {"a": 1}["b"]' in r.message
    )
    assert r.text.startswith("Error (exception): KeyError")
    r = await pool.call(s, "counter", "info", {"town": "x"})
    assert r.error_kind is ErrorKind.BAD_ARGS and "town" in r.message and "city" in r.message
    r = await pool.call(s, "counter", "info", {"city": {1, 2}})
    assert r.error_kind is ErrorKind.BAD_ARGS and "JSON" in r.message
    r = await pool.call(s, "counter", "missing", {})
    assert r.error_kind is ErrorKind.NOT_FOUND and "bump" in r.message
    r = await pool.call(s, "nomodule", "bump", {})
    assert r.error_kind is ErrorKind.NOT_FOUND and "counter" in r.message
    assert (await pool.call(s, "counter", "bump", {})).output == "1"  # the session is unharmed
    await pool.close_session(s)
    await pool.close_session(s)  # idempotent
    with pytest.raises(SandboxError, match="closed"):
        await pool.call(s, "counter", "bump", {})


async def test_load_errors_are_per_module_and_the_rest_works(pool):
    s = await pool.open_session(
        program(good="def f():\n    return 1\n", broken="def g(:\n", raising="raise RuntimeError('bad top level')\n")
    )
    assert (await pool.call(s, "good", "f", {})).output == "1"
    r = await pool.call(s, "broken", "g", {})
    assert r.error_kind is ErrorKind.LOAD_ERROR and "SyntaxError" in r.message and "line 1" in r.message
    r = await pool.call(s, "raising", "g", {})
    assert r.error_kind is ErrorKind.LOAD_ERROR and "bad top level" in r.message
    await pool.close_session(s)


@pytest.mark.parametrize(
    "top_level, expect",
    [("while True: pass", "did not finish"), ("import os; os._exit(7)", "exit status 7"), ("", "not a valid")],
)
async def test_programs_that_cannot_load_still_open(pool, top_level, expect):
    prog = program(**{"bad name" if not top_level else "m": top_level or "x = 1"})
    s = await pool.open_session(prog)
    for _ in range(2):
        r = await pool.call(s, "m" if top_level else "bad name", "f", {})
        assert r.error_kind is ErrorKind.LOAD_ERROR and expect in r.message, r
    await pool.close_session(s)


async def test_modules_import_each_other_and_the_stdlib(pool):
    prog = program(
        api="import helpers\nimport statistics\ndef mean(xs):\n    return helpers.fmt(statistics.mean(xs))\n",
        helpers="import decimal\ndef fmt(x):\n    return f'{decimal.Decimal(str(x)):.2f}'\n",
        statistics="def mean(xs):\n    return 'shadowed'\n",  # a stdlib name: callable, not importable
    )
    s = await pool.open_session(prog)
    assert (await pool.call(s, "api", "mean", {"xs": [1, 2, 4]})).output == "2.33"
    assert (await pool.call(s, "statistics", "mean", {"xs": [1]})).output == "shadowed"
    await pool.close_session(s)


async def test_a_session_has_a_minimal_environment_and_its_own_inside_module(pool):
    # The worker sets the environment once for all its sessions and drops its own `inside`
    # package from sys.modules before tool code runs: neither may leak into a session.
    prog = program(
        api="import os\nimport inside\ndef env():\n    return {'env': dict(os.environ), 'inside': inside.WHO}\n",
        inside="WHO = 'the program'\n",
    )
    s = await pool.open_session(prog)
    r = await pool.call(s, "api", "env", {})
    assert r.ok, r
    out = json.loads(r.output)
    assert out["inside"] == "the program"
    env = out["env"]
    assert sorted(env) == ["HOME", "LANG", "PATH", "TMPDIR"]
    assert env["HOME"] == env["TMPDIR"] and env["PATH"] == "/usr/bin:/bin"
    await pool.close_session(s)


async def test_timeout_kills_and_resets_the_session(pool):
    s = await pool.open_session(program(m=COUNTER + "\ndef hang():\n    while True: pass\n"))
    assert (await pool.call(s, "m", "bump", {"by": 5})).output == "5"
    r = await pool.call(s, "m", "hang", {})
    assert r.error_kind is ErrorKind.TIMEOUT and "1.5 s" in r.message and "reset" in r.message
    assert 1.4 < r.elapsed_s < 3
    assert (await pool.call(s, "m", "bump", {})).output == "1"  # fresh state
    await pool.close_session(s)


async def test_many_concurrent_sessions(pool):
    prog = program(counter=COUNTER)

    async def episode(i):
        s = await pool.open_session(prog)
        try:
            outs = [(await pool.call(s, "counter", "bump", {"by": i})).output for _ in range(3)]
        finally:
            await pool.close_session(s)
        return outs

    results = await asyncio.gather(*(episode(i) for i in range(40)))
    assert results == [[str(i), str(2 * i), str(3 * i)] for i in range(40)]
    assert pool.open_sessions == 0


async def test_pool_is_bound_to_its_loop(pool):
    def other_loop():
        return asyncio.run(pool.call(None, "m", "f", {}))

    with pytest.raises(RuntimeError, match="another event loop"):
        await asyncio.to_thread(other_loop)


async def test_run_calls_refuses_a_running_loop():
    with pytest.raises(RuntimeError, match="async API"):
        run_calls(program(m="x=1"), [])


async def test_max_sessions_makes_open_wait():
    async with SandboxPool(SandboxConfig(workers=1, max_sessions=2, backend="process")) as p:
        prog = program(m="def f():\n    return 1\n")
        a, b = await p.open_session(prog), await p.open_session(prog)
        third = asyncio.ensure_future(p.open_session(prog))
        await asyncio.sleep(0.2)
        assert not third.done()
        await p.close_session(a)
        c = await asyncio.wait_for(third, 5)
        assert (await p.call(c, "m", "f", {})).ok
        await p.close_session(b)
        await p.close_session(c)


async def test_python310_timeout_fallback():
    from astra_foundation.sandbox.timeouts import Timeout310

    with pytest.raises(asyncio.TimeoutError):
        async with Timeout310(0.05):
            await asyncio.sleep(2)
    async with Timeout310(1.0):
        await asyncio.sleep(0.01)
    with pytest.raises(asyncio.CancelledError):  # a real cancellation is not turned into a timeout
        async with Timeout310(5.0):
            asyncio.current_task().cancel()
            await asyncio.sleep(1)


def _failing_worker_command(monkeypatch, fail_first: int):
    """Make the first `fail_first` worker launches exit at once (as a broken interpreter would)."""
    from astra_foundation.sandbox import launch

    real, launches = launch.worker_command, []

    def command(*args, **kwargs):
        cmd = real(*args, **kwargs)
        launches.append(cmd)
        return launch.WorkerCommand(["/bin/false"], cmd.env, cmd.cwd) if len(launches) <= fail_first else cmd

    monkeypatch.setattr(launch, "worker_command", command)
    return launches


async def test_start_fails_loudly_and_cleanly_when_no_worker_starts(monkeypatch, caplog):
    launches = _failing_worker_command(monkeypatch, fail_first=10**6)
    p = SandboxPool(SandboxConfig(workers=2, backend="process"))
    with pytest.raises(SandboxError, match="no sandbox worker could start"):
        await p.start()
    with pytest.raises(SandboxError, match="no sandbox worker could start"):  # a second caller sees it too
        await p.start()
    await asyncio.sleep(0.3)
    assert len(launches) == 2, "a setup error must not be retried as if workers had crashed"
    await p.aclose()
    del p
    import gc

    gc.collect()
    assert "never retrieved" not in caplog.text


async def test_a_worker_that_fails_to_start_is_replaced(monkeypatch):
    launches = _failing_worker_command(monkeypatch, fail_first=1)
    async with SandboxPool(SandboxConfig(workers=2, backend="process")) as p:
        s = await p.open_session(program(m=COUNTER))
        assert (await p.call(s, "m", "bump", {})).text == "1"
        for _ in range(50):  # the failed slot gets a replacement worker
            if len(launches) == 3 and all(w is not None and w.alive for w in p._workers):
                break
            await asyncio.sleep(0.1)
        assert len(launches) == 3 and all(w.alive for w in p._workers)
        await p.close_session(s)
