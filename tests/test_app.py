"""The command line: range sugar and one-line errors for bad overrides."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli
from washexp.app import expand_ranges, expand_short_keys
from washexp.errors import WashexpError


def test_range_sugar_is_inclusive():
    # Trap: Hydra reads `0..5` as the string "0..5" and would run ONE job per other choice.
    assert expand_ranges(["-m", "method=S,H", "topn=0..5"]) == ["-m", "method=S,H", "topn=range(0,6)"]
    assert expand_ranges(["model.generations=1..3"]) == ["model.generations=range(1,4)"]
    assert expand_ranges(["task=payment", "topn=3"]) == ["task=payment", "topn=3"]
    assert expand_ranges(["topn=-1..1"]) == ["topn=range(-1,2)"]


def test_short_keys_set_the_family_node():
    assert expand_short_keys(["-m", "method=S,H", "topn=range(0,6)", "task=[a,b]"]) == [
        "-m",
        "method=S,H",
        "compaction.topn=range(0,6)",
        "compaction.task=[a,b]",
    ]
    assert expand_short_keys(["model.topn=1", "topnx=1"]) == ["model.topn=1", "topnx=1"]
    assert expand_short_keys(["method.h_impl=native", "washer.timeout_s=5"]) == [
        "compaction.method.h_impl=native",
        "wash.washer.timeout_s=5",
    ]


def test_empty_range_is_an_error():
    with pytest.raises(WashexpError, match="empty range"):
        expand_ranges(["topn=5..0"])


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("topn=abc", "topn"),
        ("method=X", "method/X"),
        ("model=nosuch", "model/nosuch"),
        ("task=paymnt", "did you mean 'payment'"),
        ("topn=-2", "topn=-2: must be >= 0"),
        ("model.generations=many", "generations"),
        ("nosuchkey=1", "nosuchkey"),
        ("metod=S", "metod=S: no such config key 'metod'; did you mean 'method'"),  # before Hydra's own text
        # trap: `???` in a YAML file does not override a dataclass default: model.name must have none
        # and OmegaConf's "Structured config of type `ModelConfig` has missing mandatory value" named no fix
        ("model=openai", "bad config: model.name is not set and has no default here: name it (model.name=...)"),
        ("model.backend=openia", "did you mean 'openai'"),
        # trap: a + override appended a key nothing reads, and the default ran, exit 0
        ("+metod=S", "metod: no such config key; did you mean 'method'"),
        ("+compaction.topm=3", "compaction.topm: no such config key; did you mean 'topn'?"),
        ("+model.tempreature=0", "model.tempreature: no such config key; did you mean 'temperature'"),
    ],
)
def test_bad_override_is_one_clear_line(store, override, expected):
    proc = run_cli([override], store, check=False)
    assert proc.returncode == 2  # a usage or input error, found before any work
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("washexp: ") and expected in lines[0], lines[0]
    assert not (store / "mlflow.db").exists(), "a rejected command must write nothing"


def test_a_top_n_past_a_tasks_units_runs_and_keeps_them_all(store):
    """The trap (issue 48): ``topn`` above every chosen task's unit count was refused (exit 2, "a
    larger N fuses the same units"); the study keeps all the units and reports the actual count."""
    from mlflow.tracking import MlflowClient

    run_cli(["-m", "method=S", "topn=1,3", "task=meeting_notes"], store, premade=True)  # one unit
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name("compaction")
    runs = client.search_runs([exp.experiment_id], "tags.`washexp.kind` = 'condition'")
    kept = {r.data.tags["topn"]: (r.info.status, r.data.metrics["units_kept"]) for r in runs}
    assert kept == {"1": ("FINISHED", 1.0), "3": ("FINISHED", 1.0)}
