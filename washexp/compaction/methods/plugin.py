"""Compaction methods from outside washexp: any importable factory, or an installed entry point.

A plugin is a factory ``factory(**args)`` returning an object with ``compact(request) -> str``:
given a :class:`MethodRequest` (the task's query, its source units in order with their token
counts, the allowance, the generation, and ``model``: the configured model through the recorder,
or None offline) it returns the summary body that washexp fuses with the Jev Top-N units in the
``Summary:`` carrier. An object may carry ``name`` (the arm's name in runs and records).

It answers to H's validity rule (``method.Method.checked``): one attempt; a body over the
allowance, an empty body, a body alone over the ceiling or not fewer input tokens than Full is an
*invalid* context (zero credit, recorded); a body that is not a string or a ``compact`` that
raises is a *failed* context (zero credit, recorded), never a traceback. An unreachable model
(``ModelError``) stops the run as it does for S and H. A factory that cannot be loaded, raises or
returns the wrong type is a one-line :class:`ConfigError` (exit 2) raised while the arm is planned.

Where a plugin comes from: ``method=plugin method.target=pkg.module:factory method.args={...}``,
or a name installed under the ``washexp.methods`` entry-point group (``method=<name>``; the
config store lists every installed name as a ``method`` option, see ``config.register``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from washexp import plugins
from washexp.compaction.frozen import Made
from washexp.compaction.methods.checkpoint import Checkpoint, generate
from washexp.compaction.methods.method import attempts_record
from washexp.errors import ConfigError, ModelError, first_line
from washexp.hashing import canonical_json
from washexp.tokens import count


@dataclass(frozen=True)
class SourceUnit:
    index: int
    text: str
    """The unit as a fused context renders it (``[tool {args}]`` then the tool result)."""
    tokens: int
    """``text`` in Qwen tokens, as the allowance counts."""


@dataclass(frozen=True)
class MethodRequest:
    task_id: str
    query: str
    units: tuple[SourceUnit, ...]
    allowance: int
    """The body must fit in this many Qwen tokens, or the context is invalid."""
    generation: int
    model: Callable[[list[dict]], str] | None = None
    """Chat messages -> the configured model's reply text, recorded and replayed like S and H;
    None on the offline reference backend."""


@dataclass(frozen=True)
class Plugin:
    """A plugin as the pipeline sees it (see :class:`washexp.compaction.methods.method.Method`)."""

    name: str
    compactor: Any = field(compare=False)
    spec: dict[str, Any]
    whole: bool = False
    checked: bool = True

    @property
    def role(self) -> str:
        return self.name

    def part(self, cache, task, generation: int, allowance: int) -> Made[Checkpoint]:
        key = ("plugin", canonical_json(self.spec), task.digest, generation, allowance)
        return cache.once(key, lambda: self._make(cache.roles, task, generation, allowance))

    def context(self, task):  # pragma: no cover - never asked: not whole
        raise NotImplementedError("a plugin's context is its part")

    def describe(self, cp: Checkpoint | None) -> dict[str, Any]:
        base = {"impl": "plugin", "plugin": self.spec}
        return base if cp is None else {**base, **attempts_record(cp)}

    def _make(self, roles, task, generation: int, allowance: int) -> Made[Checkpoint]:
        keys: list[str] = []
        units = tuple(SourceUnit(u.index, u.render(), count(u.render())) for u in task.units)
        chat = _chat(roles, task.id, generation, self.name, keys)
        request = MethodRequest(task.id, task.query, units, allowance, generation, chat)

        def body_for(_k: int, _target: int, _words: int) -> str | None:
            body = self.compactor.compact(request)
            if body is not None and not isinstance(body, str):
                raise TypeError(f"compact() returned {type(body).__name__}, expected str")
            return body.strip() if body else None

        try:
            cp = generate(allowance, body_for, lambda _b: None, label=self.name, attempts=1, keys=keys)
        except ModelError:
            raise
        except (
            Exception
        ) as err:  # the plugin boundary: a third party's bug is its condition's zero, not the sweep's end
            return Made(None, f"{self.name}: {first_line(err, named=True)}", tuple(keys))
        return Made(cp, None, cp.keys)


def _chat(roles, task_id: str, generation: int, role: str, keys: list[str]):
    if roles.chat is None:
        return None

    def chat(messages: list[dict]) -> str:
        reply = roles.chat(task_id, generation, messages, role)
        if reply.key:
            keys.append(reply.key)
        return reply.text

    return chat


def build(name: str, target: str | None, args: dict[str, Any], dist: metadata.Distribution | None = None) -> Plugin:
    """The plugin ``method.name`` / ``method.target`` names (an installed name's target and
    ``dist`` found by :func:`washexp.compaction.methods.table.method_for`), built and checked; raises
    :class:`ConfigError` (one line naming the target) before anything runs."""
    if not target:
        raise ConfigError("method=plugin needs method.target=package.module:factory")
    where = f"method.target={target}"
    factory = plugins.factory(where, target)
    compactor = plugins.build(where, factory, dict(args or {}), "compact(request)")
    if name == plugins.PLUGIN:
        name = str(getattr(compactor, "name", "") or target.rpartition(":")[2])
    origin = plugins.provenance(target, factory, dist)
    spec = {"name": name, "target": target, "args": dict(args or {}), **origin}  # a new version is a new condition
    return Plugin(name, compactor, spec)
