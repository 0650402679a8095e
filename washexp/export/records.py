"""One frozen record, two renderings: markdown for people, JSON (full precision) for programs.

A record builder turns the runs of one topic into records (one per model); builders are
listed by topic in ``washexp.benchmarks.RECORDS``, each family owning its own. Nothing in a
record depends on the day it is exported: its date is the newest covered run's (UTC), so
exporting the same runs again writes byte-identical files.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from washexp.errors import ConfigError, FixtureError
from washexp.inputs import parse_json

NA = "n/a"
"""How a cell without a value reads (never 0)."""

SCHEMA = 1
"""The record JSON's schema version (README: "Records and compare"): ``schema``, ``topic``,
``platform``, ``date``, ``title``, ``provenance``, ``notes``, ``tables`` (key -> title, note,
rows), ``plots``, ``data`` (machine tables for ``washexp compare``)."""


MAX_DEPTH = 64
"""How deep a record's JSON may nest (a record's own is under ten levels): deeper is refused
before anything recurses through it."""


def parse(data: bytes, path: Path) -> Any:
    """A record's JSON, or its bundle's: untrusted, so parsed by :func:`washexp.inputs.parse_json`
    with :data:`MAX_DEPTH`; what cannot be read is an input error of one line."""
    try:
        return parse_json(data, path, max_depth=MAX_DEPTH)
    except FixtureError as err:
        raise ConfigError(str(err)) from None


def show(value: Any) -> str:
    """A cell for people: 3 decimals for floats, ``n/a`` for an absent value (never 0)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NA
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.0f}" if value.is_integer() and abs(value) >= 1000 else f"{value:.3f}"
    return str(value)


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    cell: Callable[[dict], str] | None = None
    """How the markdown shows a row's value (default: ``show(row[key])``)."""

    def render(self, row: dict) -> str:
        return self.cell(row) if self.cell else show(row.get(self.key))


def through(key: str, fmt: Callable[[Any], str]) -> Callable[[dict], str]:
    """A :class:`Column` cell that shows ``row[key]`` through ``fmt`` (``key`` bound now: a lambda
    in a loop would see the loop's last)."""
    return lambda row: fmt(row[key])


@dataclass(frozen=True)
class Table:
    key: str
    """The table's name in the JSON."""
    title: str
    columns: tuple[Column, ...]
    rows: tuple[dict, ...]
    """Full-precision values; the JSON keeps every key, the markdown shows ``columns``."""
    note: str = ""
    sheet: bool = False
    """Also written beside the record as ``<stem>-<key>.csv`` (every key, full precision) and
    ``<stem>-<key>.tex`` (a booktabs table of the shown columns), for a reviewer to paste."""


@dataclass(frozen=True)
class Plot:
    file: str
    """File name beside the record."""
    caption: str
    png: bytes = field(repr=False)


@dataclass(frozen=True)
class Record:
    topic: str
    platform: str
    date: str
    """YYYY-MM-DD (UTC) of the newest covered run."""
    title: str
    provenance: dict[str, Any]
    notes: tuple[str, ...]
    tables: tuple[Table, ...]
    plots: tuple[Plot, ...] = ()
    appendix: tuple[Table, ...] = ()
    """Tables shown folded in the markdown (e.g. every run id)."""
    data: dict[str, list] = field(default_factory=dict)
    """Machine tables for ``washexp compare`` (JSON only, not shown in the markdown)."""

    copy: int = 1
    """1: the record's own name; 2, 3, ...: ``washexp export`` found that name holding another record."""

    @property
    def stem(self) -> str:
        name = f"{self.topic}-{self.platform}-{self.date}"
        return name if self.copy == 1 else f"{name}-{self.copy}"

    def as_copy(self, copy: int) -> Record:
        """The same record under ``<stem>-<copy>``, its plots renamed with it."""
        return self._renamed(replace(self, copy=copy))

    def with_platform(self, platform: str) -> Record:
        """The same record under another platform label, so another name, its plots renamed with it."""
        return self._renamed(replace(self, platform=platform))

    def _renamed(self, new: Record) -> Record:
        old = self.stem
        if any(not p.file.startswith(old) for p in self.plots):
            raise ValueError(f"a plot of {old} is not named after it: {[p.file for p in self.plots]}")
        return replace(new, plots=tuple(replace(p, file=new.stem + p.file.removeprefix(old)) for p in self.plots))

    def files(self) -> dict[str, bytes]:
        """Every file of the record by name: ``<stem>.md``, ``<stem>.json``, the plots and each
        sheet table's ``.csv`` and ``.tex``."""
        sheets = [t for t in self.tables if t.sheet]
        return {
            f"{self.stem}.md": self.to_markdown().encode("utf-8"),
            f"{self.stem}.json": self.to_json().encode("utf-8"),
            **{p.file: p.png for p in self.plots},
            **{f"{self.stem}-{t.key}.csv": _csv(t).encode("utf-8") for t in sheets},
            **{f"{self.stem}-{t.key}.tex": _latex(t).encode("utf-8") for t in sheets},
        }

    def to_json(self) -> str:
        body = {
            "schema": SCHEMA,
            "topic": self.topic,
            "platform": self.platform,
            "date": self.date,
            "title": self.title,
            "provenance": self.provenance,
            "notes": list(self.notes),
            "tables": {
                t.key: {"title": t.title, "note": t.note, "rows": list(t.rows)} for t in (*self.tables, *self.appendix)
            },
            "plots": [{"file": p.file, "caption": p.caption} for p in self.plots],
            "data": self.data,
        }
        return json.dumps(_finite(body), indent=1, ensure_ascii=False, sort_keys=False) + "\n"

    def to_markdown(self) -> str:
        out = [f"# {self.title}", ""]
        if self.notes:  # the first note is the headline; the rest are the reading notes
            out += [f"> {self.notes[0]}", ""] + [f"- {n}" for n in self.notes[1:]] + [""]
        out += ["## Provenance", ""]
        for key, val in self.provenance.items():
            out += _provenance_lines(key, val)
        out.append("")
        for t in self.tables:
            out += [f"## {t.title}", ""]
            if t.note:
                out += [t.note, ""]
            out += _markdown_table(t) + [""]
        for p in self.plots:
            out += [f"![{p.caption}]({p.file})", "", f"*{p.caption}*", ""]
        for t in self.appendix:
            out += [
                "<details>",
                f"<summary>{t.title}</summary>",
                "",
                *(([t.note, ""]) if t.note else []),
                *_markdown_table(t),
                "",
                "</details>",
                "",
            ]
        return "\n".join(out).rstrip("\n") + "\n"


def _markdown_table(t: Table) -> list[str]:
    """The table for people: a column ``n/a`` in every row is left out and named under it (a
    wide table stays readable; the JSON keeps every column)."""
    if not t.rows:
        return ["(none)"]
    cells = [[c.render(row).replace("|", "\\|") for c in t.columns] for row in t.rows]
    shown = [i for i in range(len(t.columns)) if any(r[i] != NA for r in cells)] or list(range(len(t.columns)))
    lines = ["| " + " | ".join(t.columns[i].header for i in shown) + " |", "|" + "|".join("---" for _ in shown) + "|"]
    lines += ["| " + " | ".join(r[i] for i in shown) + " |" for r in cells]
    dropped = [c.header for i, c in enumerate(t.columns) if i not in shown]
    if dropped:
        lines += ["", f"Not shown, {NA} in every row (the .json keeps them): {', '.join(dropped)}."]
    return lines


def _csv(t: Table) -> str:
    """Every key of every row at full precision (an absent value is empty)."""
    keys = list(dict.fromkeys(k for row in t.rows for k in row))
    out = io.StringIO()
    writer = csv.DictWriter(out, keys, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: ("" if _absent(v) else v) for k, v in row.items()} for row in t.rows)
    return out.getvalue()


def _absent(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


_TEX = {c: "\\" + c for c in "&%$#_{}"} | {
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "\\": r"\textbackslash{}",
    "−": "$-$",  # Unicode minus and plus-minus: outside LaTeX's default input encoding
    "±": r"$\pm$",
}


def _tex(text: str) -> str:
    return "".join(_TEX.get(c, c) for c in text)


def _latex(t: Table) -> str:
    """The shown columns as a booktabs tabular (needs ``\\usepackage{booktabs}``)."""
    lines = [
        f"% {_tex(t.title)}",
        "\\begin{tabular}{" + "l" * len(t.columns) + "}",
        "\\toprule",
        " & ".join(_tex(c.header) for c in t.columns) + " \\\\",
        "\\midrule",
        *(" & ".join(_tex(c.render(row)) for c in t.columns) + " \\\\" for row in t.rows),
        "\\bottomrule",
        "\\end{tabular}",
    ]
    return "\n".join(lines) + "\n"


def _provenance_lines(key: str, val: Any) -> list[str]:
    if isinstance(val, dict):
        return [f"- **{key}**:"] + [f"  - `{k}`: `{v}`" for k, v in val.items()]
    if isinstance(val, list):
        return [f"- **{key}**:"] + [f"  - `{v}`" for v in val]
    return [f"- **{key}**: {val}"]


def _finite(obj: Any) -> Any:
    """JSON has no NaN: an absent value is null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj
