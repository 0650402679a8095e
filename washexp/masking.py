"""Secrets: which environment variables hold one, and their values masked out of what is written.

One rule, used by every writer. A variable holds a secret when its name ends in ``_API_KEY`` or
``_TOKEN`` (or is ``API_KEY``/``TOKEN``), contains ``SECRET`` (any case), or was declared
(:func:`declare`: the configured ``endpoint.api_key_env``). Any value of such a variable in
the environment is replaced by ``***`` (:func:`mask`) in every message, tag, param, artifact
and log line before it is written, whatever an endpoint echoed back. Values shorter than
:data:`MIN_LEN` characters are left alone: masking ``1`` or ``EMPTY`` everywhere would corrupt
the data, and so short a value is no credential.

The writers that go through it: the tracking writer (params, tags, artifacts, tables), the model
recordings, Python logging (a record factory: Hydra's job log too) and the process's own
stdout/stderr (:func:`guarded_streams`, which also turns a closed pipe, ``washexp ... | head``,
into silence instead of a ``BrokenPipeError`` traceback, so the command ends with its own exit
code). The command washer's environment leaves these variables out (:func:`clean_env`).
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

MASK = "***"
MIN_LEN = 8
_NAME = re.compile(r"(?:^|_)(?:API_KEY|TOKEN)$|SECRET", re.IGNORECASE)
_declared: set[str] = set()
_verdicts: dict[str, bool] = {}
"""Each variable name's :func:`is_secret`, decided once (a sweep reads the environment for every
record it writes: the name's pattern was half of that); :func:`declare` decides its name again."""


def declare(name: str) -> None:
    """``name`` holds a secret from now on in this process (a configured key's variable); its log
    records are masked from now on too (a parallel launcher's worker runs no ``guarded_streams``)."""
    if name:
        _declared.add(name)
        _verdicts.pop(name, None)
    mask_logging()


def is_secret(name: str) -> bool:
    verdict = _verdicts.get(name)
    if verdict is None:
        verdict = _verdicts[name] = name in _declared or bool(_NAME.search(name))
    return verdict


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """The values to mask, longest first (a key holding another is masked whole)."""
    env = os.environ if env is None else env
    found = {v for k, v in env.items() if len(v) >= MIN_LEN and is_secret(k)}
    return sorted(found, key=len, reverse=True)


def mask(text: str, values: list[str] | None = None) -> str:
    """``values``: :func:`secret_values` taken once for a batch of writes (one run's params, tags
    and artifacts); by default read from the environment now."""
    for value in secret_values() if values is None else values:
        text = text.replace(value, MASK)
    return text


def mask_bytes(data: bytes, values: list[str] | None = None) -> bytes:
    for value in secret_values() if values is None else values:
        data = data.replace(value.encode("utf-8"), MASK.encode())
    return data


def clean_env(env: Mapping[str, str], allowed: Iterable[str] = ()) -> dict[str, str]:
    """``env`` without its secret variables, except those named in ``allowed``."""
    keep = set(allowed)
    return {k: v for k, v in env.items() if k in keep or not is_secret(k)}


# -- writers that are not ours: logging and the standard streams ------------------------------


class _MaskingFactory:
    """A log record factory that masks what ``previous`` makes (a class: installed once is known)."""

    def __init__(self, previous: Callable[..., logging.LogRecord]) -> None:
        self.previous = previous

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        record = self.previous(*args, **kwargs)
        values = secret_values()  # once for the record's message, traceback and stack
        if not values:
            return record
        try:
            record.msg, record.args = mask(record.getMessage(), values), None
        except (TypeError, ValueError):  # a bad format: logging reports it as it would have
            return record
        if record.exc_info and not record.exc_text:
            record.exc_text = mask(logging.Formatter().formatException(record.exc_info), values)
        if record.stack_info:
            record.stack_info = mask(record.stack_info, values)
        return record


def mask_logging() -> None:
    """Every log record's message and traceback masked, whichever handler writes it (once)."""
    factory = logging.getLogRecordFactory()
    if not isinstance(factory, _MaskingFactory):
        logging.setLogRecordFactory(_MaskingFactory(factory))


class _Guarded:
    """A standard stream whose writes are masked, and that a closed pipe silences: a reader
    that went away (``| head``) ends the output, never the command."""

    def __init__(self, stream, binary: bool = False):
        self._stream, self._binary = stream, binary

    def write(self, data):
        try:
            return self._stream.write(mask_bytes(bytes(data)) if self._binary else mask(data))
        except BrokenPipeError:
            self._silence()
            return len(data)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._silence()

    @property
    def buffer(self):
        return _Guarded(self._stream.buffer, binary=True)

    def _silence(self) -> None:
        """Point the descriptor at /dev/null: what is still buffered, and any later write, goes
        nowhere instead of raising again (also at the interpreter's last flush)."""
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)
        except (OSError, ValueError):  # not a real descriptor (a test's capture)
            pass

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextmanager
def guarded_streams() -> Iterator[None]:
    """For one command: stdout and stderr masked and pipe-safe, log records masked."""
    mask_logging()
    previous = sys.stdout, sys.stderr
    sys.stdout = previous[0] if isinstance(previous[0], _Guarded) else _Guarded(previous[0])
    sys.stderr = previous[1] if isinstance(previous[1], _Guarded) else _Guarded(previous[1])
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        sys.stdout, sys.stderr = previous
