"""The haystack: files of an agent's investigation, written from our own templates.

Each source file has a kind (a config, a log, code, command output, notes) and a path; its filler
lines are drawn from a ``random.Random`` the caller owns. Filler never writes a planted fact's key
(those come from ``washexp.tasks.facts``'s own stems), so no filler line can prove a fact.
"""

from __future__ import annotations

import random

FILE_KINDS = ("config", "log", "code", "output", "notes")
SERVICES = ("ledger", "billing", "ingest", "search", "notifier", "scheduler", "gateway", "reports")
_COMPONENTS = ("http", "db", "queue", "cache", "auth", "worker", "cron", "rpc")
_VERBS = ("opened", "closed", "retried", "skipped", "flushed", "renewed", "parsed", "queued")
_NOUNS = ("session", "batch", "socket", "lease", "snapshot", "cursor", "bucket", "segment")
_OPTS = ("verbosity", "color", "locale", "banner", "theme", "motd", "pager", "editor")


def path_for(rng: random.Random, kind: str, service: str, i: int) -> str:
    """A file path of ``kind``; ``i`` (the unit's index) keeps paths distinct within a task."""
    return {
        "config": f"conf/{service}-{i:02d}.ini",
        "log": f"logs/{service}-worker-{i:02d}.log",
        "code": f"src/{service}/{rng.choice(_NOUNS)}_{i:02d}.py",
        "output": f"out/check-{i:02d}.txt",
        "notes": f"notes/{service}-{i:02d}.md",
    }[kind]


def backup_path(path: str) -> str:
    """The backup copy of a file: the place of near misses."""
    return path + ".bak"


def line(rng: random.Random, kind: str, n: int) -> str:
    """Filler line ``n`` of a file of ``kind``."""
    if kind == "config":
        return f"{rng.choice(_OPTS)}_{rng.choice(_COMPONENTS)} = {rng.randrange(1, 60)}"
    if kind == "log":
        stamp = f"2026-09-{rng.randrange(1, 29):02d} {rng.randrange(24):02d}:{rng.randrange(60):02d}"
        level, part = rng.choice(("INFO", "INFO", "DEBUG", "WARN")), rng.choice(_COMPONENTS)
        what = f"{rng.choice(_VERBS)} {rng.choice(_NOUNS)} #{rng.randrange(100, 999)}"
        return f"{stamp} {level} {part}: {what} in {rng.randrange(1, 900)}ms"
    if kind == "code":
        if n % 6 == 0:
            return f"def {rng.choice(_VERBS)}_{rng.choice(_NOUNS)}(ctx, limit={rng.randrange(1, 20)}):"
        return f"    {rng.choice(_NOUNS)} = ctx.{rng.choice(_COMPONENTS)}.{rng.choice(_VERBS)}({rng.randrange(1, 99)})"
    if kind == "output":
        outcome = rng.choice(("PASSED", "PASSED", "PASSED", "SKIPPED"))
        return f"tests/test_{rng.choice(_NOUNS)}.py::test_{rng.choice(_VERBS)}_{rng.randrange(1, 99)} {outcome}"
    what = f"the {rng.choice(_NOUNS)} of {rng.choice(_COMPONENTS)}"
    return f"- {what} was {rng.choice(_VERBS)} on day {rng.randrange(1, 30)}"
