"""The seccomp BPF program, evaluated by a small classic-BPF interpreter for both architectures
(aarch64 cannot run here), and its syscall numbers checked against the kernel headers."""

from __future__ import annotations

import errno
import os
import re
import struct

import pytest

from astra_foundation.sandbox.inside import confine

ALLOW, KILL = confine.SECCOMP_RET_ALLOW, confine.SECCOMP_RET_KILL_PROCESS
EPERM, ENOSYS = confine.SECCOMP_RET_ERRNO | errno.EPERM, confine.SECCOMP_RET_ERRNO | errno.ENOSYS
READ = {"x86_64": 0, "aarch64": 63}


def run_bpf(program: bytes, nr: int, arch: int, args=(0, 0, 0, 0, 0, 0)) -> int:
    """Return value of the filter for one syscall (only the opcodes seccomp_program emits)."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, *[a & 0xFFFFFFFFFFFFFFFF for a in args])
    ins = [struct.unpack_from("=HBBI", program, i) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = ins[pc]
        pc += 1
        if code == 0x20:  # ld [k]
            (acc,) = struct.unpack_from("=I", data, k)
        elif code == 0x06:  # ret k
            return k
        elif code in (0x15, 0x35, 0x45):  # jeq / jge / jset
            cond = acc == k if code == 0x15 else acc >= k if code == 0x35 else bool(acc & k)
            pc += jt if cond else jf
        else:
            raise AssertionError(f"unexpected opcode {code:#x}")


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_filter_decisions(machine):
    table, arch, me = confine.SYSCALLS[machine], confine.AUDIT_ARCH[machine], 4242
    prog = confine.seccomp_program(me, machine)
    assert len(prog) // 8 < 4096  # BPF_MAXINSNS
    assert run_bpf(prog, READ[machine], arch) == ALLOW
    assert run_bpf(prog, READ[machine], 0x40000003) == KILL  # another ABI (i386) is killed
    assert run_bpf(prog, table["clone"], arch, (0x11, 0, 0, 0, 0, 0)) == EPERM  # fork-style clone
    assert run_bpf(prog, table["clone"], arch, (0x3D0F00, 0, 0, 0, 0, 0)) == ALLOW  # pthread_create
    assert run_bpf(prog, table["clone3"], arch) == ENOSYS
    for name in ("socket", "socketpair", "execve", "ptrace", "unshare", "mount", "bpf", "io_uring_setup", "setuid"):
        assert run_bpf(prog, table[name], arch) == EPERM, name
    # memory outside RLIMIT_AS, host file activity, host metadata writes
    for name in ("memfd_create", "memfd_secret", "inotify_init1", "inotify_add_watch", "fanotify_init"):
        assert run_bpf(prog, table[name], arch) == EPERM, name
    for name in ("fanotify_mark", "utimensat", "setxattr", "lsetxattr", "fsetxattr", "removexattr"):
        assert run_bpf(prog, table[name], arch) == EPERM, name
    for name in ("lremovexattr", "fremovexattr", "setxattrat", "removexattrat"):
        assert run_bpf(prog, table[name], arch) == EPERM, name
    for name in ("kill", "tgkill", "tkill", "rt_sigqueueinfo"):
        assert run_bpf(prog, table[name], arch, (me, 9, 0, 0, 0, 0)) == ALLOW, name
        for other in (1, me + 1, 0, -1):
            assert run_bpf(prog, table[name], arch, (other, 9, 0, 0, 0, 0)) == EPERM, (name, other)
    if machine == "x86_64":
        assert run_bpf(prog, table["fork"], arch) == EPERM
        for name in ("inotify_init", "utime", "utimes", "futimesat"):
            assert run_bpf(prog, table[name], arch) == EPERM, name
        assert run_bpf(prog, 0x40000000 + READ[machine], arch) == KILL  # x32


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_filter_decisions_on_limits_scheduling_and_aio(machine):
    """Issue 47: Linux AIO takes a host-wide budget (refused); calls that change another process's
    limits or scheduling are allowed on the caller only (pid 0 or its own), as signals are."""
    table, arch, me = confine.SYSCALLS[machine], confine.AUDIT_ARCH[machine], 4242
    prog = confine.seccomp_program(me, machine)
    for name in ("io_setup", "io_submit", "io_getevents", "io_pgetevents", "io_cancel", "io_destroy"):
        assert run_bpf(prog, table[name], arch, (1, 0, 0, 0, 0, 0)) == EPERM, name
    for name in ("prlimit64", "sched_setparam", "sched_setscheduler", "sched_setattr", "sched_setaffinity"):
        for pid in (0, me):
            assert run_bpf(prog, table[name], arch, (pid, 9, 0, 0, 0, 0)) == ALLOW, (name, pid)
        for other in (1, me + 1, -1, me + (1 << 32) + 1):
            assert run_bpf(prog, table[name], arch, (other, 9, 0, 0, 0, 0)) == EPERM, (name, other)
    for name, process in (("setpriority", 0), ("ioprio_set", 1)):
        for who in (0, me):
            assert run_bpf(prog, table[name], arch, (process, who, 5, 0, 0, 0)) == ALLOW, (name, who)
        for which, who in ((process, 1), (process, me + 1), (process + 1, 0), (process + 2, 0), (process + 1, me)):
            assert run_bpf(prog, table[name], arch, (which, who, 5, 0, 0, 0)) == EPERM, (name, which, who)
    assert confine.SIGPENDING <= 256  # a low RLIMIT_SIGPENDING: POSIX timers pin kernel memory


HEADERS = {
    "x86_64": "/usr/include/x86_64-linux-gnu/asm/unistd_64.h",
    "aarch64": "/usr/include/asm-generic/unistd.h",
}


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_syscall_numbers_match_the_kernel_headers(machine):
    path = HEADERS[machine]
    if not os.path.exists(path):
        pytest.skip(f"{path} not installed")
    text = open(path).read()
    for name, nr in confine.SYSCALLS[machine].items():
        m = re.search(rf"^#define __NR(?:3264)?_{name}\s+(\d+)", text, re.M)
        if m is None and name in confine.NEWER_SYSCALLS:
            continue  # headers older than the syscall (test_newer_syscalls_exist checks them on this kernel)
        assert m and int(m.group(1)) == nr, (machine, name, nr, m and m.group(1))


def test_newer_syscalls_exist_under_their_numbers():
    """The syscalls newer than some headers (setxattrat, removexattrat: Linux 6.13) answer to our
    numbers on a kernel that has them: EFAULT/EBADF for a bad call, not ENOSYS. On an older
    kernel they are ENOSYS and denying them changes nothing."""
    import ctypes

    if confine.MACHINE not in confine.SYSCALLS:
        pytest.skip(f"no table for {confine.MACHINE}")
    release = tuple(int(x) for x in re.findall(r"\d+", os.uname().release)[:2])
    if release < (6, 13):
        pytest.skip(f"kernel {os.uname().release} predates them")
    libc = ctypes.CDLL(None, use_errno=True)
    for name in confine.NEWER_SYSCALLS:
        ret = libc.syscall(confine.SYSCALLS[confine.MACHINE][name], -1, None, 0, None, None, 0)
        assert ret == -1 and ctypes.get_errno() != errno.ENOSYS, (name, ctypes.get_errno())
