"""``washexp compare`` of a sweep with itself reads each run's table once. Trap guarded: it built
the same record twice, and each build read every condition's retention table twice (two run
lookups and a download each): 20 s and more of a newcomer's first comparison."""

from __future__ import annotations

import re

from tests.conftest import run_cli
from washexp.compare import main
from washexp.tracking.reader import _downloaded, _table


def test_a_sweep_against_itself_reads_each_table_once(store, capsys, monkeypatch):
    out = run_cli(["-m", "method=S", "topn=1", "task=[backup,refactor]"], store, env={"CI": "1"}, premade=True)
    sweep = re.search(r"^washexp: sweep (\S+)", out.stdout, re.M).group(1)
    monkeypatch.chdir(store)
    _downloaded.cache_clear()
    _table.cache_clear()
    assert main([sweep, sweep, "--tracking-uri", f"sqlite:///{store / 'mlflow.db'}"]) == 0
    assert capsys.readouterr().out.startswith("no regression: 0 needle(s) lost in B")
    reads = _downloaded.cache_info()
    assert reads.misses == 4, reads  # per condition its retention table and its fact ledger, each read once
    assert _table.cache_info().misses == 4  # and each parsed once
