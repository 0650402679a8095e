"""A record over several sweeps counts each model call once (issue 49).

A protocol of hours runs as a sweep per session, each resumed from the recordings, and the record
is exported over all of them. A call two sweeps used (a ranking read by S's arms in one sweep and
by H's in the next) was made once; the record's cost table must count it once, as a single sweep
of the same arms would, never once per sweep.
"""

from __future__ import annotations

import json
from collections import Counter

from tests.conftest import scripted_sweep
from tests.openai_server import Script, serve
from tests.test_export import export

TASKS = ("backup", "payment")
ROLES = ("H", "Jev", "S", "read")


def test_a_call_two_sweeps_used_is_counted_once(tmp_path):
    script = Script()
    with serve(script) as url:
        for method in ("H", "S"):  # a sweep each; the second replays the first's rankings
            scripted_sweep(url, tmp_path, TASKS, f"method={method}", "topn=1")
    sent = Counter(r["kind"] for r in script.requests if r["kind"] in ROLES)
    assert sent["Jev"] > 0 and sent["S"] > 0 and sent["H"] > 0
    export(tmp_path, tmp_path / "results")
    (record,) = (tmp_path / "results").glob("compaction-scripted-test-server-*.json")
    found = json.loads(record.read_text())
    rows = {r["role"]: r for r in found["tables"]["spend"]["rows"]}
    assert {role: rows[role]["calls"] for role in ROLES} == {role: float(sent[role]) for role in ROLES}
    assert rows["all"]["calls"] == float(sum(sent.values()))
    assert found["tables"]["spend"]["note"].startswith("Each recorded call counted once in the record")
