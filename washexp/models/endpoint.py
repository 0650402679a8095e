"""A sweep's recorder in front of its endpoint, built from the ``model`` and ``endpoint`` config
nodes: shared by both families (the compaction roles, the model washers)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from washexp.models.cost import budget_for, price_of
from washexp.models.openai_client import OpenAIModel
from washexp.models.recorder import Recorder


def open_recorder(model, endpoint, root: Path, gone: Callable[[int], str | None] | None = None) -> Recorder:
    """Recordings under ``endpoint.recordings`` (default ``<project>/mlruns/recordings``); with
    ``endpoint.replay=strict`` no client is built at all (strict never calls out). ``gone``: how
    a local server ended (see ``OpenAIModel``). ``endpoint.price`` and ``endpoint.budget_usd``
    are checked here, before any work (a usage error otherwise)."""
    price = price_of(getattr(endpoint, "price", None))
    budget = budget_for(getattr(endpoint, "budget_usd", None), price)
    directory = Path(endpoint.recordings) if endpoint.recordings else root / "mlruns" / "recordings"
    if not directory.is_absolute():
        directory = root / directory
    client = None
    if endpoint.replay != "strict":
        client = OpenAIModel(
            model.name,
            endpoint.base_url,
            endpoint.api_key_env,
            endpoint.timeout_s,
            endpoint.max_retries,
            endpoint.max_concurrency,
            gone=gone,
        )
    return Recorder(client, model.name, directory, endpoint.replay, price, budget)
