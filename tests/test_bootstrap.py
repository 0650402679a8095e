"""The hierarchical bootstrap on data built by hand: it widens the interval exactly when a task's
own generations and answers disagree, and is the task-level interval when there is nothing within
a task to resample."""

from __future__ import annotations

import pytest

from washexp.export import bootstrap

TASKS = [f"t{i}" for i in range(8)]


def _flat(scores: dict[str, float]) -> bootstrap.Nested:
    return {t: [[s]] for t, s in scores.items()}


def test_one_generation_one_answer_is_the_task_level_interval():
    a = {t: (i % 3) / 2 for i, t in enumerate(TASKS)}
    b = {t: ((i + 1) % 4) / 3 for i, t in enumerate(TASKS)}
    task = bootstrap.paired(a, b)
    nested = bootstrap.hierarchical(_flat(a), _flat(b))
    assert nested == task  # every field, bit for bit: the same task draw


def test_within_task_variance_widens_the_interval():
    # Every task's mean is 0.5 in A and 0.25 in B, so the task-level interval is one point...
    a_task = dict.fromkeys(TASKS, 0.5)
    b_task = dict.fromkeys(TASKS, 0.25)
    # ...while within each task A's generations and answers disagree wildly (0 or 1).
    a = {t: [[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]] for t in TASKS}
    b = {t: [[0.25, 0.25], [0.25, 0.25], [0.25, 0.25]] for t in TASKS}
    task = bootstrap.paired(a_task, b_task)
    nested = bootstrap.hierarchical(a, b)
    assert task.high - task.low == pytest.approx(0.0)
    assert nested.diff == pytest.approx(task.diff) == pytest.approx(0.25)
    assert nested.high - nested.low > 0.2  # wide: the within-task draws vary
    assert nested.low < 0.25 < nested.high


def test_more_within_task_variance_is_wider_than_less():
    calm = {t: [[0.4, 0.6], [0.6, 0.4]] for t in TASKS}
    wild = {t: [[0.0, 1.0], [1.0, 0.0]] for t in TASKS}
    zero = {t: [[0.0]] for t in TASKS}
    narrow, wide = bootstrap.hierarchical(calm, zero), bootstrap.hierarchical(wild, zero)
    assert wide.high - wide.low > narrow.high - narrow.low > 0


def test_seeded_and_ragged():
    a = {"x": [[1.0], [0.0, 1.0, 1.0]], "y": [[0.5, 0.5]], "z": [[0.0], [1.0]]}
    b = {"x": [[0.0]], "y": [[0.0]], "z": [[0.0]]}
    one, two = bootstrap.hierarchical(a, b), bootstrap.hierarchical(a, b)
    assert one == two
    assert one.mean_a == pytest.approx(((1.0 + 2 / 3) / 2 + 0.5 + 0.5) / 3)  # generations weigh equally


def test_a_generation_without_answers_is_an_error_and_no_common_task_is_none():
    with pytest.raises(ValueError, match="task x"):
        bootstrap.hierarchical({"x": [[]]}, {"x": [[0.0]]})
    assert bootstrap.hierarchical({"x": [[1.0]]}, {"y": [[1.0]]}) is None


def test_the_words_name_the_method_and_its_seed():
    assert bootstrap.describe() == (
        "intervals: hierarchical bootstrap over tasks, generations within a task, answers within a "
        f"generation; B=10,000, seed={bootstrap.SEED}"
    )
