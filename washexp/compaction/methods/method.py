"""A compaction method as the pipeline sees it: what it needs and what it is, never its name.

A method answers four questions (:class:`Method`):

- ``whole``: is its context fixed by the task alone (Top N ignored, no frozen parts)? Full's is the
  whole collection history, the closed book's (``none``) no evidence at all; ``context(task)``
  builds it;
- ``part(cache, task, g, allowance)``: its body for one generation, made once per task and
  generation and kept by the :class:`~washexp.compaction.frozen.FrozenCache` (a ``str`` for an
  unchecked method, a :class:`~washexp.compaction.methods.checkpoint.Checkpoint` for a checked one);
- ``checked``: does it answer to H's validity rule (the body within the allowance, the body alone
  under the ceiling, fewer actual input tokens than Full)? S does not: whether it shrinks is
  reported, not enforced; H and every plugin do;
- ``spec``: what it was built from (name, implementation, a plugin's target, args, package and
  version), logged as params and hashed into the condition's identity.

Full, the closed book (``none``), S and H are four small implementations here; a plugin
(``washexp.compaction.methods.plugin``) is a fifth, built from any importable factory. Top N (the Jev
ranking) is the arm's, not the method's: every non-whole method is fused with its Top-N units.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from washexp.compaction.frozen import h_impl_for
from washexp.compaction.inputs.context import closed_book_context, full_context
from washexp.compaction.methods import h_hermes, h_native
from washexp.compaction.methods.checkpoint import Checkpoint

if TYPE_CHECKING:
    from washexp.compaction.backends.roles import Roles
    from washexp.compaction.frozen import FrozenCache, Made
    from washexp.compaction.inputs.context import Context
    from washexp.compaction.inputs.fixtures import Task


class Method(Protocol):
    # read-only properties: the methods are frozen dataclasses
    @property
    def name(self) -> str: ...

    @property
    def whole(self) -> bool: ...

    @property
    def checked(self) -> bool: ...

    @property
    def role(self) -> str:
        """The name its failures and invalid contexts carry (``S``, ``H``, a plugin's name)."""
        ...

    @property
    def spec(self) -> dict[str, Any]: ...

    def part(self, cache: FrozenCache, task: Task, generation: int, allowance: int) -> Made: ...

    def context(self, task: Task) -> Context:
        """A whole method's context (only asked when ``whole``)."""
        ...

    def describe(self, cp: Checkpoint | None) -> dict[str, Any]:
        """A checked method's body, as a condition's ``summary/g<N>.checkpoint.json`` records it."""
        ...


@dataclass(frozen=True)
class Full:
    name: str = "full"
    whole: bool = True
    checked: bool = False
    role: str = "Full"
    spec: dict[str, Any] = field(default_factory=lambda: {"name": "full"})

    def part(self, cache, task, generation, allowance):  # pragma: no cover - never asked: whole
        raise NotImplementedError("Full has no body")

    def context(self, task):
        return full_context(task)

    def describe(self, cp):  # pragma: no cover
        return {}


@dataclass(frozen=True)
class ClosedBook:
    """The closed-book control (``method=none``): the system prompt, the task and the follow-up,
    no evidence and no summary. What a reader answers here it answers without the evidence."""

    name: str = "none"
    whole: bool = True
    checked: bool = False
    role: str = "none"
    spec: dict[str, Any] = field(default_factory=lambda: {"name": "none"})

    def part(self, cache, task, generation, allowance):  # pragma: no cover - never asked: whole
        raise NotImplementedError("the closed book has no body")

    def context(self, task):
        return closed_book_context(task)

    def describe(self, cp):  # pragma: no cover
        return {}


@dataclass(frozen=True)
class Summary:
    """S: one summary of every source unit within the allowance (the ``summarize`` role)."""

    name: str = "S"
    whole: bool = False
    checked: bool = False
    role: str = "S"
    spec: dict[str, Any] = field(default_factory=lambda: {"name": "S"})

    def part(self, cache, task, generation, allowance):
        return cache.summary(task, generation, allowance)

    def context(self, task):  # pragma: no cover - never asked: not whole
        raise NotImplementedError("S is fused with its Top-N units")

    def describe(self, cp):  # pragma: no cover - unchecked
        return {}


@dataclass(frozen=True)
class Checkpointed:
    """H: the Hermes context checkpoint, ``native`` (the study's) or ``hermes`` (as installed)."""

    impl: str = "native"
    name: str = "H"
    whole: bool = False
    checked: bool = True
    role: str = "H"

    @property
    def spec(self) -> dict[str, Any]:
        return {"name": "H", "h_impl": self.impl}

    def part(self, cache, task, generation, allowance):
        return cache.checkpoint(task, generation, allowance, self.impl)

    def context(self, task):  # pragma: no cover - never asked: not whole
        raise NotImplementedError("H is fused with its Top-N units")

    def describe(self, cp):
        if cp is None:
            return {"impl": self.impl}
        return {
            "impl": self.impl,
            "protocol": h_native.PROTOCOL if self.impl == "native" else h_hermes.protocol(),
            "source_sha256": h_hermes.source_sha256() if self.impl == "hermes" else None,
            **attempts_record(cp),
        }


def attempts_record(cp: Checkpoint) -> dict[str, Any]:
    """A checked body's validity and attempts, as every checked method records them."""
    return {"valid": cp.valid, "failure": cp.failure, "attempts": [asdict(a) for a in cp.attempts]}


BUILTINS = {cls.name: cls for cls in (Full, ClosedBook, Summary, Checkpointed)}
"""The study's methods and the closed-book control by name (each declared in
:data:`washexp.compaction.methods.table.METHODS`, which builds them through :func:`from_config`)."""


def builtin(name: str, h_impl: str = "native") -> Method:
    """Full, the closed book, S or H (``h_impl``: H's implementation, checked by ``frozen.h_impl_for``)."""
    return Checkpointed(h_impl) if BUILTINS[name] is Checkpointed else BUILTINS[name]()


def from_config(config: Any, roles: Roles) -> Method:
    """Full, the closed book, S or H as the ``method`` config node sets it; H's implementation is
    checked against the roles (``hermes`` needs hermes-agent and a model) before anything runs."""
    return builtin(config.name, h_impl_for(roles, config.h_impl) if BUILTINS[config.name] is Checkpointed else "native")
