"""The ``local`` backend (``model=local``): a GGUF model served on this machine by llama.cpp.

It starts the server (``washexp.models.local.serve``) and returns the ``openai`` backend's roles
against it: the same recorder, replay, retries and parsing. What the model is (GGUF sha256,
``n_ctx``, llama-cpp-python version) joins the roles' spec. The roles own the server: their
``close()`` (which ``Sweep.close()`` calls at the end of the command, also on a failure, Ctrl-C
or SIGTERM) stops it. H's token check counts with the GGUF's own template and vocabulary.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from washexp.compaction.backends.openai_roles import openai_backend
from washexp.compaction.backends.roles import Roles
from washexp.compaction.inputs.meter import gguf_meter
from washexp.models import local
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


def local_backend(model, endpoint, root: Path) -> Roles:
    served = local.serve(model, endpoint, root)
    try:
        roles = openai_backend(served.model, served.endpoint, root, served.gone)
    except BaseException:
        served.stop()
        raise
    spec = {**roles.spec, **served.spec}
    fields = {f.name: getattr(roles, f.name) for f in dataclasses.fields(Roles)}
    fields["meter"] = gguf_meter(served.gguf)  # the server's own count, with or without the server
    logs = served.new_log if served.server else None
    return LocalRoles(**{**fields, "spec": spec, "logs": logs}, server=served.server)
