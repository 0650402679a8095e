"""The typed config schema Hydra composes into. Bad types fail while Hydra parses overrides.

Config groups under ``conf/`` fill these nodes; secrets are never config values: a model names
the *environment variable* that holds its key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING


@dataclass
class BenchmarkConfig:
    name: str = MISSING
    fixtures: str = MISSING
    """Fixture folder, relative to the project root."""


@dataclass
class ModelConfig:
    backend: str = "reference"
    """Which implementation of the roles: ``reference`` (offline, deterministic) or ``openai``."""
    name: str = MISSING
    """Required: the model's name at its endpoint (``???`` in a YAML file would not override a
    default, so there is none)."""
    tier: str = "reference"
    platform: str = "reference"
    generations: int = 1
    """Independently generated summary/ranking pairs per task."""
    answers_per_context: int = 2
    base_url: str | None = None
    """The endpoint (an OpenAI-compatible ``.../v1``); required by ``backend=openai``."""
    api_key_env: str = "OPENAI_API_KEY"
    """The name of the environment variable holding the key; never the key itself."""
    temperature: float = 0.0
    max_tokens: int = 1024
    timeout_s: float = 120.0
    max_retries: int = 5
    max_concurrency: int = 8
    extra_body: dict[str, Any] = field(default_factory=dict)
    replay: str = "auto"
    """``auto``: reuse recorded responses, call for the rest; ``strict``: never call out."""
    recordings: str | None = None


@dataclass
class MethodConfig:
    name: str = MISSING
    """``full``, ``S`` or ``H``."""
    h_impl: str = "auto"
    """For H: ``native`` (washexp's protocol implementation), ``hermes`` (the real package),
    or ``auto`` (hermes with an LLM backend, native with the reference backend)."""


@dataclass
class TrackingConfig:
    enabled: bool = True
    uri: str | None = None
    """Default: SQLite at ``<root>/mlruns/mlflow.db``; or an ``http://`` tracking server."""
    artifacts: str | None = None
    """Artifact root for new experiments. Default: ``<root>/mlruns``."""
    experiment: str | None = None
    """Default: the benchmark's name."""


@dataclass
class Config:
    benchmark: BenchmarkConfig = MISSING
    model: ModelConfig = MISSING
    method: MethodConfig = MISSING
    tracking: TrackingConfig = MISSING
    topn: int = 0
    """Jev Top-N evidence units fused with the summary (0 = summary only)."""
    task: Any = "all"
    """One task id, a list of ids, or ``all``."""
    rerun: bool = False
    """Run a condition again even when a FINISHED run with its identity exists."""
    phase: str = "final"
    """``final`` or ``preflight`` (a format preflight: kept, never counted in final metrics)."""


def register() -> None:
    ConfigStore.instance().store(name="washexp_schema", node=Config)
