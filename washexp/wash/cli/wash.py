"""``washexp wash``: one wash of one store from the shell.

    washexp wash STORE [--tier quick|full] [--washer reference|command] [--washer-arg KEY=VALUE ...]
                       [--operator interactive|approve-all|approve-none|benchmark]
                       [--gauge coalwash-1.0|coalwash-beta5|off] [--expected FILE] [--dry-run]
                       [--in-place-fixture] [--json]
    washexp wash STORE --recover

The wash is ``washexp.wash.pipeline.wash`` with the gates on (the gauge's LEAN band is a hard stop,
the fidelity gate blocks any unapproved drop). The rules of the command:

- ``--tier`` defaults to ``quick`` (free and mechanical); the paid ``full`` tier is CoalWash's
  separate consent, asked for by name. Only ``full`` builds a washer, with
  ``washexp.wash.washers.make_washer({"name": WASHER, **ARGS})`` (``--washer-arg`` values read as YAML scalars).
- ``--operator`` defaults to ``interactive``: on a real store nothing is deleted without a human
  answering y/n at a terminal. With no terminal on stdin the command stops before any work.
- The store is checked as the benchmark checks one before any work (UTF-8 ``*.md`` files, a
  ``MEMORY.md`` index), and for the ``benchmark`` operator its ground truth too: every needle in
  the store, the co-location rule. A needle already missing is refused then, never counted later
  as lost by the plan.
- ``--expected`` is the ground truth the ``benchmark`` operator reads (default: the store's own
  ``expected.json``); no other operator reads one, so giving it to another is a usage error.
- ``--dry-run`` washes a temporary copy of the whole folder and reports that; the store itself is
  not touched (not even its gauge state).
- A store under a ``fixtures/`` folder is committed input a benchmark relies on: it is refused
  (exit 2) unless ``--dry-run`` washes a copy, or ``--in-place-fixture`` asks for it by name; a
  fixture so changed is named on stderr with the ``git checkout`` line that restores it.
- Output: a short summary (band, counts, files written and deleted, what was blocked or refused),
  or with ``--json`` the receipt (``Receipt.to_dict``) plus the run's settings.

The whole wash is one transaction (``washexp.wash.store.apply``): SIGINT or SIGTERM before it commits
rolls it back at once; after a SIGKILL, the next wash of the store rolls it back first (a line on
stderr says so), before a byte of the store is read. ``--recover`` does only that. Until then the
store's files may be torn, and every command that only reads a store (``score``, ``caliper``,
``gate``, ``recall``, a ``--dry-run`` wash, the benchmark) refuses it in one line naming the
journal (:class:`~washexp.wash.store.apply.TornStore`): rolling back is a write. Scratch
folders a killed wash left in the system temp folder are removed when the next wash starts.

Exit codes: 0 the wash ran (applied, or nothing to clean); 1 it could not finish: the fidelity
gate blocked a plan, the apply refused or rolled back (a pinned file, another writer), the
washer failed, or a signal stopped it; 2 a usage or input error found before any work (missing
folder, not a store, a store file name that is not a plain ``NAME.md`` or a file that is not
UTF-8, a journal or snapshot naming a path outside the store, a corrupt ``keeps.json``, unknown
operator, gauge or washer, a bad ``--washer-arg``, no terminal for ``interactive``, a bad
``expected.json`` or one the store does not match). Every error is one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

import yaml

from washexp.errors import FAILED, USAGE, FixtureError, Parser, UsageError, WashexpError, fail, first_line
from washexp.inputs import store_folder_problem
from washexp.wash.coalwash.files import read_md
from washexp.wash.coalwash.gauge import DEFAULT_GAUGE, load_gauge, load_state, state_path
from washexp.wash.coalwash.keeps import read_keeps
from washexp.wash.coalwash.operators import OPERATORS, Interactive, Operator, make_operator
from washexp.wash.pipeline import Receipt, wash
from washexp.wash.store.apply import Terminated, check_journal, pending_journal, recover
from washexp.wash.store.scratch import scratch_dir, sweep_scratch
from washexp.wash.store.stores import EXPECTED, check_contents, load_expected, store_files

PROG = "washexp wash"
TIERS = ("quick", "full")
WASHERS = ("reference", "command")


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog=PROG, description="Wash one memory store: quick tier, then (if asked) the full tier.")
    p.add_argument("store", type=Path, help="the store folder (its top-level *.md files)")
    p.add_argument("--tier", choices=TIERS, default="quick", help="quick (default, free) or full (a washer proposes)")
    p.add_argument("--washer", choices=WASHERS, default="reference", help="the full tier's washer (default: reference)")
    p.add_argument("--washer-arg", action="append", default=[], metavar="KEY=VALUE", help="a washer option; repeatable")
    p.add_argument("--operator", default="interactive", help=f"the human gate: {' | '.join(OPERATORS)}")
    p.add_argument("--gauge", default=DEFAULT_GAUGE, help="band gauge: coalwash-1.0 | coalwash-beta5 | off")
    p.add_argument("--expected", type=Path, help="ground truth for --operator benchmark (default: STORE/expected.json)")
    p.add_argument("--dry-run", action="store_true", help="wash a temporary copy; the store is not touched")
    p.add_argument(
        "--in-place-fixture",
        action="store_true",
        help="wash a store under a fixtures/ folder in place (committed input: restore it with git)",
    )
    p.add_argument("--json", action="store_true", help="print the receipt as JSON")
    p.add_argument(
        "--recover",
        action="store_true",
        help="only roll back the journal an interrupted wash left (what every other command refuses to read)",
    )
    return p


def washer_args(pairs: list[str]) -> dict[str, object]:
    """``["model=x", "timeout_s=30"]`` -> ``{"model": "x", "timeout_s": 30}``: each value read as a
    YAML scalar or list, as a Hydra override is (``0.5`` a number, ``[a,b]`` a list); a pair without
    ``=``, an empty key, a key named ``name`` or a key given twice is a usage error."""
    out: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--washer-arg {pair!r}: expected KEY=VALUE")
        if key == "name":
            raise UsageError("--washer-arg name=...: the washer is chosen with --washer")
        if key in out:
            raise UsageError(f"--washer-arg {key}: given twice")
        try:
            out[key] = yaml.safe_load(value) if value.strip() else value
        except yaml.YAMLError:
            out[key] = value
    return out


def _check_fixture(args: argparse.Namespace) -> None:
    """A store under a ``fixtures/`` folder is committed input a benchmark relies on: washed in
    place only when asked by name (``--in-place-fixture``); ``--dry-run`` washes a copy."""
    if args.dry_run or args.in_place_fixture or args.recover or state_path(args.store) is not None:
        return
    raise UsageError(
        f"{args.store} is under a fixtures/ folder (committed input a benchmark relies on): wash a copy, "
        "or use --dry-run; --in-place-fixture washes it anyway"
    )


def _check_store(store: Path) -> dict[str, str]:
    """Before any work: a store folder whose names, encoding, journal and keeps can be trusted,
    checked as the benchmark checks one (a ``MEMORY.md`` index); its files."""
    problem = store_folder_problem(store)
    if problem:
        raise UsageError(problem)
    if not read_md(store):  # a hostile name or a non-UTF-8 file is one FixtureError line
        raise UsageError(f"{store}: not a store (no top-level *.md files)")
    check_journal(store)  # a journal naming a path outside the store: UnsafeStore, nothing touched
    read_keeps(store)
    if state_path(store) is not None:
        load_state(store)  # a FIFO, a link out, a huge or hostile file: one line, exit 2
    return store_files(store)


def _recover(store: Path) -> None:
    """Roll back the journal an interrupted wash left (one line on stderr says so), before a byte is read."""
    if not store.is_dir():
        raise UsageError(f"{store}: no such store folder")
    wal = pending_journal(store)
    if wal is None:
        line = "no interrupted wash to roll back"
    elif recover(store):
        line = f"rolled back the interrupted wash its journal {wal} named"
    else:
        line = f"removed the journal {wal} of a wash that had committed (its changes kept)"
    print(f"{PROG}: {store}: {line}", file=sys.stderr)


def _ask_on_stderr(prompt: str) -> str:
    """An ``input`` that prompts on stderr, so ``--json`` output on stdout stays JSON."""
    print(prompt, end="", file=sys.stderr, flush=True)
    return sys.stdin.readline()


def _operator(args: argparse.Namespace, files: dict[str, str]) -> Operator:
    if args.expected is not None and args.operator != "benchmark":
        raise UsageError(f"--expected is read by --operator benchmark only (not {args.operator})")
    if args.operator == "interactive":
        if not sys.stdin.isatty():
            raise UsageError(
                "--operator interactive needs a terminal on stdin; choose approve-all, approve-none or benchmark"
            )
        return Interactive(_ask_on_stderr) if args.json else make_operator("interactive")
    muscle = None
    if args.operator == "benchmark":
        where = args.expected or args.store / EXPECTED
        expected = load_expected(where)
        try:  # a needle already missing is the store's, not the plan's: say so before any work
            check_contents(files, expected, args.store, where)
        except FixtureError as err:
            raise UsageError(f"the ground truth does not hold before the wash (nothing was washed): {err}") from None
        muscle = tuple((n.id, n.needle) for n in expected.muscle)
    return make_operator(args.operator, muscle)


def _washer(args: argparse.Namespace) -> Any:
    options = washer_args(args.washer_arg)
    if args.tier != "full":
        if options:
            raise UsageError("--washer-arg is for --tier full only (the quick tier has no washer)")
        return None
    try:
        from washexp.wash.washers import make_washer
    except ImportError as err:
        raise UsageError(f"--tier full needs the washexp.wash.washers package (not installed: {err})") from None
    try:
        return make_washer({"name": args.washer, **options})
    except (ValueError, TypeError, KeyError) as err:  # a WashexpError passes through as it is
        raise UsageError(f"--washer {args.washer}: {first_line(err)}") from None


def exit_code(receipt: Receipt) -> int:
    """1 when the fidelity gate blocked a plan (the wash could not finish), else 0."""
    return 1 if receipt.blocked else 0


def summary(receipt: Receipt, args: argparse.Namespace) -> str:
    """The human report: band, counts, files, and what was blocked or refused, one fact a line."""
    head = f"{PROG} {args.store}: {receipt.band} ({receipt.reason}) · tier {args.tier} · operator {args.operator}"
    if args.dry_run:
        head += " · dry run (a temporary copy was washed; the store is untouched)"
    lines = [head]
    if receipt.stopped:
        return "\n".join([*lines, receipt.stopped])
    lines.append(
        f"proposed {receipt.proposed} · refused {receipt.refused} · blocked {receipt.blocked}"
        f" · applied {receipt.applied} · washer cost ~{receipt.cost_tokens} tok"
    )
    changed = [f"written: {', '.join(receipt.written)}"] if receipt.written else []
    changed += [f"deleted: {', '.join(receipt.deleted)}"] if receipt.deleted else []
    lines.append(" · ".join(changed) if changed else "files: none changed")
    for step in receipt.steps:
        for d in step.blocked:
            lines.append(f"  blocked ({step.tier}): {d['type']}:{d['value']}")
        for r in step.refused:
            lines.append(f"  refused ({step.tier}): {r['file']}:{r['start']}-{r['end']} {r['op']} ({r['why']})")
        lines += [f"  note ({step.tier}): {note}" for note in step.notes]
    return "\n".join(lines)


def _terminated(_signum: int, _frame: object) -> None:
    raise Terminated  # where the process is: a running apply rolls back, as on SIGINT


def _run(args: argparse.Namespace, operator: Operator, washer: Any) -> Receipt:
    the_gauge = load_gauge(args.gauge)
    if not args.dry_run:
        return wash(args.store, washer, the_gauge, operator, tier=args.tier)
    with scratch_dir("dry-run") as tmp:
        copy = tmp / args.store.resolve().name
        shutil.copytree(args.store, copy, symlinks=True)
        return wash(copy, washer, the_gauge, operator, tier=args.tier)


def main(argv: list[str] | None = None) -> int:
    """``washexp wash``: see the module docstring for the rules and exit codes."""
    try:
        args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
        if args.recover and args.dry_run:
            raise UsageError("--recover rolls the store itself back; it takes no --dry-run")
        _check_fixture(args)
        load_gauge(args.gauge)  # an unknown gauge is a usage error, found before any work
        if args.recover or (not args.dry_run and pending_journal(args.store) is not None):
            _recover(args.store)  # a dry run leaves the store as it is: it refuses a torn one (store_files)
            if args.recover:
                return 0
        files = _check_store(args.store)
        operator = _operator(args, files)
        washer = _washer(args)
    except SystemExit as done:  # --help
        return int(done.code or 0)
    except WashexpError as err:  # all found before any work
        return fail(PROG, err, USAGE)
    signal.signal(signal.SIGTERM, _terminated)
    sweep_scratch()  # the scratch folders a killed wash left in the temp folder
    try:
        receipt = _run(args, operator, washer)
    except (KeyboardInterrupt, Terminated):
        print(f"{PROG}: {args.store}: interrupted; the wash is rolled back unless it had committed", file=sys.stderr)
        return 1
    except (WashexpError, OSError, UnicodeDecodeError) as err:
        return fail(PROG, err, FAILED)
    if args.in_place_fixture and not args.dry_run and (receipt.written or receipt.deleted):
        print(
            f"{PROG}: changed the fixture {args.store} in place; restore it with: git checkout -- {args.store}",
            file=sys.stderr,
        )
    if args.json:
        settings = {"tier": args.tier, "operator": args.operator, "gauge": args.gauge, "dry_run": args.dry_run}
        print(json.dumps({**receipt.to_dict(), **settings}, ensure_ascii=False, indent=2))
    else:
        print(summary(receipt, args))
    return exit_code(receipt)
