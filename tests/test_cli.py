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
