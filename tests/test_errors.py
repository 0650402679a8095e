"""``washexp.errors``: the one argument parser, the one error-to-exit mapping and the one first-line
cut every command uses (in process, no command started)."""

from __future__ import annotations

import errno
import re

import pytest

from tests.conftest import ROOT
from washexp.errors import (
    FAILED,
    USAGE,
    ConfigError,
    FixtureError,
    ModelError,
    Parser,
    UsageError,
    WashexpError,
    fail,
    first_line,
)


def test_first_line_is_the_first_line_or_the_class_name():
    assert first_line(ValueError("  bad value\nsecond line\n")) == "bad value"
    assert first_line(RuntimeError("")) == "RuntimeError"
    assert first_line(RuntimeError("cannot start\nat line 2"), named=True) == "RuntimeError: cannot start"
    assert first_line(KeyError(), named=True) == "KeyError"  # no text: the class once, not twice


@pytest.mark.parametrize(
    ("err", "code"),
    [
        (UsageError("argument --x: expected one argument"), USAGE),
        (ConfigError("topn=-1: must be >= 0"), USAGE),
        (WashexpError("the store failed mid-run"), FAILED),
        (ModelError("gave up after 6 attempts"), FAILED),
        (FixtureError("t.json", "needles", "in no tool result"), USAGE),
    ],
)
def test_fail_maps_an_error_by_its_class_and_prints_one_line(capsys, err, code):
    assert fail("washexp x", err) == code
    assert capsys.readouterr().err == f"washexp x: {str(err).splitlines()[0]}\n"


def test_fail_gives_the_code_the_command_names(capsys):
    """A command that knows where it stopped says so: everything found while it checks its input
    is 2 whatever its class; score.mjs's 1 for usage."""
    assert fail("washexp feed", WashexpError("feed.yaml: sessions[0]: bad"), USAGE) == USAGE
    assert fail("score", UsageError("usage: ..."), FAILED) == FAILED
    assert capsys.readouterr().err == "washexp feed: feed.yaml: sessions[0]: bad\nscore: usage: ...\n"


def test_fail_names_the_class_of_an_os_error_whose_text_alone_says_nothing_of_what_failed(capsys):
    assert fail("washexp wash", OSError(errno.ENOSPC, "No space left on device"), FAILED) == FAILED
    assert capsys.readouterr().err == "washexp wash: OSError: [Errno 28] No space left on device\n"


def test_the_parser_raises_one_usage_line_never_argparses_usage_block():
    p = Parser(prog="washexp x")
    p.add_argument("store")
    p.add_argument("--n", type=int)
    with pytest.raises(UsageError, match=r"^the following arguments are required: store$"):
        p.parse_args([])
    with pytest.raises(UsageError, match=r"^argument --n: invalid int value: 'two'$"):
        p.parse_args(["s", "--n", "two"])


def test_no_command_has_a_parser_or_a_first_line_cut_of_its_own():
    """The seven ``_Parser`` copies and the private first-line helpers are one each, in errors.py."""
    parser = re.compile(r"^class (\w+)\((?:argparse\.)?ArgumentParser\)", re.M)
    cut = re.compile(r"^def (\w*line)\(\w+: BaseException", re.M)
    own = []
    for path in sorted((ROOT / "washexp").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        own += [f"{path.relative_to(ROOT).as_posix()}: class {name}" for name in parser.findall(text)]
        # app.one_line is a Hydra error's line (its key, cause and close options), built on first_line
        own += [f"{path.relative_to(ROOT).as_posix()}: def {name}" for name in cut.findall(text) if name != "one_line"]
    assert own == ["washexp/errors.py: class Parser", "washexp/errors.py: def first_line"]
