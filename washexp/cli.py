"""The ``washexp`` command.

    washexp export [--experiment compaction] [--sweep ID]... [--model NAME | --models A,B] [--date YYYY-MM-DD]
                   [--out DIR] [--overwrite] [--tracking-uri URI]
    washexp ui [--port 5000] [--experiment compaction] [--tracking-uri URI] [--no-browser]
    washexp runs [--experiment NAME] [--limit 10] [--tracking-uri URI]
    washexp server [--host 127.0.0.1] [--port 5000] [--backend-store-uri URI] [--artifacts-destination DIR]

More commands parse their own arguments (``PASSTHROUGH``); ``--help`` lists them. ``washexp -C DIR
<command> ...`` runs a command as if started in ``DIR`` (as ``git -C`` does): the commands a sweep
prints name its project this way when the user stands outside it.

Exit codes: 0 done; 1 a problem the user can fix (one line on stderr); 2 bad usage, found before any
work: argparse's, an unknown ``--topic`` or an ``--out`` folder that cannot be written (one line).
A low score is a result, never an exit code.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import signal
import sys
import webbrowser
from pathlib import Path

from washexp.errors import USAGE, ConfigError, Parser, WashexpError, fail
from washexp.masking import guarded_streams


def _date(text: str) -> str:
    try:
        return dt.date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date YYYY-MM-DD") from None


STORE_HELP = "MLflow store (default: sqlite:///<project>/mlruns/mlflow.db)"


def _parser(root: Path) -> Parser:
    from washexp.tracking import default_uri

    more = "\n".join(f"  {name:9s} {text}" for name, text in PASSTHROUGH_HELP.items())
    p = Parser(
        prog="washexp",
        description="washexp: records, sweeps and the MLflow UI; memory-store tools.",
        epilog=f"more commands (each has its own --help):\n{more}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # read (and removed) by _main before parsing, so that the project is found from DIR; shown here
    p.add_argument("-C", metavar="DIR", help="run as if started in DIR, as git -C does (first argument only)")
    sub = p.add_subparsers(dest="command", required=True)
    store = Parser(add_help=False)
    store.add_argument("--tracking-uri", default=default_uri(root), help=STORE_HELP)
    store.add_argument("--experiment", default="compaction", help="experiment name (default: compaction)")

    e = sub.add_parser("export", parents=[store], help="write dated records (.md, .json, plots) from runs")
    e.add_argument(
        "--sweep",
        action="append",
        default=[],
        metavar="ID",
        help="only arm runs of this sweep (its tag, or the tail like 2026-11-30/10-31-23); repeatable",
    )
    e.add_argument("--model", help="only runs of this model (default: one record per model)")
    e.add_argument(
        "--models",
        metavar="A,B",
        help="one cross-model record with these models side by side (each must have runs after the filters)",
    )
    e.add_argument("--date", type=_date, help="the record as of this UTC day: runs started on or before it")
    e.add_argument("--topic", help="record builder (default: the experiment's name)")
    e.add_argument("--out", type=Path, default=root / "results", help="output folder (default: results/)")
    e.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a record of the same name (default: keep it, and write this one as <name>-2, ...)",
    )
    e.add_argument(
        "--bundle",
        action="store_true",
        help="also write <name>.bundle/ beside each record: its runs and artifacts, for washexp verify",
    )

    allow = Parser(add_help=False)
    allow.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests with this Host header (default: localhost, 127.0.0.1, [::1]"
        " and the bound address only); repeatable",
    )
    u = sub.add_parser("ui", parents=[store, allow], help="start the MLflow UI on 127.0.0.1 at the runs table")
    u.add_argument("--port", type=int, default=5000)
    u.add_argument("--no-browser", action="store_true", help="print the URL only")

    r = sub.add_parser("runs", help="list the recent sweeps: ids, overrides, run counts, status")
    r.add_argument("--tracking-uri", default=default_uri(root), help=STORE_HELP)
    r.add_argument("--experiment", help="only this experiment's sweeps (default: compaction and wash)")
    r.add_argument("--limit", type=int, default=10, help="how many sweeps, newest first (default: 10)")

    s = sub.add_parser(
        "server", parents=[allow], help="start an MLflow tracking server for tracking=server (127.0.0.1 unless --host)"
    )
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, this machine only)")
    s.add_argument("--port", type=int, default=5000)
    s.add_argument(
        "--backend-store-uri",
        default=default_uri(root),
        help="run metadata: sqlite:///<project>/mlruns/mlflow.db (default)"
        " or postgresql+psycopg://user@host/db (the postgres extra)",
    )
    s.add_argument(
        "--artifacts-destination",
        type=Path,
        default=root / "mlruns",
        help="where the server keeps the artifacts clients upload (default: <project>/mlruns)",
    )
    return p


def export(args: argparse.Namespace) -> int:
    from washexp.export import ExportOptions
    from washexp.export import export as run_export
    from washexp.export.crossmodel import parse_models

    options = ExportOptions(
        uri=args.tracking_uri,
        experiment=args.experiment,
        topic=args.topic,
        sweeps=tuple(args.sweep),
        model=args.model,
        models=parse_models(args.models) if args.models is not None else (),
        date=args.date,
        out=args.out,
        overwrite=args.overwrite,
        bundle=args.bundle,
    )
    for written in run_export(options):
        for stem in written.taken:
            print(
                f"washexp: {options.out / stem}.md holds another record; kept, and this one is {written.record.stem}"
                " (--overwrite replaces it)",
                file=sys.stderr,
            )
        for path in written.paths:
            print(path)
    return 0


UI_HOST = "127.0.0.1"
"""``washexp ui`` binds the loopback only: the runs never face the network."""


def ui(args: argparse.Namespace) -> int:
    uri = args.tracking_uri
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).is_file():
        raise WashexpError(f"no tracking store at {uri}: run a sweep first (python run.py ...)")

    def describe() -> tuple[str, str | None]:
        from washexp.tracking.views import runs_url, save_view

        exp_id = save_view(uri, args.experiment, args.experiment)  # the table opens on the arm runs
        if exp_id is None:
            raise WashexpError(f"no experiment {args.experiment!r} in {uri}: run a sweep first")
        url = runs_url(f"http://{UI_HOST}:{args.port}", exp_id)
        return f"MLflow UI: {url}", None if args.no_browser else url

    return _serve(uri, UI_HOST, args.port, None, describe, args.allow_host)


def runs(args: argparse.Namespace) -> int:
    """The recent sweeps of one experiment, or of both families' when none is named."""
    from washexp.listing import render, sweep_rows
    from washexp.tracking.reader import search

    uri = args.tracking_uri
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).is_file():
        raise WashexpError(f"no tracking store at {uri}: run a sweep first (python run.py ...)")
    rows = []
    for experiment in [args.experiment] if args.experiment else ["compaction", "wash"]:
        rows += sweep_rows(search(uri, experiment), experiment)
    rows.sort(key=lambda r: r.started, reverse=True)
    for line in render(rows[: args.limit]):
        print(line)
    return 0


def server(args: argparse.Namespace) -> int:
    url = f"http://{args.host}:{args.port}"
    line = f"MLflow tracking server: {url}   (python run.py tracking=server tracking.uri={url})"
    store, artifacts = args.backend_store_uri, args.artifacts_destination
    from washexp.tracking.reader import client

    client(store)  # a store MLflow cannot open is one line before the server starts, not its traceback
    return _serve(store, args.host, args.port, artifacts, lambda: (line, None), args.allow_host)


def _serve(uri: str, host: str, port: int, artifacts: Path | None, describe, allow: list[str]) -> int:
    """Run an MLflow server until Ctrl-C or SIGTERM. ``describe()`` gives the line to print once
    it answers and the page to open (or None); it runs while the server boots (the ui's
    experiment lookup imports MLflow too: on two cores the two overlap), and what it raises
    stops the server."""
    from washexp.tracking import server as mlflow_server

    process = mlflow_server.start(uri, host, port, artifacts, allow)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # so `finally` stops the server too
    try:
        line, browse = describe()
        if not mlflow_server.wait_healthy(f"http://{host}:{port}", process):
            why = "timed out" if process.poll() is None else f"exited {process.returncode}; its error is above"
            raise WashexpError(f"mlflow server did not come up on {host}:{port} ({why}; port in use?)")
        print(f"{line}   (Ctrl-C stops it)", flush=True)
        if browse:
            webbrowser.open(browse)
        return process.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        mlflow_server.stop(process)


PASSTHROUGH = {
    "score": "washexp.wash.coalwash.score:main",
    "caliper": "washexp.wash.coalwash.caliper:main",
    "feed": "washexp.wash.store.feed:main",
    "gate": "washexp.wash.coalwash.gate:main",
    "recall": "washexp.wash.cli.recall:main",
    "compare": "washexp.compare:main",
    "verify": "washexp.verify:main",
    "power": "washexp.power:main",
    "wash": "washexp.wash.cli.wash:main",
    "import": "washexp.sessions.cli:main",
    "tasks": "washexp.tasks.cli:main",
}
"""Commands that parse their own arguments (``score`` keeps score.mjs's flags and exit codes)."""
PASSTHROUGH_HELP = {
    "compare": "regressions between two sweeps or records: exit 1 when B is worse",
    "verify": "recompute a record from its bundle (or the store): exit 1 naming what differs",
    "power": "how many tasks, generations and answers a difference needs, from a record's variance",
    "score": "score a washed memory store against its fixture (CoalWash's score.mjs, its exit codes)",
    "wash": "wash one memory store from the shell, behind its gates",
    "caliper": "what a memory store costs a session, and whether a wash is due",
    "gate": "the fidelity gate: did a wash drop a structured value the plan did not name?",
    "feed": "write a growth feed's store after N sessions",
    "recall": "the recall of one cut per class, with the values lost (CoalWash's controlled scorer)",
    "import": "agent sessions (openai, claude-code, atif, mlflow, otlp) as a compaction task set",
    "tasks": "generate a set of compaction tasks with planted facts, or verify a folder against its manifest",
}


def main(argv: list[str] | None = None) -> int:
    """The command, its output masked and safe from a closed pipe (``| head``: no traceback, the
    command's own exit code)."""
    with guarded_streams():
        return _main(sys.argv[1:] if argv is None else list(argv))


def _main(argv: list[str]) -> int:
    if argv[:1] == ["-C"]:
        if len(argv) < 2 or not Path(argv[1]).is_dir():
            where = argv[1] if len(argv) > 1 else "(nothing)"
            print(f"washexp: -C {where}: not a folder", file=sys.stderr)
            return 2
        os.chdir(argv[1])
        argv = argv[2:]
    if argv and argv[0] in PASSTHROUGH:
        import importlib

        module, _, name = PASSTHROUGH[argv[0]].partition(":")
        return getattr(importlib.import_module(module), name)(argv[1:])
    from washexp.project import find_root

    try:
        root = find_root()
    except WashexpError as err:
        if argv and not {"-h", "--help"} & set(argv):
            return fail(
                "washexp", ConfigError(f"{err}: cd into one, or name it: washexp -C <project> {argv[0]}"), USAGE
            )
        root = Path.cwd()  # help reads no project: it prints anywhere (no command at all is a usage error)
    try:
        args = _parser(root).parse_args(argv)
        return {"export": export, "ui": ui, "runs": runs, "server": server}[args.command](args)
    except WashexpError as err:  # 2 for a usage error (an unknown --topic, an unwritable --out), else 1
        return fail("washexp", err)


if __name__ == "__main__":
    sys.exit(main())
