"""How fast is the real local model here, and how busy does the panel keep it?

    python bench/bench_local.py [--tasks control] [--threads N] [--generations 1] [--answers 1]

Runs the 13-arm panel (Full; S + Top 0..5; H + Top 0..5) with ``model=local`` as a user would,
``python run.py -m method=full,S,H topn=0..5 model=local ...``, on the control cohort by default,
with a fresh recordings folder (every request reaches the model) and tracking off. washexp
starts and stops the llama.cpp server itself; its log holds llama.cpp's own timing of every
request (``prompt eval time``, ``eval time``, ``total time``), from which this prints:

- prompt tokens per second, by llama.cpp's own prompt-eval timer (a prefix the server still
  holds from the previous request is not read again and not counted);
- generation tokens per second;
- the wall time of the panel against the ideal: the sum of the per-request server times, what
  the server alone needs with one request at a time (it has one slot).

The result is the default tier, Qwen2.5-Coder-0.5B-Instruct (Q4_K_M), unless ``--gguf``
names another file; it is labelled so. Needs the extra: pip install -e '.[local]'.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CONTROL = (
    "active_config",
    "backup",
    "checksum_anomaly",
    "dependency_version",
    "meeting_notes",
    "package_versions",
    "refactor",
    "retry_backoff",
    "targeted_edit",
    "three_files",
)
_MS = r"=\s*([\d.]+) ms /\s*(\d+) (?:tokens|runs)"
PROMPT = re.compile(r"prompt eval time " + _MS)
EVAL = re.compile(r"(?<!prompt )eval time " + _MS)
TOTAL = re.compile(r"total time " + _MS)


def server_times(log: str) -> dict[str, float]:
    """Sums over every request in a llama.cpp server log."""
    out = {}
    for name, pattern in (("prompt", PROMPT), ("eval", EVAL), ("total", TOTAL)):
        found = [(float(ms), int(n)) for ms, n in pattern.findall(log)]
        out[f"{name}_ms"] = sum(ms for ms, _ in found)
        out[f"{name}_n"] = sum(n for _, n in found)
        out[f"{name}_count"] = len(found)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default="control", help="control (default), all, or a comma-separated list")
    parser.add_argument("--threads", type=int, default=None, help="server threads (default: every usable core)")
    parser.add_argument("--generations", type=int, default=1)
    parser.add_argument("--answers", type=int, default=1)
    parser.add_argument("--gguf", default=None, help="another GGUF file (default: the 0.5B tier)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: the run and its server stop, tmp is removed
    tasks = {"control": ",".join(CONTROL), "all": "all"}.get(args.tasks, args.tasks)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        command = [
            sys.executable,
            str(ROOT / "run.py"),
            "-m",
            "method=full,S,H",
            "topn=0..5",
            "model=local",
            f"model.generations={args.generations}",
            f"model.answers_per_context={args.answers}",
            f"task={tasks if tasks == 'all' else '[' + tasks + ']'}",
            f"endpoint.recordings={folder / 'rec'}",
            "tracking=off",
            f"hydra.sweep.dir={folder / 'multirun'}",
        ]
        if args.threads:
            command.append(f"endpoint.threads={args.threads}")
        if args.gguf:
            command += ["model.weights=null", f"model.gguf={args.gguf}"]
        start = time.perf_counter()
        proc = subprocess.run(command, cwd=folder, capture_output=True, text=True, env={**os.environ, "CI": "1"})
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(f"bench_local: run.py exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
        log = "".join(p.read_text(errors="replace") for p in sorted((folder / "llama-server").glob("*.log")))
        failed = (proc.stdout + proc.stderr).count(": FAILED:")  # Hydra logs to stdout
    t = server_times(log)
    threads = re.search(r"--n_threads (\d+)", log)
    print(f"model           {args.gguf or 'Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (model=local)'}")
    print(f"server          llama-cpp-python, {threads.group(1) if threads else '?'} threads, one request at a time")
    print(f"panel           13 arms x {len(tasks.split(','))} tasks ({args.tasks}), {args.generations} generation(s),")
    print(f"                {args.answers} answer(s) per context; {failed} condition(s) FAILED (see the runs)")
    print(f"requests        {t['total_count']} served")
    if t["prompt_ms"]:
        print(f"prompt          {t['prompt_n']} tokens read, {t['prompt_n'] / t['prompt_ms'] * 1000:.0f} tokens/s")
    if t["eval_ms"]:
        print(f"generation      {t['eval_n']} tokens, {t['eval_n'] / t['eval_ms'] * 1000:.1f} tokens/s")
    ideal = t["total_ms"] / 1000
    print(f"ideal           {ideal:.1f} s  (sum of the server's per-request times)")
    print(f"wall            {wall:.1f} s  (start-up, server start and stop, harness work included)")
    if ideal:
        print(f"ratio           {wall / ideal:.2f}")


if __name__ == "__main__":
    main()
