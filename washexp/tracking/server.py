"""A local MLflow tracking server (``washexp server``, ``washexp ui``), and whether one answers.

The server is MLflow's own app (``mlflow.server.fastapi_app:app``, what ``mlflow server`` serves),
started so it comes up fast on a small machine. ``mlflow server`` is a launcher: a process that
imports MLflow's CLI and server, then starts uvicorn in a second process that imports the server
again, with four workers and a job-execution runner (huey consumers for GenAI jobs such as
scheduled scorers, which a harness that logs runs never submits). On two cores that took about
30 s to answer. Here one process runs uvicorn with one worker on the same app, handed the
settings the launcher would hand it (:func:`settings`); the UI and the REST API are the same.

The server answers only requests whose ``Host`` header names this machine's loopback
(``localhost``, ``127.0.0.1``, ``[::1]``, bare or with its port), the address it is bound to, or a
name the user allowed (``--allow-host``): a web page that rebinds its own DNS name, or a forged
``Host: 192.168.1.5``, gets a 403 (MLflow's own default lets every private IP literal through).

The child runs behind the parent watch (``washexp.child``): a ``washexp ui`` killed outright
takes its server with it.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Sequence
from pathlib import Path

from washexp.child import module_command

APP = "mlflow.server.fastapi_app:app"
ARTIFACTS_DEFAULT = "./mlartifacts"
"""``mlflow server``'s own default for ``--artifacts-destination``."""


STARLETTE_WSGI = "ignore:starlette.middleware.wsgi is deprecated:UserWarning:mlflow.server.fastapi_app"
"""MLflow's app imports Starlette's deprecated WSGI middleware (``StarletteDeprecationWarning``, a
``UserWarning``): that one warning, from that one module, is MLflow's to fix, not news to a user."""


def command(host: str, port: int) -> list[str]:
    """uvicorn serving MLflow's app with one worker and MLflow's log format, watched by its parent."""
    args = ["--log-config", str(_log_config()), "--host", host, "--port", str(port), "--workers", "1", APP]
    return module_command(sys.executable, "uvicorn", args, ignored=(STARLETTE_WSGI,))


def _log_config() -> Path:
    """MLflow's uvicorn log config, found without importing MLflow's server."""
    spec = importlib.util.find_spec("mlflow")
    return Path(next(iter(spec.submodule_search_locations))) / "server" / "uvicorn_log_config.yaml"


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


def settings(backend_store_uri: str, artifacts: Path | None = None, hosts: Sequence[str] = ()) -> dict[str, str]:
    """What ``mlflow server --backend-store-uri URI [--artifacts-destination DIR]`` hands its
    worker, through the environment (names from ``mlflow.server.constants``, which cannot be
    imported without importing the whole server; a test holds them equal): the store for runs
    and models, served artifacts (``mlflow-artifacts:/``, kept in ``artifacts``), uvicorn as
    the server, no job execution, and the Host headers it answers (``hosts``; default: the
    loopback names)."""
    return {
        "_MLFLOW_SERVER_FILE_STORE": backend_store_uri,
        "_MLFLOW_SERVER_REGISTRY_STORE": backend_store_uri,
        "_MLFLOW_SERVER_ARTIFACT_ROOT": "mlflow-artifacts:/",
        "_MLFLOW_SERVER_SERVE_ARTIFACTS": "true",
        "_MLFLOW_SERVER_ARTIFACT_DESTINATION": str(artifacts) if artifacts is not None else ARTIFACTS_DEFAULT,
        "_MLFLOW_SGI_NAME": "uvicorn",
        "_MLFLOW_SERVER_BOOT_ID": uuid.uuid4().hex,
        "_MLFLOW_IN_JOB_EXECUTOR": "false",
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        "MLFLOW_SERVER_ALLOWED_HOSTS": ",".join(hosts or LOOPBACK),
    }


def start(
    backend_store_uri: str, host: str, port: int, artifacts: Path | None = None, allow: Sequence[str] = ()
) -> subprocess.Popen:
    """The server on ``host:port``; ``allow``: Host headers it answers besides its own (see the module doc)."""
    env = {**os.environ, **settings(backend_store_uri, artifacts, allowed_hosts(host, port, allow))}
    return subprocess.Popen(command(host, port), env=env, stdin=subprocess.PIPE)


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
    return bool(uri) and uri.startswith(("http://", "https://")) and not healthy(uri)


def stop(server: subprocess.Popen) -> None:
    """End the server: SIGTERM (uvicorn shuts down in order), SIGKILL if it hangs."""
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    if server.stdin and not server.stdin.closed:
        server.stdin.close()
