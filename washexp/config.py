"""The typed config schema Hydra composes into. Bad types fail while Hydra parses overrides.

Three shared nodes and one node per family:

- ``model``: what the model *is* (name, tier, temperature, generations...): part of every
  condition's identity;
- ``endpoint``: how it is *reached* (URL, key env, timeouts, retries, concurrency, replay,
  recordings): never part of an identity; secrets are never config values, only the name of the
  environment variable holding the key;
- ``tracking``: where results go: never part of an identity;
- ``compaction`` / ``wash``: each family's own settings, filled only when ``benchmark`` names that
  family (its ``conf/benchmark/<name>.yaml`` brings the defaults), so a job carries no other
  family's keys. :func:`identity` is the one place that decides what enters an identity.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from washexp.project import new_dir


@dataclass
class BenchmarkConfig:
    name: str = MISSING
    """The family: ``compaction`` or ``wash`` (set by ``benchmark=...``)."""
    fixtures: str = MISSING
    """Fixture folder, relative to the project root."""


@dataclass
class ModelConfig:
    backend: str = "reference"
    """Which implementation of the roles: ``reference`` (offline, deterministic), ``openai`` (a served
    model) or ``local`` (a GGUF file served by llama.cpp on this machine; ``conf/model/local.yaml``)."""
    name: str = MISSING
    """Required: the model's name at its endpoint (``???`` in a YAML file would not override a
    default, so there is none)."""
    tier: str = "reference"
    """A free label every record carries (e.g. ``max``, ``135m-q4_1``)."""
    platform: str = "reference"
    """A free label that names the record: ``results/<topic>-<platform>-YYYY-MM-DD.md``."""
    generations: int = 1
    """Independently generated summary/ranking pairs per task."""
    answers_per_context: int = 2
    """The reader's answers to each context (graded separately, averaged per generation)."""
    temperature: float = 0.0
    """The reader's: the study answers at temperature zero."""
    generation_temperature: float = 0.7
    """S, H and Jev: the study's three *independently generated* summary/ranking pairs are
    sampled (its "temperature zero" qualifies the answers). 0.7 is Qwen3's recommended
    non-thinking temperature; 0 gives one deterministic generation, which the record then counts
    as such. Unused by the deterministic reference backend."""
    max_tokens: int = 1024
    """The output cap of every call (S, H on both paths, Jev, the reader)."""
    repeats: int = 1
    """Reruns of the answering step at ``temperature``: each repeat answers every context
    ``answers_per_context`` times again, its calls recorded apart (never replayed as one), and the
    record reports the spread between repeats. At 1 (the default) it is left out of every identity."""
    extra_body: dict[str, Any] = field(default_factory=dict)
    """Sent with every request as the OpenAI client's ``extra_body`` (e.g. ``chat_template_kwargs``)."""
    structured_output: str = "off"
    """What the reader, and only the reader, asks the server for: ``json_schema`` (OpenAI's form:
    OpenAI, vLLM, llama.cpp's ``llama-server``), ``json_object`` (llama-cpp-python's form, with the
    schema) or ``off``. The schema is built per task from its fact keys (``compaction.answer_format``).
    At ``off`` (the default) it is left out of every identity."""


@dataclass
class LocalModelConfig(ModelConfig):
    """``model=local``: a GGUF file served on this machine by llama.cpp (``washexp.models.llama_server``).

    A schema of its own (``conf/model/local.yaml`` extends it), so these keys enter the identity of
    local runs only: every other model's identity stays as it was. Both are what the model *is*:
    the file decides the weights (its sha256 also enters, through the roles' spec, so another file
    under the same path is another condition), and the window decides which contexts it refuses."""

    weights: str | None = "qwen2.5-coder-0.5b-instruct-q4_k_m"
    """A packaged tier (``washexp.models.weights.PACKAGED``): its parts joined once into a cache
    file, verified by sha256 before every load. Null when ``gguf`` names the file instead."""
    gguf: str | None = None
    """Your own GGUF file (then ``weights=null``, and name it: ``model.name``, ``model.platform``)."""
    n_ctx: int = 16384
    """The context window the server is started with; a longer context fails its condition with the
    server's message and scores 0."""


@dataclass
class PriceConfig:
    """What the provider charges, in US dollars per million tokens (``null``: not priced). A price
    is how the model is paid for, not what it is: never part of an identity."""

    input_per_mtok: float | None = None
    """Input (prompt) tokens."""
    output_per_mtok: float | None = None
    """Output (completion) tokens."""
    cached_input_per_mtok: float | None = None
    """Input tokens the endpoint reports as cached (``usage.prompt_tokens_details.cached_tokens``);
    default (null): charged as input."""


@dataclass
class EndpointConfig:
    base_url: str | None = None
    """An OpenAI-compatible ``.../v1``; required by ``model.backend=openai``."""
    api_key_env: str = "OPENAI_API_KEY"
    """The name of the environment variable holding the key; never the key itself."""
    timeout_s: float = 120.0
    """Seconds one request may take before it is retried."""
    max_retries: int = 5
    """Retries of a 429, a 5xx, a timeout or a dropped connection (exponential backoff, ``Retry-After``)."""
    max_concurrency: int = 8
    """Requests in flight at once."""
    replay: str = "auto"
    """``auto``: reuse recorded responses, call for the rest; ``strict``: never call out."""
    recordings: str | None = None
    """Default: ``<project>/mlruns/recordings``."""
    threads: int | None = None
    """``model=local``: CPU threads of the local server (default: every core this process may use).
    How fast it answers, not what: llama.cpp splits each product by rows across threads."""
    startup_timeout_s: float = 120.0
    """``model=local``: how long the local server may take to answer ``/v1/models``."""
    price: PriceConfig = field(default_factory=PriceConfig)
    """``endpoint.price.*``: what a live call costs (``cost_usd``); unset, no cost is logged."""
    budget_usd: float | None = None
    """The most the sweep's live calls may cost: it stops before the call whose estimate (its
    input tokens and its output cap) would exceed it. Needs both prices."""


@dataclass
class MethodConfig:
    name: str = MISSING
    """``full``, ``none`` (the closed-book control), ``S``, ``H``, an installed ``washexp.methods``
    entry-point name, or ``plugin`` (the name is then the compactor's ``name`` attribute, else its factory's)."""
    target: str | None = None
    """A plugin's factory, ``package.module:factory`` (``method=plugin``; an entry point's own)."""
    args: Any = None
    """A plugin factory's keyword arguments, ``method.args={lines: 2}`` (a mapping; None: none):
    part of the condition's identity. Typed ``Any`` so a whole mapping can be given at once."""
    h_impl: str = "native"
    """For H: ``native`` (the study's H: washexp's implementation of the ``tail_mode=legacy``
    protocol; every backend's default) or ``hermes`` (hermes-agent as installed, labelled so)."""


@dataclass
class CompactionConfig:
    method: MethodConfig = MISSING
    """The ``method`` option (``conf/method/``)."""
    topn: int = 0
    """Jev Top-N evidence units fused with the summary (0 = summary only)."""
    task: Any = "all"
    """One task id, a list of ids, or ``all``."""
    phase: str = "final"
    """``final`` or ``preflight`` (a format preflight: kept, never counted in final metrics)."""


@dataclass
class MeasurementConfig:
    name: str = MISSING
    """``ceiling``, ``infinity`` or ``sawtooth`` (the seed's three measurements), ``controlled`` or
    ``chain`` (CoalWash's equal-size fidelity and chain studies; ``washexp.wash.fidelity``)."""
    rounds: int = 8
    """Full-tier rounds per store (ceiling, infinity)."""
    dry_stop: int = 0
    """0 (the seed: "no rest"): every store runs all its rounds. A user's option: stop a store after
    this many consecutive dry rounds (nothing applied); the ceiling table then says so."""
    arms: list[str] = field(default_factory=lambda: ["off"])
    """The gauges a store is washed under: ``configured`` (the ``gauge`` option) and/or ``off``."""
    sessions: int = 24
    """Sawtooth: growth-feed sessions."""
    target_pct: int = 50
    """Controlled: the target, % of the store's bytes, when the gated arm cut less than 5 %."""
    repeats: int = 4
    """Controlled: runs of a stochastic (model) arm, reported as mean and range."""
    passes: int = 4
    """Chain: sequential passes, each seeing only the previous output."""
    pass_keep_pct: int = 80
    """Chain: the share of its input's bytes each pass of the model-free ``truncate`` keeps."""


@dataclass
class WashConfig:
    measurement: MeasurementConfig = MISSING
    """The ``measurement`` option (``conf/measurement/``)."""
    store: Any = "all"
    """The stores (ceiling, infinity): ``all`` under ``fixtures/wash/``, or one or a list
    (``[lean,/data/mem]``) of names there or paths to store folders, absolute or relative to the
    directory the command runs from (docs/your-own-store.md)."""
    feed: str = "dispatch-team"
    """The growth feed (sawtooth): a name under ``fixtures/wash-feed/`` or a path to a feed folder."""
    operator: str = "benchmark"
    """The human gate: ``benchmark`` (the seed's operator), ``approve-all``, ``approve-none``."""
    gates: bool = True
    """``false`` only for control arms: no fidelity gate, no keeps, no LEAN stop."""
    washer: dict[str, Any] = field(default_factory=dict)
    """The washer option (``conf/washer/``): its name and arguments."""
    gauge: dict[str, Any] = field(default_factory=dict)
    """The gauge option (``conf/gauge/``): the CoalWash version it pins and its thresholds."""


@dataclass
class TrackingConfig:
    enabled: bool = True
    """``false`` (``tracking=off``): no MLflow at all, nothing written."""
    uri: str | None = None
    """Default: SQLite at ``<project>/mlruns/mlflow.db``; or an ``http://`` tracking server."""
    artifacts: str | None = None
    """Artifact root for new experiments. Default: ``<project>/mlruns``."""
    experiment: str | None = None
    """Default: the benchmark's name."""
    traces: bool = True
    """Each model call of a condition an MLflow trace attached to its run (a served or local
    model; the offline reference makes no calls). ``false``: no traces. Never in an identity."""


@dataclass
class Config:
    benchmark: BenchmarkConfig = MISSING
    """Which family (``benchmark=compaction|wash``)."""
    model: ModelConfig = MISSING
    """What the model is (``model=reference|openai|local``): part of every identity."""
    endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    """How the model is reached: never part of an identity."""
    tracking: TrackingConfig = MISSING
    """Where runs go (``tracking=local|server|off``): never part of an identity."""
    rerun: bool = False
    """Run a condition again even when a FINISHED run with its identity exists."""
    compaction: CompactionConfig | None = None
    """The compaction study's own settings (only with ``benchmark=compaction``)."""
    wash: WashConfig | None = None
    """The wash benchmark's own settings (only with ``benchmark=wash``)."""


SHORT_KEYS = {
    "topn": "compaction.topn",
    "task": "compaction.task",
    "phase": "compaction.phase",
    "store": "wash.store",
    "feed": "wash.feed",
    "operator": "wash.operator",
    "gates": "wash.gates",
    "rounds": "wash.measurement.rounds",
    "dry_stop": "wash.measurement.dry_stop",
    "sessions": "wash.measurement.sessions",
    "h_impl": "compaction.method.h_impl",
}
"""What users type on the command line -> the family key it sets."""
SHORT_PREFIXES = {
    "method.": "compaction.method.",
    "washer.": "wash.washer.",
    "gauge.": "wash.gauge.",
    "measurement.": "wash.measurement.",
    "controlled.": "wash.measurement.",
    "chain.": "wash.measurement.",
}
"""``method.h_impl=native`` -> ``compaction.method.h_impl=native``: a group's keys, short too."""


@dataclass(frozen=True)
class Identity:
    """What determines a result (hashed into a run's identity) and the params a run logs for it,
    made together by :func:`identify` so the two never drift apart."""

    spec: dict[str, Any]
    params: dict[str, Any]


def identify(cfg: Config, family: dict[str, Any], code: str, model: dict[str, Any] | None = None) -> Identity:
    """What determines a result: the benchmark, what the model is (``model``: the family's view
    of ``cfg.model``, default all of it), the family's own settings (as the family normalises
    them, each the spec of a component a condition calls) and the digest of the code that
    computes it. How the model is reached, where results go and ``rerun`` never enter, nor
    ``model.repeats`` at its default (1). The params
    are the same values: the model's fields (its name as ``model``), the family's, and ``code``
    (a None is left out: Full's top-N)."""
    model = asdict(cfg.model) if model is None else model
    defaults = {"repeats": 1, "structured_output": "off"}  # keep the identity conditions had before them
    model = {k: v for k, v in model.items() if k not in defaults or v != defaults[k]}
    spec = {"benchmark": cfg.benchmark.name, "model": model, cfg.benchmark.name: family, "code": code}
    params = {"model": model["name"], **{k: v for k, v in model.items() if k != "name"}, **family, "code": code}
    return Identity(spec, {k: v for k, v in params.items() if v is not None})  # absent, never "None" or "n/a"


def register() -> None:
    """The schema, and one ``method`` option per installed ``washexp.methods`` entry point that
    has no ``conf/method/<name>.yaml``: ``method=<name>`` then selects it like S or H, sweeps
    included (``method=S,H,<name>``); the same for ``washer`` and ``washexp.washers``. Only
    metadata is read: no plugin is imported here."""
    from importlib.metadata import entry_points

    store = ConfigStore.instance()
    store.store(name="washexp_schema", node=Config)
    store.store(group="model", name="local_schema", node=LocalModelConfig)
    for ep in entry_points(group="washexp.methods"):
        if ep.name not in BUILTIN_METHODS:
            node = {"name": ep.name, "target": ep.value, "args": None}
            store.store(group="method", name=ep.name, node=node, package="compaction.method")
    for ep in entry_points(group="washexp.washers"):
        if ep.name not in BUILTIN_WASHERS:
            store.store(group="washer", name=ep.name, node={"name": ep.name}, package="wash.washer")


BUILTIN_METHODS = ("full", "none", "S", "H", "plugin")
"""The options ``conf/method/`` defines; an entry point never shadows one."""
BUILTIN_WASHERS = ("reference", "command", "coalwash", "plain", "plugin")
"""The options ``conf/washer/`` defines; an entry point never shadows one."""


# At import, not in register(): a parallel launcher's worker resolves hydra.sweep.dir having only
# unpickled its job (which imports washexp.app, and so this module). Cached per config, as ${now:}.
OmegaConf.register_new_resolver("washexp.new_dir", new_dir, use_cache=True, replace=True)
