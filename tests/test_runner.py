"""The schedule groups (arms) share: the next group starts beside the last children of the one
before, a lane never runs more than its concurrency, one group asked for twice is computed once,
and a fatal error or a stop ends every open run of every group. A real SQLite store; the last
test runs the real command against the scripted server."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import new_store_copy, run_cli, scripted_model
from tests.openai_server import Script, serve
from washexp.engine.runner import Result, Schedule, Work, run_group, start_group
from washexp.engine.sweep import raise_if_stopped, sigterm_as_exit, watch_stops
from washexp.tracking import open_tracker

WAIT = 20  # seconds a blocked child waits at most: a failing test ends, it never hangs


class Gone(Exception):
    """A fatal error (an endpoint that is gone)."""


@pytest.fixture
def tracker(tmp_path):
    new_store_copy(tmp_path / "mlflow.db")  # a copy of an empty store: its making is not checked here
    t = open_tracker(True, f"sqlite:///{tmp_path / 'mlflow.db'}", str(tmp_path / "mlruns"), "runner", tmp_path)
    yield t
    t.close()


def _statuses(tracker) -> dict[str, str]:
    tracker.close()  # the writer thread has stored every run
    client = MlflowClient(tracker.uri)
    return {r.info.run_name: r.info.status for r in client.search_runs([tracker.experiment_id], max_results=500)}


def _group(name: str, tasks: int) -> tuple[Work, list[Work]]:
    parent = Work(f"{name} · arm", {"arm": name})
    return parent, [Work(f"{name} · t{i}", {"arm": name, "task": i}, key=f"t{i}") for i in range(tasks)]


def _summarize(results) -> Result:
    return Result({"done": float(sum(m is not None for m in results.values()))})


def test_the_next_group_starts_beside_the_last_children_of_the_one_before(tracker):
    schedule, ended = Schedule(), []
    release, b_started = threading.Event(), threading.Event()

    def compute_a(work: Work) -> Result:
        if work.key == "t1":  # the arm's last condition, still computing when the next arm starts
            assert release.wait(WAIT)
        return Result({"x": 1.0})

    def compute_b(work: Work) -> Result:
        b_started.set()
        return Result({"x": 2.0})

    start_group(schedule, tracker, *_group("A", 2), compute_a, _summarize, ended.append, concurrency=2, lane="e")
    assert not release.is_set() and ended == []  # returned while A's last child computes
    start_group(schedule, tracker, *_group("B", 1), compute_b, _summarize, ended.append, concurrency=2, lane="e")
    assert b_started.wait(WAIT) and ended == []  # B's child ran while A's was still computing
    release.set()
    schedule.drain()
    assert sorted(o.metrics["done"] for o in ended) == [1.0, 2.0]  # each group ended once
    assert set(_statuses(tracker).values()) == {"FINISHED"}


def test_a_lane_runs_at_most_its_concurrency_and_a_run_opens_as_its_child_starts(tracker):
    schedule, ended, lock = Schedule(), [], threading.Lock()
    now, peak, began, finished = [0], [0], {}, []
    three = threading.Barrier(3)  # the first three computes meet: three run at once, by construction

    def compute(work: Work) -> Result:
        with lock:
            began[work.name] = time.time() * 1000
            now[0] += 1
            peak[0] = max(peak[0], now[0])
            first = len(began) <= 3
        if first:
            three.wait(WAIT)
        time.sleep(0.05)  # room for a fourth, if the lane let one in (it must not)
        with lock:
            now[0] -= 1
            finished.append(int(time.time() * 1000))  # floored to ms, as MLflow's start times
        return Result({})

    for name in "AB":
        start_group(schedule, tracker, *_group(name, 4), compute, _summarize, ended.append, concurrency=3, lane="e")
    schedule.drain()
    assert peak[0] == 3 and len(ended) == 2
    tracker.close()
    client = MlflowClient(tracker.uri)
    runs = client.search_runs([tracker.experiment_id], max_results=500)
    opened = {r.info.run_name: r.info.start_time for r in runs if r.info.run_name in began}
    assert len(opened) == 8  # no run opened before its child could compute: its duration is its own
    later = sorted(opened.values())[3:]  # the lane was full when these were asked for
    assert all(start >= min(finished) for start in later), (began, opened, finished)
    assert all(start <= began[name] for name, start in opened.items())


def test_one_group_asked_for_twice_is_computed_once(tracker):
    schedule, ended, calls = Schedule(), [], Counter()
    release = threading.Event()

    def compute(work: Work) -> Result:
        calls[work.key] += 1
        assert release.wait(WAIT)
        return Result({})

    for _ in range(2):  # the second time while the first still runs (Full under a top-N sweep)
        start_group(schedule, tracker, *_group("Full", 2), compute, _summarize, ended.append, concurrency=2)
    release.set()
    schedule.drain()
    assert calls == {"t0": 1, "t1": 1}
    assert [(o.reused, o.metrics) for o in ended] == [(False, {"done": 2.0}), (True, {"done": 2.0})]


def test_a_fatal_error_ends_every_open_run_of_every_group(tracker):
    schedule, release = Schedule(), threading.Event()

    def compute_a(work: Work) -> Result:
        if work.key == "t0":
            assert release.wait(WAIT)
            raise Gone("the endpoint is gone")
        return Result({})

    def compute_b(work: Work) -> Result:
        assert release.wait(WAIT)
        time.sleep(0.2)  # still computing when A's error is taken in
        return Result({})

    start_group(schedule, tracker, *_group("A", 2), compute_a, _summarize, print, concurrency=4, fatal=(Gone,))
    start_group(schedule, tracker, *_group("B", 2), compute_b, _summarize, print, concurrency=4, fatal=(Gone,))
    release.set()
    with pytest.raises(Gone):
        schedule.drain()
    statuses = _statuses(tracker)
    assert statuses == {
        "A · arm": "FAILED",
        "A · t0": "FAILED",
        "A · t1": "FINISHED",
        "B · arm": "FAILED",
        "B · t0": "FAILED",
        "B · t1": "FAILED",
    }


def test_a_stopped_command_ends_its_open_runs_killed(tracker):
    schedule, release = Schedule(), threading.Event()

    def compute(work: Work) -> Result:
        release.wait(WAIT)
        return Result({})

    start_group(schedule, tracker, *_group("A", 2), compute, _summarize, print, concurrency=2)
    schedule.close()  # as Sweep.close does when Ctrl-C lands while Hydra composes the next job
    release.set()
    assert _statuses(tracker) == {"A · arm": "KILLED", "A · t0": "KILLED", "A · t1": "KILLED"}


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # Python's "Exception ignored"
def test_a_stop_python_dropped_inside_a_finalizer_still_stops_the_schedule(tracker):
    """A signal handler can run inside a finalizer, where Python drops what it raises: the
    SIGTERM is kept and raised at the schedule's next turn, so the open runs end KILLED and the
    command does not go on to end 0."""

    class Finalized:
        def __del__(self):
            sigterm_as_exit()  # as if SIGTERM arrived while this finalizer ran

    watch_stops()
    schedule, release = Schedule(check=raise_if_stopped), threading.Event()
    try:
        compute = lambda w: release.wait(WAIT) and Result({})  # noqa: E731
        start_group(schedule, tracker, *_group("A", 2), compute, _summarize, print, concurrency=2)
        Finalized()  # dropped at once: its SystemExit(143) is printed as ignored, not raised here
        release.set()
        with pytest.raises(SystemExit) as stopped:
            schedule.drain()
    finally:
        watch_stops()
    assert stopped.value.code == 143
    assert _statuses(tracker) == {"A · arm": "KILLED", "A · t0": "KILLED", "A · t1": "KILLED"}


def test_run_group_runs_one_group_to_its_end(tracker):
    outcome = run_group(tracker, *_group("W", 3), lambda w: Result({"x": 1.0}), _summarize, concurrency=2)
    assert (outcome.metrics, outcome.counts) == ({"done": 3.0}, {"run": 3, "reused": 0, "failed": 0})
    again = run_group(tracker, *_group("W", 3), lambda w: Result({"x": 1.0}), _summarize)
    assert again.reused and again.metrics == {"done": 3.0}


def test_a_served_sweep_starts_an_arm_beside_the_last_conditions_of_the_one_before(tmp_path):
    """The real command against the scripted server (1 s a request): the second arm's first
    condition starts while the first arm's last ones still compute (the endpoint is not idle at
    the seam), and the third waits for one of the two open arms to end."""
    script = Script(latency=1.0)
    with serve(script) as url:
        run_cli(
            ["-m", "method=S", "topn=0..2", "task=[backup,payment]"]
            + scripted_model(url, tmp_path / "rec", "qwen3.8-max", platform=None, generations=None, answers=None),
            tmp_path,
            env={"CI": "1"},
            premade=True,
        )
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("compaction").experiment_id], max_results=100)
    arms = sorted((r for r in runs if r.data.tags["washexp.kind"] == "arm"), key=lambda r: r.info.start_time)
    assert [a.info.run_name for a in arms] == ["S top0 · arm", "S top1 · arm", "S top2 · arm"]
    children = {
        a.info.run_id: [r for r in runs if r.data.tags.get("mlflow.parentRunId") == a.info.run_id] for a in arms
    }
    top0, top1, top2 = arms
    first = min(c.info.start_time for c in children[top1.info.run_id])
    assert first < max(c.info.end_time for c in children[top0.info.run_id])  # beside top0's last conditions
    assert top2.info.start_time >= min(top0.info.end_time, top1.info.end_time)  # it waited for one to end


def test_a_group_another_sweep_finished_is_linked_by_the_sweep_that_reuses_it(tracker):
    """The trap (issue 50): a group reused whole from another sweep left nothing in the sweep that
    reused it, so its export, compare and ``washexp runs`` did not see it."""
    from washexp.export.selection import parents
    from washexp.listing import sweep_rows
    from washexp.tracking.reader import search

    def group(sweep: str) -> tuple[Work, list[Work]]:
        parent, kids = _group("W", 2)
        tags = {"sweep": sweep, "washexp.kind": "arm"}
        return Work(parent.name, parent.identity, tags=tags), [
            Work(k.name, k.identity, tags={"sweep": sweep, "washexp.kind": "condition"}, key=k.key) for k in kids
        ]

    compute = lambda w: Result({"x": 1.0})  # noqa: E731
    first = run_group(tracker, *group("one"), compute, _summarize)
    again = run_group(tracker, *group("two"), compute, _summarize)
    twice = run_group(tracker, *group("two"), compute, _summarize)  # the same sweep asks again
    assert (first.reused, again.reused, again.reused_from, twice.reused_from) == (False, True, "one", "one")
    tracker.close()
    runs = search(tracker.uri, "runner")
    (arm,) = runs[(runs["tags.washexp.kind"] == "arm")]["run_id"]
    found = parents(runs, "arm", sweeps=("two",))
    assert list(zip(found["run_id"], found["reused_from"], found["reused_by"], strict=True)) == [(arm, "one", "two")]
    rows = {r.sweep: (r.arms, r.units, r.reused) for r in sweep_rows(runs, "runner")}
    assert rows == {"one": (1, 2, {}), "two": (1, 2, {"one": 1})}


def test_each_identity_is_looked_up_once_a_sweep_computed_or_reused(tracker, monkeypatch):
    """A lookup is a search of the store (most of washexp's own tracking CPU on the panel): one
    per identity, under its claim, whether the sweep computes it or reuses it."""
    looked: Counter[str] = Counter()
    find = tracker.find

    def counted(identity_hash: str):
        looked[identity_hash] += 1
        return find(identity_hash)

    monkeypatch.setattr(tracker, "find", counted)
    parent, children = _group("A", 2)
    run_group(tracker, parent, children, lambda w: Result({"x": 1.0}), _summarize, concurrency=2)
    assert looked == Counter({w.hash: 1 for w in [parent, *children]})
    looked.clear()
    other = Work("B · arm", {"arm": "B"})  # a new arm over the same children: each reused, looked up once
    outcome = run_group(tracker, other, children, lambda w: Result({"x": 2.0}), _summarize, concurrency=2)
    assert outcome.counts == {"run": 0, "reused": 2, "failed": 0}
    assert looked == Counter({w.hash: 1 for w in [other, *children]})
