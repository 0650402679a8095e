"""A local MLflow tracking server (``washexp server``, ``washexp ui``), and whether one answers.

The server is MLflow's own, started through its documented command line (``python -m mlflow
server --backend-store-uri URI --artifacts-destination DIR --host H --port P ...``,
:func:`command`) with what keeps it quick on a small machine: one worker (``--workers 1``; the
default four took about 30 s to answer on two cores) and no job execution
(``MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false``: huey consumers for GenAI jobs such as scheduled
scorers, which a harness that logs runs never submits). The UI and the REST API are MLflow's.

The server answers only requests whose ``Host`` header names this machine's loopback
(``localhost``, ``127.0.0.1``, ``[::1]``, bare or with its port), the address it is bound to, or a
name the user allowed (``--allow-host``): a web page that rebinds its own DNS name, or a forged
``Host: 192.168.1.5``, gets a 403 (MLflow's own default lets every private IP literal through).

``mlflow server`` is a launcher that runs uvicorn as a child of its own. Both run in a process
group of their own behind the parent watch (``washexp.child``): a stop signals the group, and a
``washexp ui`` killed outright takes the whole group with it, never an orphan uvicorn.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path

from washexp.child import module_command

ARTIFACTS_DEFAULT = "./mlartifacts"
"""``mlflow server``'s own default for ``--artifacts-destination``."""


STARLETTE_WSGI = "ignore:starlette.middleware.wsgi is deprecated:UserWarning:mlflow.server.fastapi_app"
"""MLflow's app imports Starlette's deprecated WSGI middleware (``StarletteDeprecationWarning``, a
``UserWarning``): that one warning, from that one module, is MLflow's to fix, not news to a user."""


def command(
    backend_store_uri: str, host: str, port: int, artifacts: Path | None = None, hosts: Sequence[str] = ()
) -> list[str]:
    """``python -m mlflow server`` with its documented options, watched by its parent: the store
    for runs and models, served artifacts (``mlflow-artifacts:/``, kept in ``artifacts``), one
    worker, and the Host headers it answers (``hosts``; default: the loopback names)."""
    args = ["server", "--backend-store-uri", backend_store_uri, "--serve-artifacts"]
    args += ["--artifacts-destination", str(artifacts) if artifacts is not None else ARTIFACTS_DEFAULT]
    args += ["--host", host, "--port", str(port), "--workers", "1", "--allowed-hosts", ",".join(hosts or LOOPBACK)]
    return module_command(sys.executable, "mlflow", args, group=True)


def environment(env: dict[str, str]) -> dict[str, str]:
    """``env`` for the server: no job execution (a documented MLflow variable), and the Starlette
    warning ignored in its uvicorn child too (``PYTHONWARNINGS``, which a child inherits)."""
    warnings = ",".join(filter(None, [env.get("PYTHONWARNINGS"), STARLETTE_WSGI]))
    return {**env, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "PYTHONWARNINGS": warnings}


LOOPBACK = ("localhost", "127.0.0.1", "[::1]")


def allowed_hosts(host: str, port: int, extra: Sequence[str] = ()) -> list[str]:
    """The Host headers the server answers: each loopback name and the bound address (an IPv6
    one in brackets; not the unspecified address, which names every interface), bare and with
    ``:port``, then ``extra`` as given (MLflow matches an entry holding ``*`` as a pattern)."""
    bound = f"[{host}]" if ":" in host and not host.startswith("[") else host
    names = dict.fromkeys([*LOOPBACK, *([] if _unspecified(host) else [bound])])
    return [h for name in names for h in (name, f"{name}:{port}")] + [h for h in extra if h]


def _unspecified(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:  # a name
        return not host


def start(
    backend_store_uri: str, host: str, port: int, artifacts: Path | None = None, allow: Sequence[str] = ()
) -> subprocess.Popen:
    """The server on ``host:port``; ``allow``: Host headers it answers besides its own (see the module doc)."""
    cmd = command(backend_store_uri, host, port, artifacts, allowed_hosts(host, port, allow))
    # a group of its own: the launcher and its uvicorn child are stopped (or killed) together
    return subprocess.Popen(cmd, env=environment(dict(os.environ)), stdin=subprocess.PIPE, start_new_session=True)


def wait_healthy(url: str, server: subprocess.Popen, timeout_s: float = 180.0) -> bool:
    """True once ``url``'s ``/health`` answers 200; False if the server exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            return False
        if healthy(url, timeout_s=2):
            return True
        time.sleep(0.2)
    return False


def healthy(url: str, timeout_s: float = 5.0) -> bool:
    """Whether the MLflow server at ``url`` answers its ``/health`` route with 200."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/health", timeout=timeout_s) as reply:
            return reply.status == 200
    except (OSError, ValueError):  # refused, timed out, unknown host, not an http URL
        return False


def unanswered(uri: str | None) -> bool:
    """An ``http(s)://`` tracking URI whose server does not answer (other URIs: False)."""
    return uri is not None and uri.startswith(("http://", "https://")) and not healthy(uri)


def stop(server: subprocess.Popen) -> None:
    """End the server: SIGTERM (uvicorn shuts down in order), SIGKILL if it hangs; to its whole
    process group when it leads one (:func:`start`: the launcher and its uvicorn child)."""
    if server.poll() is None:
        _signal(server, signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            _signal(server, signal.SIGKILL)
            server.wait()
    if server.stdin and not server.stdin.closed:
        server.stdin.close()


def _signal(process: subprocess.Popen, signum: int) -> None:
    with suppress(ProcessLookupError):
        if os.getpgid(process.pid) == process.pid:  # a group's leader: the group
            os.killpg(process.pid, signum)
        else:
            process.send_signal(signum)
