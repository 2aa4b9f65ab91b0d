"""Kernel confinement of one session process, applied after fork and before any tool code runs.

Layers, in the order `confine()` applies them (each one is also useful alone):

0. **private work dir** (when the worker may mount: root, or bwrap's worker which keeps
   CAP_SYS_ADMIN): a mount namespace of its own with a size- and inode-limited tmpfs on the work
   dir, so a session can neither see nor fill another session's files.
1. **uid drop** (only when running as root): the session gets its own unprivileged uid/gid and no
   supplementary groups, which clears every capability. Only then does RLIMIT_NPROC mean anything
   (the kernel exempts uid 0), and only then do file permissions (0700 homes, /etc/shadow) apply.
2. **not dumpable, no new privileges**: no same-uid process may ptrace it or read its memory.
3. **rlimits**: address space, CPU seconds (per session), file size, open files, processes /
   threads (with the uid drop), no core dumps, no POSIX message queues, few queued signals and
   POSIX timers (`SIGPENDING`: each pins kernel memory that the address-space limit misses).
4. **Landlock** (Linux >= 5.13, if the LSM is enabled): the filesystem is read-only below the
   Python installation and the system library directories and read-write below the session's
   work dir only; nothing else can be opened. From ABI 4 TCP bind/connect are denied, from ABI 6
   signals and abstract unix sockets are scoped to the session.
5. **seccomp** (mandatory): a BPF deny-list. Blocked with EPERM: new processes (fork, vfork,
   clone without CLONE_THREAD, execve[at]), every socket (socket, socketpair: "no network", and
   no abstract unix sockets to host daemons), signals to any process but itself, ptrace and
   process_vm_*, pidfd_*, namespaces and mounts, bpf, perf_event_open, userfaultfd, io_uring and
   Linux AIO (io_setup & co.: its contexts come from one host-wide budget, fs.aio-max-nr, that a
   single session could take whole), changes of limits, scheduling or priority of any process
   but itself (prlimit64, sched_set*, setpriority, ioprio_set, checked as signals are), keyrings,
   uid/gid changes, SysV IPC and POSIX message queues, open_by_handle_at, kexec, personality; memfd_create and memfd_secret (their pages are shared memory, not address space:
   RLIMIT_AS does not count them, so they would let a session hold memory beyond `memory_mb`);
   inotify and fanotify (Landlock does not mediate them: a watch on a readable or even a merely
   existing host directory reports the host's file activity); the timestamp calls (utime, utimes,
   futimesat, utimensat) and the xattr writes (setxattr, removexattr and their l/f/at forms), so
   a session cannot change host metadata, nor leave a message on a world-writable file for a later
   session (a channel between sessions through the host). clone3 returns ENOSYS (its flags live in memory a filter cannot read; glibc then
   falls back to clone, whose flags the filter checks). Any other architecture than the native
   one (e.g. i386 `int 0x80` or x32 calls from a 64-bit process) kills the process.

Pure ctypes, no dependency. x86_64 and aarch64 only (the syscall tables below).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import resource
import struct
from dataclasses import dataclass

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]

MACHINE = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine().lower())

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

# Numbers from the kernel's uapi tables (asm/unistd_64.h for x86_64, asm-generic/unistd.h for aarch64).
_X86_64 = {
    "fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "execve": 59, "execveat": 322,
    "socket": 41, "socketpair": 53, "ptrace": 101, "kill": 62, "tkill": 200, "tgkill": 234,
    "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297, "process_vm_readv": 310, "process_vm_writev": 311,
    "pidfd_open": 434, "pidfd_send_signal": 424, "pidfd_getfd": 438, "unshare": 272, "setns": 308,
    "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "open_tree": 428, "move_mount": 429,
    "fsopen": 430, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "bpf": 321, "perf_event_open": 298,
    "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "keyctl": 250, "add_key": 248, "request_key": 249, "setuid": 105, "setgid": 106, "setreuid": 113,
    "setregid": 114, "setresuid": 117, "setresgid": 119, "setfsuid": 122, "setfsgid": 123, "setgroups": 116,
    "msgget": 68, "msgctl": 71, "msgrcv": 70, "msgsnd": 69, "semget": 64, "semctl": 66, "semtimedop": 220,
    "semop": 65, "shmget": 29, "shmctl": 31, "shmat": 30, "shmdt": 67, "mq_open": 240,
    "name_to_handle_at": 303, "open_by_handle_at": 304, "kexec_load": 246, "personality": 135,
    "memfd_create": 319, "memfd_secret": 447, "inotify_init": 253, "inotify_init1": 294,
    "inotify_add_watch": 254, "fanotify_init": 300, "fanotify_mark": 301, "utime": 132, "utimes": 235,
    "futimesat": 261, "utimensat": 280, "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190,
    "removexattr": 197, "lremovexattr": 198, "fremovexattr": 199, "setxattrat": 463, "removexattrat": 466,
    "io_setup": 206, "io_destroy": 207, "io_getevents": 208, "io_submit": 209, "io_cancel": 210,
    "io_pgetevents": 333, "prlimit64": 302, "sched_setparam": 142, "sched_setscheduler": 144,
    "sched_setattr": 314, "sched_setaffinity": 203, "setpriority": 141, "ioprio_set": 251,
}  # fmt: skip
_AARCH64 = {
    "clone": 220, "clone3": 435, "execve": 221, "execveat": 281, "socket": 198, "socketpair": 199,
    "ptrace": 117, "kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240,
    "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_open": 434, "pidfd_send_signal": 424,
    "pidfd_getfd": 438, "unshare": 97, "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41,
    "chroot": 51, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 219, "add_key": 217, "request_key": 218,
    "setuid": 146, "setgid": 144, "setreuid": 145, "setregid": 143, "setresuid": 147, "setresgid": 149,
    "setfsuid": 151, "setfsgid": 152, "setgroups": 159, "msgget": 186, "msgctl": 187, "msgrcv": 188,
    "msgsnd": 189, "semget": 190, "semctl": 191, "semtimedop": 192, "semop": 193, "shmget": 194,
    "shmctl": 195, "shmat": 196, "shmdt": 197, "mq_open": 180, "name_to_handle_at": 264,
    "open_by_handle_at": 265, "kexec_load": 104, "personality": 92, "memfd_create": 279, "memfd_secret": 447,
    "inotify_init1": 26, "inotify_add_watch": 27, "fanotify_init": 262, "fanotify_mark": 263, "utimensat": 88,
    "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "removexattr": 14, "lremovexattr": 15, "fremovexattr": 16,
    "setxattrat": 463, "removexattrat": 466, "io_setup": 0, "io_destroy": 1, "io_submit": 2, "io_cancel": 3,
    "io_getevents": 4, "io_pgetevents": 292, "prlimit64": 261, "sched_setparam": 118, "sched_setscheduler": 119,
    "sched_setattr": 274, "sched_setaffinity": 122, "setpriority": 140, "ioprio_set": 30,
}  # fmt: skip
# In the tables above but newer than some kernel headers still in use (Linux 6.13): the header
# test checks them only where the header has them.
NEWER_SYSCALLS = ("setxattrat", "removexattrat")
SYSCALLS = {"x86_64": _X86_64, "aarch64": _AARCH64}

# Syscalls whose first argument is a pid/tgid: allowed only when it is the session's own pid.
SIGNAL_SYSCALLS = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
# Syscalls that change a process's limits or scheduling, the process named by their first
# argument (0: the caller): allowed on the caller only. The kernel lets a process change any
# process of its uid this way; a session that shared a uid with another (or found one) could cap
# its address space or starve it.
SELF_SYSCALLS = ("prlimit64", "sched_setparam", "sched_setscheduler", "sched_setattr", "sched_setaffinity")
# The same for calls that name their target as (which, who): allowed only for which = "a process"
# (PRIO_PROCESS, IOPRIO_WHO_PROCESS) and who = the caller (0 or its own pid); a process group or a
# whole uid is refused.
WHICH_WHO_SYSCALLS = {"setpriority": 0, "ioprio_set": 1}
_CHECKED = {*SIGNAL_SYSCALLS, *SELF_SYSCALLS, *WHICH_WHO_SYSCALLS, "clone", "clone3"}
DENIED_SYSCALLS = tuple(
    n for n in _X86_64 if n not in _CHECKED
)  # present in both tables except the legacy ones aarch64 lacks (fork, vfork, inotify_init, utime ...)
# Queued signals and POSIX timers of a session's uid (RLIMIT_SIGPENDING): each timer pins a
# preallocated signal queue entry in unreclaimable kernel memory, which RLIMIT_AS does not count.
# The inherited default (~1/4 of the host's pages / 1k, ~96k) let one session pin ~36 MiB.
SIGPENDING = 64

CLONE_THREAD = 0x00010000
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000

# classic BPF
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_OFF_NR, _OFF_ARCH, _OFF_ARG0, _OFF_ARG1 = 0, 4, 16, 24  # struct seccomp_data; args are u64, low word first


class ConfinementError(RuntimeError):
    """A mandatory layer could not be applied; the session must not run tool code."""


def _errcheck(ret: int, what: str) -> int:
    if ret < 0:
        e = ctypes.get_errno()
        raise ConfinementError(f"{what} failed: {os.strerror(e)} (errno {e})")
    return ret


def set_parent_death_signal(sig: int) -> None:
    _errcheck(_libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")


# --------------------------------------------------------------------------- private work dir
CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 1 << 14, 1 << 18
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.unshare.argtypes = [ctypes.c_int]


def private_tmpfs(path: str, size_mb: int, uid: int | None) -> None:
    """Mount a tmpfs of `size_mb` (and at most 4096 files) on `path`, in a mount namespace of
    the calling process's own: the session's files live in memory it alone sees, and filling it
    affects no other session. Needs CAP_SYS_ADMIN (root; inside bwrap the worker keeps it)."""
    _errcheck(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _errcheck(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount(/, MS_REC|MS_PRIVATE)")
    opts = f"size={size_mb}m,nr_inodes=4096,mode=0700" + (f",uid={uid},gid={uid}" if uid is not None else "")
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    _errcheck(_libc.mount(b"tmpfs", path.encode(), b"tmpfs", flags, opts.encode()), f"mount(tmpfs on {path})")


def can_mount_private_tmpfs(scratch: str) -> bool:
    """Try `private_tmpfs` in a throw-away child (the worker's own mounts stay untouched)."""
    pid = os.fork()
    if pid == 0:
        try:
            private_tmpfs(scratch, 1, None)
            os._exit(0)
        except BaseException:  # noqa: BLE001 - any failure means "no"
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


# --------------------------------------------------------------------------- uid drop
def drop_privileges(uid: int) -> None:
    """Become `uid`/`uid` with no groups and no capabilities (root only)."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    if os.getuid() != uid or os.geteuid() != uid:
        raise ConfinementError(f"uid drop to {uid} did not take effect")


# --------------------------------------------------------------------------- rlimits
def apply_rlimits(*, memory_mb: int, cpu_s: int, file_size_mb: int, open_files: int, nproc: int | None) -> None:
    limits = [
        (resource.RLIMIT_AS, memory_mb << 20, memory_mb << 20),
        (resource.RLIMIT_CPU, cpu_s, cpu_s + 1),  # soft: SIGXCPU, hard one second later: SIGKILL
        (resource.RLIMIT_FSIZE, file_size_mb << 20, file_size_mb << 20),
        (resource.RLIMIT_NOFILE, open_files, open_files),
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_MSGQUEUE, 0, 0),
        (resource.RLIMIT_SIGPENDING, SIGPENDING, SIGPENDING),
    ]
    if nproc is not None:  # meaningful only for a non-root uid of its own (see module docstring)
        limits.append((resource.RLIMIT_NPROC, nproc, nproc))
    for which, soft, hard in limits:
        resource.setrlimit(which, (soft, hard))


# --------------------------------------------------------------------------- landlock
_LL_CREATE, _LL_ADD_RULE, _LL_RESTRICT = 444, 445, 446  # same numbers on every architecture
_LL_VERSION_FLAG = 1
_LL_RULE_PATH_BENEATH = 1
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_ALL_V1 = (1 << 13) - 1
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FILE_ONLY = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is unavailable or disabled."""
    ret = _libc.syscall(_LL_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_LL_VERSION_FLAG))
    return max(int(ret), 0)


def _fs_rights(abi: int) -> int:
    rights = _FS_ALL_V1
    if abi >= 2:
        rights |= _FS_REFER
    if abi >= 3:
        rights |= _FS_TRUNCATE
    if abi >= 5:
        rights |= _FS_IOCTL_DEV
    return rights


class LandlockRules:
    """A session's Landlock layers, prepared once by the worker. Two layers; an access must pass both.

    * shared (`shared`, a ruleset descriptor built here): reads of exactly what a session may
      read (`fine_paths`: the standard library dir's entries but its site-packages, say, a few
      hundred rules; `listed_paths`: the dirs above a cut-out one, listing only) and everything
      below the work root, where every session's dir lies.
    * per session (`ruleset`): reads below the coarse `read_paths` (a dozen rules: the Python
      install, the system dirs) and everything below the session's own work dir.

    Their intersection is the fine reads plus the session's own dir; each session adds only the
    dozen coarse rules and its dir, as it did before the fine list existed. The coarse paths are
    opened here (O_PATH, as root: the session's uid may not be able to open them, /root is 0700)
    and their rules packed: a session forked from the worker inherits the descriptors, builds its
    ruleset from them (`ruleset`) and closes them (`close`) before any tool code runs."""

    def __init__(
        self,
        abi: int,
        read_paths: list[str],
        fine_paths: list[str] | None = None,
        listed_paths: tuple[str, ...] | list[str] = (),
        work_root: str = "",
    ):
        self.abi = abi
        self.handled = _fs_rights(abi)
        attr = struct.pack("=Q", self.handled)
        if abi >= 4:
            attr += struct.pack("=Q", _NET_BIND_TCP | _NET_CONNECT_TCP)
        if abi >= 6:
            attr += struct.pack("=Q", _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL)
        self.attr = attr
        read = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
        self.fds: list[int] = []
        self.rules: list[ctypes.Array] = []
        self.shared: int | None = None
        try:
            for path in read_paths:
                rule = self._rule(path, read)
                if rule is not None:
                    self.fds.append(rule[0])
                    self.rules.append(rule[1])
            if fine_paths is not None:
                rules = [(p, read) for p in fine_paths] + [(p, _FS_READ_DIR) for p in listed_paths]
                self.shared = self._ruleset([*rules, (work_root, self.handled)])
        except BaseException:
            self.close()
            raise

    def _ruleset(self, paths: list[tuple[str, int]]) -> int:
        """A new ruleset allowing `rights` below each `path` (paths that do not exist are skipped)."""
        buf = ctypes.create_string_buffer(self.attr, len(self.attr))
        ruleset = _errcheck(
            _libc.syscall(_LL_CREATE, buf, ctypes.c_size_t(len(self.attr)), ctypes.c_uint32(0)),
            "landlock_create_ruleset",
        )
        try:
            for path, rights in paths:
                self._add_path(ruleset, path, rights)
        except BaseException:
            os.close(ruleset)
            raise
        return ruleset

    def _rule(self, path: str, rights: int) -> tuple[int, ctypes.Array] | None:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        allowed = rights if os.path.isdir(path) else rights & _FILE_ONLY
        return fd, ctypes.create_string_buffer(struct.pack("=Qi", allowed, fd), 12)

    def _add_path(self, ruleset: int, path: str, rights: int) -> None:
        """A rule for `path` (missing paths are skipped), its O_PATH descriptor closed after."""
        prepared = self._rule(path, rights)
        if prepared is None:
            return
        try:
            self._add(ruleset, prepared[1])
        finally:
            os.close(prepared[0])

    def ruleset(self, write_paths: list[str]) -> int:
        """A ruleset fd allowing reads below the prepared paths and everything below `write_paths`."""
        buf = ctypes.create_string_buffer(self.attr, len(self.attr))
        ruleset = _errcheck(
            _libc.syscall(_LL_CREATE, buf, ctypes.c_size_t(len(self.attr)), ctypes.c_uint32(0)),
            "landlock_create_ruleset",
        )
        try:
            for rule in self.rules:
                self._add(ruleset, rule)
            for path in write_paths:
                self._add_path(ruleset, path, self.handled)
        except BaseException:
            os.close(ruleset)
            raise
        return ruleset

    @staticmethod
    def _add(ruleset: int, rule: ctypes.Array) -> None:
        ret = _libc.syscall(_LL_ADD_RULE, ruleset, _LL_RULE_PATH_BENEATH, rule, ctypes.c_uint32(0))
        if ret < 0:
            _, fd = struct.unpack("=Qi", rule.raw)
            _errcheck(ret, f"landlock_add_rule({os.readlink(f'/proc/self/fd/{fd}') if fd >= 0 else fd})")

    def take_shared(self) -> int | None:
        """The shared layer's descriptor, handed over (to `landlock_restrict`, which closes it)."""
        fd, self.shared = self.shared, None
        return fd

    def close(self) -> None:
        while self.fds:
            os.close(self.fds.pop())
        if self.shared is not None:
            os.close(self.take_shared())


def landlock_restrict(ruleset: int) -> None:
    """Enforce the ruleset on the calling process (needs no_new_privs first)."""
    try:
        _errcheck(_libc.syscall(_LL_RESTRICT, ruleset, ctypes.c_uint32(0)), "landlock_restrict_self")
    finally:
        os.close(ruleset)


# --------------------------------------------------------------------------- seccomp
def _ins(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


@dataclass(frozen=True)
class SeccompTemplate:
    """The BPF filter with the session's own pid left open: built once per worker, completed per
    session by patching the pid into the instructions that compare against it (`for_pid`)."""

    program: bytes
    pid_offsets: tuple[int, ...]  # byte offsets of the `k` field of the own-pid comparisons

    def for_pid(self, own_pid: int) -> bytes:
        prog = bytearray(self.program)
        for offset in self.pid_offsets:
            struct.pack_into("=I", prog, offset, own_pid & 0xFFFFFFFF)
        return bytes(prog)


_K_OFFSET = 4  # struct sock_filter: u16 code, u8 jt, u8 jf, u32 k


def seccomp_template(machine: str = MACHINE) -> SeccompTemplate:
    """The BPF filter of a session, its own pid still to be filled in (see `SeccompTemplate`)."""
    if machine not in SYSCALLS:
        raise ConfinementError(f"seccomp filter has no syscall table for architecture {machine!r}")
    table = SYSCALLS[machine]
    eperm = SECCOMP_RET_ERRNO | errno.EPERM
    prog = [
        _ins(_LD_W_ABS, 0, 0, _OFF_ARCH),
        _ins(_JEQ_K, 1, 0, AUDIT_ARCH[machine]),
        _ins(_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
        _ins(_LD_W_ABS, 0, 0, _OFF_NR),
    ]
    if machine == "x86_64":  # x32 ABI calls carry bit 30 under the x86_64 audit arch
        prog += [_ins(_JGE_K, 0, 1, 0x40000000), _ins(_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS)]
    # clone: threads only
    prog += [
        _ins(_JEQ_K, 0, 4, table["clone"]),
        _ins(_LD_W_ABS, 0, 0, _OFF_ARG0),
        _ins(_JSET_K, 1, 0, CLONE_THREAD),
        _ins(_RET_K, 0, 0, eperm),
        _ins(_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ]
    prog += [_ins(_JEQ_K, 0, 1, table["clone3"]), _ins(_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS)]
    pid_offsets = []
    for name in SIGNAL_SYSCALLS:  # signals: to itself only
        prog += [_ins(_JEQ_K, 0, 4, table[name]), _ins(_LD_W_ABS, 0, 0, _OFF_ARG0)]
        pid_offsets.append(8 * len(prog) + _K_OFFSET)
        prog += [_ins(_JEQ_K, 0, 1, 0), _ins(_RET_K, 0, 0, SECCOMP_RET_ALLOW), _ins(_RET_K, 0, 0, eperm)]
    for name in SELF_SYSCALLS:  # limits and scheduling: of itself only (pid 0 or its own)
        prog += [_ins(_JEQ_K, 0, 5, table[name]), _ins(_LD_W_ABS, 0, 0, _OFF_ARG0), _ins(_JEQ_K, 2, 0, 0)]
        pid_offsets.append(8 * len(prog) + _K_OFFSET)
        prog += [_ins(_JEQ_K, 1, 0, 0), _ins(_RET_K, 0, 0, eperm), _ins(_RET_K, 0, 0, SECCOMP_RET_ALLOW)]
    for name, which in WHICH_WHO_SYSCALLS.items():  # priorities: of itself only, never a group or a uid
        prog += [_ins(_JEQ_K, 0, 7, table[name]), _ins(_LD_W_ABS, 0, 0, _OFF_ARG0), _ins(_JEQ_K, 0, 3, which)]
        prog += [_ins(_LD_W_ABS, 0, 0, _OFF_ARG1), _ins(_JEQ_K, 2, 0, 0)]
        pid_offsets.append(8 * len(prog) + _K_OFFSET)
        prog += [_ins(_JEQ_K, 1, 0, 0), _ins(_RET_K, 0, 0, eperm), _ins(_RET_K, 0, 0, SECCOMP_RET_ALLOW)]
    for name in DENIED_SYSCALLS:
        if name in table:
            prog += [_ins(_JEQ_K, 0, 1, table[name]), _ins(_RET_K, 0, 0, eperm)]
    prog.append(_ins(_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    return SeccompTemplate(b"".join(prog), tuple(pid_offsets))


def seccomp_program(own_pid: int, machine: str = MACHINE) -> bytes:
    """The BPF filter for a session whose pid (as the session sees it) is `own_pid`."""
    return seccomp_template(machine).for_pid(own_pid)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def no_new_privs() -> None:
    _errcheck(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")


def apply_seccomp(code: bytes) -> None:
    buf = ctypes.create_string_buffer(code, len(code))
    fprog = _SockFprog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    ret = _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0)
    _errcheck(ret, "prctl(PR_SET_SECCOMP)")


# --------------------------------------------------------------------------- all together
def confine(
    *,
    uid: int | None,
    workdir: str,
    tmpfs_mb: int | None,
    memory_mb: int,
    cpu_s: int,
    file_size_mb: int,
    open_files: int,
    threads: int,
    landlock: LandlockRules | None,
    seccomp: SeccompTemplate,
) -> None:
    """Apply every layer to the calling process, irreversibly. Raises ConfinementError if a
    mandatory layer fails (uid drop when asked, rlimits, no_new_privs, seccomp). Closes the
    descriptors `landlock` holds (this process's copies) once its ruleset is built."""
    if tmpfs_mb is not None:
        private_tmpfs(workdir, tmpfs_mb, uid)
    ruleset = shared = None
    if landlock is not None:
        try:
            ruleset = landlock.ruleset([workdir])
            shared = landlock.take_shared()
        finally:
            landlock.close()
    if uid is not None:
        drop_privileges(uid)
    # Not dumpable: no other process of the same uid may ptrace it or read its /proc/<pid>/mem
    # (the uid drop implies this; without it, e.g. not running as root, this is what does it).
    _errcheck(_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")
    no_new_privs()
    apply_rlimits(
        memory_mb=memory_mb,
        cpu_s=cpu_s,
        file_size_mb=file_size_mb,
        open_files=open_files,
        nproc=threads if uid is not None else None,
    )
    if shared is not None:
        landlock_restrict(shared)
    if ruleset is not None:
        landlock_restrict(ruleset)
    apply_seccomp(seccomp.for_pid(os.getpid()))
