"""``python run.py --help``: washexp's own, built from ``conf/`` and the schema so it cannot drift
(the groups and their options, the short keys, the range sugar, examples). ``--hydra-help`` is
still Hydra's."""

from __future__ import annotations

from pathlib import Path

from washexp import plugins
from washexp.config import SHORT_KEYS

GROUPS = {
    "benchmark": "which family: the compaction study or the wash benchmark",
    "method": "compaction: how a trajectory is compacted (Full, S, H, mask, recency, hybrid, none, your own)",
    "model": "who plays the roles: offline reference, a served model, a local GGUF",
    "measurement": "compaction: single (default), cycles (repeated); wash: ceiling, infinity, sawtooth, ...",
    "washer": "wash: what proposes the cuts",
    "gauge": "wash: when a store is due (and the CoalWash version it follows)",
    "tracking": "where runs go: the project's SQLite store, a tracking server, nowhere",
    "hydra/launcher": "how jobs run: one process (default), joblib, Ray, SLURM",
}
"""The config groups a user picks from, in the order the help lists them."""

EXAMPLES = [
    ("python run.py -m method=S,H topn=0..5", "the 12-arm offline sweep (S and H, Top 0..5, 14 tasks)"),
    ("python run.py method=S topn=3 task=payment", "one cell"),
    ("python run.py -m benchmark=wash measurement=ceiling,infinity,sawtooth", "the wash benchmark, offline"),
    (
        "python run.py -m method=full,S,H topn=0..5 model=openai endpoint.base_url=URL model.name=NAME",
        "the 13-arm panel on a served model",
    ),
    ("python run.py -m method=S,H topn=0..5 tracking=off", "no MLflow at all"),
]


def options(root: Path, group: str) -> list[str]:
    """A group's options: its YAML files, plus the names installed packages register."""
    names = {p.stem for p in (root / "conf" / group).glob("*.yaml")}
    if group in plugins.OPTIONS:  # options installed packages add (``config.register``)
        names |= set(plugins.installed(group))
    return sorted(names, key=str.lower)


def run_help(root: Path) -> str:
    width = max(len(g) for g in GROUPS)
    lines = [
        "usage: python run.py [-m] [GROUP=OPTION ...] [KEY=VALUE ...]",
        "",
        "Runs washexp's benchmarks: one Hydra job per arm (or wash measurement), each an MLflow run.",
        "-m (--multirun) sweeps every comma list and range: method=S,H topn=0..5 is 12 jobs.",
        "The command ends with the sweep's id and the commands that read its runs.",
        "",
        "config groups (GROUP=OPTION):",
    ]
    for group, text in GROUPS.items():
        lines.append(f"  {group:<{width}}  {text}")
        lines.append(f"  {'':<{width}}    {' | '.join(options(root, group)) or '(none)'}")
    lines += [
        "",
        "short keys (KEY=VALUE; each sets the family key on the right):",
        *(f"  {k:<9} -> {v}" for k, v in SHORT_KEYS.items()),
        "  topn is the number of Jev Top-N evidence units fused with the summary (0 = summary only).",
        "",
        "ranges: KEY=A..B is the inclusive integer sweep A, A+1, ..., B (topn=0..5 is 0,1,2,3,4,5);",
        "  run.py rewrites it to Hydra's KEY=range(A,B+1) before Hydra reads the command line.",
        "other keys: any key of the config reference (model.*, endpoint.*, tracking.*, rerun=true);",
        "  +washer.KEY=VALUE adds a plugin washer's argument.",
        "",
        "examples:",
        *(f"  {cmd}\n      {text}" for cmd, text in EXAMPLES),
        "",
        "more: README.md and docs/ (mkdocs serve); --hydra-help for Hydra's own flags.",
    ]
    return "\n".join(lines)
