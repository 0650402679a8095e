"""Hydra's basic sweeper, composing each job's config once (``hydra/sweeper=washexp``, the default).

Hydra's ``BasicSweeper`` composes every job of a batch to validate it, so that a bad override fails
before any job runs; its launcher then composes each job again to run it: the same config twice,
about 50 ms of CPU a job. This sweeper keeps what validation composed and hands it to the launcher,
so a bad override still fails before any work and each job is composed once. A launcher that runs
jobs in other processes (joblib, submitit, Ray) receives the loader without what it kept, and
composes there as before.

It also runs washexp's own refusals on every job's config before the first job
(``washexp.app.check_job``: keys, family, types, the family's settings, the model a job would
serve), so such a usage error in the tenth job of a sweep is exit 2 before the first runs.

It lives in ``hydra_plugins`` because Hydra instantiates plugins from that package only.
"""

from __future__ import annotations

from collections.abc import Sequence

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.types import HydraContext


class _ComposedOnce:
    """A config loader that returns a config kept by :meth:`keep` once instead of composing it
    again; every other call goes to the loader it wraps."""

    def __init__(self, loader) -> None:
        self._loader = loader
        self._kept: dict[tuple[int, tuple[str, ...]], object] = {}

    def keep(self, master_config, overrides: Sequence[str]):
        key = (id(master_config), tuple(overrides))
        self._kept[key] = self._loader.load_sweep_config(master_config, list(overrides))
        return self._kept[key]

    def load_sweep_config(self, master_config, sweep_overrides: list[str]):
        kept = self._kept.pop((id(master_config), tuple(sweep_overrides)), None)
        return kept if kept is not None else self._loader.load_sweep_config(master_config, sweep_overrides)

    def __getattr__(self, name: str):
        return getattr(self._loader, name)

    def __reduce__(self):  # to a worker process: the loader alone, without the configs kept here
        return _ComposedOnce, (self._loader,)


class ComposeOnceSweeper(BasicSweeper):
    def setup(self, *, hydra_context: HydraContext, task_function, config) -> None:
        context = HydraContext(
            config_loader=_ComposedOnce(hydra_context.config_loader), callbacks=hydra_context.callbacks
        )
        super().setup(hydra_context=context, task_function=task_function, config=config)

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        from omegaconf import open_dict

        from washexp.app import check_job

        for overrides in batch:  # a bad override raises here, before any job of the batch runs
            job = self.hydra_context.config_loader.keep(self.config, overrides).copy()
            with open_dict(job):
                del job["hydra"]  # the job's config, as its task function will get it
            check_job(job)  # washexp's own refusals too: a ConfigError, exit 2 before any work
