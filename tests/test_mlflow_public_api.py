"""washexp reaches MLflow through its public API only (issue 38): a source scan of ``washexp/`` for
MLflow's private modules, private attributes, private environment variables (``_MLFLOW_*``, what
``mlflow server`` hands its worker) and its migration tables."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "washexp"

INTERNALS = {
    "a private module of MLflow's store": re.compile(r"\bmlflow\.store\b"),
    "MLflow's utilities": re.compile(r"\bmlflow\.utils\b"),
    "a private tracking module": re.compile(r"\bmlflow\.tracking\._"),
    "a private attribute": re.compile(r"\._tracking_client\b|\bmlflow(\.\w+)*\._\w"),
    "a server module beside the app `mlflow server` serves": re.compile(r"\bmlflow\.server\.(?!fastapi_app\b)\w"),
    "MLflow's private environment variables": re.compile(r"\b_MLFLOW_\w*"),
    "MLflow's migrations": re.compile(r"\balembic_version\b|\bdb_migrations\b|\bimport alembic\b|\bfrom alembic\b"),
}


def _code(text: str) -> str:
    """The source without its comments and docstrings' prose mentions in backticks (``mlflow.x``)."""
    text = re.sub(r"``[^`]*``", "", text)
    return "\n".join(line.split("  # ")[0] for line in text.splitlines())


def internals(root: Path = ROOT) -> list[str]:
    found = []
    for file in sorted(root.rglob("*.py")):
        code = _code(file.read_text(encoding="utf-8"))
        for what, pattern in INTERNALS.items():
            for match in pattern.finditer(code):
                line = code.count("\n", 0, match.start()) + 1
                found.append(f"{file.relative_to(root.parent)}:{line}: {match.group(0)} ({what})")
    return found


def test_washexp_uses_no_mlflow_internals():
    assert internals() == []


def test_the_scan_sees_an_internal_import(tmp_path):
    source = "from mlflow.store.tracking import SEARCH_MAX_RESULTS_DEFAULT\nc._tracking_client.store\n"
    source += 'env = {"_MLFLOW_SERVER_FILE_STORE": uri}\n'
    (tmp_path / "m.py").write_text(source)
    assert len(internals(tmp_path)) == 3
