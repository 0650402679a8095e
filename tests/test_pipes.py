"""A closed stdout (``washexp ... | head``) ends a command quietly, with the command's own exit code.

The trap: Python raises ``BrokenPipeError`` at the first write (or the last flush) to a pipe whose
reader is gone, and prints a traceback; ``washexp score`` must still end with score.mjs's code.
Each command runs as a user runs it, with its stdout a pipe closed before it writes a byte.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

STORE = str(ROOT / "fixtures" / "wash" / "lean")


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        ([sys.executable, "-m", "washexp.cli", "--help"], 0),
        ([sys.executable, "-m", "washexp.cli", "score", STORE, STORE], 0),
        ([sys.executable, "-m", "washexp.cli", "score", "--size", STORE], 0),
        ([sys.executable, "-m", "washexp.cli", "score", "--json", STORE, STORE], 0),
        ([sys.executable, str(ROOT / "run.py"), "--help"], 0),
    ],
    ids=["help", "score", "score-size", "score-json", "run.py-help"],
)
def test_a_closed_stdout_is_no_traceback(argv, code):
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the command writes anything
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == code, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert err == ""


def test_a_usage_error_still_reaches_stderr_with_a_closed_stdout():
    proc = subprocess.Popen(
        [sys.executable, "-m", "washexp.cli", "score", STORE],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 1  # score.mjs's usage code
    assert err.startswith("score: ") and err.count("\n") == 1, err
