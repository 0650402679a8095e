"""The docs cannot drift from the code: the README's marked examples run and print what they show,
the generated references cover every key and command, and the README stays a README."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from docs import gen_reference
from tests.conftest import ROOT

README = ROOT / "README.md"
ERRORS = ROOT / "docs" / "guide" / "errors.md"
CHECK = re.compile(r"^<!-- check -->\n```console\n(.*?)^```", re.M | re.S)
EXIT = re.compile(r"\s+# exit (\d+)$")
"""A command's expected exit code, as the page shows it: a shell comment, so the line pastes as is."""


def checked_blocks(text: str) -> list[list[tuple[str, list[str], int]]]:
    """Each ``<!-- check -->`` console block as ``[(command, expected lines, exit code)]``: ``$ ``
    starts a command (``# exit N`` after it: the code it must end with, else 0), the lines under
    it are an excerpt of what it prints."""
    blocks = []
    for body in CHECK.findall(text):
        steps: list[tuple[str, list[str], int]] = []
        for line in body.splitlines():
            if line.startswith("$ "):
                code = EXIT.search(line)
                steps.append((EXIT.sub("", line[2:]), [], int(code.group(1)) if code else 0))
            elif line.strip():
                steps[-1][1].append(line)
        blocks.append(steps)
    return blocks


VOLATILE = [(re.compile(r"\d{4}[-/]\d\d[-/]\d\d"), "<date>"), (re.compile(r"\d\d([-:])\d\d\1\d\d(,\d+)?"), "<time>")]
"""What differs from one run to the next (dates, clock times, the sweep ids made of them): the
README shows real ones, and both sides are compared with them masked."""


def _masked(text: str) -> str:
    for pattern, mask in VOLATILE:
        text = pattern.sub(mask, text)
    return text


def excerpt_found(expected: list[str], output: str) -> str | None:
    """None when the expected lines appear in order among the output's lines (``...`` is anything;
    a line of only ``...`` stands for any lines; dates and times are masked); else the first line
    not found."""
    lines = iter(_masked(output).splitlines())
    for want in expected:
        if want.strip() == "...":
            continue
        pattern = re.compile(".*".join(re.escape(p) for p in _masked(want).split("...")))
        if not any(pattern.fullmatch(line.rstrip()) for line in lines):
            return want
    return None


def test_excerpt_matching_fails_on_a_missing_or_reordered_line():
    out = "a 1\nb 2\nc 3\n"
    assert excerpt_found(["a ...", "...", "c 3"], out) is None
    assert excerpt_found(["c 3", "a 1"], out) == "a 1"
    assert excerpt_found(["b 3"], out) == "b 3"
    assert (
        excerpt_found(["sweep multirun/2026-12-01/20-33-54 · 1 arm"], "sweep multirun/2027-01-02/09-00-01 · 1 arm")
        is None
    )
    assert excerpt_found(["sweep x/2026-12-01/20-33-54 · 1 arm"], "sweep y/2027-01-02/09-00-01 · 1 arm") is not None


@pytest.fixture
def project(tmp_path) -> Path:
    """A fresh copy of the project's inputs for each block (a block's counts assume a fresh store):
    the examples write stores, records and gauge state there."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "conf").symlink_to(ROOT / "conf")
    shutil.copy(ROOT / "run.py", root / "run.py")
    shutil.copytree(ROOT / "fixtures", root / "fixtures")
    return root


def _blocks_of(*pages: Path) -> list[tuple[str, int]]:
    return [
        (p.relative_to(ROOT).as_posix(), i) for p in pages for i in range(len(checked_blocks(p.read_text("utf-8"))))
    ]


# Slow (each block runs the real commands on a fresh store: 20 to 35 s each, about 2 min of the
# default suite): the marked suite that .ci/run runs. What they print is each command's own,
# guarded in the default suite by its tests (tests/test_bad_input.py, test_compare.py, ...).
@pytest.mark.slow
@pytest.mark.parametrize(("page", "block"), _blocks_of(README, ERRORS))
def test_checked_examples_print_what_they_show(project, page, block):
    """The README's examples and the error page's messages: each command ends with the exit code
    shown and prints the lines shown."""
    steps = checked_blocks((ROOT / page).read_text(encoding="utf-8"))[block]
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # this venv's python and washexp
    # one stream, in the order printed; this checkout's washexp, whatever the venv has installed
    env = {**os.environ, "PATH": path, "CI": "true", "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    for command, expected, code in steps:
        done = subprocess.run(
            command,
            shell=True,
            cwd=project,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            timeout=300,
        )
        assert done.returncode == code, f"{command}: exit {done.returncode}, {page} shows {code}\n{done.stdout[-2000:]}"
        missing = excerpt_found(expected, done.stdout)
        assert missing is None, f"{command}: {page} shows {missing!r}; it printed:\n{done.stdout}"


def test_readme_is_a_readme():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200
    diary = re.compile(r"\b(load average|load \d|later that day|an hour later|measured on|tried and dropped)\b", re.I)
    assert [line for line in lines if diary.search(line)] == []
    assert checked_blocks("\n".join(lines) + "\n"), "the README's offline examples are marked for checking"
    # the two fresh-machine commands, exactly
    assert (
        "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && python run.py -m method=S,H topn=0..5"
        in lines
    )
    assert "python3 -m venv .venv && . .venv/bin/activate && pip install -q -e '.[test]' && pytest" in lines


def _local_links(text: str) -> set[str]:
    return {t.split("#")[0] for t in re.findall(r"\]\(([^)]+)\)", text) if not t.startswith("http")}


def test_readme_and_changelog_links_resolve():
    for page in (README, ROOT / "CHANGELOG.md"):
        targets = _local_links(page.read_text(encoding="utf-8"))
        assert sorted(t for t in targets if not (ROOT / t).exists()) == [], page.name


def test_the_sites_changelog_links_resolve_from_docs():
    """The site shows CHANGELOG.md as docs/changelog.md: its links must resolve from ``docs/``
    (mkdocs --strict fails on one that does not, late in CI)."""
    targets = _local_links(gen_reference.changelog())
    assert targets and sorted(t for t in targets if not (ROOT / "docs" / t).exists()) == []


def _conf_keys() -> set[str]:
    """Every key each ``conf/`` file sets, under its ``# @package`` (read here on its own)."""
    keys = set()
    for path in (ROOT / "conf").rglob("*.yaml"):
        text = path.read_text(encoding="utf-8")
        group = path.parent.relative_to(ROOT / "conf").as_posix()
        found = re.search(r"^# @package (\S+)", text, re.M)
        package = found.group(1) if found else ("" if group == "." else group.replace("/", "."))
        prefix = "" if package == "_global_" else package + "."

        todo = [(yaml.safe_load(text) or {}, "")]
        while todo:
            node, at = todo.pop()
            if isinstance(node, dict) and node:
                todo += [(v, f"{at}.{k}" if at else str(k)) for k, v in node.items() if at or k != "defaults"]
            else:
                keys.add(prefix + at)
    return keys


def test_the_config_reference_lists_every_key_of_conf_and_of_the_schema():
    page = gen_reference.config_reference()
    listed = set(re.findall(r"^\| `([^`]+)` \|", page, re.M))
    assert _conf_keys() - listed == set()
    assert {k for k, *_ in gen_reference.schema_keys()} - listed == set()
    assert all(doc for *_, doc in gen_reference.schema_keys()), "every schema key has its docstring"


def test_the_cli_reference_has_every_command():
    from washexp import cli

    page = gen_reference.cli_reference()
    for name in ["export", "runs", "ui", "server", *cli.PASSTHROUGH]:
        section = page.split(f"### `washexp {name}`", 1)[1].split("###", 1)[0]
        assert f"washexp {name}" in section and "usage" in section, name
    assert "powered by Hydra" not in page and "`` " not in page


def test_every_error_class_raised_has_what_to_do():
    found = gen_reference.error_messages()
    assert len(found) > 100 and {cls for _, cls, _ in found} <= set(gen_reference.WHAT_TO_DO)
    assert ("washexp/app.py", "WashexpError", "{arg}: empty range ({lo} > {hi})") in found


GLOSSARY_TERMS = ["s", "h", "top-n", "jev", "evidence-unit", "cohort", "fact-accuracy", "retention", "needle"]
GLOSSARY_TERMS += ["muscle", "fat", "ceiling", "lean", "gauge", "washer", "arm", "condition", "sweep", "record"]
"""The terms a newcomer meets first (issue 39), each an anchor of ``docs/glossary.md``."""


def _nav_pages(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [p for v in node.values() for p in _nav_pages(v)]
    return [p for item in node for p in _nav_pages(item)]


def test_the_site_is_arranged_for_a_newcomer():
    """At most 8 top-level entries, every page reachable from them, and each first-met term
    defined in the glossary and linked from the home page."""
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    assert len(nav) <= 8
    docs = ROOT / "docs"
    assert sorted(_nav_pages(nav)) == sorted(p.relative_to(docs).as_posix() for p in docs.rglob("*.md"))
    anchors = set(re.findall(r"\{#([\w-]+)\}", (docs / "glossary.md").read_text(encoding="utf-8")))
    assert [t for t in GLOSSARY_TERMS if t not in anchors] == []
    home = set(re.findall(r"\]\(glossary\.md#([\w-]+)\)", (docs / "index.md").read_text(encoding="utf-8")))
    assert [t for t in GLOSSARY_TERMS if t not in home] == []


def test_the_site_loads_nothing_from_another_host():
    """Read offline and in private: the theme's web fonts (fonts.googleapis.com) are off."""
    theme = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["theme"]
    assert theme.get("font") is False
