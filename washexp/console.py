"""What a ``run.py`` command shows on the terminal, and what only its log file gets.

- The console shows results and problems only: a record logged with :func:`result` (an arm's or
  a measurement's closing line) or at WARNING and above. Every other line (Hydra's job list, a
  condition done, a retry) goes to the log file alone: Hydra's job log
  (``multirun/<sweep>/<job>/run.log``) or, for Hydra's own lines, ``multirun/<sweep>/multirun.log``.
  ``conf/config.yaml`` puts :class:`Console` in place of Hydra's console handlers.
- On a terminal each arm (or measurement) has a live progress bar with the time left
  (:func:`arm_bar`, tqdm); without one (piped, redirected, CI) there is no bar, so a sweep prints
  one line per arm plus its closing summary. :func:`live` decides, from the streams alone.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import Any

RESULT = "washexp_result"
"""The attribute :func:`result` sets on a log record: the console shows it."""


def result(logger: logging.Logger, msg: str, *args: Any) -> None:
    """Log a result line: the console shows it (and the log file keeps it)."""
    logger.info(msg, *args, extra={RESULT: True})


def shown(record: logging.LogRecord) -> bool:
    """Whether the console shows a record: a result, a warning or an error."""
    return record.levelno >= logging.WARNING or bool(getattr(record, RESULT, False))


def live(stdout: Any = None, stderr: Any = None, env: Mapping[str, str] | None = None) -> bool:
    """Whether to draw progress bars: both streams are a terminal, and neither CI nor a dumb
    terminal says otherwise (a bar redrawn in a log file or a CI page is noise)."""
    env = os.environ if env is None else env
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    if env.get("CI", "").lower() in ("1", "true") or env.get("TERM") == "dumb":
        return False
    return all(_isatty(s) for s in (stdout, stderr))


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no such method, or a closed stream
        return False


class Console(logging.StreamHandler):
    """Hydra's console handler, replaced: results and problems only (:func:`shown`), written above
    any live bar so a bar is never torn by a line."""

    def __init__(self, stream: Any = None) -> None:
        super().__init__(stream)
        self.addFilter(shown)

    def emit(self, record: logging.LogRecord) -> None:
        if not _BARS:
            return super().emit(record)
        try:
            from tqdm import tqdm

            tqdm.write(self.format(record), file=self.stream)
        except Exception:  # logging's own convention: a handler never raises
            self.handleError(record)


_BARS: list[Any] = []
"""The bars open in this process (at most two arms overlap)."""


class ArmBar:
    """One arm's progress: a live bar on a terminal (its conditions done of planned, the time
    left), else nothing; each step's line goes to the log file either way."""

    def __init__(self, label: str, total: int, unit: str, logger: logging.Logger) -> None:
        self._log, self._bar = logger, None
        if live():
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=label, unit=f" {unit}", leave=False, file=sys.stderr, dynamic_ncols=True)
            _BARS.append(self._bar)

    def step(self, done: int, line: str) -> None:
        """``done`` units of the arm are over (reused ones included); ``line`` is for the log."""
        self._log.info("%s", line)
        if self._bar is not None:
            self._bar.update(max(0, done - self._bar.n))

    def close(self) -> None:
        """Remove the bar (its arm's result line is printed next); a second call does nothing."""
        if self._bar is not None:
            self._bar.close()
            _BARS.remove(self._bar)
            self._bar = None
