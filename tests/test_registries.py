"""Each rule declared once (issue 51, item 2): the methods, the measurements and the plug-in loader.

The method table (``compaction/methods/table.py``) is what ``conf/method/`` offers and the order a record
lists arms in; the measurement registry (``washexp/measurements/``) is what ``conf/measurement/``
offers, with each measurement's runner, ranges, headline and record part; entry points are read in
one module (``washexp/plugins.py``). The worked example of ``docs/guide/plugins.md`` (a measurement
as one module and one config file) runs here exactly as the page shows it.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from tests.conftest import run_cli
from washexp import measurements, plugins
from washexp.compaction.condition import Arm
from washexp.compaction.methods.table import BY_NAME, METHODS, NAMES, method_for
from washexp.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "guide" / "plugins.md"


def _options(group: str) -> dict[str, dict]:
    return {p.stem: yaml.safe_load(p.read_text()) for p in sorted((ROOT / "conf" / group).glob("*.yaml"))}


def test_conf_method_is_the_method_table_key_for_key():
    files = _options("method")
    assert set(files) == {*NAMES, plugins.PLUGIN}
    for name, entry in BY_NAME.items():
        assert files[name]["name"] == name and set(files[name]) - {"name"} == set(entry.keys), name


def test_each_method_is_built_from_its_config_under_its_name():
    defaults = {"target": None, "args": None, "h_impl": "native", "M": None, "K": None, "budget": None}
    for entry in METHODS:
        method = method_for(SimpleNamespace(**{**defaults, "name": entry.name}), roles=None)
        assert method.spec["name"] == entry.name, entry.name
    with pytest.raises(ConfigError, match="is the study's own"):
        method_for(SimpleNamespace(**{**defaults, "name": "mask", "target": "x:y"}), roles=None)
    with pytest.raises(ConfigError, match="unknown compaction method 'hybird'; did you mean 'hybrid'"):
        method_for(SimpleNamespace(**{**defaults, "name": "hybird"}), roles=None)


def test_a_record_lists_arms_in_the_table_order_then_plugins():
    arms = [Arm("zeta", 0), Arm("hybrid M=10 budget=4000", 0), Arm("H", 1), Arm("S", 0), Arm("none", None)]
    arms += [Arm("full", None), Arm("recency K=10", 0), Arm("mask M=10", 0), Arm("H", 0)]
    ordered = [a.label for a in sorted(arms, key=lambda a: a.order)]
    assert ordered == [
        "Full",
        "none",
        "S top0",
        "H top0",
        "H top1",
        "mask M=10 top0",
        "recency K=10 top0",
        "hybrid M=10 budget=4000 top0",
        "zeta top0",
    ]


def test_conf_measurement_is_the_measurement_registry():
    files = _options("measurement")
    assert set(files) == set(measurements.names())
    assert all(files[n]["name"] == n for n in files)
    assert measurements.names("compaction") == ["single", "cycles", "cliff"]
    assert measurements.names("wash") == ["ceiling", "infinity", "sawtooth", "controlled", "chain"]
    assert list(measurements.bounds("wash")) == [
        *("rounds", "dry_stop", "sessions", "target_pct", "repeats", "passes", "pass_keep_pct")
    ]
    with pytest.raises(ConfigError, match="measurement=cycles is the compaction benchmark's, not wash's"):
        measurements.get("cycles", "wash")
    with pytest.raises(ConfigError, match="unknown measurement 'celing'; did you mean 'ceiling'"):
        measurements.get("celing")


def test_entry_points_are_read_in_one_module():
    readers = sorted(
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "washexp").rglob("*.py")
        if re.search(r"\bentry_points\s*\(", p.read_text(encoding="utf-8"))
    )
    assert readers == ["washexp/plugins.py"]


def _example() -> tuple[str, str]:
    """The worked example's module and config file, as the page shows them."""
    text = PAGE.read_text(encoding="utf-8")
    module = re.search(r"```python\n# washexp/measurements/sizes.py\n(.*?)```", text, re.S)
    config = re.search(r"```yaml\n# conf/measurement/sizes.yaml\n(.*?)```", text, re.S)
    assert module and config, "docs/guide/plugins.md lost its worked example"
    return module.group(1), config.group(1)


@pytest.fixture
def sizes(tmp_path, monkeypatch) -> Path:
    """The example installed as a package would be: its module, an entry point, its config file."""
    module, config = _example()
    (tmp_path / "sizes.py").write_text(module)
    info = tmp_path / "sizes-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sizes\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[washexp.measurements]\nsizes = sizes:MEASUREMENT\n")
    (tmp_path / "conf" / "measurement").mkdir(parents=True)
    (tmp_path / "conf" / "measurement" / "sizes.yaml").write_text(config)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_the_worked_example_registers_as_a_wash_measurement(sizes):
    assert measurements.names("wash")[-1] == "sizes"  # no order given: last
    assert measurements.headlines("wash")[-1] == "bytes_max"
    assert measurements.bounds("wash")["rounds"] == (1, 1000)
    assert callable(measurements.use(measurements.get("sizes", "wash").run))


@pytest.mark.slow
def test_the_worked_example_runs_as_a_measurement(sizes, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    args = ["benchmark=wash", "measurement=sizes", "store=lean", f"hydra.searchpath=[file://{sizes / 'conf'}]"]
    done = run_cli(args, store, env={"PYTHONPATH": str(sizes), "CI": "1"}, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert re.search(r"largest \d+ bytes", done.stdout + done.stderr), done.stdout[-2000:]
