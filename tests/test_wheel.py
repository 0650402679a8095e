"""The package as a wheel, installed non-editable: it holds every file the package reads, and a model
washer (whose prompts are package data) runs from it against the scripted server on 127.0.0.1.

Trap guarded: ``package-data`` listing only the compaction prompts, so that every model washer broke
outside an editable install while every test (run from the source tree) passed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.wash_model_server import WashScript, serve

WASH = """\
import json, sys
from pathlib import Path

import washexp
from washexp.models.openai_client import OpenAIModel
from washexp.models.recorder import Recorder
from washexp.wash.washers import make_washer
from washexp.wash.washers.model import WasherModel

url, work = sys.argv[1], Path(sys.argv[2])
client = OpenAIModel("scripted-wash-model", url, max_retries=0)
model = WasherModel(Recorder(client, "scripted-wash-model", work / "rec"), 0.0, 1024, {})
files = {"notes.md": "# Notes\\n- deploy with `make ship`\\n- the settled baseline of March\\n"}
out = {"package": washexp.__file__}
for name in ("coalwash", "plain"):
    proposal = make_washer({"name": name}, model).propose(files, (), work)
    out[name] = [[i.file, i.op, i.start, i.end] for i in proposal.plan.items]
print(json.dumps(out))
"""


def _package_files(folder: Path) -> set[str]:
    return {
        str(p.relative_to(folder.parent))
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """``pip wheel`` of a copy of the source (setuptools writes build/ beside what it builds)."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    for package in ("washexp", "hydra_plugins"):
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(work / "dist"), str(src)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return next((work / "dist").glob("washexp-*.whl"))


def test_the_wheel_holds_every_file_of_the_package(wheel):
    with zipfile.ZipFile(wheel) as z:
        held = {n for n in z.namelist() if n.startswith(("washexp/", "hydra_plugins/"))}
    wanted = _package_files(ROOT / "washexp") | _package_files(ROOT / "hydra_plugins")  # the sweeper
    assert "hydra_plugins/washexp_sweeper/__init__.py" in wanted
    assert {"washexp/wash/prompts/outsider.txt", "washexp/compaction/prompts/jev.txt"} <= wanted
    assert sorted(wanted - held) == []


def test_a_model_washer_runs_from_the_installed_wheel(wheel, tmp_path):
    """A fresh venv gets the wheel (non-editable, no index); its dependencies come from this
    interpreter's site-packages through a path entry (no editable hook of the source tree runs)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    site = Path(
        subprocess.check_output(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    script = WashScript(fat={"settled baseline": "superseded"})
    with serve(script) as url:
        proc = subprocess.run(
            [python, "-c", WASH, url, str(tmp_path)], cwd=tmp_path, capture_output=True, text=True, timeout=300
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert Path(out["package"]).is_relative_to(site)  # the wheel's copy, not the source tree
    assert out["coalwash"] == [["notes.md", "delete", 3, 3]]
    assert out["plain"] and out["plain"][0][:2] == ["notes.md", "replace"]
    assert {r["kind"] for r in script.requests} == {"outsider", "insider", "plain"}
