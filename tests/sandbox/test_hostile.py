"""Hostile tool code, run against every backend: each attack is contained, the session that
made it still works (fresh if it had to die), and the host and other sessions are unaffected.

What the `process` fallback cannot do is tested at the end with Landlock switched off (the
situation on kernels without it): see test_fallback_without_landlock_*.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import socket
import tempfile
import time

import pytest
import pytest_asyncio

from astra_foundation.sandbox import ErrorKind, Module, Program, SandboxPool

pytestmark = pytest.mark.asyncio(loop_scope="module")

HEALTH = "\n_calls = [0]\ndef health():\n    _calls[0] += 1\n    return _calls[0]\n"
CONTAINED = {ErrorKind.FORBIDDEN, ErrorKind.EXCEPTION}  # blocked: PermissionError, or the path does not exist


def tool(source: str) -> Program:
    return Program((Module("m", source + HEALTH),))


async def attack(pool, source: str, kwargs: dict | None = None, calls: int = 1):
    """Open a session, run `m.f(**kwargs)`, check the session still answers; returns the result
    and the health call's output ("1": state kept, "1" after a crash too: state was reset)."""
    s = await pool.open_session(tool(source))
    try:
        for _ in range(calls):
            r = await pool.call(s, "m", "f", kwargs or {})
        health = await pool.call(s, "m", "health", {})
        assert health.ok, f"session unusable after the attack: {health}"
        return r, health.output
    finally:
        await pool.close_session(s)


@pytest.fixture(scope="module")
def host_dir():
    """A world-readable directory with a world-readable secret and a world-writable subdir:
    only real isolation (namespaces / Landlock) keeps a session out, not file permissions."""
    d = tempfile.mkdtemp(prefix="astra-hostile-")
    os.chmod(d, 0o755)
    with open(os.path.join(d, "secret.txt"), "w") as f:
        f.write("TOP-SECRET-42")
    os.chmod(os.path.join(d, "secret.txt"), 0o644)
    os.mkdir(os.path.join(d, "drop"))
    os.chmod(os.path.join(d, "drop"), 0o777)
    with open(os.path.join(d, "root-only.txt"), "w") as f:
        f.write("ROOT-ONLY-7")
    os.chmod(os.path.join(d, "root-only.txt"), 0o600)
    yield d
    import shutil

    shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------------ processes
@pytest.mark.parametrize(
    "body",
    [
        "while True:\n        os.fork()",
        "import subprocess\n    subprocess.run(['true'])",
        "import multiprocessing\n    multiprocessing.Process(target=print).start()",
        "os.posix_spawn('/bin/true', ['true'], {})",
        "os.execv('/bin/true', ['true'])",
    ],
    ids=["fork-bomb", "subprocess", "multiprocessing", "posix_spawn", "execv"],
)
async def test_no_new_processes(pool, body):
    r, health = await attack(pool, f"import os\ndef f():\n    {body}\n")
    assert r.error_kind is ErrorKind.FORBIDDEN, r
    assert "blocked by the sandbox" in r.message and health == "1"


async def test_os_system_starts_nothing(pool):
    r, _ = await attack(pool, "import os\ndef f():\n    return os.system('touch /tmp/astra-pwned')\n")
    assert r.ok and r.output != "0"  # the shell never ran
    assert not os.path.exists("/tmp/astra-pwned")


async def test_thread_bomb_is_capped(pool):
    src = "import threading, time\ndef f():\n    while True:\n        threading.Thread(target=time.sleep, args=(3,), daemon=True).start()\n"
    r, health = await attack(pool, src)
    assert r.error_kind is ErrorKind.EXCEPTION and "can't start new thread" in r.message and health == "1"


# ------------------------------------------------------------------ memory, cpu, output
@pytest.mark.parametrize(
    "body",
    ["x = bytearray(10**10)", "x = []\n    while True:\n        x.append(' ' * 10**6)"],
    ids=["one-shot", "growing"],
)
async def test_memory_bomb(fresh_config, backend, body):
    # Its own pool with a longer call timeout: the growing bomb reaches the memory limit in a few
    # hundred ms on an idle core, and timed out first under the shared pool's 1.5 s at load 10.
    async with SandboxPool(fresh_config(backend, workers=1, call_timeout_s=20.0)) as pool:
        r, health = await attack(pool, f"def f():\n    {body}\n")
    assert r.error_kind is ErrorKind.MEMORY and "memory limit" in r.message and health == "1"


async def test_recursion_bomb(pool):
    r, health = await attack(pool, "def f():\n    return f()\n")
    assert r.error_kind is ErrorKind.EXCEPTION and "RecursionError" in r.message and health == "1"


async def test_c_stack_overflow_is_a_crash_and_resets(fresh_config, backend):
    # Its own pool with a longer call timeout: building a million nested lists takes a few
    # hundred ms on an idle core and more than the shared pool's 1.5 s on a loaded machine.
    src = (
        "import sys, json\ndef f():\n    sys.setrecursionlimit(10**7)\n    x = []\n"
        "    for _ in range(10**6):\n        x = [x]\n    return json.dumps(x)\n"
    )
    async with SandboxPool(fresh_config(backend, workers=1, call_timeout_s=20.0)) as pool:
        r, health = await attack(pool, src)
    assert r.error_kind is ErrorKind.CRASH and "SIGSEGV" in r.message and health == "1"


@pytest.mark.parametrize(
    "body, expect",
    [
        ("while True:\n        print('x' * 1000)", "printed more than 2,000"),
        (
            "for _ in range(10**4):\n        try:\n            print('x' * 1000)\n        except BaseException:\n            pass\n    return 'done'",
            "printed more than 2,000",
        ),
        ("return 'x' * 10**7", "returned 10,000,000 characters"),
        ("return list(range(10**6))", "more than the limit"),
    ],
    ids=["print-flood", "print-flood-swallowing-the-stop", "huge-return", "huge-list"],
)
async def test_huge_output(pool, body, expect):
    r, health = await attack(pool, f"def f():\n    {body}\n")
    assert r.error_kind is ErrorKind.OUTPUT_LIMIT and expect in r.message and health == "1"
    assert len(r.stdout) <= 2000


async def test_top_level_print_flood_is_a_load_error(pool):
    s = await pool.open_session(Program((Module("m", "while True: print('x')"),)))
    r = await pool.call(s, "m", "f", {})
    assert r.error_kind is ErrorKind.LOAD_ERROR and "printed more than" in r.message
    await pool.close_session(s)


async def test_file_size_limit(pool):
    r, health = await attack(pool, "def f():\n    open('big', 'wb').write(b'x' * (40 << 20))\n")
    assert r.error_kind is ErrorKind.EXCEPTION and "File too large" in r.message and health == "1"


# ------------------------------------------------------------------ files
async def test_work_dir_is_writable_and_private(pool):
    src = "import os\ndef f():\n    open('notes.txt', 'w').write('mine')\n    return os.getcwd() + '|' + open('notes.txt').read()\n"
    r, _ = await attack(pool, src)
    assert r.ok and r.output.endswith("|mine")
    assert not os.path.exists(r.output.split("|")[0] + "/notes.txt")  # not on the host (private tmpfs / gone)


@pytest.mark.parametrize(
    "target", ["{d}/secret.txt", "{d}/root-only.txt", "/etc/shadow", "/proc/1/environ", "{repo}/setup.py"]
)
async def test_host_files_are_unreadable(pool, host_dir, target):
    path = target.format(d=host_dir, repo=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    r, _ = await attack(pool, "def f(path):\n    return open(path).read()\n", {"path": path})
    assert r.error_kind in CONTAINED and not r.output, r
    assert "SECRET" not in r.message and "ROOT-ONLY" not in r.message


async def test_listing_the_host_is_denied(pool):
    src = "import os\ndef f(path):\n    return os.listdir(path)\n"
    for path in ("/", "..", "/proc", "/home"):
        r, _ = await attack(pool, src, {"path": path})
        assert r.error_kind in CONTAINED, (path, r)


async def test_escape_through_the_stdlib_descriptors(pool):
    src = "import sys, os\ndef f():\n    up = sys.path[0] + '/../../../../../..'\n    return [os.listdir(up), open(up + '/etc/shadow').read()]\n"
    r, _ = await attack(pool, src)
    assert r.error_kind in CONTAINED, r


@pytest.mark.parametrize("target", ["{d}/drop/evil.txt", "{d}/evil.txt", "/tmp/astra-evil.txt", "/dev/shm/astra-evil"])
async def test_writing_outside_the_work_dir(pool, host_dir, target):
    path = target.format(d=host_dir)
    r, _ = await attack(pool, "def f(path):\n    open(path, 'w').write('pwned')\n", {"path": path})
    assert r.error_kind in CONTAINED, r
    assert not os.path.exists(path)


async def test_symlink_out_of_the_work_dir(pool, host_dir):
    src = "import os\ndef f(path):\n    os.symlink(path, 'link')\n    return open('link').read()\n"
    r, _ = await attack(pool, src, {"path": f"{host_dir}/secret.txt"})
    assert r.error_kind in CONTAINED and "SECRET" not in r.message


# ------------------------------------------------------------------ network
@pytest.fixture
def loopback_server():
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    yield srv
    srv.close()


@pytest.mark.parametrize(
    "body",
    [
        "socket.create_connection(('127.0.0.1', port), timeout=1)",
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n    s.sendto(b'x', ('127.0.0.1', port))",
        "s = socket.socket(socket.AF_UNIX)\n    s.connect('\\0astra')",
        "import ctypes\n    libc = ctypes.CDLL(None, use_errno=True)\n    assert libc.socket(2, 1, 0) >= 0, 'socket() refused'",
    ],
    ids=["tcp", "udp", "abstract-unix", "ctypes-socket"],
)
async def test_no_network(pool, loopback_server, body):
    port = loopback_server.getsockname()[1]
    r, health = await attack(pool, f"import socket\ndef f(port):\n    {body}\n    return 'connected'\n", {"port": port})
    assert not r.ok and r.error_kind in (ErrorKind.FORBIDDEN, ErrorKind.EXCEPTION), r
    assert "refused" in r.message or r.error_kind is ErrorKind.FORBIDDEN
    ready, _, _ = select.select([loopback_server], [], [], 0.2)
    assert not ready, "the loopback server saw a connection"
    assert health == "1"


# ------------------------------------------------------------------ signals, other processes
@pytest.mark.parametrize(
    "body",
    [
        "os.kill(os.getppid(), signal.SIGKILL)",
        "os.killpg(0, signal.SIGKILL)",
        "os.kill(-1, signal.SIGKILL)",
        "os.kill(1, signal.SIGKILL)",
        "os.kill(host_pid, signal.SIGUSR1)",
    ],
    ids=["parent", "process-group", "everyone", "init", "trainer"],
)
async def test_cannot_signal_others(pool, body):
    received = []
    old = signal.signal(signal.SIGUSR1, lambda *_: received.append(1))
    try:
        workers_before = pool.worker_pids()
        src = f"import os, signal\ndef f(host_pid):\n    {body}\n"
        r, health = await attack(pool, src, {"host_pid": os.getpid()})
        await asyncio.sleep(0.1)
    finally:
        signal.signal(signal.SIGUSR1, old)
    assert r.error_kind is ErrorKind.FORBIDDEN, r
    assert not received and health == "1"
    assert pool.worker_pids() == workers_before and all(workers_before)


async def test_ctypes_syscalls_are_blocked(pool):
    src = (
        "import ctypes, os\ndef f():\n    libc = ctypes.CDLL(None, use_errno=True)\n"
        "    return [libc.fork(), libc.kill(os.getppid(), 9), libc.ptrace(16, os.getppid(), 0, 0), libc.unshare(0x20000)]\n"
    )
    r, health = await attack(pool, src)
    assert r.ok and r.output == "[-1, -1, -1, -1]" and health == "1"


# ------------------------------------------------------------------ crashes
@pytest.mark.parametrize(
    "body, kind, words",
    [
        ("os._exit(3)", ErrorKind.CRASH, "exit status 3"),
        ("import ctypes\n    ctypes.string_at(0)", ErrorKind.CRASH, "SIGSEGV"),
        ("os.abort()", ErrorKind.CRASH, "SIGABRT"),
        ("os.kill(os.getpid(), 9)", ErrorKind.CRASH, "SIGKILL"),
    ],
    ids=["os._exit", "segfault", "abort", "kill-self"],
)
async def test_crashes_reset_the_session(pool, body, kind, words):
    r, health = await attack(pool, f"import os\ndef f():\n    {body}\n", calls=1)
    assert r.error_kind is kind and words in r.message and "tool state was reset" in r.message
    assert health == "1"


async def test_tampering_with_the_result_channel(pool):
    src = "import os\ndef f():\n    for fd in range(3, 64):\n        try:\n            os.write(fd, b'\\x00\\x00\\x00\\x05hello')\n        except OSError:\n            pass\n    return 'x'\n"
    r, health = await attack(pool, src)
    assert r.error_kind is ErrorKind.FORBIDDEN and "result channel" in r.message and health == "1"


async def test_closing_the_result_channel(pool):
    src = "import os\ndef f():\n    for fd in range(3, 64):\n        try:\n            os.close(fd)\n        except OSError:\n            pass\n"
    r, health = await attack(pool, src)
    assert r.error_kind is ErrorKind.FORBIDDEN and "result channel" in r.message and health == "1"


async def test_tampering_while_loading(pool):
    src = "import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'\\x00\\x00\\x00\\x03abc')\n    except OSError:\n        pass\n"
    s = await pool.open_session(Program((Module("m", src),)))
    r = await pool.call(s, "m", "f", {})
    assert r.error_kind is ErrorKind.LOAD_ERROR and "interfered" in r.message
    await pool.close_session(s)


# ------------------------------------------------------------------ sessions vs sessions
POISON = """
import builtins, json, math
def f():
    builtins.len = lambda x: 42
    json.dumps = lambda *a, **k: "HACKED"
    math.pi = 3
    open("state.txt", "w").write("attacker")
    return "poisoned"
def probe():
    import os
    return [len([1, 2]), json.dumps([1]), math.pi, os.path.exists("state.txt")]
"""


async def test_monkeypatching_stays_in_its_session(pool):
    prog = Program((Module("m", POISON),))
    a, b = await pool.open_session(prog), await pool.open_session(prog)
    assert (await pool.call(a, "m", "f", {})).output == "poisoned"
    # builtins are restored after every call; the session's own modules keep what it did to them
    assert (await pool.call(a, "m", "probe", {})).output == '[2, "HACKED", 3, true]'
    assert (await pool.call(b, "m", "probe", {})).output == '[2, "[1]", 3.141592653589793, false]'
    c = await pool.open_session(prog)  # opened after the poisoning, maybe on the same worker
    assert (await pool.call(c, "m", "probe", {})).output == '[2, "[1]", 3.141592653589793, false]'
    for s in (a, b, c):
        await pool.close_session(s)


VICTIM = """
import os
def plant():
    open("secret.txt", "w").write("VICTIM-SECRET")
    return {"cwd": os.getcwd(), "pid": os.getpid()}
def check():
    return open("secret.txt").read()
"""
ATTACKER = """
import os, signal
def read(path):
    return open(path).read()
def kill(pid):
    os.kill(pid, signal.SIGKILL)
def listing(path):
    return os.listdir(path)
def where():
    return os.getcwd()
def pid():
    return os.getpid()
"""


async def test_sessions_cannot_reach_each_other(pool):
    import json

    victims = [await pool.open_session(Program((Module("v", VICTIM),))) for _ in range(2)]
    attacker = await pool.open_session(Program((Module("a", ATTACKER),)))
    for victim in victims:
        planted = json.loads((await pool.call(victim, "v", "plant", {})).output)
        # Distinct paths, whichever worker each session is on (bwrap workers once named them alike,
        # and the listing below then read the attacker's own empty dir).
        assert (await pool.call(attacker, "a", "where", {})).output != planted["cwd"]
        r = await pool.call(attacker, "a", "read", {"path": planted["cwd"] + "/secret.txt"})
        assert r.error_kind in CONTAINED and "VICTIM" not in r.message, r
        assert (await pool.call(attacker, "a", "listing", {"path": planted["cwd"]})).error_kind in CONTAINED
        # Under bwrap each worker has a pid namespace of its own, so a victim on another worker can
        # carry the attacker's own pid number: that kill names the attacker itself (allowed, and
        # it ends only the attacker's process). Any other pid is refused.
        own = int((await pool.call(attacker, "a", "pid", {})).output)
        for pid in (planted["pid"], pool.session_pid(victim)):
            expected = ErrorKind.CRASH if pid == own else ErrorKind.FORBIDDEN
            assert (await pool.call(attacker, "a", "kill", {"pid": pid})).error_kind is expected
        assert (await pool.call(victim, "v", "check", {})).output == "VICTIM-SECRET"
    for s in (*victims, attacker):
        await pool.close_session(s)


async def test_every_live_session_has_a_work_dir_path_of_its_own(pool):
    """Across workers too: under bwrap each worker is pid 2 of its own namespace, and work dirs
    named by the worker's pid collided, so one session's path named another's dir elsewhere."""
    sessions = [await pool.open_session(Program((Module("a", ATTACKER),))) for _ in range(6)]
    paths = [(await pool.call(s, "a", "where", {})).output for s in sessions]
    assert len(set(paths)) == len(paths), paths
    for s in sessions:
        await pool.close_session(s)


# ------------------------------------------------------------------ killed from outside
async def test_session_process_killed_mid_call(own_pool):
    pool = own_pool
    s = await pool.open_session(tool("import time\ndef f():\n    time.sleep(30)\n"))
    assert (await pool.call(s, "m", "health", {})).output == "1"
    pending = asyncio.ensure_future(pool.call(s, "m", "f", {}))
    await asyncio.sleep(0.3)
    os.kill(pool.session_pid(s), signal.SIGKILL)
    r = await asyncio.wait_for(pending, 4)
    assert r.error_kind is ErrorKind.CRASH and "SIGKILL" in r.message and "reset" in r.message
    assert (await pool.call(s, "m", "health", {})).output == "1"  # fresh process, fresh state
    await pool.close_session(s)


async def test_worker_killed_mid_call(own_pool):
    pool = own_pool
    prog = tool("import time\ndef f():\n    time.sleep(30)\n")
    sessions = [await pool.open_session(prog) for _ in range(4)]  # spread over both workers
    doomed_worker = pool.worker_pid_of(sessions[0])
    doomed = [s for s in sessions if pool.worker_pid_of(s) == doomed_worker]
    spared = [s for s in sessions if pool.worker_pid_of(s) != doomed_worker]
    assert doomed and spared
    for s in spared:
        await pool.call(s, "m", "health", {})
    pending = asyncio.ensure_future(pool.call(doomed[0], "m", "f", {}))
    await asyncio.sleep(0.3)
    os.kill(doomed_worker, signal.SIGKILL)
    r = await asyncio.wait_for(pending, 4)
    assert r.error_kind is ErrorKind.CRASH and ("worker" in r.message or "SIGKILL" in r.message), r
    for s in spared:  # other workers' sessions kept their state
        assert (await pool.call(s, "m", "health", {})).output == "2"
    for s in doomed[1:]:  # idle sessions of the dead worker learn on their next call that their state is gone
        r = await pool.call(s, "m", "health", {})
        assert r.error_kind is ErrorKind.CRASH and "worker" in r.message and "reset" in r.message, r
    for s in doomed:  # and then come back fresh
        assert (await pool.call(s, "m", "health", {})).output == "1"
    deadline = time.monotonic() + 10
    while not (all(pool.worker_pids()) and doomed_worker not in pool.worker_pids()):
        assert time.monotonic() < deadline, "no replacement worker"
        await asyncio.sleep(0.05)
    fresh = await pool.open_session(prog)
    assert (await pool.call(fresh, "m", "health", {})).output == "1"
    for s in (*sessions, fresh):
        await pool.close_session(s)


async def test_cpu_budget_stops_background_spinning(own_pool):
    pool = own_pool
    src = (
        "import threading\ndef spin():\n    while True:\n        pass\n"
        "def f():\n    threading.Thread(target=spin, daemon=True).start()\n    return 'spinning'\n"
    )
    s = await pool.open_session(tool(src))
    assert (await pool.call(s, "m", "f", {})).output == "spinning"
    deadline = time.monotonic() + 10
    while True:  # the thread burns the session's 1 s CPU budget between calls
        r = await pool.call(s, "m", "health", {})
        if not r.ok:
            break
        assert time.monotonic() < deadline, "the CPU limit never hit"
        await asyncio.sleep(0.2)
    assert r.error_kind is ErrorKind.TIMEOUT and "CPU-time budget" in r.message
    assert (await pool.call(s, "m", "health", {})).output == "1"
    await pool.close_session(s)


# ------------------------------------------------------------------ the fallback without Landlock
@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def degraded(fresh_config):
    async with SandboxPool(fresh_config("process", landlock=False)) as p:
        yield p


async def test_fallback_without_landlock_still_guarantees(degraded, host_dir, loopback_server):
    """Kernels without Landlock: uid drop + seccomp + rlimits still hold."""
    assert "Landlock disabled" in degraded.isolation
    port = loopback_server.getsockname()[1]
    checks = {
        "def f():\n    return open('/etc/shadow').read()\n": CONTAINED,
        f"def f():\n    return open('{host_dir}/root-only.txt').read()\n": CONTAINED,  # 0600 root
        f"def f():\n    open('{host_dir}/evil.txt', 'w').write('x')\n": CONTAINED,  # root's 0755 dir
        f"import socket\ndef f():\n    socket.create_connection(('127.0.0.1', {port}))\n": {ErrorKind.FORBIDDEN},
        "import os\ndef f():\n    os.fork()\n": {ErrorKind.FORBIDDEN},
        "import os\ndef f():\n    os.kill(os.getppid(), 9)\n": {ErrorKind.FORBIDDEN},
    }
    for src, kinds in checks.items():
        r, health = await attack(degraded, src)
        assert r.error_kind in kinds and health == "1", (src, r)
    assert not os.path.exists(f"{host_dir}/evil.txt")
    assert not select.select([loopback_server], [], [], 0.1)[0]


async def test_fallback_without_landlock_limits_are_as_documented(degraded, host_dir):
    """What only Landlock (or bwrap) stops: world-readable files are readable and world-writable
    directories writable by the session's uid. This test pins the documented weakness."""
    r, _ = await attack(degraded, "def f(p):\n    return open(p).read()\n", {"p": f"{host_dir}/secret.txt"})
    assert r.ok and r.output == "TOP-SECRET-42"
    path = f"{host_dir}/drop/evil.txt"
    r, _ = await attack(degraded, "def f(p):\n    open(p, 'w').write('x')\n    return 'ok'\n", {"p": path})
    assert r.ok
    os.unlink(path)


async def test_hung_worker_is_replaced(own_pool):
    """A worker that no longer answers: the first request to it times out, it is killed with its
    session processes and replaced. The pool holds a confined process of each worker ahead of
    opens (supervise.HELD_SPARES), so the first open may still get the stopped worker's: that
    session's next call then finds its process gone with the worker (CRASH, state reset) and the
    call after runs on a live worker."""
    pool = own_pool
    stopped = pool.worker_pids()[0]
    os.kill(stopped, signal.SIGSTOP)
    try:
        prog = tool("def f():\n    return 'ok'\n")
        sessions = [await pool.open_session(prog) for _ in range(3)]
        deadline = time.monotonic() + pool.config.load_timeout_s + 10
        while stopped in pool.worker_pids():  # detected: a request to it timed out
            assert time.monotonic() < deadline, "the hung worker was not detected"
            await asyncio.sleep(0.05)
        for s in sessions:
            r = await pool.call(s, "m", "f", {})
            if not r.ok:  # a process held from the stopped worker before it stopped, gone with it
                assert r.error_kind is ErrorKind.CRASH and "reset" in r.message, r
                r = await pool.call(s, "m", "f", {})
            assert r.output == "ok", r
            assert pool.worker_pid_of(s) != stopped
    finally:
        try:
            os.kill(stopped, signal.SIGCONT)
        except ProcessLookupError:
            pass  # already killed by the pool, as it should be
    deadline = time.monotonic() + 15
    while stopped in pool.worker_pids() or not all(pool.worker_pids()):
        assert time.monotonic() < deadline, "the hung worker was not replaced"
        await asyncio.sleep(0.05)
    for s in sessions:
        await pool.close_session(s)


EVIL_BUILTIN = """
import builtins
class Liar:
    def __eq__(self, other):
        return True
    __hash__ = object.__hash__
    def __call__(self, *a, **k):
        return 0
def f():
    builtins.len = Liar()  # equal to everything: only an identity check sees it is not len
    builtins.isinstance = Liar()
    return "planted"
def big():
    return "x" * 100000
"""


async def test_builtins_replaced_by_objects_equal_to_everything_are_restored(pool):
    s = await pool.open_session(Program((Module("m", EVIL_BUILTIN),)))
    try:
        assert (await pool.call(s, "m", "f", {})).output == "planted"
        r = await pool.call(s, "m", "big", {})  # the session measures the output with the real len
        assert r.error_kind is ErrorKind.OUTPUT_LIMIT and "100,000 characters" in r.message, r
    finally:
        await pool.close_session(s)
