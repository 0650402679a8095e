"""A local server that dies is one line at once, and a build that cannot run here is refused.

These run in the default suite: the server is the scripted OpenAI server (test equipment, never a
model's result) in a child process of its own, killed with a real signal; the client is the real
openai client. The real llama.cpp server's death is ``tests/test_local_model.py``'s.

Traps guarded: retries against a process that is gone ("gave up after 6 attempts; connection
failed" minutes later, with nothing saying the server died); a native llama.cpp build (AVX-512,
AMX) that crashes on its first request on another CPU, or on one whose CPU lists AMX.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from washexp.errors import ModelError
from washexp.models import llama_server
from washexp.models.base import ChatRequest
from washexp.models.llama_server import LlamaServer
from washexp.models.openai_client import OpenAIModel

ROOT = Path(__file__).resolve().parent.parent
SERVE = (
    "import sys, time\n"
    "from tests.openai_server import Script, serve\n"
    "with serve(Script()) as url:\n"
    "    print(url, flush=True)\n"
    "    time.sleep(600)\n"
)
PORTABLE = (
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
    "LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | "
)
NATIVE_XEON = PORTABLE.replace("BMI2 = 1 |", "BMI2 = 1 | AVX512 = 1 | AVX512_VNNI = 1 | AMX_INT8 = 1 |")
XEON_FLAGS = {"pni", "ssse3", "avx", "avx2", "f16c", "fma", "bmi2", "avx512f", "avx512_vnni", "amx_int8", "amx_tile"}


@pytest.fixture
def server(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-c", SERVE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,  # as llama_server.start runs its child: stop() ends the group
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    url = process.stdout.readline().strip()
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    log = tmp_path / "llama-server" / "server.log"
    log.parent.mkdir()
    log.write_text("")
    s = LlamaServer(process, port, "scripted", log)
    yield s
    s.stop()


def _ask(model: OpenAIModel):
    return model.chat(ChatRequest(({"role": "user", "content": "hello"},), 0.0, 8))


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGKILL])
def test_a_dead_server_is_one_line_at_once_with_no_retry(server, sig, caplog):
    model = OpenAIModel("scripted", server.base_url, max_retries=5, backoff_s=600.0, gone=server.exit_line)
    assert _ask(model).text  # a scripted reply: the server answers
    os.kill(server.pid, sig)
    # Dead before it is asked: a SIGSEGV kills the other threads of a process only once its core
    # dump starts, so a thread could still answer a request sent at once (CI saw one answered)
    server.process.wait(60)
    t0 = time.monotonic()
    with caplog.at_level(logging.INFO, logger="washexp"), pytest.raises(ModelError) as caught:
        _ask(model)
    line = str(caught.value)
    # a retry would wait 600 s: the bound is far from both sides (not a timing)
    assert time.monotonic() - t0 < 120, "it waited on a server that is gone"
    assert line.startswith(f"the llama.cpp server exited ({sig.name}) after 1 request; its log: ")
    assert line.endswith("server.log") and "\n" not in line
    assert not [r for r in caplog.records if "retry" in r.getMessage()], "a dead server was retried"


def test_a_live_server_that_fails_a_request_is_retried_as_before(server, caplog):
    """The liveness question must not turn an ordinary failure into a death: a refused
    connection to a port nobody serves, while the process lives, is retried."""
    model = OpenAIModel("scripted", "http://127.0.0.1:9/v1", max_retries=1, backoff_s=0.01, gone=server.exit_line)
    with caplog.at_level(logging.INFO, logger="washexp"), pytest.raises(ModelError, match="gave up after 2"):
        _ask(model)
    assert [r for r in caplog.records if "retry 1/1" in r.getMessage()]


def test_the_exit_line_names_the_signal_or_the_code(tmp_path):
    assert llama_server.how_ended(-11) == "SIGSEGV"
    assert llama_server.how_ended(-9) == "SIGKILL"
    assert llama_server.how_ended(1) == "exit code 1"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.exit(3)"], stdin=subprocess.PIPE, start_new_session=True
    )
    s = LlamaServer(proc, 1, "x", tmp_path / "x.log")
    assert s.exit_line(None, grace_s=10).startswith(
        "the llama.cpp server exited (exit code 3) on its start-up self-test"
    )
    assert s.exit_line(2).startswith("the llama.cpp server exited (exit code 3) after 2 requests;")


def test_the_build_line_is_read_as_instruction_sets():
    assert llama_server.build_features(PORTABLE) == ["SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2"]
    assert "AMX_INT8" in llama_server.build_features(NATIVE_XEON)


def test_the_portable_build_runs_where_avx2_is():
    assert llama_server.build_problem(llama_server.build_features(PORTABLE), XEON_FLAGS) is None
    assert llama_server.build_problem(llama_server.build_features(PORTABLE), None) is None  # no cpuinfo


def test_a_native_build_with_amx_is_refused_even_where_the_cpu_lists_amx():
    problem = llama_server.build_problem(llama_server.build_features(NATIVE_XEON), XEON_FLAGS)
    assert problem.startswith("the installed llama.cpp was built for AMX_INT8, a machine-specific build")
    assert problem.endswith(f"(pip uninstall -y llama-cpp-python && {llama_server.INSTALL})")


def test_a_build_for_instructions_this_cpu_lacks_is_refused():
    amd = XEON_FLAGS - {"amx_int8", "amx_tile", "avx512_vnni"}
    problem = llama_server.build_problem(llama_server.build_features(NATIVE_XEON), amd)
    assert problem.startswith(
        "the installed llama.cpp was built for AMX_INT8, AVX512_VNNI, which this CPU does not offer"
    )
    old = {"pni", "ssse3", "avx"}
    assert "AVX2, F16C, FMA, BMI2, which this CPU" in llama_server.build_problem(
        llama_server.build_features(PORTABLE), old
    )


def test_this_machine_reads_its_own_flags():
    flags = llama_server.cpu_flags()
    assert flags is None or "sse2" in flags
