"""The fixture loaders fuzzed (issue 12): random bytes, real files with random bytes spliced in,
and random JSON/YAML structures go into every loader a user feeds (task.yaml, trajectory.json,
expected.json, a store's .md files, a feed's sessions.yaml, a washer's plan). Each loader either
loads or raises its own one-line error; a ``UnicodeDecodeError``, ``KeyError``, ``TypeError``,
``AttributeError``, ``RecursionError`` ... escaping is the bug this guards against."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from washexp.compaction.inputs.fixtures import load_task
from washexp.errors import WashexpError
from washexp.wash.plan import Plan, apply_to_texts
from washexp.wash.store.feed import load_feed
from washexp.wash.store.stores import load_expected, load_store

REAL = Path(__file__).resolve().parent.parent / "fixtures"
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=15,
)


def spliced(original: bytes) -> st.SearchStrategy[bytes]:
    """The real file with a random run of bytes put in place of a random slice of it."""
    return st.tuples(st.integers(0, len(original)), st.integers(0, 40), st.binary(max_size=12)).map(
        lambda t: original[: t[0]] + t[2] + original[t[0] + t[1] :]
    )


def contents(original: bytes, structured: Callable[[object], bytes]) -> st.SearchStrategy[bytes]:
    return st.binary(max_size=200) | spliced(original) | json_values.map(structured)


def one_line_or_loads(load: Callable[[], object]) -> None:
    try:
        load()
    except WashexpError as err:  # the loader's own error: one line naming what and where
        assert str(err) and "\n" not in str(err), repr(str(err))


def as_json(value) -> bytes:
    return json.dumps(value).encode()


def as_yaml(value) -> bytes:
    return yaml.safe_dump(value, allow_unicode=True).encode()


def with_key_parts(value) -> bytes:
    """A mapping with the format's own top-level keys and random values: past the first checks."""
    keys = ["id", "query", "fields", "expected", "unordered_fields", "needles", "declared_cohort", "messages"]
    keys += ["fixture", "description", "expectNoOp", "muscle", "fat", "feed", "sessions"]
    return json.dumps({k: value for k in keys}).encode()


@pytest.fixture(scope="module")
def copies(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fuzz")
    shutil.copytree(REAL / "compaction" / "backup", root / "backup")
    shutil.copytree(REAL / "wash" / "lean", root / "lean")
    shutil.copytree(REAL / "wash-feed" / "dispatch-team", root / "dispatch-team")
    return root


LOADERS: dict[str, tuple[str, Callable[[Path], object], Callable[[object], bytes]]] = {
    # file fuzzed (under the copies): (its path, the loader a user's command runs on it, its format)
    "task.yaml": ("backup/task.yaml", lambda c: load_task(c / "backup"), as_yaml),
    "trajectory.json": ("backup/trajectory.json", lambda c: load_task(c / "backup"), as_json),
    "expected.json": ("lean/expected.json", lambda c: load_expected(c / "lean" / "expected.json"), as_json),
    "store .md file": ("lean/conventions.md", lambda c: load_store(c / "lean"), as_yaml),
    "sessions.yaml": ("dispatch-team/sessions.yaml", lambda c: load_feed(c / "dispatch-team"), as_yaml),
}


@pytest.mark.parametrize("target", list(LOADERS))
@FUZZ
@given(data=st.data())
def test_loader(copies, target, data):
    rel, load, structured = LOADERS[target]
    path = copies / rel
    original = path.read_bytes()
    path.write_bytes(data.draw(contents(original, structured) | st.builds(with_key_parts, json_values)))
    try:
        one_line_or_loads(lambda: load(copies))
    finally:
        path.write_bytes(original)


plan_items = st.fixed_dictionaries(
    {  # every key an item needs, so the values themselves get checked; each sometimes of a wrong type
        "file": st.sampled_from(["a.md", "MEMORY.md", "../a.md", "/etc/a.md", "a", ""]) | json_values,
        "start": st.integers(-2, 8) | json_values,
        "end": st.integers(-2, 8) | json_values,
        "cls": st.sampled_from(["duplicate", "quick", "nope"]) | json_values,
        "reason": st.text(max_size=5) | json_values,
        "op": st.sampled_from(["delete", "replace", "delete-file", "move"]) | json_values,
    },
    optional={"text": st.text(max_size=10) | json_values},
)


@FUZZ
@given(
    plan=st.fixed_dictionaries(
        {"items": st.lists(plan_items | json_values, max_size=4)},
        optional={"washer": json_values, "notes": json_values, "approved_drops": json_values, "extra": json_values},
    )
    | json_values
)
def test_plan(plan):
    files = {"MEMORY.md": "- [[a]]\n", "a.md": "one\ntwo\r\nthree"}
    one_line_or_loads(lambda: apply_to_texts(files, Plan.from_dict(plan)))
