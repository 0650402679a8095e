"""``washexp --help`` names every command, the ones that parse their own arguments too."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT
from washexp import cli


def test_help_names_every_command(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as stop:
        cli.main(["--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert set(cli.PASSTHROUGH_HELP) == set(cli.PASSTHROUGH)
    for name in ("export", "ui", "server", *cli.PASSTHROUGH):
        assert re.search(rf"^\s+{name}\s+\S", out, flags=re.M), name


@pytest.mark.parametrize("command", ["export", "runs", "ui"])
def test_a_store_command_outside_a_project_says_how_to_name_one(tmp_path, monkeypatch, capsys, command):
    monkeypatch.chdir(tmp_path)
    assert cli.main([command]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"washexp: {tmp_path}: not inside a washexp project"), line
    assert line.endswith(f"cd into one, or name it: washexp -C <project> {command}"), line


def test_help_outside_a_project_is_the_help(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as ended:
        cli.main(["--help"])
    assert ended.value.code == 0
    assert "{export,ui,runs,server}" in capsys.readouterr().out
