"""Run one program contained: it sees its copy and nothing else of ours, and every descendant ends
with it.

    python -I confine.py SPEC_JSON -- PROGRAM ARG...
    python -I confine.py --probe          # what this kernel offers, as one JSON line

This file is run as a script by the command washer (``washexp.wash.washers.command``) and
imports nothing but the standard library, so it starts fast and never loads washexp. It is the
program's parent and stays out of the program's reach. ``SPEC_JSON`` names the mechanisms to
apply (``"use"``); each one asked for and not applied ends the launcher with status 125 and one
line on stderr, never a silent run without it:

- ``namespaces``: the program is process 1 of a new PID namespace, in a new mount namespace with
  its own ``/proc``: it sees its own processes and nothing else (not washexp's environment,
  memory or open files, not any other process's), and when it ends the kernel kills every process
  left in its namespace. (Not root: a user namespace maps our own uid so that this is allowed.)
- ``landlock``: reads as well as writes are limited. The program may read (and execute) only
  beneath ``readable`` (the system folders, the interpreter, its program's file) and ``writable``, and
  write, create, remove, link or rename only beneath ``writable`` (its copy, its temp folder, the
  user's ``washer.writable``), plus the few devices in ``DEVICES``. Mounting is denied, and with
  ABI 6 or later it cannot signal, or connect to an abstract socket of, a process outside its domain.
- ``seccomp``: a filter answers ``EPERM`` to every call that changes a file's metadata or links
  (chmod, chown, utime, the xattr family, link, symlink, mknod, the inode-flag ioctls), reads or
  traces another process (ptrace, process_vm_*, pidfd_getfd, kcmp), changes mounts or namespaces,
  or goes around the filter (io_uring, bpf, open_by_handle_at, the kernel keyring). A text washer
  needs none of them; Landlock does not cover metadata, hence this.
- ``nocaps``: every capability is dropped from the bounding, ambient, inheritable, permitted and
  effective sets, so a program run as root is root without privilege (no ``CAP_CHOWN``,
  ``CAP_DAC_OVERRIDE``, ``CAP_SYS_ADMIN``, ``CAP_SYS_PTRACE``...).

Whatever the spec, the launcher is a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): a
descendant that detaches, even into a new session, is re-parented to it; once the program ends,
or the launcher is told to stop (SIGTERM, or its stdin closes because washexp is gone), it kills
every descendant and reaps them before it exits. The program's exit status is the launcher's (a
signal N: 128 + N).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import platform
import select
import signal
import struct
import subprocess
import sys

PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER, PR_SET_SECCOMP, PR_CAPBSET_DROP = 38, 36, 22, 24
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # the same on every Linux arch
CREATE_RULESET_VERSION, RULE_PATH_BENEATH = 1, 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
MAKE_CHAR, MAKE_BLOCK = 1 << 6, 1 << 11
WRITES_ABI1 = sum(1 << b for b in (1, 4, 5, 6, 7, 8, 9, 10, 11, 12))
"""write file, remove dir/file, make char/dir/reg/sock/fifo/block/sym."""
READS = EXECUTE | READ_FILE | READ_DIR
REFER, TRUNCATE = 1 << 13, 1 << 14
DEVICES = {
    "/dev/null": WRITE_FILE | TRUNCATE | READ_FILE,
    "/dev/zero": READ_FILE,
    "/dev/full": READ_FILE,
    "/dev/random": READ_FILE,
    "/dev/urandom": READ_FILE,
}
"""The devices a program may open (a raw disk, ``/dev/mem`` or a tty is none of them)."""
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
CLONE_NAMESPACES = 0x7E020000
"""CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET (a clone that asks for one)."""
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 1 << 14, 1 << 18
FAILED = 125
MECHANISMS = ("namespaces", "landlock", "seccomp", "nocaps")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _RulesetAttr(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in ("handled_access_fs", "handled_access_net", "scoped")]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _check(result: int, what: str) -> int:
    if result < 0:
        raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")
    return result


# -- Landlock ----------------------------------------------------------------------------------


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 where it has none (or it is disabled)."""
    abi = _libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    return max(int(abi), 0)


def restrict_paths(readable: list[str], writable: list[str]) -> None:
    """Enter a Landlock domain where reads happen only beneath ``readable`` and ``writable``, and
    writes only beneath ``writable`` (see the module doc). A ``readable`` folder that does not
    exist is skipped; a ``writable`` one is an error."""
    abi = landlock_abi()
    if abi < 1:
        raise OSError(0, "Landlock is not available on this kernel")
    handled = READS | WRITES_ABI1 | (REFER if abi >= 2 else 0) | (TRUNCATE if abi >= 3 else 0)
    scoped = SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET if abi >= 6 else 0
    attr = _RulesetAttr(handled, 0, scoped)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 8 if abi < 4 else 16
    ruleset = _check(_libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0), "ruleset")
    try:
        rules = [(p, READS, False) for p in readable]
        rules += [(p, handled & ~(MAKE_CHAR | MAKE_BLOCK), True) for p in writable]
        rules += [(p, handled & access, False) for p, access in DEVICES.items()]
        for path, access, required in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                if required:
                    raise
                continue
            try:
                if not os.path.isdir(f"/proc/self/fd/{fd}"):
                    access &= READ_FILE | WRITE_FILE | EXECUTE | TRUNCATE  # a file takes file rights only
                rule = _PathBeneath(access, fd)
                _check(_libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0), path)
            finally:
                os.close(fd)
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        _check(_libc.syscall(SYS_RESTRICT_SELF, ruleset, 0), "restrict_self")
    finally:
        os.close(ruleset)


# -- seccomp -----------------------------------------------------------------------------------

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_UNIFIED = {  # the numbers from 424 on are the same on every architecture
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "pidfd_getfd": 438,
    "mount_setattr": 442,
    "fchmodat2": 452,
    "setxattrat": 463,
    "removexattrat": 466,
    "open_tree_attr": 467,
    "file_setattr": 469,
}
SYSCALLS = {
    "x86_64": {
        "chmod": 90,
        "fchmod": 91,
        "fchmodat": 268,
        "chown": 92,
        "fchown": 93,
        "lchown": 94,
        "fchownat": 260,
        "utime": 132,
        "utimes": 235,
        "futimesat": 261,
        "utimensat": 280,
        "setxattr": 188,
        "lsetxattr": 189,
        "fsetxattr": 190,
        "removexattr": 197,
        "lremovexattr": 198,
        "fremovexattr": 199,
        "link": 86,
        "linkat": 265,
        "symlink": 88,
        "symlinkat": 266,
        "mknod": 133,
        "mknodat": 259,
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "kcmp": 312,
        "mount": 165,
        "umount2": 166,
        "pivot_root": 155,
        "chroot": 161,
        "setns": 308,
        "unshare": 272,
        "name_to_handle_at": 303,
        "open_by_handle_at": 304,
        "bpf": 321,
        "perf_event_open": 298,
        "userfaultfd": 323,
        "keyctl": 250,
        "add_key": 248,
        "request_key": 249,
        **_UNIFIED,
        "clone": 56,
        "clone3": 435,
        "ioctl": 16,
    },
    "aarch64": {
        "fchmod": 52,
        "fchmodat": 53,
        "fchown": 55,
        "fchownat": 54,
        "utimensat": 88,
        "setxattr": 5,
        "lsetxattr": 6,
        "fsetxattr": 7,
        "removexattr": 14,
        "lremovexattr": 15,
        "fremovexattr": 16,
        "linkat": 37,
        "symlinkat": 36,
        "mknodat": 33,
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "kcmp": 272,
        "mount": 40,
        "umount2": 39,
        "pivot_root": 41,
        "chroot": 51,
        "setns": 268,
        "unshare": 97,
        "name_to_handle_at": 264,
        "open_by_handle_at": 265,
        "bpf": 280,
        "perf_event_open": 241,
        "userfaultfd": 282,
        "keyctl": 219,
        "add_key": 217,
        "request_key": 218,
        **_UNIFIED,
        "clone": 220,
        "clone3": 435,
        "ioctl": 29,
    },
}
"""The calls the filter handles, by architecture (from the kernel's unistd tables)."""
SPECIAL = ("clone", "clone3", "ioctl")
X32_BIT = 0x40000000
INODE_FLAG_IOCTLS = (0x40086602, 0x40046602, 0x401C5820)
"""FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS, FS_IOC_FSSETXATTR: chattr's calls."""
RET_KILL_PROCESS, RET_ERRNO, RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
EPERM, ENOSYS = 1, 38
LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06


def seccomp_filter(arch: str) -> bytes:
    """The BPF program (``struct sock_filter[]``) for ``arch``; ``KeyError`` for one we have no table of."""
    calls, audit = SYSCALLS[arch], AUDIT_ARCH[arch]
    denied = sorted(nr for name, nr in calls.items() if name not in SPECIAL)
    prog: list[tuple[int | str, int | str, int | str, int]] = []  # (code, jt, jf, k); jt/jf may name labels

    def label(name: str) -> None:
        prog.append(("label", name, 0, 0))  # a place, not an instruction

    prog.append((LD_W_ABS, 0, 0, 4))  # seccomp_data.arch
    prog.append((JEQ_K, 0, "kill", audit))
    prog.append((LD_W_ABS, 0, 0, 0))  # seccomp_data.nr
    if arch == "x86_64":
        prog.append((JGE_K, "eperm", 0, X32_BIT))  # the x32 ABI: another table, none of it ours
    for nr in denied:
        prog.append((JEQ_K, "eperm", 0, nr))
    prog.append((JEQ_K, "enosys", 0, calls["clone3"]))  # its flags are behind a pointer: libc falls back to clone
    prog.append((JEQ_K, "clone", 0, calls["clone"]))
    prog.append((JEQ_K, "ioctl", 0, calls["ioctl"]))
    prog.append((RET_K, 0, 0, RET_ALLOW))
    label("clone")
    prog.append((LD_W_ABS, 0, 0, 16))  # args[0], low word: the flags
    prog.append((JSET_K, "eperm", 0, CLONE_NAMESPACES))
    prog.append((RET_K, 0, 0, RET_ALLOW))
    label("ioctl")
    prog.append((LD_W_ABS, 0, 0, 24))  # args[1], low word: the request
    for request in INODE_FLAG_IOCTLS:
        prog.append((JEQ_K, "eperm", 0, request))
    prog.append((RET_K, 0, 0, RET_ALLOW))
    label("eperm")
    prog.append((RET_K, 0, 0, RET_ERRNO | EPERM))
    label("enosys")
    prog.append((RET_K, 0, 0, RET_ERRNO | ENOSYS))
    label("kill")
    prog.append((RET_K, 0, 0, RET_KILL_PROCESS))

    where: dict[int | str, int] = {}
    n = 0
    for ins in prog:
        if ins[0] == "label":
            where[ins[1]] = n
        else:
            n += 1
    out, i = bytearray(), 0
    for code, jt, jf, k in prog:
        if code == "label":
            continue
        jumps = [where[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf)]
        if not all(0 <= j <= 255 for j in jumps):
            raise ValueError("seccomp filter: a jump out of range")
        out += struct.pack("=HBBI", code, jumps[0], jumps[1], k)
        i += 1
    return bytes(out)


def install_seccomp() -> None:
    """Load the filter of :func:`seccomp_filter` into this process (and so its program)."""
    arch = platform.machine()
    if arch not in SYSCALLS:
        raise OSError(0, f"no seccomp table for {arch}")
    code = ctypes.create_string_buffer(seccomp_filter(arch))

    class _Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = _Fprog(len(code.raw) // 8, ctypes.addressof(code))
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _check(_libc.prctl(PR_SET_SECCOMP, 2, ctypes.byref(prog), 0, 0), "seccomp")


# -- capabilities and namespaces ---------------------------------------------------------------


def drop_bounding() -> None:
    """Drop every capability from the bounding and ambient sets (an exec then grants none, even
    to root). Without the right to (not root, no user namespace) we have none to drop: checked."""
    with open("/proc/sys/kernel/cap_last_cap") as fh:
        last = int(fh.read())
    for cap in range(last + 1):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0:
            if _capabilities() != 0:
                _check(-1, f"drop capability {cap}")
            break
    with contextlib.suppress(OSError):  # a kernel before 4.3 has no ambient set
        _check(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "ambient")


def clear_capabilities() -> None:
    """Empty the effective, permitted and inheritable sets (``capset``), and check it (``capget``)."""
    header = ctypes.create_string_buffer(struct.pack("=Ii", 0x20080522, 0))  # _LINUX_CAPABILITY_VERSION_3
    data = ctypes.create_string_buffer(24)
    _check(_libc.capset(header, data), "capset")
    if _capabilities() != 0:
        raise OSError(0, "capabilities left after capset")


def _capabilities() -> int:
    """This thread's effective and permitted capability masks, ORed (``capget``)."""
    header = ctypes.create_string_buffer(struct.pack("=Ii", 0x20080522, 0))
    data = ctypes.create_string_buffer(24)
    _check(_libc.capget(header, data), "capget")
    words = struct.unpack("=6I", data.raw)  # (effective, permitted, inheritable) x 2 words
    return words[0] | words[1] | words[3] | words[4]


def new_pid_namespace() -> None:
    """The next child of this process is process 1 of a new PID namespace (not root: in a new
    user namespace that maps our uid and gid, so that it may be made)."""
    uid, gid = os.geteuid(), os.getegid()
    flags = CLONE_NEWPID | (CLONE_NEWUSER if uid != 0 else 0)
    _check(_libc.unshare(flags), "unshare pid")
    if uid != 0:
        for name, text in (("uid_map", f"{uid} {uid} 1"), ("setgroups", "deny"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)


def own_proc() -> None:
    """A new mount namespace, nothing propagated back, and a ``/proc`` of this PID namespace."""
    _check(_libc.unshare(CLONE_NEWNS), "unshare mount")
    _check(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    _check(_libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount /proc")


def confine(spec: dict) -> None:
    """In the program's process, before its exec: everything ``spec["use"]`` names, in order."""
    use = set(spec["use"])
    if "namespaces" in use:
        own_proc()
    if "nocaps" in use:
        drop_bounding()
    if "landlock" in use:
        restrict_paths(spec["readable"], spec["writable"])
    if "seccomp" in use:
        install_seccomp()
    if "nocaps" in use:
        clear_capabilities()


# -- the probe ---------------------------------------------------------------------------------


def _try_in_child(steps) -> bool:
    pid = os.fork()
    if pid == 0:
        try:
            for step in steps:
                step()
            os._exit(0)
        except BaseException:
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def probe() -> dict:
    """What this kernel offers, each mechanism tried in a child process for real."""
    found = {"landlock_abi": landlock_abi()}
    found["landlock"] = found["landlock_abi"] >= 1 and _try_in_child([lambda: restrict_paths(["/"], [])])
    found["seccomp"] = _try_in_child([install_seccomp])
    found["nocaps"] = _try_in_child([drop_bounding, clear_capabilities])

    def namespaced():
        new_pid_namespace()
        if not _try_in_child([own_proc]):
            raise OSError(0, "no mount namespace or /proc")

    found["namespaces"] = _try_in_child([namespaced])
    return found


# -- the launcher ------------------------------------------------------------------------------


def _children() -> set[int]:
    pids: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as fh:
                pids |= {int(p) for p in fh.read().split()}
        except OSError:  # a thread that just ended
            pass
    return pids


def end_all() -> None:
    """Kill every descendant and reap it: a killed child's own children come to us (we are their
    subreaper; in a PID namespace the kernel kills them with the program), so repeat until none is left."""
    while True:
        kids = _children()
        for pid in kids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            os.waitpid(-1, 0 if kids else os.WNOHANG)
        except ChildProcessError:
            return


def _stop(*_) -> None:
    end_all()
    os._exit(128 + signal.SIGTERM)


def main(argv: list[str]) -> int:
    if argv == ["--probe"]:
        print(json.dumps(probe()))
        return 0
    spec, program = json.loads(argv[0]), argv[2:]
    unknown = set(spec["use"]) - set(MECHANISMS)
    if unknown:
        print(f"washexp-confine: unknown mechanism {sorted(unknown)[0]}", file=sys.stderr)
        return FAILED
    _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "subreaper")
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    if "namespaces" in spec["use"]:
        try:
            new_pid_namespace()
        except OSError as err:
            print(f"washexp-confine: cannot confine {program[0]}: {err.strerror or err}", file=sys.stderr)
            return FAILED
    try:  # we run no thread, so a preexec_fn is safe
        child = subprocess.Popen(program, stdin=subprocess.DEVNULL, preexec_fn=lambda: confine(spec))
    except OSError as err:
        print(f"washexp-confine: cannot start {program[0]}: {err.strerror or err}", file=sys.stderr)
        return FAILED
    except subprocess.SubprocessError as err:  # confine failed in the child
        print(f"washexp-confine: cannot confine {program[0]}: {err}", file=sys.stderr)
        return FAILED
    watched = os.pidfd_open(child.pid)
    try:
        while True:
            ready, _, _ = select.select([watched, sys.stdin.fileno()], [], [])
            if watched in ready:
                break
            if not os.read(sys.stdin.fileno(), 4096):  # washexp is gone, or asks us to stop
                end_all()
                return 128 + signal.SIGKILL
        code = child.wait()
    finally:
        end_all()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
