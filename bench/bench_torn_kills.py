"""Washes killed just after their snapshot appears: is a torn store ever read as if whole? (issue 48)

    python bench/bench_torn_kills.py [--kills 30] [--seed N] [--store plump-real]

Each kill: a copy of the store in a temporary folder, ``washexp wash COPY --tier full --washer
reference --operator approve-all --gauge off``, SIGKILL 0 to 30 ms (uniform) after
``.washexp-snapshot/`` appears. Then, before any wash: ``washexp score FIXTURE COPY``, ``caliper``,
``gate`` and ``recall`` on the copy, each read either refused naming the journal (non-zero, the
journal's path in its one line) or, with no journal left, run on a store that is whole (its
``*.md`` files as before or as after the wash). Then ``washexp wash COPY --recover``: the copy must
be as before or after. Printed: one line per kill (the delay, whether a journal was pending,
whether the files were torn, each read's exit status), then the counts. Done (issue 48): every
read of a torn store refused, every store whole after ``--recover``.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from washexp.wash.store.apply import SNAPSHOT_DIR, pending_journal  # noqa: E402

WASH = ["--tier", "full", "--washer", "reference", "--operator", "approve-all", "--gauge", "off"]


def washexp(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "washexp.cli", *args], capture_output=True, text=True, env=env)


def md_state(store: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in store.iterdir() if p.name.endswith(".md")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--seed", type=int, default=20261206)
    parser.add_argument("--store", default="plump-real")
    opts = parser.parse_args()
    fixture = ROOT / "fixtures" / "wash" / opts.store
    rng = random.Random(opts.seed)
    counts = {"pending": 0, "torn": 0, "reads": 0, "refused": 0, "read whole": 0, "read torn": 0, "not whole after": 0}
    with tempfile.TemporaryDirectory(prefix="torn-kills-") as tmp:
        after = Path(shutil.copytree(fixture, Path(tmp) / "after"))
        done = washexp("wash", str(after), *WASH)
        assert done.returncode == 0, done.stderr
        before_md, after_md = md_state(fixture), md_state(after)
        assert before_md != after_md, "the wash changed nothing: pick a store with work"
        for i in range(opts.kills):
            store = Path(shutil.copytree(fixture, Path(tmp) / f"kill-{i:02d}"))
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            child = subprocess.Popen(
                [sys.executable, "-m", "washexp.cli", "wash", str(store), *WASH],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            while not (store / SNAPSHOT_DIR).exists() and child.poll() is None:
                pass
            delay = rng.uniform(0.0, 0.030)
            time.sleep(delay)
            child.send_signal(signal.SIGKILL)
            child.wait()
            wal = pending_journal(store)
            now = md_state(store)
            torn = now not in (before_md, after_md)
            counts["pending"] += wal is not None
            counts["torn"] += torn
            codes = []
            for args in (
                ["score", str(fixture), str(store)],
                ["caliper", str(store)],
                ["gate", str(fixture), str(store)],
                ["recall", str(fixture), str(store)],
            ):
                read = washexp(*args)
                counts["reads"] += 1
                refused = wal is not None and read.returncode != 0 and str(wal) in read.stderr
                counts["refused"] += refused
                if not refused:
                    counts["read torn" if torn else "read whole"] += 1
                codes.append(f"{args[0]}={read.returncode}{' refused' if refused else ''}")
            (store / ".washexp-gauge.json").unlink(missing_ok=True)  # caliper's state: not the wash's
            recovered = washexp("wash", str(store), "--recover")
            whole = recovered.returncode == 0 and md_state(store) in (before_md, after_md)
            counts["not whole after"] += not whole
            print(
                f"kill {i:02d} +{delay * 1000:4.1f} ms · journal {'pending' if wal else 'none   '} · "
                f"{'TORN ' if torn else 'whole'} · {' '.join(codes)} · --recover: "
                f"{'whole' if whole else 'NOT WHOLE'} ({recovered.stderr.strip().rpartition(': ')[2]})"
            )
    print(
        f"{opts.kills} kills: {counts['pending']} left a pending journal, {counts['torn']} left the files torn; "
        f"{counts['reads']} reads: {counts['refused']} refused naming the journal, {counts['read whole']} read a "
        f"whole store, {counts['read torn']} read a torn one; not whole after --recover: {counts['not whole after']}"
    )
    return 1 if counts["read torn"] or counts["not whole after"] else 0


if __name__ == "__main__":
    sys.exit(main())
