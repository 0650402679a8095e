"""``model=local`` for both families: a GGUF file served on this machine by llama.cpp.

:func:`serve` checks the config, starts the server (``washexp.models.llama_server``) and returns
what a family needs to talk to it through its usual openai path: the model node renamed to the
served alias, the endpoint node pointed at the server, the server itself (its owner stops it) and
the spec that says what the model is. The compaction roles (``compaction/backends/local_roles.py``) and
the model washers (``wash/washers/model.py``) both build on it.

What the model is enters the spec, and so every condition's identity, its params and the
record's provenance: the file's ``general.name``, size and quantisation, its sha256, ``n_ctx``
and the llama-cpp-python version. The server serves the model under an alias made of the name,
the GGUF sha256 and ``n_ctx``; requests name that alias, so the recording key (sha256 of the
model name and the request) differs for two files or two windows: they never share a recording.
``endpoint.replay=strict`` never calls out, so it starts no server.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from washexp.errors import ConfigError
from washexp.models import llama_server, weights
from washexp.models.llama_server import LlamaServer


@dataclass(frozen=True)
class Served:
    """A local model ready for the openai path."""

    model: Any
    """The ``model`` node with ``name`` set to the served alias (what requests and recordings carry)."""
    endpoint: Any
    """The ``endpoint`` node with ``base_url`` set to the server (None under strict replay)."""
    server: LlamaServer | None
    spec: dict[str, Any]
    """What the model is: ``backend``, ``model``, ``gguf`` (file, sha256, name, size, quantisation),
    ``n_ctx``, ``server``."""
    gguf: Path

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    def gone(self, answered: int) -> str | None:
        """How the server ended, or None while it serves (see ``OpenAIModel``)."""
        return self.server.exit_line(answered) if self.server is not None else None

    def new_log(self) -> dict[str, str]:
        """``{"llama-server.log": text since the last call}``, or nothing without a server."""
        return {"llama-server.log": self.server.new_log()} if self.server is not None else {}


def served_name(name: str, sha256: str, n_ctx: int) -> str:
    """The name the server serves the model under and requests (and recording keys) carry."""
    return f"{name}@gguf-sha256:{sha256}/n_ctx:{n_ctx}"


def log_dir(endpoint, root: Path) -> Path:
    """Server logs live beside the recordings (default ``<project>/mlruns/llama-server``)."""
    recordings = Path(endpoint.recordings) if endpoint.recordings else root / "mlruns" / "recordings"
    return (recordings if recordings.is_absolute() else root / recordings).parent / "llama-server"


def check(model, endpoint) -> str:
    """The usage errors of ``model=local`` that its config alone decides, nothing read or started
    (a sweep runs this on every job before the first: ``washexp.app.check_job``); the installed
    llama-cpp-python version."""
    tier = weights.packaged(model.weights) if model.weights and not model.gguf else None
    if endpoint.base_url:
        raise ConfigError(
            f"model=local starts its own server: drop endpoint.base_url={endpoint.base_url} "
            "(or use model=openai for a server you run yourself)"
        )
    if model.n_ctx < 1:
        raise ConfigError(f"model.n_ctx={model.n_ctx}: must be a positive number of tokens")
    if model.gguf and model.weights:
        raise ConfigError(
            f"model.gguf={model.gguf} and model.weights={model.weights}: pick one "
            "(model.weights=null to serve your own file, named with model.name=... model.platform=...)"
        )
    if model.gguf and not Path(model.gguf).expanduser().is_file():
        raise ConfigError(f"model.gguf={model.gguf!r}: no such file")
    if not model.gguf and not model.weights:
        raise ConfigError("model=local needs model.weights (a packaged tier) or model.gguf (a file)")
    # the extra last, so that what the config gets wrong is said whether or not it is installed;
    # one line naming the install commands if it is missing (a packaged tier's own: 1.5B needs two)
    return llama_server.llama_cpp_version(*((tier.config, tier.install) if tier else ()))


def model_file(model) -> tuple[Path, weights.Packaged | None]:
    """The file to serve and the packaged tier it must be (None: the user's own ``model.gguf``)."""
    if model.gguf:
        return Path(model.gguf).expanduser().resolve(), None
    tier = weights.packaged(model.weights)
    return weights.materialize(tier), tier


def flat_params(spec: dict[str, Any] | None) -> dict[str, str]:
    """The served file's sha256 and its GGUF ``general.name`` as flat params (the MLflow UI filters
    on them); nothing for a model that is not a local file."""
    gguf = (spec or {}).get("gguf")
    return {"gguf_sha256": gguf["sha256"], "gguf_name": gguf["name"]} if gguf else {}


def serve(model, endpoint, root: Path) -> Served:
    """Check ``model``/``endpoint`` (one-line ConfigErrors) and start the server unless replay is strict."""
    version = check(model, endpoint)
    gguf, tier = model_file(model)
    sha256 = llama_server.file_sha256(gguf)
    if tier is not None:  # before the first load: bytes that are not the tier's are never served
        weights.check(tier, sha256, str(gguf))
    facts = llama_server.gguf_facts(gguf)
    alias = served_name(model.name, sha256, model.n_ctx)
    server = None
    if endpoint.replay != "strict":
        server = llama_server.start(
            gguf,
            alias=alias,
            n_ctx=model.n_ctx,
            threads=endpoint.threads,
            # the pid too: two commands in the same second must not share (and misread) one log
            log_path=log_dir(endpoint, root) / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{sha256[:12]}.log",
            timeout_s=endpoint.startup_timeout_s,
        )
    spec = {
        "backend": "local",
        "model": model.name,
        "gguf": {"file": gguf.name, "sha256": sha256, **facts},
        "n_ctx": model.n_ctx,
        "server": f"llama-cpp-python {version}",
    }
    return Served(
        dataclasses.replace(model, name=alias),
        dataclasses.replace(endpoint, base_url=server.base_url if server else None),
        server,
        spec,
        gguf,
    )
