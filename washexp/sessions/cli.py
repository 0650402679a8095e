"""``washexp import FORMAT PATH --out DIR``: a user's own agent sessions as a compaction task set.

Exit codes: 0 the set was written; 2 bad usage or input (one line naming the file and line or
field), found before anything is written under ``DIR``; 1 the set could not be written.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from washexp.errors import USAGE, ConfigError, Parser, WashexpError, fail
from washexp.sessions import named
from washexp.sessions.writer import Plan, task_ids, write

FORMATS = {
    "openai": "washexp.sessions.openai",
    "claude-code": "washexp.sessions.claude_code",
    "atif": "washexp.sessions.atif",
    "mlflow": "washexp.sessions.mlflow_traces",
    "otlp": "washexp.sessions.otlp",
}
"""Format name -> its module (each has ``sessions(path)``; ``mlflow``: ``sessions(uri, experiment)``)."""


def _parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="washexp import",
        description="Import agent sessions as a compaction task set (benchmark.fixtures=DIR).",
    )
    p.add_argument("format", choices=list(FORMATS), help="the session file's format")
    p.add_argument("path", help="the session file (mlflow: the tracking URI)")
    p.add_argument("--experiment", metavar="NAME", help="mlflow: the experiment whose traces are imported")
    p.add_argument("--out", type=Path, required=True, help="the task set folder to create (must not exist)")
    p.add_argument(
        "--plant", type=int, default=0, metavar="N", help="plant N typed facts in each session's tool results"
    )
    p.add_argument("--seed", type=int, default=0, help="the planting seed (default 0)")
    p.add_argument("--facts", type=Path, metavar="FILE", help="facts you name, already in the sessions (see the docs)")
    return p


def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
        if args.plant < 0:
            raise ConfigError(f"--plant {args.plant}: a count of facts, 0 or more")
        if not args.plant and args.facts is None:
            raise ConfigError("nothing to grade: plant facts (--plant N --seed S) or name them (--facts FILE)")
        facts = named.load(args.facts) if args.facts is not None else {}
        module = importlib.import_module(FORMATS[args.format])
        if args.format == "mlflow":
            if not args.experiment:
                raise ConfigError("mlflow: name the experiment whose traces are imported (--experiment NAME)")
            sessions = list(module.sessions(args.path, args.experiment))
            stem, source = args.experiment, {"format": "mlflow", "experiment": args.experiment}
        else:
            path = Path(args.path)
            sessions = list(module.sessions(path))
            stem, source = path.stem, {"format": args.format, "source_file": path.name}
        ids = task_ids(stem, sessions)
        written = write(sessions, ids, Plan(args.plant, args.seed, facts, args.facts), args.out, source)
    except WashexpError as err:  # found before anything is written
        return fail("washexp import", err, USAGE)
    except OSError as err:
        print(f"washexp import: {args.out}: could not be written ({err.strerror}); nothing was left", file=sys.stderr)
        return 1
    for task, notes in written.notes.items():
        if notes:
            print(f"{task}: left out or changed (the task format holds none as written): {'; '.join(notes)}")
    cohorts = list(written.tasks.values())
    primary = cohorts.count("primary")
    print(
        f"washexp import: {len(cohorts)} task(s) in {args.out} ({primary} primary, {len(cohorts) - primary} control);"
        f" {written.masked} secret(s) masked. Run: python run.py benchmark.fixtures={args.out}"
    )
    return 0
