"""The reference pages, generated from the code so they cannot drift (``docs/hooks.py`` puts them
into the site; ``tests/test_docs.py`` checks them):

- :func:`config_reference`: every key of the structured config (``washexp/config.py``: type,
  default, the attribute's docstring), then every key each ``conf/`` option file sets (its value
  and its comment);
- :func:`cli_reference`: ``python run.py --help`` and every ``washexp`` subcommand's ``--help``,
  from their own parsers;
- :func:`error_reference`: every one-line error washexp raises, read from the source, with its
  exit code and what to do.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import io
import re
import typing
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


# -- config -----------------------------------------------------------------------------------


def _docstrings(cls) -> dict[str, str]:
    """A dataclass's attribute docstrings: the string literal right after a field."""
    import inspect

    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body
    out = {}
    for node, after in zip(body, body[1:], strict=False):
        if isinstance(node, ast.AnnAssign) and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
            out[node.target.id] = " ".join(str(after.value.value).split()).replace("``", "`")
    return out


def _default(f: dataclasses.Field) -> str:
    from omegaconf import MISSING

    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "(required)"
    return "(required)" if value == MISSING else f"`{value!r}`" if value is not None else "`None`"


def schema_keys() -> list[tuple[str, str, str, str]]:
    """``(key, type, default, doc)`` for every field of ``washexp.config.Config``, nested nodes
    walked (``model=local``'s own keys under ``model.`` too)."""
    from washexp import config

    rows: list[tuple[str, str, str, str]] = []

    def walk(cls, prefix: str) -> None:
        hints = typing.get_type_hints(cls, vars(config))
        docs = {}
        for base in reversed(cls.__mro__):
            if dataclasses.is_dataclass(base):
                docs |= _docstrings(base)
        for f in dataclasses.fields(cls):
            hint = hints[f.name]
            node = next((a for a in typing.get_args(hint) or (hint,) if dataclasses.is_dataclass(a)), None)
            if node is not None:
                walk(node, f"{prefix}{f.name}.")
                continue
            rows.append((prefix + f.name, _type_name(f.type), _default(f), docs.get(f.name, "")))

    walk(config.Config, "")
    seen, local_docs = {r[0] for r in rows}, _docstrings(config.LocalModelConfig)
    for f in dataclasses.fields(config.LocalModelConfig):  # model=local's own keys
        if f"model.{f.name}" not in seen:
            rows.append((f"model.{f.name}", _type_name(f.type), _default(f), local_docs[f.name]))
    return rows


def _type_name(annotation) -> str:
    return str(annotation).replace("typing.", "").replace(" | ", " or ")  # a bare | would split the table


_LINE = re.compile(r"^(\s*)([\w.@-]+):(?:\s*(.*?))?\s*(?:#\s*(.*))?$")


def option_keys(path: Path) -> tuple[str, list[tuple[str, str, str]]]:
    """An option file's header comment and ``(full key, value, comment)`` rows: its keys under the
    file's ``# @package`` (``_global_``: as written; none: its group's path), ``defaults`` aside."""
    text = path.read_text(encoding="utf-8")
    group = path.parent.relative_to(ROOT / "conf").as_posix()
    package = re.search(r"^# @package (\S+)", text, re.M)
    prefix = package.group(1) if package else ("" if group == "." else group.replace("/", "."))
    prefix = "" if prefix == "_global_" else prefix + "."
    header = " ".join(
        line.lstrip("# ").strip() for line in text.splitlines() if line.startswith("#") and "@package" not in line
    )
    header = header.split(". ", 1)[0] if len(header) > 240 else header
    comments, stack = {}, []
    for line in text.splitlines():
        m = _LINE.match(line.split(" #", 1)[0] + ("  #" + line.split(" #", 1)[1] if " #" in line else ""))
        if not m or line.lstrip().startswith(("#", "-")):
            continue
        depth = len(m.group(1)) // 2
        stack[depth:] = [m.group(2)]
        comments[".".join(stack)] = m.group(4) or ""
    rows = []

    def flatten(node, keys: list[str]) -> None:
        if isinstance(node, dict) and node:
            for k, v in node.items():
                if keys or k != "defaults":
                    flatten(v, [*keys, str(k)])
            return
        rows.append((prefix + ".".join(keys), f"`{node!r}`", comments.get(".".join(keys), "")))

    flatten(yaml.safe_load(text) or {}, [])
    return header, rows


def config_reference() -> str:
    out = [
        "## The structured config",
        "",
        "Every key Hydra composes into (`washexp/config.py`); a wrong type fails while Hydra parses the",
        "command line. Short keys (`topn`, `task`, `store`...) are listed in the [CLI reference](cli.md).",
        "",
        "| key | type | default | what it is |",
        "|---|---|---|---|",
    ]
    out += [f"| `{k}` | `{t}` | {d} | {doc} |" for k, t, d, doc in schema_keys()]
    out += ["", "## The options of each group", ""]
    conf = ROOT / "conf"
    for folder in sorted({p.parent for p in conf.rglob("*.yaml")}):
        group = folder.relative_to(conf).as_posix()
        out += [f"### `{'config' if group == '.' else group}`", ""]
        for path in sorted(folder.glob("*.yaml")):
            header, rows = option_keys(path)
            name = path.relative_to(ROOT).as_posix()
            out += [f"#### `{path.stem}` (`{name}`)", "", header, ""]
            if rows:
                out += ["| key | value | note |", "|---|---|---|"]
                out += [f"| `{k}` | {v} | {c} |" for k, v, c in rows]
            out.append("")
    return "\n".join(out).replace("|  |", "| |")


# -- command line -----------------------------------------------------------------------------


def _help_of(main, argv: list[str]) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf), contextlib.suppress(SystemExit):
        main(argv)
    return buf.getvalue().rstrip()


def cli_reference() -> str:
    from washexp import cli
    from washexp.usage import run_help

    out = ["## `python run.py`", "", "```text", run_help(ROOT), "```", ""]
    out += ["## `washexp`", "", "```text", _help_of(cli.main, ["--help"]), "```", ""]
    names = ["export", "runs", "ui", "server", *cli.PASSTHROUGH]
    for name in names:
        out += [f"### `washexp {name}`", "", "```text", _help_of(cli.main, [name, "--help"]), "```", ""]
    return "\n".join(out)


# -- errors -----------------------------------------------------------------------------------

EXIT = {
    "UsageError": "2",
    "ConfigError": "2",
    "FixtureError": "2",
    "ModelError": "1",
    "WashexpError": "1 (2 if found before any work)",
}
"""What each error class ends the command with (``washexp.errors.fail``)."""
WHAT_TO_DO = {
    "UsageError": "Fix the argument the line names (`--help` lists them); nothing was run or written.",
    "ConfigError": "Fix the option, value or file the line names; nothing was run or written.",
    "FixtureError": "Fix the fixture file and field the line names (a task, store or feed); nothing ran.",
    "ModelError": "The endpoint or model failed mid-run: check it answers, then run the same command again "
    "(finished conditions are reused).",
    "WashexpError": "Read the line: it names what could not finish; fix that and run the same command again.",
}


def _template(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            parts.append(v.value if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _template(node.left), _template(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "unknown_name":
        return "unknown <kind> <name>; did you mean <close names>? (known: ...)"
    return None


def error_messages() -> list[tuple[str, str, str]]:
    """``(module, class, message template)`` for every ``raise <washexp error>(...)`` in the package."""
    found = []
    for path in sorted((ROOT / "washexp").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)):
                continue
            func = node.exc.func
            name = func.id if isinstance(func, ast.Name) else None
            if name in EXIT and node.exc.args:
                text = _template(node.exc.args[0]) or ast.unparse(node.exc.args[0])
                found.append((path.relative_to(ROOT).as_posix(), name, " ".join(text.split())))
    return found


def error_reference() -> str:
    out = [
        "| class | exit | what to do |",
        "|---|---|---|",
        *(f"| `{c}` | {EXIT[c]} | {WHAT_TO_DO[c]} |" for c in EXIT),
        "",
        "Every message, as the source raises it (`{...}` is filled in with the value at hand):",
        "",
    ]
    by_module: dict[str, list[tuple[str, str]]] = {}
    for module, cls, text in error_messages():
        by_module.setdefault(module, []).append((cls, text))
    for module, rows in by_module.items():
        out += [f"### `{module}`", "", "| exit | message |", "|---|---|"]
        out += [f"| {EXIT[c]} | `{t.replace('|', '¦').replace('`', '')}` |" for c, t in rows]
        out.append("")
    return "\n".join(out)


def changelog() -> str:
    """``CHANGELOG.md`` (at the repository's top, where a user looks for it) in the site, its title
    aside; its links, written from the top (``docs/performance.md``), made relative to the site's
    pages, which live in ``docs/``."""
    body = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8").split("\n", 1)[1]
    return body.replace("](docs/", "](")


GENERATED = {"config": config_reference, "cli": cli_reference, "errors": error_reference, "changelog": changelog}
"""Marker name -> generator: a page holding ``<!-- generated: NAME -->`` gets that text there."""
