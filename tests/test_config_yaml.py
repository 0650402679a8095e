"""A YAML alias bomb in Hydra's own config files is one line, exit 2, before Hydra reads them
(issue 37: the sweep hung, copying billions of values into its config)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT
from washexp.app import main

BOMB = "name: reference\na: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)
SELF = "name: reference\nloop: &loop [*loop]\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(ROOT / "conf", root / "conf")
    shutil.copy(ROOT / "run.py", root / "run.py")
    return root


@pytest.mark.parametrize("text", [BOMB, SELF], ids=["nine-by-nine", "self"])
def test_an_alias_bomb_in_a_config_group_file_is_one_line(project, capsys, text):
    (project / "conf" / "model" / "bomb.yaml").write_text(text)
    code = main(["model=bomb", "task=payment", "tracking.enabled=false"], root=project)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"washexp: {project / 'conf' / 'model' / 'bomb.yaml'}: not usable YAML")


def test_an_alias_bomb_in_a_config_dir_given_on_the_command_line_is_one_line(project, tmp_path, capsys):
    extra = tmp_path / "mine"
    (extra / "model").mkdir(parents=True)
    (extra / "model" / "bomb.yaml").write_text(BOMB)
    code = main(["--config-dir", str(extra), "model=bomb", "tracking.enabled=false"], root=project)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "its aliases expand to more than" in err[0], err
