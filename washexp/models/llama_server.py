"""The life of one local llama.cpp server: llama-cpp-python's OpenAI-compatible server, started
as a child process on a free 127.0.0.1 port and stopped by its owner.

- :func:`start` checks that the installed llama.cpp build runs on this CPU (:func:`check_build`),
  runs ``python -m llama_cpp.server --model FILE --n_ctx N --n_threads T --model_alias NAME``
  (through ``washexp.models.llama_child``, with its prompt cache: :func:`server_command`) with
  its output in a log file, waits until ``/v1/models`` answers with that alias, then sends
  one tiny completion (:func:`self_test`): a build that crashes on its first request is found
  before any condition runs. A server that exits before it answers is a one-line
  :class:`~washexp.errors.ConfigError` naming the file (exit 2); one that never answers, or
  dies in its self-test, a one-line :class:`~washexp.errors.ModelError`.
- :meth:`LlamaServer.exit_line` says how a server that died mid-sweep ended (the signal, the
  requests it answered, its log): the openai client asks it on a failed request instead of
  retrying against a process that is gone.
- :meth:`LlamaServer.stop` ends it (SIGTERM, then SIGKILL after a grace period) and waits for
  it; it is idempotent and also runs at interpreter exit. Its owner calls it: in a sweep, the
  roles hold the server and ``Sweep.close()`` closes them, on success, failure, Ctrl-C and SIGTERM.
- A parent killed outright (SIGKILL) cannot stop anything, so the child watches for it: it runs
  the server behind a watchdog thread that blocks on its stdin, a pipe only the parent holds;
  when the parent dies the pipe closes and the child exits at once. No orphan either way.

The child has its own session, so a Ctrl-C at the terminal reaches washexp alone, which then
stops the server in order. Nothing is downloaded: the model is a local file.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from washexp.child import module_command, printable
from washexp.errors import ConfigError, ModelError, WashexpError

INSTALL = "sh scripts/install-local.sh"
"""The one install line of the ``[local]`` extra: a portable llama.cpp build (see the script)."""
HOST = "127.0.0.1"
STOP_GRACE_S = 5.0
PROMPT_CACHE_BYTES = 2 << 30
"""The server's RAM prompt cache: a few states of the largest wash store (about 540 MB each on the
1.5B tier: its KV cache and its saved logits), dozens of short ones."""


def llama_cpp_version(config: str = "local", install: str = INSTALL) -> str:
    """The installed llama-cpp-python version, or a ConfigError naming the ``model=`` option asked
    for and every command it needs installed (a larger tier's weights are a second step)."""
    try:
        import llama_cpp
    except ImportError:
        raise ConfigError(f"model={config} needs the local extra: {install}") from None
    return llama_cpp.__version__


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def gguf_facts(path: Path) -> dict[str, str]:
    """What the file says it is: its ``general.name``, size label, quantisation and trained
    context length, read from its metadata (vocabulary only: no weights are loaded)."""
    import llama_cpp

    with quiet_stderr():  # llama.cpp's C code writes warnings to fd 2 even with verbose=False
        try:
            llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        except ValueError:  # llama-cpp-python's "Failed to load model from file"
            raise ConfigError(f"model.gguf={str(path)!r}: not a GGUF file llama.cpp can load") from None
        try:
            meta = dict(llm.metadata)
        finally:
            llm.close()
    ftypes = {v: k.removeprefix("LLAMA_FTYPE_MOSTLY_") for k, v in vars(llama_cpp).items() if k.startswith("LLAMA_FT")}
    arch = meta.get("general.architecture", "")
    file_type = meta.get("general.file_type")
    return {
        "name": meta.get("general.name", ""),
        "size": meta.get("general.size_label", ""),
        "quantisation": ftypes.get(int(file_type), file_type) if file_type is not None else "",
        "trained_n_ctx": meta.get(f"{arch}.context_length", ""),
    }


@contextlib.contextmanager
def quiet_stderr():
    """File descriptor 2 to /dev/null for a moment (start-up, before any worker thread exists)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def port_free(port: int) -> bool:
    """Nothing listens on ``127.0.0.1:port`` (the test of a stopped server)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        return s.connect_ex((HOST, port)) != 0


@dataclass
class LlamaServer:
    """A started server. ``base_url`` is what an OpenAI client takes."""

    process: subprocess.Popen
    port: int
    alias: str
    log_path: Path
    _read_to: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process.poll() is None

    def exit_line(self, answered: int | None, grace_s: float = 1.0) -> str | None:
        """How the server ended, as the one line a user sees, or None while it runs; ``answered``
        is the requests it answered (None: it died in its start-up self-test). A request fails a
        moment before its server is reaped: wait ``grace_s`` for that before saying None."""
        try:
            code = self.process.wait(grace_s)
        except subprocess.TimeoutExpired:
            return None
        when = (
            "on its start-up self-test"
            if answered is None
            else f"after {answered} request{'' if answered == 1 else 's'}"
        )
        return f"the llama.cpp server exited ({how_ended(code)}) {when}; its log: {shown(self.log_path)}"

    def stop(self) -> None:
        """End the server and wait for it (SIGTERM, then SIGKILL); safe to call twice."""
        with self._lock:
            proc = self.process
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)  # its own session: the group is the server
                try:
                    proc.wait(STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            if proc.stdin and not proc.stdin.closed:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            atexit.unregister(self.stop)

    close = stop

    def __enter__(self) -> LlamaServer:
        return self

    def __exit__(self, *_) -> None:
        self.stop()

    def new_log(self) -> str:
        """The log written since the previous call (the first call: from the start)."""
        with self._lock, open(self.log_path, "rb") as f:
            f.seek(self._read_to)
            data = f.read()
            self._read_to += len(data)
        return data.decode("utf-8", errors="replace")


def how_ended(code: int) -> str:
    """``SIGSEGV`` for a process a signal ended, ``exit code 1`` for one that exited."""
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def shown(path: Path) -> str:
    """A path as a user at this working directory would type it."""
    relative = os.path.relpath(path)
    return path.as_posix() if relative.startswith("..") else relative


FEATURE_FLAGS = {
    "SSE3": "pni",
    "SSSE3": "ssse3",
    "AVX": "avx",
    "AVX2": "avx2",
    "AVX_VNNI": "avx_vnni",
    "F16C": "f16c",
    "FMA": "fma",
    "BMI2": "bmi2",
    "AVX512": "avx512f",
    "AVX512_VBMI": "avx512vbmi",
    "AVX512_VNNI": "avx512_vnni",
    "AVX512_BF16": "avx512_bf16",
    "AMX_INT8": "amx_int8",
    "AMX_BF16": "amx_bf16",
}
"""The x86 instruction sets llama.cpp's build line names, and the ``/proc/cpuinfo`` flag of each.
Names not here (LLAMAFILE, OPENMP, REPACK, ARM's) are not instruction sets this check judges."""


def build_features(system_info: str) -> list[str]:
    """The instruction sets a llama.cpp build uses, from its ``llama_print_system_info()`` line
    (``CPU : SSE3 = 1 | AVX = 1 | ... |``)."""
    found = re.findall(r"([A-Z0-9_]+) = 1", system_info)
    return [name for name in found if name in FEATURE_FLAGS]


def cpu_flags() -> set[str] | None:
    """This CPU's flags from ``/proc/cpuinfo`` (None where there is no such file)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    match = re.search(r"^flags\s*:(.*)$", text, flags=re.M)
    return set(match.group(1).split()) if match else None


def build_problem(features: list[str], flags: set[str] | None) -> str | None:
    """Why a build with these instruction sets cannot serve on a CPU with these flags, or None.
    AMX is refused even where the CPU lists it: a native build with AMX crashed on its first
    request on such a machine (the kernel grants AMX state per process), and a machine-specific
    build is the wrong install anyway."""
    amx = [f for f in features if f.startswith("AMX")]
    lacking = [f for f in features if flags is not None and FEATURE_FLAGS[f] not in flags]
    bad = list(dict.fromkeys(amx + lacking))
    if not bad:
        return None
    return (
        f"the installed llama.cpp was built for {', '.join(bad)}, "
        f"{'which this CPU does not offer' if lacking else 'a machine-specific build'}: "
        f"reinstall it portable (pip uninstall -y llama-cpp-python && {INSTALL})"
    )


def check_build() -> str:
    """The installed build's instruction sets, or a ConfigError if it cannot run here."""
    import llama_cpp

    features = build_features(llama_cpp.llama_print_system_info().decode(errors="replace"))
    problem = build_problem(features, cpu_flags())
    if problem:
        raise ConfigError(problem)
    return " ".join(features)


def _last_line(path: Path) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def _models(base_url: str) -> list[str] | None:
    """The ids ``/v1/models`` lists, or None while nothing answers."""
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=2) as reply:
            return [m.get("id") for m in json.load(reply).get("data", [])]
    except (OSError, ValueError):  # refused, reset, timed out (URLError is an OSError), not JSON yet
        return None


def server_command(
    python: str,
    gguf: Path,
    alias: str,
    port: int,
    n_ctx: int,
    threads: int,
    cache_bytes: int = PROMPT_CACHE_BYTES,
    extra: tuple[str, ...] = (),
) -> list[str]:
    """The llama.cpp server's command line: bound to ``HOST`` (127.0.0.1), never every interface.

    ``--logits_all false``: the server's default keeps the logits of every prompt token (600 KB a
    token with Qwen's 152k vocabulary, written for nothing: washexp asks for no logprobs). The
    server reuses the prefix of the request just before; ``cache_bytes`` > 0 adds its RAM cache of
    earlier prompts (``llama_child`` makes it count all it keeps), so a gate's outsider, insider
    and check, which alternate on one store, each find their own prefix again. Neither changes
    which model answers or what a request is, so neither enters a recording key. ``extra``: more
    of the server's own options, last (``bench/bench_serving.py`` sets its old defaults back)."""
    cache = ["--cache", "true", "--cache_type", "ram", "--cache_size", str(cache_bytes)] if cache_bytes > 0 else []
    return module_command(
        python,
        "washexp.models.llama_child",
        [
            "--model",
            str(gguf),
            "--model_alias",
            alias,
            "--host",
            HOST,
            "--port",
            str(port),
            "--n_ctx",
            str(n_ctx),
            "--n_threads",
            str(threads),
            "--n_threads_batch",
            str(threads),
            "--logits_all",
            "false",
            *cache,
            *extra,
        ],
    )


def start(
    gguf: Path,
    *,
    alias: str,
    n_ctx: int,
    threads: int | None,
    log_path: Path,
    timeout_s: float = 120.0,
    python: str = sys.executable,
    cache_bytes: int = PROMPT_CACHE_BYTES,
    extra: tuple[str, ...] = (),
) -> LlamaServer:
    """Start the server on a free port and return once it answers with ``alias`` (``cache_bytes``,
    ``extra``: see :func:`server_command`)."""
    llama_cpp_version()  # the extra is there, or one line naming the pip command
    gguf = Path(gguf)
    if not gguf.is_file():
        raise ConfigError(f"model.gguf={str(gguf)!r}: no such file")
    features = check_build()
    threads = threads or len(os.sched_getaffinity(0))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(3):  # a free port can be taken between our probe and the server's bind
        port = free_port()
        command = server_command(python, gguf, alias, port, n_ctx, threads, cache_bytes, extra)
        with open(log_path, "ab") as log:
            log.write(f"# washexp: llama.cpp build: {features}\n# washexp: {printable(command)}\n".encode())
            log.flush()
            process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        server = LlamaServer(process, port, alias, log_path)
        atexit.register(server.stop)
        with open(log_path, "ab") as log:  # O_APPEND, like the child's own writes
            log.write(f"# washexp: server pid {process.pid} on port {port}\n".encode())
        try:
            _wait_ready(server, gguf, timeout_s)
            self_test(server)
            return server
        except WashexpError:
            server.stop()
            if attempt < 2 and "address already in use" in _last_line(log_path).lower():
                continue
            raise
        except BaseException:  # Ctrl-C while waiting: never leave it behind
            server.stop()
            raise
    raise AssertionError("unreachable")


def _wait_ready(server: LlamaServer, gguf: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if not server.running():
            raise ConfigError(
                f"the local llama.cpp server exited ({how_ended(server.process.returncode)}) before it answered, "
                f"serving {gguf}: {_last_line(server.log_path)} (its log: {shown(server.log_path)})"
            )
        ids = _models(server.base_url)
        if ids is not None:
            if server.alias not in ids:
                raise ModelError(f"the local server at {server.base_url} serves {ids}, not {server.alias!r}")
            return
        if time.monotonic() > deadline:
            raise ModelError(
                f"the local llama.cpp server did not answer within {timeout_s:.0f} s "
                f"(endpoint.startup_timeout_s; log: {server.log_path})"
            )
        time.sleep(0.1)


SELF_TEST = {"messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1, "temperature": 0.0}
"""The start-up self-test: one token of one tiny chat completion."""


def self_test(server: LlamaServer, timeout_s: float = 120.0) -> None:
    """One tiny completion before the first condition: a build that cannot compute (it crashes on
    its first request) is one line here, not a sweep of failed conditions. Its cost goes to the
    server's log, an artifact of the runs."""
    body = json.dumps({**SELF_TEST, "model": server.alias}).encode()
    request = urllib.request.Request(f"{server.base_url}/chat/completions", body, {"Content-Type": "application/json"})
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as reply:
            usage = json.load(reply).get("usage") or {}
    except (OSError, ValueError) as err:  # refused, reset, timed out, an HTTP error, not JSON
        died = server.exit_line(None)
        if died:
            raise ModelError(died) from None
        raise ModelError(f"the local llama.cpp server failed its start-up self-test: {err}") from None
    with open(server.log_path, "ab") as log:
        log.write(
            f"# washexp: self-test: {usage.get('prompt_tokens')} prompt + {usage.get('completion_tokens')} "
            f"completion tokens in {time.perf_counter() - t0:.2f} s\n".encode()
        )


_PROMPT_EVAL = re.compile(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens")
_PREFIX_HIT = re.compile(r"Llama\.generate: (\d+) prefix-match hit")


SERVER_COUNTS = ("server_completions", "server_prompt_tokens_evaluated", "server_prompt_tokens_reused")
"""What the server did: a replay starts no server, so a run replayed has none of them."""


def prompt_tokens_evaluated(logs: dict[str, str]) -> dict[str, float]:
    """From the server's log since the last look (``{"llama-server.log": text}``; nothing without a
    local server): the completions it ran, the prompt tokens it evaluated for them (llama.cpp's own
    ``prompt eval`` lines) and those it reused, from the prompt before or its prompt cache, instead
    of evaluating them (``prefix-match hit``). Evaluated plus reused is what a server without
    either evaluates."""
    if "llama-server.log" not in logs:
        return {}
    text = logs["llama-server.log"]
    counts = [int(n) for n in _PROMPT_EVAL.findall(text)]
    reused = sum(int(n) for n in _PREFIX_HIT.findall(text))
    return dict(zip(SERVER_COUNTS, (float(len(counts)), float(sum(counts)), float(reused)), strict=True))
