"""A sweep's console is results and problems only; every other line is in its log files, and a
terminal (only a terminal) gets a progress bar per arm. Trap guarded: a sweep that prints one
line per condition (168 for the main job) into a CI log or a pipe."""

from __future__ import annotations

import logging

import pytest

from tests.conftest import run_cli
from tests.test_endpoint_down import _closed_port
from washexp.console import Console, live, result


class _Stream:
    def __init__(self, tty: bool) -> None:
        self.tty, self.text = tty, ""

    def isatty(self) -> bool:
        return self.tty

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass


@pytest.mark.parametrize(
    ("stdout", "stderr", "env", "expected"),
    [
        (True, True, {"TERM": "xterm"}, True),
        (False, True, {"TERM": "xterm"}, False),  # piped: `python run.py ... | tee log`
        (True, False, {"TERM": "xterm"}, False),  # 2> file: the bar would be written into it
        (True, True, {"TERM": "xterm", "CI": "true"}, False),
        (True, True, {"TERM": "dumb"}, False),
    ],
)
def test_a_bar_is_drawn_on_a_terminal_only(stdout, stderr, env, expected):
    assert live(_Stream(stdout), _Stream(stderr), env) is expected


def test_the_console_shows_results_and_problems_only():
    stream = _Stream(False)
    logger = logging.getLogger("washexp.test_console")
    logger.propagate, logger.level = False, logging.INFO
    logger.addHandler(Console(stream))
    try:
        logger.info("a condition done")
        result(logger, "S top0: a result")
        logger.warning("a problem")
    finally:
        logger.handlers.clear()
    assert stream.text.splitlines() == ["S top0: a result", "a problem"]


def test_a_piped_sweep_prints_its_results_and_logs_the_rest(store):
    proc = run_cli(["-m", "method=S", "topn=0..1", "task=[backup,refactor]"], store, env={"CI": ""})
    lines = (proc.stdout + proc.stderr).splitlines()
    assert len(lines) == 1 + 2 + 4, lines  # what it started, one line per arm, then the sweep's closing lines
    assert lines[0].endswith(" - started S top0 (2 conditions); a line follows as each arm ends")
    assert "S top0: 2 conditions (2 run, 0 reused, 0 failed)" in lines[1]
    assert lines[3].startswith("washexp: sweep ")
    sweep = store / "multirun"
    # each condition is logged (in the log of the job running then: an arm's last ones overlap the next job)
    logs = "".join(p.read_text(encoding="utf-8") for p in [*sweep.glob("*/app.log"), sweep / "multirun.log"])
    assert all(f"S top{n} · {task}: done (" in logs for n in (0, 1) for task in ("backup", "refactor"))
    assert "Launching 2 jobs locally" in (sweep / "multirun.log").read_text(encoding="utf-8")


def test_an_unreachable_endpoint_is_one_line(store):
    """Every retry of every condition was a warning on the console (26 lines and more)."""
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    args = ["model=openai", f"endpoint.base_url={url}", "model.name=m", "endpoint.max_retries=2"]
    args += [f"endpoint.recordings={store / 'rec'}", "task=[backup,refactor]"]
    proc = run_cli(args, store, check=False)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        f"washexp: {url}: gave up after 3 attempts; last error: connection failed (ConnectError)"
    ]
    (started,) = proc.stdout.splitlines()  # the job had started: its first line, then nothing but the error
    assert started.endswith(" - started S top0 (2 conditions); a line follows as each arm ends")
    assert "retry 1/2" in (store / "outputs" / "app.log").read_text(encoding="utf-8")  # kept in the log


@pytest.mark.slow
def test_the_main_job_piped_prints_at_most_40_lines(store):
    proc = run_cli(["-m", "method=S,H", "topn=0..5"], store, env={"CI": ""})
    lines = (proc.stdout + proc.stderr).splitlines()
    assert len(lines) <= 40, lines
    assert sum(": 14 conditions (14 run" in line for line in lines) == 12
