"""``washexp verify RECORD``: recompute every number of an exported record from its bundle
(``results/<stem>.bundle/``, written by ``washexp export --bundle``) or, with ``--tracking-uri``,
from the tracking store; no model, no network. The record is rebuilt by the very builder that
exported it (``washexp.export.build``), reading the bundle where it would read the store.

Exit codes: 0 every value of the record agrees with the recomputed one; 1 the first cell or
bundle artifact that differs, named (a table cell by record, table, row and column; an artifact by
run and file with both sha256 digests); 2 a usage or input error (one line): no such file, not a
record, no bundle beside it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from washexp.errors import ConfigError, Parser, WashexpError, fail


def load_record(arg: str) -> tuple[Path, dict]:
    path = Path(arg)
    if path.suffix == ".md":
        if not path.with_suffix(".json").is_file():
            raise ConfigError(f"{arg}: not a record (no {path.with_suffix('.json').name} beside it)")
        path = path.with_suffix(".json")
    if not path.is_file():
        raise ConfigError(f"{arg}: no such record file")
    from washexp.export.records import parse

    try:
        data = path.read_bytes()
    except OSError as err:
        raise ConfigError(f"{path}: not a readable record ({err})") from None
    record = parse(data, path)
    if not isinstance(record, dict) or record.get("schema") != 1 or not {"topic", "tables", "data"} <= record.keys():
        raise ConfigError(f"{path}: not a washexp record of schema 1")
    for plot in record.get("plots") or ():
        name = plot.get("file") if isinstance(plot, dict) else None
        if not isinstance(name, str) or name in ("", ".", "..") or any(c in name for c in "/\\\0"):
            shown = json.dumps(name)[:80]
            raise ConfigError(f"{path}: plot file {shown} is not a plain name beside the record: refused")
    return path, record


def _row_name(row: Any, index: int) -> str:
    """A row as a reader finds it: its first text cell (an arm, a task), else its index."""
    if isinstance(row, dict):
        for value in row.values():
            if isinstance(value, str) and value:
                return repr(value)
    return f"row {index}"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:  # NaN is NaN
        return True
    return type(a) is type(b) and a == b if not isinstance(a, dict | list) else False


def first_difference(old: Any, new: Any, where: str) -> str | None:
    """The first place where ``old`` (the record) and ``new`` (recomputed) differ, named."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*old.keys(), *[k for k in new if k not in old]]:
            if key not in new:
                return f"{where} {key}: in the record, not recomputed"
            if key not in old:
                return f"{where} {key}: recomputed, not in the record"
            name = where if key == "rows" else (f"{where} {key}" if where else str(key))  # a row names itself
            found = first_difference(old[key], new[key], name)
            if found:
                return found
        return None
    if isinstance(old, list) and isinstance(new, list):
        for i, (a, b) in enumerate(zip(old, new, strict=False)):
            found = first_difference(a, b, f"{where} {_row_name(a, i)}")
            if found:
                return found
        if len(old) != len(new):
            return f"{where}: the record has {len(old)} rows, recomputed {len(new)}"
        return None
    if _same(old, new):
        return None
    return f"{where}: record {json.dumps(old)}, recomputed {json.dumps(new)}"


def recompute(path: Path, record: dict, uri: str | None):
    from washexp.export import ExportOptions, build
    from washexp.tracking import bundle
    from washexp.tracking.sqlite import store_path

    root = path.with_suffix(".bundle")
    store = store_path(uri) if uri is not None else None
    if store is not None and not store.is_file():  # read, never made: MLflow would create an empty store there
        raise ConfigError(f"--tracking-uri {uri}: no tracking store at {store}")
    if uri is None:
        bundle.check_folder(root)
        uri = bundle.PREFIX + str(root)
    bundle.clear_cache()
    if bundle.is_bundle(uri):
        options = bundle.info(bundle.folder(uri))["options"]
    elif root.is_dir():
        options = bundle.info(root)["options"]
    else:  # no bundle: what the record says it covers
        prov = record.get("provenance", {})
        options = {"experiment": prov.get("experiment", record["topic"]), "model": prov.get("model")}
    try:
        opts = ExportOptions(
            uri=uri,
            experiment=str(options["experiment"]),
            topic=options.get("topic"),
            sweeps=tuple(options.get("sweeps") or ()),
            model=options.get("model"),
            models=tuple(options.get("models") or ()),
            date=options.get("date"),
        )
    except (KeyError, TypeError) as err:
        raise ConfigError(f"{root}: bundle options cannot be read ({err})") from None
    built = build(opts)
    mine = [r for r in built if r.platform == record.get("platform")] or built
    if len(mine) != 1:
        raise WashexpError(f"{path}: the bundle rebuilds {len(built)} records, not this one alone")
    return mine[0]


def verify(path: Path, record: dict, uri: str | None) -> str | None:
    """The first difference between the record (its JSON, then its markdown) and the one rebuilt."""
    rebuilt = recompute(path, record, uri)
    new = json.loads(rebuilt.to_json())
    for plot in new["plots"]:  # plots are named after the record, which may be kept under another name
        plot["file"] = path.stem + plot["file"].removeprefix(rebuilt.stem)
    found = first_difference(record, new, "")  # plots too: their captions and file names (not the PNG bytes)
    if found:
        return f"{path}: {found.strip()}"
    md = path.with_suffix(".md")
    if md.is_file():  # the markdown people read is rendered from the same values: it must agree too
        text = rebuilt.files().get(md.name.replace(path.stem, rebuilt.stem), b"").decode("utf-8")
        expected = text.replace(rebuilt.stem, path.stem).splitlines()  # a record kept under another name
        lines = md.read_text(encoding="utf-8", errors="replace").splitlines()
        for n, (a, b) in enumerate(zip(lines, expected, strict=False), 1):
            if a != b:
                return f"{md}: line {n}: record {a.strip()!r}, recomputed {b.strip()!r}"
        if len(lines) != len(expected):
            return f"{md}: {len(lines)} lines, recomputed {len(expected)}"
    return None


def main(argv: list[str]) -> int:
    p = Parser(
        prog="washexp verify",
        description=__doc__.replace("``", ""),  # pragma: no mutate
        formatter_class=argparse.RawDescriptionHelpFormatter,  # pragma: no mutate
    )
    p.add_argument("record", help="a record .json (or its .md)")  # pragma: no mutate
    p.add_argument(
        "--tasks",
        help="the tasks the bundled replies are regraded against (default: the project's fixtures/compaction)",
    )
    p.add_argument(
        "--tracking-uri",
        help="recompute from this store instead of the bundle beside the record",  # pragma: no mutate
    )
    try:
        args = p.parse_args(argv)
        path, record = load_record(args.record)
        found = verify(path, record, args.tracking_uri)
        regraded = None if found or args.tracking_uri else regrade_bundle(path, record, args.tasks)
    except WashexpError as err:  # a bundle that is not what its manifest says is a finding (1)
        return fail("washexp verify", err)
    if found:
        print(f"DIFFERS {found}")
        return 1
    print(f"verified {path}: every value recomputed from {args.tracking_uri or path.with_suffix('.bundle')}")
    if regraded:
        print(regraded)
    return 0


def regrade_bundle(path: Path, record: dict, tasks: str | None) -> str | None:
    """What regrading the bundle's replies found (:mod:`washexp.regrade`); None for a wash record."""
    from washexp.project import find_root
    from washexp.regrade import regrade
    from washexp.tracking import bundle

    if record.get("topic") != "compaction":
        return None
    if tasks is not None:
        folder = Path(tasks)
        if not folder.is_dir():
            raise ConfigError(f"--tasks {tasks}: no such folder")
    else:
        try:
            folder = find_root() / "fixtures" / "compaction"
        except ConfigError:
            return "replies not regraded: not inside a washexp project (name the tasks with --tasks DIR)"
    root = path.with_suffix(".bundle")
    experiment = str(bundle.info(root)["options"]["experiment"])
    return regrade(bundle.PREFIX + str(root), experiment, folder).said(folder)
