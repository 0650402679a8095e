"""``washexp recall BEFORE AFTER``: CoalWash's controlled scorer as a command (issue 36).

The scorer's rule, in our words: for each structured-token class, the distinct values the text
before states, and which of them the text after no longer states anywhere; recall is kept over
total, and a class with nothing to recall has no figure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from washexp.wash.cli import recall as cli_recall

BEFORE = "See [[alpha]] and [[beta]]; v2.31.0 shipped 2026-05-14 at 43%.\nAgain [[alpha]].\n"
AFTER = "See [[alpha]]; v2.31.0 shipped.\n"


def test_two_files_per_class_with_the_values_lost(tmp_path, capsys):
    (tmp_path / "b.md").write_text(BEFORE)
    (tmp_path / "a.md").write_text(AFTER)
    assert cli_recall.main([str(tmp_path / "b.md"), str(tmp_path / "a.md"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rule"].startswith("distinct values per class")
    by = data["by_class"]
    assert (by["wikilinks"]["total"], by["wikilinks"]["kept"], by["wikilinks"]["lost"]) == (2, 1, ["beta"])
    assert (by["dates"]["kept"], by["dates"]["lost"]) == (0, ["2026-05-14"])
    assert by["numbers"]["lost"] == ["43%"] and by["versions"]["lost"] == []
    assert by["quotes"]["recall_pct"] is None  # nothing to recall: n/a
    assert (data["total"], data["kept"]) == (5, 2)
    assert data["occurrence_recall"] == {"total": 6, "kept": 2, "recall_pct": 100.0 * 2 / 6}


def test_two_store_folders_and_the_text_report(tmp_path, capsys):
    for side, text in (("before", BEFORE), ("after", AFTER)):
        (tmp_path / side).mkdir()
        (tmp_path / side / "MEMORY.md").write_text(text)
        (tmp_path / side / "notes.md").write_text("---\nname: notes\n---\nx\n" if side == "before" else "x\n")
    assert cli_recall.main([str(tmp_path / "before"), str(tmp_path / "after")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "overall: 2/6 kept (33.33%) · 4 lost"
    assert "  wikilinks: 1/2 (50.00%) · lost: beta" in out
    assert "  frontmatter: 0/1 (0.00%) · lost: name" in out


def test_a_file_and_a_folder_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "b.md").write_text(BEFORE)
    assert cli_recall.main([str(tmp_path / "b.md"), str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "two files or two store folders" in err
    assert cli_recall.main([str(tmp_path / "nope.md"), str(tmp_path / "b.md")]) == 2


@pytest.mark.parametrize("command", ["recall", "gate"])
def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path, command):
    """The trap: ``washexp recall`` opened a FIFO and waited forever for a writer. Its type is
    checked before it is opened for reading (``gate`` reads its sides with the same helper). The
    timeout is a bound on a hang, not a timing: the command ends on its own or the test fails."""
    fifo = tmp_path / "before.md"
    os.mkfifo(fifo)
    (tmp_path / "after.md").write_text(AFTER)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "washexp.cli", command, str(fifo), str(tmp_path / "after.md")],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"washexp {command} waited on a FIFO")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"washexp {command}: {fifo}: not a regular file (a FIFO, device or folder): refusing to read it"
    ]
