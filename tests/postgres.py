"""A throwaway PostgreSQL cluster for tests, where the machine has PostgreSQL and the
``postgres`` extra (psycopg); a test that asks for one is skipped, with the reason, otherwise."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:  # bound, then released: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else shutil.which("initdb") and Path(shutil.which("initdb")).parent


@contextmanager
def postgres_cluster() -> Iterator[str]:
    """A PostgreSQL cluster on a free port, run by an unprivileged user (PostgreSQL refuses to
    run as root), with an empty ``mlflow`` database; yields its ``postgresql+psycopg://`` URI."""
    bin_dir = _postgres_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql provides initdb and pg_ctl)")
    pytest.importorskip("psycopg", reason="the postgres extra is not installed (pip install -e .[postgres])")
    as_user = []
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser: cannot start PostgreSQL as an unprivileged user")
        as_user = ["runuser", "-u", "nobody", "--"]
    folder = Path(tempfile.mkdtemp(prefix="washexp-pg-"))  # not under pytest's root-only tmp
    if as_user:
        shutil.chown(folder, "nobody", "nogroup")
    port = free_port()
    data, log = folder / "data", folder / "log"

    def pg(*cmd: str) -> None:
        subprocess.run([*as_user, str(bin_dir / cmd[0]), *cmd[1:]], check=True, capture_output=True, cwd=folder)

    try:
        pg("initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        opts = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1"
        pg("pg_ctl", "-D", str(data), "-o", opts, "-l", str(log), "-w", "start")
        pg("createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "mlflow")
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/mlflow"
    finally:
        if data.exists():
            stop_cmd = [*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"]
            subprocess.run(stop_cmd, capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
