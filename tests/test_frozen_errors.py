"""Errors at the right depth in the frozen parts: only a reply that cannot be read (``ReplyError``,
raised where a reply is parsed) becomes that part's failure; any other exception (a bug in washexp)
propagates and fails its run, it never becomes a low score.

Trap guarded: ``except ValueError`` around the whole making of S, the ranking and H, which turned
every bug that raised a ValueError (a bad slice, a failed int()) into an unusable reply scored 0.
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.conftest import ROOT
from washexp.compaction.backends.reference import reference_backend
from washexp.compaction.backends.roles import Ranking, ReplyError
from washexp.compaction.frozen import FrozenCache
from washexp.compaction.inputs.fixtures import load_tasks
from washexp.config import ModelConfig


@pytest.fixture(scope="module")
def task():
    (found,) = load_tasks(ROOT / "fixtures" / "compaction", ["payment"])
    return found


def _cache(**roles) -> FrozenCache:
    return FrozenCache(dataclasses.replace(reference_backend(ModelConfig(name="reference")), **roles))


def _raise(error: BaseException):
    def role(_job):
        raise error

    return role


def test_an_unusable_reply_is_that_parts_failure_with_its_recording(task):
    made = _cache(summarize=_raise(ReplyError("S returned an empty summary", "rec-1"))).summary(task, 0, 128)
    assert not made.ok and made.failure == "S: S returned an empty summary" and made.keys == ("rec-1",)
    ranked = _cache(rank=lambda job: Ranking([1.0], "rec-2")).ranking(task, 0)
    assert not ranked.ok and ranked.keys == ("rec-2",)
    assert ranked.failure == f"Jev: ranker returned 1 scores for {len(task.units)} units"


@pytest.mark.parametrize("error", [ValueError("a bug"), KeyError("units"), TypeError("a bug")])
def test_any_other_exception_is_not_a_reply_and_propagates(task, error):
    with pytest.raises(type(error)):
        _cache(summarize=_raise(error)).summary(task, 0, 128)
    with pytest.raises(type(error)):
        _cache(rank=_raise(error)).ranking(task, 0)


def test_the_reference_parts_are_made(task):
    cache = _cache()
    assert cache.summary(task, 0, 128).ok and cache.ranking(task, 0).ok
    assert len(cache.ranking(task, 0).value) == len(task.units)
