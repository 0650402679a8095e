"""The command washer: any external program washes a private copy; its changes become a plan.

The program (for example the real CoalWash skill driven by an agent CLI) runs as ``command``, a
list of argv strings, with ``{store}`` in any argument replaced by the copy's path; the
environment variable ``WASHEXP_STORE`` names the copy too, and the copy is the working
directory. The copy is a fresh folder under the pipeline's ``scratch`` holding only the store's
top-level ``*.md`` files (never ``expected.json``); the original store is never touched.

What the program changed is turned into plan items, one per ``difflib`` opcode of each file's
lines (compared without their endings):

- ``replace`` lines -> a ``replace`` item; ``delete`` -> a ``delete`` item;
- ``insert`` -> a ``replace`` of the line above (that line, then the inserted lines), or of the
  line below for an insert at the top of a file;
- a vanished file -> ``delete-file``.

Every item has class ``over-verbose`` and reason ``changed by the command`` (the program's own
classes are unknown), so the gates judge it like any plan; ``approved_drops`` are the candidates
its changes entail (:func:`washexp.wash.washers.entailed_drops`). What a plan cannot express is
reported in ``notes`` and ignored: a new file, text put into a file that was empty, a change of
line endings or of the final newline alone, a file no longer valid UTF-8. Items on a kept target
are dropped (noted). Items on a pinned file are kept and noted: the transactional apply refuses
them, as the real ``apply.mjs`` does, so a program that edits a pinned file is caught there. The
program's stdout and stderr are the proposal's artifacts ``command.stdout.txt`` and
``command.stderr.txt``, each capped at ``LIMIT`` bytes as it is read (the rest is counted, named
in a last line, never held in memory).

The program is contained: it sees its copy and nothing else of ours (``confine.py`` is its
parent; docs/command-washer.md says what each mechanism holds and why):

- every descendant ends with the round: it is process 1 of its own PID namespace, and the
  launcher is a child subreaper besides, when the program ends and at the timeout;
- it sees only its own processes (a ``/proc`` of its PID namespace, in its own mount namespace):
  not washexp's environment, memory or open files, nor any other process's;
- its environment is built, not inherited: ``BASE_ENV`` (PATH, HOME, the locale...) and the
  names in ``env``, never a credential unless ``env`` names it (:func:`washexp.masking.is_secret`);
  ``TMPDIR`` is a private folder beside the copy;
- Landlock: it reads only the system folders, the Python washexp runs on, its program's file
  and that script's interpreter (not their folders), ``readable`` and ``writable``; it writes
  only in its copy, its temp folder and ``writable``;
- seccomp: chmod, chown, utime, xattrs, links, device nodes, ptrace, mounts and namespaces are
  denied (``EPERM``) everywhere, as root too, and every capability is dropped;
- a symlink, a hard link or a special file anywhere in its copy, or a copy replaced or removed,
  fails the round: only plain files are read back.

Where the kernel lacks one of these the washer refuses to be built (one line) unless
``uncontained=True``; :attr:`CommandWasher.confinement` names what was in force (a run param),
and says ``UNCONTAINED`` with what was missing.

A program that is not found, exits non-zero, outlives ``timeout_s`` or leaves such a copy raises a
one-line :class:`~washexp.wash.washers.WasherError` carrying its stdout and stderr.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
import json
import os
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from washexp.errors import ConfigError
from washexp.masking import is_secret
from washexp.wash.plan import Plan, PlanItem, line_ending, split_lines
from washexp.wash.store.apply import is_pinned
from washexp.wash.washer import Keep, Proposal, target_of
from washexp.wash.washers import WasherError, confine, entailed_drops

NAME = "command"
CLS = "over-verbose"
REASON = "changed by the command"
STDOUT, STDERR = "command.stdout.txt", "command.stderr.txt"
LIMIT = 1 << 20
"""Bytes of stdout, and of stderr, kept; the rest is counted and dropped as it arrives."""
GRACE_S = 10.0
"""How long the launcher has to end every descendant once told to stop."""
BASE_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ")
"""The variables of washexp's environment the program gets (with ``LC_*`` and ``washer.env``)."""
SYSTEM_READABLE = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys")
"""Folders the program may read and execute from, where they exist (with Landlock in force)."""
NAMES = {"namespaces": "pid-mount-ns", "landlock": "landlock", "seccomp": "seccomp", "nocaps": "no-caps"}
MISSING = {
    "namespaces": "no PID and mount namespaces",
    "landlock": "no Landlock",
    "seccomp": "no seccomp filter",
    "nocaps": "capabilities cannot be dropped",
}


@dataclasses.dataclass(frozen=True)
class Containment:
    """What this kernel offers to contain a program (``confine.py --probe``, each tried for real)."""

    found: dict

    def missing(self) -> list[str]:
        return [MISSING[m] for m in confine.MECHANISMS if not self.found.get(m)]

    def complete(self) -> bool:
        return not self.missing()

    def usable(self) -> tuple[str, ...]:
        return tuple(m for m in confine.MECHANISMS if self.found.get(m))


@functools.cache
def containment() -> Containment:
    """Probe once per process (a child Python that tries each mechanism in its own children)."""
    if sys.platform != "linux":
        return Containment({})
    done = subprocess.run(
        [sys.executable, "-I", str(confine.__file__), "--probe"], capture_output=True, text=True, timeout=60
    )
    try:
        found = json.loads(done.stdout) if done.returncode == 0 else {}
    except ValueError:
        found = {}
    return Containment(found if isinstance(found, dict) else {})


def program_env(environ: dict[str, str], named: Sequence[str]) -> dict[str, str]:
    """The program's environment: ``BASE_ENV``, ``LC_*`` and the ``named`` variables of ``environ``;
    nothing else (a credential only when named)."""
    keep = set(named)
    return {
        k: v for k, v in environ.items() if k in keep or ((k in BASE_ENV or k.startswith("LC_")) and not is_secret(k))
    }


def _content(text: str) -> list[str]:
    return [line[: len(line) - len(line_ending(line))] for line in split_lines(text)]


def diff_items(name: str, before: str, after: str) -> tuple[list[PlanItem], list[str]]:
    """Plan items turning ``before`` into ``after`` (line opcodes), and what could not be expressed."""
    a, b = _content(before), _content(after)
    if a == b:
        if before == after:
            return [], []
        return [], [f"{name}: only line endings or the final newline changed; not expressible, ignored"]
    if not a:
        return [], [f"{name}: text put into an empty file; not expressible, ignored"]
    items = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "replace":
            items.append(PlanItem(name, i1 + 1, i2, CLS, REASON, "replace", "\n".join(b[j1:j2])))
        elif op == "delete":
            items.append(PlanItem(name, i1 + 1, i2, CLS, REASON, "delete"))
        elif op == "insert" and i1 > 0:  # the line above is unchanged: it carries the insert
            items.append(PlanItem(name, i1, i1, CLS, REASON, "replace", "\n".join([a[i1 - 1], *b[j1:j2]])))
        elif op == "insert":  # at the top: the unchanged first line carries it
            items.append(PlanItem(name, 1, 1, CLS, REASON, "replace", "\n".join([*b[j1:j2], a[0]])))
    return items, []


def _last_line(text: str, limit: int = 200) -> str:
    last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")
    return last if len(last) <= limit else last[: limit - 3] + "..."


class _Capped:
    """One output stream: its first ``LIMIT`` bytes kept, the rest only counted."""

    def __init__(self) -> None:
        self.kept, self.total = bytearray(), 0

    def add(self, chunk: bytes) -> None:
        self.kept += chunk[: max(LIMIT - len(self.kept), 0)]
        self.total += len(chunk)

    def text(self) -> str:
        dropped = self.total - len(self.kept)
        tail = f"\n[washexp: {dropped} more bytes not kept (the first {LIMIT} are above)]\n" if dropped else ""
        return self.kept.decode("utf-8", "replace") + tail


def _collect(proc: subprocess.Popen[bytes], timeout_s: float) -> tuple[_Capped, _Capped, bool]:
    """Read the launcher's stdout and stderr to their end, capped (the launcher holds both until
    it exits, whatever its program closes); past ``timeout_s`` tell it to stop (it ends every
    descendant), past ``GRACE_S`` more kill its group. ``True``: timed out."""
    assert proc.stdout is not None and proc.stderr is not None  # opened with both piped (WasherCommand)
    out, err = proc.stdout.fileno(), proc.stderr.fileno()
    streams = {out: _Capped(), err: _Capped()}  # by file descriptor
    deadline, timed_out = time.monotonic() + timeout_s, False
    with selectors.DefaultSelector() as sel:
        for pipe in streams:
            sel.register(pipe, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0 and not timed_out:
                timed_out, deadline = True, time.monotonic() + GRACE_S
                proc.terminate()  # the launcher kills every descendant, then exits
                continue
            if left <= 0:  # the launcher itself hangs: its group goes, and we stop reading
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                break
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 65536)
                if chunk:
                    streams[key.fd].add(chunk)
                else:
                    sel.unregister(key.fd)
    return streams[out], streams[err], timed_out


def _strange_entries(copy: Path) -> list[str]:
    """What in the copy is not a folder or a regular file with one link (read back, a symlink or
    a hard link would bring in a file from outside; a FIFO could hang the read)."""
    found = []
    for folder, dirs, names in os.walk(copy):  # a symlinked folder is listed, never entered
        for name in sorted(dirs + names):
            path = Path(folder, name)
            what = _strange(os.lstat(path))
            if what:
                found.append(f"{path.relative_to(copy)} is {what}")
    return found


def _strange(st: os.stat_result) -> str | None:
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    if stat.S_ISDIR(st.st_mode):
        return None
    if not stat.S_ISREG(st.st_mode):
        return "a special file"
    return "a hard link" if st.st_nlink > 1 else None


def _program_found(program: str, copy: Path, path_env: str | None) -> str | None:
    """The program's path (relative to the copy, the program's cwd), or ``None``."""
    if os.sep in program:
        path = copy / program
        return str(path) if os.access(path, os.X_OK) else None
    return shutil.which(program, path=path_env)


def executed_files(program: str, path_env: str | None) -> list[str]:
    """The files (links resolved) the kernel reads to run ``program``: the program itself and, for a
    script, the interpreter its ``#!`` line names (``#!/usr/bin/env NAME``: NAME found on
    ``path_env``). Files, never their folders: a program kept in a project must not read the
    project's ``expected.json`` or ``mlruns/`` beside it."""
    files = [os.path.realpath(program)]
    try:
        with open(files[0], "rb") as fh:
            first = fh.readline(256)
    except OSError:  # not readable to us: then the kernel will not run it either
        return files
    words = first[2:].decode("utf-8", "replace").split() if first.startswith(b"#!") else []
    interpreters = words[:1]
    if words and os.path.basename(words[0]) == "env" and len(words) > 1:
        interpreters.append(shutil.which(words[1], path=path_env) or "")
    return files + [os.path.realpath(w) for w in interpreters if os.path.isabs(w)]


def _check_copy(copy: Path, made: os.stat_result, artifacts: dict[str, str]) -> None:
    """The copy is still the folder made for the program, holding folders and plain files only:
    anything else fails the round (its output kept)."""
    try:
        now = os.lstat(copy)
    except FileNotFoundError:
        raise WasherError(f"washer command: the command removed its store copy {copy}", artifacts) from None
    if not stat.S_ISDIR(now.st_mode) or (now.st_dev, now.st_ino) != (made.st_dev, made.st_ino):
        raise WasherError(f"washer command: the command replaced its store copy {copy}", artifacts)
    strange = _strange_entries(copy)
    if strange:
        more = f" (and {len(strange) - 1} more)" if len(strange) > 1 else ""
        msg = f"washer command: in its store copy, {strange[0]}{more}: only plain files are read back"
        raise WasherError(msg, artifacts)


class CommandWasher:
    """Runs ``command`` on a private copy of the store, contained, and proposes what it changed."""

    name = NAME

    def __init__(
        self,
        *,
        command: Sequence[str],
        timeout_s: float = 300,
        env: Sequence[str] = (),
        writable: Sequence[str] = (),
        readable: Sequence[str] = (),
        uncontained: bool = False,
    ):
        if sys.platform != "linux":
            raise ConfigError("washer command: runs only on Linux, where it can be contained (a child subreaper)")
        if isinstance(command, str) or not isinstance(command, Sequence) or not command:
            raise ConfigError(f"washer command: command must be a non-empty list of argv strings, got {command!r}")
        if not all(isinstance(arg, str) and arg for arg in command):
            raise ConfigError(f"washer command: every argument of command must be a non-empty string, got {command!r}")
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not timeout_s > 0:
            raise ConfigError(f"washer command: timeout_s must be a number > 0, got {timeout_s!r}")
        for key, names in (("env", env), ("writable", writable), ("readable", readable)):
            if isinstance(names, str) or not all(isinstance(n, str) and n for n in names):
                raise ConfigError(f"washer command: {key} must be a list of non-empty strings, got {names!r}")
        for key, folders in (("writable", writable), ("readable", readable)):
            if not all(os.path.isabs(p) for p in folders):
                raise ConfigError(f"washer command: every folder in {key} must be an absolute path, got {folders!r}")
        if not isinstance(uncontained, bool):
            raise ConfigError(f"washer command: uncontained must be true or false, got {uncontained!r}")
        self.command = tuple(command)
        self.timeout_s = float(timeout_s)
        self.env, self.writable, self.readable = tuple(env), tuple(writable), tuple(readable)
        offered = containment()
        if not offered.complete() and not uncontained:
            raise ConfigError(
                f"washer command: this machine cannot contain the program ({', '.join(offered.missing())}); "
                "washer.uncontained=true runs it anyway, and the run records that"
            )
        self.mechanisms = offered.usable()
        abi = offered.found.get("landlock_abi", 0)
        parts = ["subreaper", *(f"landlock-abi{abi}" if m == "landlock" else NAMES[m] for m in self.mechanisms)]
        self.confinement = "+".join(parts)
        """What contains the program on this machine (a run's ``confinement`` param)."""
        if not offered.complete():
            self.confinement += f" UNCONTAINED ({', '.join(offered.missing())})"

    def run(self, copy: Path, tmp: Path) -> tuple[str, str]:
        """Run the program in ``copy`` (``tmp`` is its temp folder); its (stdout, stderr), or ``WasherError``."""
        argv = [arg.replace("{store}", str(copy)) for arg in self.command]
        env = {**program_env(dict(os.environ), self.env), "WASHEXP_STORE": str(copy)}
        env |= {"TMPDIR": str(tmp), "TMP": str(tmp), "TEMP": str(tmp)}
        found = _program_found(argv[0], copy, env.get("PATH"))
        if not found:
            raise WasherError(f"washer command: program not found: {argv[0]}")
        spec = {
            "use": list(self.mechanisms),
            "readable": self._readable(found, env.get("PATH")),
            "writable": [str(copy), str(tmp), *self.writable],
        }
        launcher = [sys.executable, "-I", str(confine.__file__), json.dumps(spec), "--", *argv]
        proc = subprocess.Popen(
            launcher,
            cwd=copy,
            env=env,
            start_new_session=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        stdin = proc.stdin
        assert stdin is not None  # piped, above
        try:
            out, err, timed_out = _collect(proc, self.timeout_s)
            stdin.close()  # a launcher still waiting ends its program and every descendant
            code = proc.wait(timeout=GRACE_S)
        finally:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:  # never: all three piped
                    pipe.close()
        stdout, stderr = out.text(), err.text()
        arts = {STDOUT: stdout, STDERR: stderr}
        if timed_out:
            raise WasherError(f"washer command: {argv[0]} timed out after {self.timeout_s:g} s", arts)
        if code != 0:
            detail = _last_line(stderr)
            msg = f"washer command: {argv[0]} exited with status {code}" + (f": {detail}" if detail else "")
            raise WasherError(msg, arts)
        return stdout, stderr

    def _readable(self, program: str, path_env: str | None) -> list[str]:
        """Where the program may read: the system folders, the Python washexp runs on (a
        ``python`` program needs its library), the files it executes (:func:`executed_files`),
        ``readable``, and ``/proc`` only when it is the program's own (its PID namespace's)."""
        prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
        proc = ["/proc"] if "namespaces" in self.mechanisms else []
        own = executed_files(program, path_env)
        return list(dict.fromkeys([*SYSTEM_READABLE, *proc, *sorted(prefixes), *own, *self.readable]))

    def propose(self, files: dict[str, str], keeps: tuple[Keep, ...], scratch: Path) -> Proposal:
        """Copy ``files`` into a fresh folder under ``scratch``, run the program there, diff."""
        Path(scratch).mkdir(parents=True, exist_ok=True)
        copy = Path(tempfile.mkdtemp(prefix="store-", dir=scratch))
        tmp = Path(tempfile.mkdtemp(prefix="tmp-", dir=scratch))
        for name, text in files.items():
            (copy / name).write_bytes(text.encode("utf-8"))
        made = os.lstat(copy)
        stdout, stderr = self.run(copy, tmp)
        _check_copy(copy, made, {STDOUT: stdout, STDERR: stderr})
        items, notes = self._changes(files, copy)
        pinned = sorted({it.file for it in items if is_pinned(files[it.file])})
        notes += [f"{n} is pinned: the apply will refuse a plan that edits it" for n in pinned]
        kept = {k.target for k in keeps}
        live = [it for it in items if target_of(it, files) not in kept]
        if len(live) < len(items):
            notes.append(f"{len(items) - len(live)} item(s) dropped: an earlier wash kept their target")
        plan = Plan(tuple(live), entailed_drops(files, live), NAME, tuple(notes))
        return Proposal(plan, artifacts={STDOUT: stdout, STDERR: stderr}, notes=tuple(notes))

    @staticmethod
    def _changes(files: dict[str, str], copy: Path) -> tuple[list[PlanItem], list[str]]:
        """Items for every file the program changed or removed; notes for what cannot be expressed."""
        names = {p.name for p in copy.iterdir() if p.name.endswith(".md") and p.is_file()}
        notes = [f"{n}: a new file cannot be expressed in a plan; ignored" for n in sorted(names - set(files))]
        items: list[PlanItem] = []
        for name, before in files.items():
            if name not in names:
                items.append(PlanItem(name, 1, 1, CLS, REASON, "delete-file"))
                continue
            try:
                after = (copy / name).read_bytes().decode("utf-8")
            except UnicodeDecodeError:
                notes.append(f"{name}: no longer valid UTF-8; ignored")
                continue
            found, why = diff_items(name, before, after)
            items += found
            notes += why
        return items, notes
