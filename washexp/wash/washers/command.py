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
``command.stderr.txt``.

A program that is not found, exits non-zero or outlives ``timeout_s`` (its whole process group
is killed) raises a one-line :class:`~washexp.wash.washers.WasherError`.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from washexp.errors import ConfigError
from washexp.wash.apply import is_pinned
from washexp.wash.plan import Plan, PlanItem, line_ending, split_lines
from washexp.wash.washer import Keep, Proposal, target_of
from washexp.wash.washers import WasherError, entailed_drops

NAME = "command"
CLS = "over-verbose"
REASON = "changed by the command"
STDOUT, STDERR = "command.stdout.txt", "command.stderr.txt"


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


def _one_line(text: str, limit: int = 200) -> str:
    last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")
    return last if len(last) <= limit else last[: limit - 3] + "..."


class CommandWasher:
    """Runs ``command`` on a private copy of the store and proposes what it changed."""

    name = NAME

    def __init__(self, *, command: Sequence[str], timeout_s: float = 300):
        if isinstance(command, str) or not isinstance(command, Sequence) or not command:
            raise ConfigError(f"washer command: command must be a non-empty list of argv strings, got {command!r}")
        if not all(isinstance(arg, str) and arg for arg in command):
            raise ConfigError(f"washer command: every argument of command must be a non-empty string, got {command!r}")
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not timeout_s > 0:
            raise ConfigError(f"washer command: timeout_s must be a number > 0, got {timeout_s!r}")
        self.command = tuple(command)
        self.timeout_s = float(timeout_s)

    def run(self, copy: Path) -> tuple[str, str]:
        """Run the program in ``copy``; its (stdout, stderr), or ``WasherError``."""
        argv = [arg.replace("{store}", str(copy)) for arg in self.command]
        env = {**os.environ, "WASHEXP_STORE": str(copy)}
        try:
            proc = subprocess.Popen(
                argv,
                cwd=copy,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except FileNotFoundError:
            raise WasherError(f"washer command: program not found: {argv[0]}") from None
        except OSError as exc:
            raise WasherError(f"washer command: cannot run {argv[0]}: {exc.strerror or exc}") from None
        try:
            out, err = proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):  # it may have ended just now
                os.killpg(proc.pid, signal.SIGKILL)  # the whole group: a shell's children hold the pipes too
            out, err = proc.communicate()
            arts = self._artifacts(out, err)
            raise WasherError(f"washer command: {argv[0]} timed out after {self.timeout_s:g} s", arts) from None
        stdout, stderr = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
        if proc.returncode != 0:
            detail = _one_line(stderr)
            msg = f"washer command: {argv[0]} exited with status {proc.returncode}" + (f": {detail}" if detail else "")
            raise WasherError(msg, self._artifacts(out, err))
        return stdout, stderr

    @staticmethod
    def _artifacts(out: bytes, err: bytes) -> dict[str, str]:
        return {STDOUT: out.decode("utf-8", "replace"), STDERR: err.decode("utf-8", "replace")}

    def propose(self, files: dict[str, str], keeps: tuple[Keep, ...], scratch: Path) -> Proposal:
        """Copy ``files`` into a fresh folder under ``scratch``, run the program there, diff."""
        Path(scratch).mkdir(parents=True, exist_ok=True)
        copy = Path(tempfile.mkdtemp(prefix="store-", dir=scratch))
        for name, text in files.items():
            (copy / name).write_bytes(text.encode("utf-8"))
        stdout, stderr = self.run(copy)
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
        if not copy.is_dir():
            raise WasherError(f"washer command: the command removed its store copy {copy}")
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
