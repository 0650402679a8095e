"""A record says where its runs ran and how long they took (issue 35)."""

import os

import pandas as pd

from washexp import machine
from washexp.export.run_facts import run_facts


def test_machine_names_cpu_cores_and_memory_and_no_host():
    assert machine._cpuinfo_model("processor\t: 0\nmodel name\t: AMD  EPYC 7B13\n") == "AMD EPYC 7B13"
    assert machine._cpuinfo_model("processor\t: 0\n") is None
    assert machine._mem_gb("MemTotal:       24510176 kB\n") == 23.4
    text = machine.describe()
    assert f"{len(os.sched_getaffinity(0))} cores" in text
    assert os.uname().nodename not in text.split(" · ")


def _arms(tags):
    t0 = pd.Timestamp("2026-12-04 06:00", tz="UTC")
    return pd.DataFrame(
        {
            "start_time": [t0, t0 + pd.Timedelta(minutes=30), t0],
            "end_time": [t0 + pd.Timedelta(minutes=20), t0 + pd.Timedelta(minutes=32, seconds=30), pd.NaT],
            "tags.washexp.machine": tags,
        }
    )


def test_wall_time_sums_the_finished_arm_runs_and_counts_the_rest():
    facts = run_facts(_arms(["AMD EPYC · 2 cores", "AMD EPYC · 2 cores", None]))
    assert facts["wall time (arm runs, summed)"] == "22.5 min over 2 of 3 runs"
    assert facts["machine (as the runs recorded it)"] == "AMD EPYC · 2 cores"


def test_runs_from_before_the_tag_name_no_machine():
    facts = run_facts(_arms([None, None, None]).drop(columns="tags.washexp.machine"))
    assert facts["machine (as the runs recorded it)"].startswith("not recorded")


def test_runs_answered_from_recordings_say_so_beside_their_wall_time():
    arms = _arms(["AMD EPYC · 2 cores"] * 3).assign(
        **{"metrics.calls_live": [2.0, 0.0, None], "metrics.calls_replayed": [1.0, 14.0, None]}
    )
    line = run_facts(arms)["model calls (arm runs, summed)"]
    assert line.startswith("2 sent to the model, 15 answered from its recordings")
    assert "model calls (arm runs, summed)" not in run_facts(arms.assign(**{"metrics.calls_replayed": 0.0}))
    assert "model calls (arm runs, summed)" not in run_facts(_arms([None, None, None]))  # no model: no line
