"""Hydra callbacks for parallel launchers (``hydra/launcher=joblib``, Ray, submitit).

:class:`PrepareStore` opens the tracking store and creates the experiment once, in the launching
process, before any job starts: jobs in several processes racing to migrate a fresh SQLite schema
("duplicate column name") or to create one experiment is a known MLflow failure. Jobs then find
both ready. Under the basic launcher every job runs in this process and shares one tracker, so
there is no race, and the jobs' tracker sets the store up beside the first model calls instead.
"""

from __future__ import annotations

import logging
from pathlib import Path

from hydra.experimental.callback import Callback

from washexp.errors import WashexpError, first_line

log = logging.getLogger("washexp")
BASIC_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"


def project_root(config) -> Path:
    """The project: the folder holding the primary ``conf/`` (``washexp.app`` points Hydra at it)."""
    for source in config.hydra.runtime.config_sources:
        if source.provider == "main":
            return Path(source.path.removeprefix("file://")).resolve().parent
    raise LookupError("no primary config source")


class PrepareStore(Callback):
    def on_multirun_start(self, config, **kwargs) -> None:
        from washexp.tracking import open_tracker
        from washexp.tracking.server import unanswered

        t = config.tracking
        if config.hydra.launcher.get("_target_") == BASIC_LAUNCHER:  # one process: no race to prevent
            return
        if not t.enabled or unanswered(t.uri):  # a tracking server that does not answer: the job says so
            return
        try:
            # closed: its set-up (a thread of its own) has ended before any job starts
            open_tracker(True, t.uri, t.artifacts, t.experiment or config.benchmark.name, project_root(config)).close()
        except WashexpError:  # an empty, damaged or read-only store: each job says so in its one line
            return
        except (OSError, LookupError) as err:  # a folder it cannot make, no primary config source: the jobs
            # open the store themselves and report the failure as they always do; anything else is a bug
            log.warning("could not prepare the tracking store before the jobs: %s", first_line(err))
