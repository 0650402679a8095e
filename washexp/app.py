"""The Hydra application behind ``run.py``.

``main(argv, root)`` does three things before Hydra sees the command line:

- range sugar: ``k=a..b`` becomes ``k=range(a,b+1)``, an inclusive integer sweep (Hydra alone
  would read ``0..5`` as the string ``"0..5"``);
- short keys: ``topn=3`` sets ``compaction.topn`` (``config.SHORT_KEYS``), so the family's own
  settings stay short on the command line;
- one-line errors: a bad override, config or fixture ends in one line on stderr and exit 2;
  a job that could not finish (an unusable endpoint) in one line and exit 1.

Each Hydra job is one arm (or measurement) of one benchmark; the family's job function does the
rest. A compaction job returns once its arm's last conditions have started (the next job starts
beside them: ``runner.Schedule``); what is still running when Hydra is done is drained here, its
failures counted as the jobs' own. A :class:`~washexp.engine.sweep.Sweep` lives as long as the command:
what jobs share (roles, frozen summaries, the endpoint's fate, errors) is kept on it, not in
module globals; under a parallel launcher each worker process has its own, and reports back to
this one.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from washexp.config import SHORT_KEYS, SHORT_PREFIXES, Config, register
from washexp.engine.ledger import closing_lines
from washexp.engine.sweep import (
    INTERRUPTED,
    STOPS,
    TERMINATED,
    Sweep,
    raise_if_stopped,
    sigint_as_interrupt,
    sigterm_as_exit,
    watch_stops,
)
from washexp.errors import USAGE, ConfigError, ModelError, WashexpError, exit_code, fail, first_line
from washexp.inputs import check_config_tree
from washexp.masking import declare, guarded_streams
from washexp.models.cost import new_command
from washexp.registry import close_names, did_you_mean

HELP_FLAGS = {"--help", "-h"}
STOPPED = "stopped by {}: the finished runs are kept, and the same command resumes the rest"
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


def expand_short_keys(args: list[str]) -> list[str]:
    """``topn=3`` -> ``compaction.topn=3`` (see ``config.SHORT_KEYS``)."""
    out = []
    for arg in args:
        key, eq, value = arg.partition("=")
        sign = key[: len(key) - len(key.lstrip("+~"))]  # Hydra's +key, ++key, ~key
        key = key[len(sign) :]
        if eq and key in SHORT_KEYS:
            arg = f"{sign}{SHORT_KEYS[key]}={value}"
        elif eq:
            prefix = next((p for p in SHORT_PREFIXES if key.startswith(p)), None)
            arg = f"{sign}{SHORT_PREFIXES[prefix]}{key[len(prefix) :]}={value}" if prefix else arg
        out.append(arg)
    return out


def config_dirs(args: list[str], root: Path) -> list[Path]:
    """The folders Hydra reads configs from: the project's ``conf/`` and a ``--config-dir``/``-cd``."""
    folders = [root / "conf"]
    for i, arg in enumerate(args):
        if arg in ("--config-dir", "-cd") and i + 1 < len(args):
            folders.append(Path(args[i + 1]))
        elif arg.startswith("--config-dir="):
            folders.append(Path(arg.partition("=")[2]))
    return [f for f in folders if f.is_dir()]


def check_override_keys(args: list[str], root: Path) -> None:
    """A top-level key nothing reads (``metod=S``) is a usage error with a "did you mean", before
    Hydra composes anything. Known: the config's fields, its option groups (``conf/<group>/``),
    the short keys, and Hydra's own. ``+key`` adds a key: ``check_known_keys`` judges it later."""
    import dataclasses

    from washexp.config import Config

    known = [f.name for f in dataclasses.fields(Config)] + [p.name for p in (root / "conf").iterdir() if p.is_dir()]
    known += [*SHORT_KEYS, *(p.rstrip(".") for p in SHORT_PREFIXES), "hydra"]
    for arg in args:
        key, eq, _ = arg.partition("=")
        if not eq or arg.startswith(("-", "+", "~")):
            continue
        head = re.split(r"[./@]", key, maxsplit=1)[0]  # compaction.topn, hydra/launcher, model@pkg
        if head not in known:
            raise ConfigError(f"{arg}: no such config key {head!r}{did_you_mean(head, known)}")


@dataclass(frozen=True)
class JobInfo:
    """What Hydra knows about the job: kept as tags, never part of an identity."""

    overrides: str
    sweep: str
    cwd: Path
    """The directory the user ran from (Hydra's ``runtime.cwd``): a path a user gives is read from
    here, whatever the job's working directory is (``hydra.job.chdir``)."""


def _job_info(root: Path):
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    hc = HydraConfig.get()
    multirun = hc.mode is RunMode.MULTIRUN
    sweep_dir = hc.sweep.dir if multirun else hc.run.dir
    return JobInfo(
        overrides=hc.job.override_dirname or "(defaults)",
        sweep=os.path.relpath(sweep_dir, root),
        cwd=Path(hc.runtime.cwd),
    )


def _run_job(cfg, sweep: Sweep) -> None:
    from washexp.benchmarks import JOBS

    raise_if_stopped()
    if sweep.endpoint_down:
        return  # the sweep's endpoint failed in an earlier job: every job would wait and fail alike
    with _settled(sweep):
        config = check_job(cfg)
        declare(config.endpoint.api_key_env)  # its value is masked, and kept from a command washer
        _check_tracking_server(config.tracking, sweep)
        JOBS.get(config.benchmark.name)(config, _job_info(sweep.root), sweep)


def check_job(cfg) -> Config:
    """The job's config as washexp's typed tree, once every refusal its config alone decides has
    passed (keys, family, types, the family's own ``check``): nothing read, written or started. The
    sweeper runs it on every job of a sweep before the first (``hydra_plugins/washexp_sweeper``),
    so such a usage error in any job ends the sweep with exit 2 before any work."""
    from omegaconf import OmegaConf

    from washexp.benchmarks import CHECKS

    check_known_keys(cfg)
    check_family(cfg)
    config = OmegaConf.to_object(cfg)
    assert isinstance(config, Config)  # the tree is washexp_schema's (washexp.config.register)
    CHECKS.get(config.benchmark.name)(cfg)
    return config


FAMILY_NODES = ("compaction", "wash")


def check_family(cfg) -> None:
    """An option of the other family (``measurement=cycles`` under ``benchmark=wash``: the
    ``measurement`` group holds both families' options, each filling its own node) is a usage
    error naming it, before the half-filled node fails to compose."""
    mine = cfg.benchmark.name
    for other in FAMILY_NODES:
        node = cfg.get(other)
        if other != mine and node is not None and "measurement" in node:
            name = node.measurement.get("name")
            raise ConfigError(f"measurement={name} is the {other} benchmark's (benchmark={other}), not {mine}'s")


def unknown_keys(node, path: str = "") -> list[tuple[str, list[str]]]:
    """Keys of the composed config that its schema does not declare (``+metod=S`` adds one, and
    ``OmegaConf.to_object`` would keep it as a stray attribute nobody reads): each with the keys
    its node does declare. Free mappings (``method.args``, ``model.extra_body``, a washer's or a
    gauge's options) take any key."""
    import dataclasses

    from omegaconf import DictConfig, OmegaConf

    kind = OmegaConf.get_type(node)
    declared = [f.name for f in dataclasses.fields(kind)] if dataclasses.is_dataclass(kind) else None
    out = []
    for key in node:
        where = f"{path}.{key}" if path else str(key)
        if declared is not None and key not in declared:
            out.append((where, declared))
            continue
        child = node._get_node(key)
        if isinstance(child, DictConfig) and not child._is_none():
            out += unknown_keys(child, where)
    return out


def check_known_keys(cfg) -> None:
    """An unknown key is a usage error (exit 2), found before any work."""
    found = unknown_keys(cfg)
    if not found:
        return
    where, declared = found[0]
    name = where.rpartition(".")[2]
    known = declared + ([*SHORT_KEYS, *(p.rstrip(".") for p in SHORT_PREFIXES)] if "." not in where else [])
    hint = did_you_mean(name, known)
    raise ConfigError(f"{where}: no such config key{hint} (a +key override adds a key nothing reads)")


def _flush(sweep: Sweep) -> None:
    """A worker's runs stored before its job returns: at the worker's exit MLflow's own exit hook
    (its trace processor's shutdown) runs before ours, and a trace handed over then is dropped."""
    try:
        sweep.flush()
    except WashexpError as err:  # the store failed: the job's one line, reported as the command's
        sweep.fail(str(err), 1)


def _drain(sweep: Sweep) -> None:
    """Run the arms the jobs left running to their end: their failures count as the jobs' own."""
    with _settled(sweep), _job_logging():
        sweep.drain()


@contextmanager
def _job_logging():
    """Once Hydra is done its own console format is back (``[HYDRA] ...``): the arms still running
    print their closing lines as a job does (the console handlers get the job's format back; the
    job's log file keeps every line)."""
    console = [
        h
        for h in logging.getLogger().handlers
        if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)
    ]
    before = [h.formatter for h in console]
    for h in console:
        h.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))
    try:
        yield
    finally:
        for h, formatter in zip(console, before, strict=True):
            h.setFormatter(formatter)


@contextmanager
def _settled(sweep: Sweep):
    """A job's failure becomes the sweep's error line and exit code (anything else is a bug)."""
    from omegaconf.errors import OmegaConfBaseException

    try:
        yield
    except WashexpError as err:  # 2 for a ConfigError or FixtureError (found before any work), else 1
        if isinstance(err, ModelError):
            sweep.endpoint_down = str(err)
        sweep.fail(str(err), exit_code(err))
    except OmegaConfBaseException as err:  # e.g. a mandatory value left unset
        sweep.fail(f"bad config: {one_line(err)}", 2)


def _check_tracking_server(tracking, sweep: Sweep) -> None:
    """A tracking server that does not answer is a usage error found before any model call or
    run (asked once a sweep): otherwise the first run would fail after its work was paid for."""
    from washexp.tracking.server import unanswered

    uri = tracking.uri
    if tracking.enabled and sweep.shared(("tracking server", uri), lambda: unanswered(uri)):
        raise ConfigError(f"tracking.uri={uri}: no MLflow tracking server answers there (start one: washexp server)")


def one_line(err: BaseException) -> str:
    """A Hydra/OmegaConf/washexp error as one line a user can act on."""
    from omegaconf.errors import MissingMandatoryValue

    key = getattr(err, "full_key", None)
    if isinstance(err, MissingMandatoryValue) and key:  # OmegaConf's words name a dataclass, not the fix
        return f"{key} is not set and has no default here: name it ({key}=...)"
    parts = [first_line(err)]
    if key:  # OmegaConf knows which key it is about
        parts.insert(0, key)
    cause = err.__cause__
    if cause is not None and str(cause).strip():
        parts.append(first_line(cause))
    text = str(err)
    if "Available options" in text:
        options = re.findall(r"^\s+(\S+)$", text.split("Available options", 1)[1], flags=re.M)
        options = [o for o in options if not internal_option(o)]
        missing = re.search(r"Could not find '[^']*/([^'/]+)'", text)  # the option, after its group's path
        close = close_names(missing.group(1), options) if missing else []
        if close:
            parts.append(f"did you mean {' or '.join(repr(c) for c in close)}?")
        parts.append("available: " + ", ".join(options))
    ambiguous = re.match(r"Ambiguous value for argument '([^']+)'", text)
    if ambiguous:  # a sweep's comma list in a single run
        parts.append(f"a comma list sweeps its values: add -m (python run.py -m {ambiguous.group(1)})")
    return ": ".join(dict.fromkeys(parts))


def internal_option(name: str) -> bool:
    """The schema nodes washexp registers beside the YAML options (``washexp_schema``,
    ``model/local_schema``): not options a user picks."""
    return name.startswith("washexp_") or name.endswith("_schema")


def main(argv: list[str] | None = None, root: Path | None = None) -> int:
    """``root``: the project (the folder holding ``conf/`` and ``run.py``); by default found
    from the working directory. Output and logs are masked and safe from a closed pipe."""
    with guarded_streams():
        try:
            return _main(argv, root)
        except KeyboardInterrupt:  # Ctrl-C: its open runs ended KILLED as it unwound
            code = INTERRUPTED
        except SystemExit as stop:
            if stop.code != TERMINATED:
                raise
            code = TERMINATED
        print(f"washexp: {STOPPED.format(STOPS[code])}", file=sys.stderr)
        return code


def leave(code: int) -> NoReturn:
    """Exit ``run.py`` with ``code``. A command a signal stopped has closed its runs and servers
    already: it leaves at once rather than wait at the interpreter's exit for a model call still
    in flight, which an endpoint may take minutes to answer and nobody would read."""
    if code in STOPS:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _main(argv: list[str] | None, root: Path | None) -> int:
    import hydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from washexp.project import find_root
    from washexp.project import new_command as new_output_dirs

    args = sys.argv[1:] if argv is None else argv
    try:
        root = Path(root).resolve() if root else find_root()
        if HELP_FLAGS & set(args):  # washexp's own help; --hydra-help still reaches Hydra
            from washexp.usage import run_help

            print(run_help(root))
            return 0
        check_override_keys(args, root)
        for folder in config_dirs(args, root):  # an alias bomb in a config: one line, not a hang
            check_config_tree(folder)
        sys.argv = [sys.argv[0], *expand_short_keys(expand_ranges(args))]
    except WashexpError as err:  # found before any work
        return fail("washexp", err, USAGE)
    register()
    os.environ["WASHEXP_PROJECT"] = str(root)  # conf/config.yaml puts outputs/ and multirun/ there
    new_output_dirs()  # this command's own folder, even when another started in the same second
    os.environ.setdefault("HYDRA_FULL_ERROR", "1")  # let errors reach us; we print one line
    sweep = Sweep(root)

    @hydra.main(config_path=str(root / "conf"), config_name="config", version_base="1.3")
    def job(cfg) -> None:
        here = sweep.here()  # in a parallel launcher's worker, that worker's own sweep
        _run_job(cfg, here)
        if here is not sweep:  # a worker ends its arm and stores its runs before it reports
            _drain(here)
            _flush(here)
            here.report()

    watch_stops()
    new_command()  # nothing spent yet (endpoint.budget_usd)
    previous = {
        s: signal.signal(s, h) for s, h in ((signal.SIGTERM, sigterm_as_exit), (signal.SIGINT, sigint_as_interrupt))
    }
    try:
        try:
            job()
            _drain(sweep)
        except (HydraException, OmegaConfBaseException) as err:
            print(f"washexp: bad config: {one_line(err)}", file=sys.stderr)
            return 2
        except ConfigError as err:  # the sweeper's check of every job, before the first ran
            return fail("washexp", err, USAGE)
        finally:
            sweep.collect()  # what jobs in other processes reported
            try:
                sweep.close()
            except WashexpError as err:  # the store failed as the last runs were written
                sweep.fail(str(err), 1)
        raise_if_stopped()  # a stop whose own exception was dropped still ends the command stopped
        if sweep.exit_code == 0:  # a command that could not finish ends on its one error line, and its
            # store (full, say) is asked nothing more. The stops are still exceptions here: the
            # closing lines log the sweep's decisions run, which a SIGTERM then ends KILLED
            for line in closing_lines(sweep.ledger, sweep.root):
                print(line, flush=True)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    for line in dict.fromkeys(sweep.errors):
        print(f"washexp: {line}", file=sys.stderr)
    return sweep.exit_code
