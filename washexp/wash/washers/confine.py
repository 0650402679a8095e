"""Run one program contained: every descendant ends with it, and (with Landlock) it writes only
where it is allowed to.

    python -I confine.py SPEC_JSON -- PROGRAM ARG...

This file is run as a script by the command washer (``washexp.wash.washers.command``) and
imports nothing but the standard library, so it starts fast and never loads washexp. It is the
program's parent, and stays out of the program's reach:

- it is a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): a descendant that detaches, even
  into a new session (``setsid sleep 25 &``), is re-parented to it instead of to init; once the
  program ends, or the launcher is told to stop (SIGTERM, or its stdin closes because washexp is
  gone), it kills every descendant and reaps them before it exits;
- with ``"landlock": true`` in the spec, the program (not the launcher) runs in a Landlock
  domain: writing, creating, removing, linking or renaming files is denied everywhere but beneath
  the ``writable`` folders (and ``/dev/null``), and with Landlock ABI 6 or later it cannot signal
  a process outside its domain (so it cannot kill this launcher to set its children free). Reads
  are not restricted. A Landlock that was asked for and cannot be applied ends the launcher with
  status 125 and one line on stderr, never a silent run without it.

The program's exit status is the launcher's (a signal N: 128 + N).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import subprocess
import sys

PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER = 38, 36
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # the same on every Linux arch
CREATE_RULESET_VERSION, RULE_PATH_BENEATH, SCOPE_SIGNAL = 1, 1, 2
WRITE_FILE, TRUNCATE = 1 << 1, 1 << 14
WRITES_ABI1 = sum(1 << b for b in (1, 4, 5, 6, 7, 8, 9, 10, 11, 12))
"""write file, remove dir/file, make char/dir/reg/sock/fifo/block/sym."""
REFER = 1 << 13
FAILED = 125

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _RulesetAttr(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in ("handled_access_fs", "handled_access_net", "scoped")]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 where it has none (or it is disabled)."""
    abi = _libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    return max(int(abi), 0)


def _check(result: int, what: str) -> int:
    if result < 0:
        raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")
    return result


def restrict_writes(writable: list[str]) -> None:
    """Enter a Landlock domain that denies writes outside ``writable`` (see the module doc)."""
    abi = landlock_abi()
    if abi < 1:
        raise OSError(0, "Landlock is not available on this kernel")
    handled = WRITES_ABI1 | (REFER if abi >= 2 else 0) | (TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(handled, 0, SCOPE_SIGNAL if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 8 if abi < 4 else 16
    ruleset = _check(_libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0), "ruleset")
    try:
        rules = [(path, handled) for path in writable] + [(os.devnull, handled & (WRITE_FILE | TRUNCATE))]
        for path, access in rules:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = _PathBeneath(access, fd)
                _check(_libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0), path)
            finally:
                os.close(fd)
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        _check(_libc.syscall(SYS_RESTRICT_SELF, ruleset, 0), "restrict_self")
    finally:
        os.close(ruleset)


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
    subreaper), so repeat until none is left."""
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
    spec, program = json.loads(argv[0]), argv[2:]
    _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "subreaper")
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    confine = (lambda: restrict_writes(spec["writable"])) if spec["landlock"] else None
    try:
        child = subprocess.Popen(program, stdin=subprocess.DEVNULL, preexec_fn=confine)  # we run no thread
    except OSError as err:
        print(f"washexp-confine: cannot start {program[0]}: {err.strerror or err}", file=sys.stderr)
        return FAILED
    except subprocess.SubprocessError as err:  # restrict_writes failed in the child
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
