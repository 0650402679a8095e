"""A local MLflow tracking server (``washexp server``, ``washexp ui``), and whether one answers.

The server is MLflow's own (``mlflow server``), started so it comes up fast on a small machine:
one uvicorn worker instead of MLflow's four, and no job-execution runner (the huey consumers serve
GenAI jobs such as scheduled scorers, which a harness that logs runs never submits). Each worker
and runner is a Python process that imports all of MLflow; on two cores they took about 30 s
to answer. The UI is the same: the same app, the same pages.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path


def command(backend_store_uri: str, host: str, port: int, artifacts: Path | None = None) -> list[str]:
    """``mlflow server`` serving ``backend_store_uri``; with ``artifacts``, it also serves run
    artifacts from that folder (clients upload them over HTTP)."""
    cmd = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", backend_store_uri]
    cmd += ["--host", host, "--port", str(port), "--workers", "1"]
    if artifacts is not None:
        cmd += ["--artifacts-destination", str(artifacts)]
    return cmd


def start(backend_store_uri: str, host: str, port: int, artifacts: Path | None = None) -> subprocess.Popen:
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    return subprocess.Popen(command(backend_store_uri, host, port, artifacts), env=env)


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
    """End the server (MLflow forwards SIGTERM to its uvicorn worker)."""
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
