"""What model calls cost in money, and the budget that stops a sweep before it spends too much.

- :class:`Price`: ``endpoint.price.*`` in US dollars per million tokens. A live call costs
  ``(input - cached) * input + cached * cached_input + output * output`` from the usage the
  endpoint reported; a call whose reply reports no usage has no cost (``None``, counted apart). A
  replayed call costs nothing: it was paid for when it was recorded.
- :class:`Budget`: ``endpoint.budget_usd``, shared by every request of the command whatever thread
  sends it. Before a request is sent its estimate is *reserved* (its input counted with
  :func:`washexp.tokens.count_chat`, at the input price, plus its output cap ``max_tokens`` at the
  output price: what the call can cost at most, up to the counting); once the reply is in, the
  reservation is *settled* with the call's actual cost (its estimate when the reply reports no
  usage; 0 when the call failed). A request whose estimate, added to what is spent and reserved,
  would exceed the budget is never sent: :class:`BudgetExceeded`, a
  :class:`~washexp.errors.ModelError`, so the sweep ends as it does on an endpoint that is gone
  (exit 1, one line), and every run it stops carries the tag ``stopped=budget``.
- :class:`Charge`: what a condition's calls cost (``cost_usd``, ``calls_live``,
  ``calls_replayed``), as :meth:`~washexp.models.recorder.Recorder.charge` counts it.
- :func:`call_row`: what one call spent when it was made, a row of its run's ``calls.json`` table
  (:data:`CALLS_TABLE`): a record over several sweeps counts each call once by its key.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

from washexp.errors import ConfigError, ModelError
from washexp.models.base import ChatRequest, ChatResponse

STOP_TAG = "stopped"
STOP_BUDGET = "budget"
MTOK = 1_000_000


def usd(value: float) -> str:
    """Money as one line shows it: dollars to the millionth."""
    return f"${value:,.6f}"


@dataclass(frozen=True)
class Price:
    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float | None = None

    def cost(self, reply: ChatResponse) -> float | None:
        """The reply's cost from its reported usage; None when it reports none."""
        if reply.prompt_tokens is None or reply.completion_tokens is None:
            return None
        cached = min(reply.cached_tokens or 0, reply.prompt_tokens)
        cached_price = self.input_per_mtok if self.cached_input_per_mtok is None else self.cached_input_per_mtok
        return (
            (reply.prompt_tokens - cached) * self.input_per_mtok
            + cached * cached_price
            + reply.completion_tokens * self.output_per_mtok
        ) / MTOK

    def estimate(self, request: ChatRequest) -> float:
        """The most ``request`` can cost: its input (Qwen tokens of its messages) and its output cap."""
        from washexp.tokens import count_chat

        if request.max_tokens is None:
            raise ModelError("endpoint.budget_usd: a request without an output cap (max_tokens) cannot be held to it")
        tokens_in = count_chat(list(request.messages))
        return (tokens_in * self.input_per_mtok + request.max_tokens * self.output_per_mtok) / MTOK


def price_of(config) -> Price | None:
    """``endpoint.price`` as a :class:`Price` (None when no price is set); half a price is a usage error."""
    if config is None:
        return None
    given = {"input_per_mtok": config.input_per_mtok, "output_per_mtok": config.output_per_mtok}
    cached = config.cached_input_per_mtok
    if all(v is None for v in given.values()) and cached is None:
        return None
    missing = [k for k, v in given.items() if v is None]
    if missing:
        raise ConfigError(f"endpoint.price: set {' and '.join(f'endpoint.price.{k}' for k in missing)} too")
    for name, value in {**given, "cached_input_per_mtok": cached}.items():
        if value is not None and (not math.isfinite(value) or value < 0):
            raise ConfigError(f"endpoint.price.{name}={value}: must be a number >= 0")
    return Price(float(given["input_per_mtok"]), float(given["output_per_mtok"]), cached)


class BudgetExceeded(ModelError):
    """The next call would take the sweep past ``endpoint.budget_usd``; it was not sent."""

    tags = {STOP_TAG: STOP_BUDGET}
    """Set on every run this error ends (``Run.fail``)."""


class Budget:
    """``endpoint.budget_usd`` over every live call of a command (see the module doc)."""

    def __init__(self, limit_usd: float):
        self.limit = limit_usd
        self.spent = 0.0
        self.reserved = 0.0
        self._lock = threading.Lock()
        self._stopped: BudgetExceeded | None = None
        self._open = 0  # reservations not yet settled

    def reserve(self, estimate: float, what: str) -> float:
        """Hold ``estimate`` for a call about to be sent, or raise :class:`BudgetExceeded`. Once one
        call is refused, every later one is too: the sweep is stopping."""
        with self._lock:
            if self._stopped is not None:
                raise BudgetExceeded(str(self._stopped))
            if self.spent + self.reserved + estimate > self.limit:
                flight = f" (+{usd(self.reserved)} in flight)" if self.reserved else ""
                self._stopped = BudgetExceeded(
                    f"endpoint.budget_usd={self.limit:g} reached: {usd(self.spent)} spent{flight}; the next call "
                    f"({what}, up to {usd(estimate)}) would exceed it and was not sent"
                )
                raise self._stopped
            self.reserved += estimate
            self._open += 1
            return estimate

    def settle(self, held: float, cost: float) -> None:
        """A reserved call is over: ``cost`` is what it cost (0 when it failed)."""
        with self._lock:
            self._open -= 1
            self.reserved = max(0.0, self.reserved - held) if self._open else 0.0  # no float residue
            self.spent += cost


_BUDGETS: dict[float, Budget] = {}
_BUDGETS_LOCK = threading.Lock()


def budget_for(limit_usd: float | None, price: Price | None) -> Budget | None:
    """The command's budget of ``limit_usd`` (one object, so every recorder of the command shares
    its spend); a budget needs a price (usage error otherwise)."""
    if limit_usd is None:
        return None
    if not math.isfinite(limit_usd) or limit_usd < 0:
        raise ConfigError(f"endpoint.budget_usd={limit_usd}: must be a number >= 0")
    if price is None:
        raise ConfigError(
            "endpoint.budget_usd needs a price: set endpoint.price.input_per_mtok and endpoint.price.output_per_mtok"
        )
    with _BUDGETS_LOCK:
        return _BUDGETS.setdefault(float(limit_usd), Budget(float(limit_usd)))


def new_command() -> None:
    """A new command starts with nothing spent (a test may run several in one process)."""
    with _BUDGETS_LOCK:
        _BUDGETS.clear()


CALLS_TABLE = "calls.json"
"""The table of every call a run used (:func:`call_row` per recording key, in the order asked)."""


def call_row(key: str, record: dict) -> dict:
    """What the call recorded as ``record`` spent when it was made: its role, the tokens the
    endpoint reported (0 where it reported none) and the model's time (None when the recording
    lacks it: made before recordings timed their calls, or a refusal for length)."""
    response = record.get("response") or {}
    elapsed = record.get("elapsed_s")
    return {
        "key": key,
        "role": record.get("role") or "call",
        "prompt_tokens": int(response.get("prompt_tokens") or 0),
        "completion_tokens": int(response.get("completion_tokens") or 0),
        "cached_tokens": int(response.get("cached_tokens") or 0),
        "elapsed_s": None if elapsed is None else float(elapsed),
    }


@dataclass
class RoleSpend:
    """What one role's calls spent when they were made: as their recordings say (issue 49)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    """Prompt tokens the endpoint said its cache served (0 where it does not say)."""
    elapsed_s: float | None = 0.0
    """The model's time for them, retries included; None once a recording lacks it (made before
    recordings timed their calls, or a refusal for length)."""

    def add(self, row: dict) -> None:
        """Count one call (:func:`call_row`)."""
        self.calls += 1
        self.prompt_tokens += row["prompt_tokens"]
        self.completion_tokens += row["completion_tokens"]
        self.cached_tokens += row["cached_tokens"]
        elapsed = row["elapsed_s"]
        self.elapsed_s = None if self.elapsed_s is None or elapsed is None else self.elapsed_s + elapsed

    def metrics(self, role: str) -> dict[str, float]:
        """``role/<role>/<what>``: flat metrics a parent sums and the MLflow UI charts."""
        out = {
            f"role/{role}/{k}": float(v)
            for k, v in (
                ("calls", self.calls),
                ("prompt_tokens", self.prompt_tokens),
                ("completion_tokens", self.completion_tokens),
                ("cached_tokens", self.cached_tokens),
            )
        }
        if self.elapsed_s is not None:
            out[f"role/{role}/elapsed_s"] = round(self.elapsed_s, 3)
        return out


@dataclass(frozen=True)
class Charge:
    """What a set of calls cost: each counted once, live or replayed."""

    cost_usd: float | None
    """Money of the live calls; None when no price is set or a live reply reported no usage."""
    live: int = 0
    replayed: int = 0
    unpriced: int = 0
    """Live calls whose reply reported no usage (their cost is unknown)."""
    roles: dict[str, RoleSpend] = field(default_factory=dict)

    def metrics(self) -> dict[str, float]:
        """``cost_usd`` (absent when unknown), ``calls_live``, ``calls_replayed``, and each role's spend."""
        out = {"calls_live": float(self.live), "calls_replayed": float(self.replayed)}
        if self.cost_usd is not None:
            out["cost_usd"] = self.cost_usd
        for role, spend in sorted(self.roles.items()):
            out |= spend.metrics(role)
        return out


def sum_metrics(children: list[dict[str, float] | None]) -> dict[str, float]:
    """A parent's ``calls_live``, ``calls_replayed`` and ``cost_usd``: its children's sums; the
    cost is absent unless every child that counted calls has one (a failed child counts nothing)."""
    counted = [m for m in children if m is not None and "calls_live" in m]
    if not counted:
        return {}
    out = {k: float(sum(m[k] for m in counted)) for k in ("calls_live", "calls_replayed")}
    if all("cost_usd" in m for m in counted):
        out["cost_usd"] = math.fsum(m["cost_usd"] for m in counted)
    spent = {k for m in counted for k in m if k.startswith("role/")}
    for k in sorted(spent):  # a time is summed only where every child that spent in the role has one
        role = k.rsplit("/", 1)[0]
        had = [m for m in counted if f"{role}/calls" in m]
        if k.endswith("/elapsed_s") and any(k not in m for m in had):
            continue
        out[k] = math.fsum(m.get(k, 0.0) for m in had)
    return out
