"""The Hydra application behind ``run.py``.

``main(argv)`` does two things before Hydra sees the command line:

- range sugar: ``k=a..b`` becomes ``k=range(a,b+1)``, an inclusive integer sweep (Hydra alone
  would read ``0..5`` as the string ``"0..5"``);
- one-line errors: a bad override, config or fixture ends in one line on stderr and exit 2
  (usage) or 1 (anything else), instead of Hydra's multi-line report.

Each Hydra job is one arm of one benchmark; the benchmark's runner does the rest.
"""

from __future__ import annotations

import logging
import os
import re
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from washexp import PROJECT_ROOT
from washexp.config import register
from washexp.errors import ModelError, WashexpError

_RANGE = re.compile(r"^([\w.]+)=(-?\d+)\.\.(-?\d+)$")
log = logging.getLogger("washexp")


def expand_ranges(args: list[str]) -> list[str]:
    """Rewrite each ``key=a..b`` override into Hydra's ``key=range(a,b+1)``."""
    out = []
    for arg in args:
        m = _RANGE.match(arg)
        if m:
            key, lo, hi = m.group(1), int(m.group(2)), int(m.group(3))
            if hi < lo:
                raise WashexpError(f"{arg}: empty range ({lo} > {hi})")
            arg = f"{key}=range({lo},{hi + 1})"
        out.append(arg)
    return out


def _job_info():
    from washexp.compaction.study import JobInfo

    hc = HydraConfig.get()
    multirun = hc.mode.name == "MULTIRUN"
    sweep_dir = hc.sweep.dir if multirun else hc.run.dir
    return JobInfo(overrides=hc.job.override_dirname or "(defaults)", sweep=os.path.relpath(sweep_dir, PROJECT_ROOT))


_job_errors: list[str] = []
"""One line per job that ended in a user error. Kept here rather than raised: Hydra would print
its own report, and a multirun goes on with its other jobs..."""
_endpoint_down: list[str] = []
"""...unless the model endpoint is unusable: then the remaining jobs are skipped."""


@hydra.main(config_path=str(PROJECT_ROOT / "conf"), config_name="config", version_base="1.3")
def _hydra_job(cfg: DictConfig) -> None:
    from washexp.benchmarks import run_benchmark

    if _endpoint_down:
        return  # the sweep's endpoint failed in an earlier job: every job would wait and fail alike
    try:
        run_benchmark(OmegaConf.to_object(cfg), _job_info())
    except ModelError as err:
        _endpoint_down.append(str(err))
        _job_errors.append(str(err))
    except WashexpError as err:
        _job_errors.append(str(err))
    except OmegaConfBaseException as err:  # e.g. a mandatory value left unset
        _job_errors.append(f"bad config: {one_line(err)}")


def one_line(err: BaseException) -> str:
    """A Hydra/OmegaConf/washexp error as one line a user can act on."""
    parts = [str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__]
    if getattr(err, "full_key", None):  # OmegaConf knows which key it is about
        parts.insert(0, err.full_key)
    cause = err.__cause__
    if cause is not None and str(cause).strip():
        parts.append(str(cause).strip().splitlines()[0])
    text = str(err)
    if "Available options" in text:
        options = re.findall(r"^\s+(\S+)$", text.split("Available options", 1)[1], flags=re.M)
        parts.append("available: " + ", ".join(o for o in options if not o.startswith("washexp_")))
    return ": ".join(dict.fromkeys(parts))


def main(argv: list[str] | None = None) -> int:
    from hydra.errors import HydraException

    args = sys.argv[1:] if argv is None else argv
    register()
    os.environ.setdefault("HYDRA_FULL_ERROR", "1")  # let errors reach us; we print one line
    try:
        sys.argv = [sys.argv[0], *expand_ranges(args)]
        _hydra_job()
    except (HydraException, OmegaConfBaseException) as err:
        print(f"washexp: bad config: {one_line(err)}", file=sys.stderr)
        return 2
    except WashexpError as err:
        _job_errors.append(str(err))
    for line in dict.fromkeys(_job_errors):
        print(f"washexp: {line}", file=sys.stderr)
    return 1 if _job_errors else 0
