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
  family's keys.

What is *not* identity is declared once, here: :data:`NOT_IDENTITY` (never enters), :data:`BY_CONTENT`
(a path: the content's digest enters instead), :data:`WHERE_USED` (enters only where the component
that reads it runs) and :data:`AT_DEFAULT` (left out at its default, so older identities hold). Every
other leaf of the composed config enters (``tests/test_identity_leaves.py`` changes each one); Hydra's
``override_dirname.exclude_keys`` and the public config derive from the same declaration.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from washexp import plugins
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
    M: int | None = None
    """``mask`` and ``hybrid``: the latest tool outputs kept verbatim (unset: 10)."""
    K: int | None = None
    """``recency``: the last turns kept verbatim (unset: 10)."""
    budget: int | None = None
    """``hybrid``: the input tokens over which the masked context gives way to S (unset: 4000)."""


@dataclass
class CompactionMeasurementConfig:
    """The compaction benchmark's ``measurement`` option (``conf/measurement/single.yaml``,
    ``cycles.yaml``, ``cliff.yaml``: ``# @package compaction.measurement``, beside wash's ``wash.measurement``)."""

    name: str = "single"
    """``single`` (one compaction of the whole trajectory: the study), ``cycles`` (repeated
    compaction, ``washexp.compaction.cycles``) or ``cliff`` (retention against budget and length
    over generated sets, ``washexp.compaction.cliff``)."""
    k: list[int] = field(default_factory=lambda: [1, 2, 3, 4, 5])
    """Cycles: the segment counts a trajectory is split into, each a condition of its own."""
    split: str = "turns"
    """Cycles: how a trajectory is split (``turns``: contiguous turns, as equal in number as they go)."""
    seed: int = 52
    """Cliff: the seed of its generated sets (``washexp.compaction.cliff``)."""
    tasks: int = 8
    """Cliff: tasks per generated set (one set per length)."""
    budgets: list[int] = field(default_factory=lambda: [64, 128, 256, 512, 1024, 2048, 4096, 8192])
    """Cliff: the compaction budgets (Qwen tokens) swept at ``budget_length``."""
    budget_length: int = 8000
    """Cliff: the trajectory length (Qwen tokens of tool results) of the budget axis."""
    lengths: list[int] = field(default_factory=lambda: [1000, 2000, 4000, 8000, 16000, 32000, 64000])
    """Cliff: the trajectory lengths swept at ``length_budget``."""
    length_budget: int = 1024
    """Cliff: the compaction budget of the length axis."""


@dataclass
class CompactionConfig:
    method: MethodConfig = MISSING
    """The ``method`` option (``conf/method/``)."""
    topn: int = 0
    """Jev Top-N evidence units fused with the summary (0 = summary only)."""
    ranker: str = "jev"
    """What ranks the Top-N units: ``jev`` (the model's ranking role) or ``bm25`` (model-free)."""
    task: Any = "all"
    """One task id, a list of ids, or ``all``."""
    phase: str = "final"
    """``final`` or ``preflight`` (a format preflight: kept, never counted in final metrics)."""
    measurement: CompactionMeasurementConfig = field(default_factory=CompactionMeasurementConfig)
    """The ``measurement`` option: ``single`` (the default), ``cycles`` or ``cliff``."""


@dataclass
class MeasurementConfig:
    name: str = MISSING
    """``ceiling``, ``infinity`` or ``sawtooth`` (the seed's three measurements), ``controlled`` or
    ``chain`` (CoalWash's equal-size fidelity and chain studies; ``washexp.wash.measure.fidelity``)."""
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
    "ranker": "compaction.ranker",
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
    "cycles.": "compaction.measurement.",
    "cliff.": "compaction.measurement.",
    "controlled.": "wash.measurement.",
    "chain.": "wash.measurement.",
}
"""``method.h_impl=native`` -> ``compaction.method.h_impl=native``: a group's keys, short too."""


NOT_IDENTITY: dict[str, str] = {
    "rerun": "whether to run again, not what runs",
    "tracking": "where results go (store, artifacts, experiment, traces)",
    "endpoint": "how the model is reached (URL, key env, timeouts, retries, concurrency, replay, "
    "recordings, threads, price, budget)",
}
"""Config subtrees (a path and every leaf under it) that never enter a condition's identity."""
NOT_PUBLISHED = ("tracking",)
"""Of :data:`NOT_IDENTITY`, what a run's ``config.yaml`` artifact leaves out (where results go is
not what they are); the endpoint stays, its URL without credentials."""
BY_CONTENT: dict[str, str] = {
    "benchmark.fixtures": "a folder: each task's (store's) id and content sha256 enter",
    "wash.store": "a name or a path: each store's content sha256 enters, never its path",
    "wash.feed": "a name or a path: the feed's content sha256 enters (sawtooth), never its path",
}
"""Paths that never enter as text: the content they name does, so a store by name and by path are
one condition."""
WHERE_USED: dict[str, str] = {
    "compaction.topn": "not for Full, which fuses no units",
    "compaction.method.target": "a plugin's: its spec (target, args, package, version, module sha256)",
    "compaction.method.args": "a plugin's: its spec (target, args, package, version, module sha256)",
    "compaction.method.h_impl": "H's: an H arm's h_impl",
    "compaction.method.M": "mask's and hybrid's: the tool outputs kept",
    "compaction.method.K": "recency's: the turns kept",
    "compaction.method.budget": "hybrid's: the tokens over which S takes over",
    "compaction.ranker": "an arm that fuses units (Top N > 0): Top 0 ranks nothing",
    "model.repeats": "compaction with a reader: the answering step's repeats",
    "model.answers_per_context": "compaction with a reader (without one, e.g. the reference backend: 0)",
    "compaction.measurement.k": "cycles': each condition's k",
    "compaction.measurement.split": "cycles': the split rule",
    "compaction.measurement.seed": "cliff's: its sets' seed",
    "compaction.measurement.tasks": "cliff's: its sets' size",
    "compaction.measurement.budgets": "cliff's: its budget axis",
    "compaction.measurement.budget_length": "cliff's: its budget axis",
    "compaction.measurement.lengths": "cliff's: its length axis",
    "compaction.measurement.length_budget": "cliff's: its length axis",
    "wash.feed": "sawtooth's",
    "wash.store": "not sawtooth's",
    "wash.measurement.sessions": "sawtooth's",
    "wash.measurement.target_pct": "controlled's (wash/measure/fidelity.py OWN_KEYS)",
    "wash.measurement.repeats": "controlled's (wash/measure/fidelity.py OWN_KEYS)",
    "wash.measurement.passes": "chain's (wash/measure/fidelity.py OWN_KEYS)",
    "wash.measurement.pass_keep_pct": "chain's (wash/measure/fidelity.py OWN_KEYS)",
}
"""Leaves that enter only where the component that reads them runs (its spec then holds them)."""
AT_DEFAULT: dict[str, Any] = {"model.repeats": 1, "model.structured_output": "off"}
"""Left out of the identity at these values: conditions from before the key keep their identity."""


def not_identity(path: str) -> bool:
    """``path`` (dotted) is declared never to enter an identity: it is, or lies under, a
    :data:`NOT_IDENTITY` entry."""
    return any(path == key or path.startswith(f"{key}.") for key in NOT_IDENTITY)


def leaves(node: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf of a config (a dataclass, mapping or list container) by dotted path; an empty
    mapping is a leaf of its own."""
    data = asdict(node) if hasattr(node, "__dataclass_fields__") else node
    if isinstance(data, dict) and data:
        return {k: v for key, value in data.items() for k, v in leaves(value, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): data}


def override_excludes() -> list[str]:
    """Hydra's ``override_dirname.exclude_keys`` (``conf/config.yaml``): the override keys of
    :data:`NOT_IDENTITY`, its groups and every leaf of the schema under them, so a job's name
    (``washexp.overrides``) holds only what changes a result. A test holds the YAML to this."""
    schema = leaves(Config(benchmark=BenchmarkConfig("", ""), model=ModelConfig(), tracking=TrackingConfig()))
    out = [key for key in NOT_IDENTITY if key not in schema]  # a group (``tracking=server``) is a key too
    return out + [path for path in schema if not_identity(path)]


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
    defaults = {k.removeprefix("model."): v for k, v in AT_DEFAULT.items()}
    model = {k: v for k, v in model.items() if k not in defaults or v != defaults[k]}
    spec = {"benchmark": cfg.benchmark.name, "model": model, cfg.benchmark.name: family, "code": code}
    params = {"model": model["name"], **{k: v for k, v in model.items() if k != "name"}, **family, "code": code}
    return Identity(spec, {k: v for k, v in params.items() if v is not None})  # absent, never "None" or "n/a"


def register() -> None:
    """The schema, and one ``method`` option per installed ``washexp.methods`` entry point that
    is not one of washexp's own (:data:`washexp.compaction.methods.table.NAMES`): ``method=<name>`` then
    selects it like S or H, sweeps included (``method=S,H,<name>``); the same for ``washer`` and
    ``washexp.washers``. Only metadata is read (:func:`washexp.plugins.installed`): no plugin is
    imported here."""
    from washexp.compaction.methods.table import NAMES

    store = ConfigStore.instance()
    store.store(name="washexp_schema", node=Config)
    store.store(group="model", name="local_schema", node=LocalModelConfig)
    for name, ep in plugins.installed("method").items():
        if name not in (*NAMES, plugins.PLUGIN):
            node = {"name": name, "target": ep.value, "args": None}
            store.store(group="method", name=name, node=node, package="compaction.method")
    for name in plugins.installed("washer"):
        if name not in (*BUILTIN_WASHERS, plugins.PLUGIN):
            store.store(group="washer", name=name, node={"name": name}, package="wash.washer")


BUILTIN_WASHERS = ("reference", "command", "coalwash", "plain")
"""The washers ``conf/washer/`` defines (beside ``plugin``); an entry point never shadows one."""


# At import, not in register(): a parallel launcher's worker resolves hydra.sweep.dir having only
# unpickled its job (which imports washexp.app, and so this module). Cached per config, as ${now:}.
OmegaConf.register_new_resolver("washexp.new_dir", new_dir, use_cache=True, replace=True)
