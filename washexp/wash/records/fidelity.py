"""The wash record's controlled-experiment and chain tables and plots.

From each chosen ``controlled`` / ``chain`` measurement run's store runs (kind
``wash-fidelity``), read back from their ``controlled.json`` / ``chain.json`` artifacts:

- **controlled**: arm · stores · bytes · saving % · token recall (mean, min-max over counted runs)
  · tokens lost · needles kept · in band / out of band · recoverability; then lost by class (corpus
  count, mean dropped, % lost) per arm; then every run raw. Sums are over the stores; an arm's
  recall is its kept tokens over the corpus, both summed over stores (per store: the mean over its
  counted runs). A store whose arm has no counted run is left out of that arm's row and named.
- **chain**: chain · stage · bytes · cumulative recall · pairwise recall (pooled over stores the
  same way), the one-shot control; then by class at the last pass.
- The instruction each compressor got, verbatim.

A FINISHED store run without its artifact is an error, never an empty row.
"""

from __future__ import annotations

import io
from collections.abc import Callable

import pandas as pd
from matplotlib.ticker import MaxNLocator

from washexp.errors import WashexpError
from washexp.export.plots import plt  # pyplot with the Agg backend chosen
from washexp.export.records import Column, Plot, Table
from washexp.tracking.kinds import KIND_TAG, Kind
from washexp.wash.coalwash.recall import CLASSES

RECOVERABILITY = "not measured"
RECOVERABILITY_NOTE = (
    "Recoverability (what left the live files but survives in an archive file) is not measured: a wash plan cannot "
    "create a file, so no arm can archive; the column says so rather than 0."
)
NOTE = (
    "Controlled and chain (CoalWash's 2026-07-12 and 2026-07-15 designs): structured-token recall is counted by "
    "washexp's port of the fidelity gate's inventory over the top-level *.md files (wikilinks, dates, versions, "
    "links, frontmatter keys, code spans, quotes, numbers; a multiset over the store's distinct lines), never by the "
    "washer's own gate or report. The gated arm washes with the gauge off. truncate is a labelled, deterministic, "
    "model-free baseline that cuts to a byte target, never a model. Recall counts every structured token, those in "
    "planted fat too: the gated arm's losses are drops its operator approved (fat deletes and what they entail) or "
    "values the gate counts otherwise (a frontmatter key another file still declares); an ungated arm's are "
    "whatever it cut. " + RECOVERABILITY_NOTE
)
ARM_ORDER = {"unchecked": 0, "gated": 1, "truncate": 2, "plain": 3}


def _raws(parents: pd.DataFrame, kids: pd.DataFrame, name: str, read: Callable[[str, str], dict | None]):
    out = []
    for _, p in parents.iterrows():
        mine = kids[(kids["parent"] == p["run_id"]) & (kids[f"tags.{KIND_TAG}"] == Kind.WASH_FIDELITY)]
        for _, kid in mine.drop_duplicates("tags.store").iterrows():
            if kid["status"] != "FINISHED":
                continue
            raw = read(kid["run_id"], name)
            if raw is None:
                raise WashexpError(f"store run {kid['run_id']} ({kid.get('tags.store')}): FINISHED without {name}")
            out.append((p, raw))
    return out


def _pct(v) -> str:
    return "n/a" if v is None else f"{v:.1f}%"


def _int(v) -> str:
    return "n/a" if v is None else f"{v:.0f}"


def _counted(runs: list[dict]) -> list[dict]:
    return [r for r in runs if r["failed"] is None and (r["in_band"] is not False or r["own_size"])]


def _mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else None


def controlled_tables(parents, kids, read, stem: str) -> tuple[list[Table], Table, Plot, dict[str, str]]:
    """(the arm table and lost-by-class table, the raw runs table, the plot, instructions)."""
    rows, by_class, raw_rows, points = [], [], [], {}
    instructions: dict[str, str] = {}
    for _, raw in _raws(parents, kids, "controlled.json", read):
        gated = raw["gated_washer"]
        instructions |= {(gated if k == "gated" else k): v for k, v in raw["instructions"].items()}
        for r in raw["runs"]:
            raw_rows.append(
                {
                    "store": raw["store"],
                    "arm": r["arm"],
                    "repeat": r["repeat"],
                    "target_bytes": raw["target_bytes"],
                    "bytes": r["bytes"],
                    "always_loaded_bytes": r["always_loaded_bytes"],
                    "saving_pct": r["saving_pct"],
                    "in_band": "own size" if r["own_size"] else r["in_band"],
                    "recall_pct": (r["recall"] or {}).get("recall_pct"),
                    "tokens_lost": None if r["recall"] is None else r["recall"]["total"] - r["recall"]["kept"],
                    "needles_kept": r["needles_kept"],
                    "needles_lost": ", ".join(r["needles_lost"]),
                    "failed": r["failed"],
                    "gated_washer": gated,
                }
            )
    frame = pd.DataFrame(raw_rows)
    if frame.empty:
        raise WashexpError("controlled: no finished store run to report")
    per_store: dict[tuple[str, str], dict[str, dict]] = {}
    raws = _raws(parents, kids, "controlled.json", read)
    several = len({p["washer"] for p, _ in raws}) > 1
    for p, raw in raws:
        for arm in dict.fromkeys(r["arm"] for r in raw["runs"]):
            runs = [r for r in raw["runs"] if r["arm"] == arm]
            slot = per_store.setdefault((p["washer"], arm), {})
            slot[raw["store"]] = {"raw": raw, "runs": runs, "counted": _counted(runs)}
    for washer, arm in sorted(per_store, key=lambda k: (k[0], ARM_ORDER.get(k[1], 9), k[1])):
        stores = per_store[(washer, arm)]
        counted = {s: v for s, v in stores.items() if v["counted"]}
        total = sum(v["raw"]["store_bytes"] for v in counted.values())
        nbytes = sum(_mean(r["bytes"] for r in v["counted"]) for v in counted.values())
        corpus = sum(v["counted"][0]["recall"]["total"] for v in counted.values())
        kept = sum(_mean(r["recall"]["kept"] for r in v["counted"]) for v in counted.values())
        per_run = [r["recall"]["recall_pct"] for v in counted.values() for r in v["counted"]]
        needles = sum(_mean(r["needles_kept"] for r in v["counted"]) for v in counted.values())
        muscle = sum(v["counted"][0]["needles_kept"] + len(v["counted"][0]["needles_lost"]) for v in counted.values())
        runs = [r for v in stores.values() for r in v["runs"]]
        label = next(iter(stores.values()))["raw"]["gated_washer"] if arm == "gated" else arm
        rows.append(
            {
                "arm": f"{label} (washer={washer} run)" if several else label,
                "stores": len(counted),
                "left_out": ", ".join(sorted(set(stores) - set(counted))),
                "bytes": nbytes if counted else None,
                "saving_pct": 100.0 * (total - nbytes) / total if total else None,
                "recall_pct": 100.0 * kept / corpus if corpus else None,
                "recall_min_pct": min((x for x in per_run if x is not None), default=None),
                "recall_max_pct": max((x for x in per_run if x is not None), default=None),
                "tokens_lost": corpus - kept if counted else None,
                "tokens_total": corpus,
                "needles_kept": needles,
                "muscle_total": muscle,
                "in_band_runs": sum(r["in_band"] is True for r in runs),
                "out_of_band_runs": sum(r["in_band"] is False and not r["own_size"] for r in runs),
                "own_size_stores": ", ".join(
                    sorted(s for s, v in stores.items() if any(r["own_size"] for r in v["runs"]))
                ),
                "failed_runs": sum(r["failed"] is not None for r in runs),
                "recoverability": RECOVERABILITY,
            }
        )
        if rows[-1]["recall_pct"] is not None:
            points[rows[-1]["arm"]] = (rows[-1]["saving_pct"], rows[-1]["recall_pct"])
        for cls in CLASSES:
            c_total = sum(v["counted"][0]["recall"]["by_class"][cls]["total"] for v in counted.values())
            dropped = sum(
                _mean(
                    r["recall"]["by_class"][cls]["total"] - r["recall"]["by_class"][cls]["kept"] for r in v["counted"]
                )
                for v in counted.values()
            )
            by_class.append(
                {
                    "arm": rows[-1]["arm"],
                    "class": cls,
                    "corpus": c_total,
                    "mean_dropped": dropped,
                    "lost_pct": 100.0 * dropped / c_total if c_total else None,
                }
            )
    arm_table = Table(
        "controlled",
        "Controlled experiment: every arm cut to the same size",
        (
            Column("arm", "arm"),
            Column("stores", "stores"),
            Column("bytes", "bytes", lambda r: _int(r["bytes"])),
            Column("saving_pct", "saving %", lambda r: _pct(r["saving_pct"])),
            Column(
                "recall_pct",
                "token recall (min-max per run)",
                lambda r: f"{_pct(r['recall_pct'])} ({_pct(r['recall_min_pct'])}-{_pct(r['recall_max_pct'])})",
            ),
            Column("tokens_lost", "tokens lost", lambda r: f"{_int(r['tokens_lost'])} of {_int(r['tokens_total'])}"),
            Column("needles_kept", "needles kept", lambda r: f"{r['needles_kept']:g}/{r['muscle_total']}"),
            Column("in_band_runs", "in band"),
            Column("out_of_band_runs", "out of band (counted apart)"),
            Column("own_size_stores", "gated at its own size (cut < 5 %)"),
            Column("recoverability", "recoverability"),
        ),
        tuple(rows),
        note="Per store, all arms start from the same files. Target: the gated arm's size when it cut >= 5 %, else "
        "controlled.target_pct % of the store. In band: within ±5 % of the target; an arm's figures are over its "
        "in-band runs (the gated arm's own run; a stochastic arm's repeats: mean, and min-max per run), out-of-band "
        "runs are in the raw table and counted apart. Bytes: the top-level *.md files, summed over stores. Token "
        "recall: structured tokens kept over the corpus (washexp's port of the gate's inventory, never the washer's "
        "report), summed over stores. " + RECOVERABILITY_NOTE,
    )
    class_table = Table(
        "controlled_by_class",
        "Controlled experiment: lost by class",
        (
            Column("arm", "arm"),
            Column("class", "class"),
            Column("corpus", "corpus count"),
            Column("mean_dropped", "mean dropped", lambda r: f"{r['mean_dropped']:.2f}"),
            Column("lost_pct", "% lost", lambda r: _pct(r["lost_pct"])),
        ),
        tuple(by_class),
        note="Corpus count: the class's tokens over the stores the arm is counted on; mean dropped: per store the mean "
        "over its counted runs, summed over stores.",
    )
    raw_table = Table(
        "controlled_runs",
        "Controlled experiment: every run, raw",
        tuple(
            Column(k, k.replace("_", " "))
            for k in (
                "store",
                "arm",
                "repeat",
                "target_bytes",
                "bytes",
                "always_loaded_bytes",
                "saving_pct",
                "in_band",
                "recall_pct",
                "tokens_lost",
                "needles_kept",
                "needles_lost",
                "failed",
            )
        ),
        tuple(frame.sort_values(["store", "arm", "repeat"]).to_dict("records")),
    )
    plot = Plot(
        f"{stem}-controlled.png", "structured-token recall vs saving per arm (pooled over stores)", _scatter(points)
    )
    return [arm_table, class_table], raw_table, plot, instructions


def chain_tables(parents, kids, read, stem: str) -> tuple[list[Table], Plot, dict[str, str]]:
    pooled: dict[tuple[str, str], dict[str, float]] = {}
    last_class: dict[tuple[str, str], dict[str, list[float]]] = {}
    instructions = {}
    for _, raw in _raws(parents, kids, "chain.json", read):
        for ch in raw["chains"]:
            c = ch["chain"]
            instructions[c] = ch["instruction"]
            stages = [("original", {"bytes": raw["store_bytes"], "cumulative": None, "pairwise": None})]
            stages += [(f"pass {p['pass']}", p) for p in ch["passes"]]
            if ch["failed"] is not None:
                stages.append((f"failed ({ch['failed']})", {"bytes": None, "cumulative": None, "pairwise": None}))
            if ch["one_shot"] is not None:
                stages.append(
                    ("one-shot to the final size", {**ch["one_shot"], "cumulative": ch["one_shot"]["recall"]})
                )
            for stage, row in stages:
                acc = pooled.setdefault((c, stage), {"stores": 0, "bytes": 0, "ck": 0, "ct": 0, "pk": 0, "pt": 0})
                acc["stores"] += 1
                acc["bytes"] += row["bytes"] or 0
                for kind, k, t in (("cumulative", "ck", "ct"), ("pairwise", "pk", "pt")):
                    if row.get(kind):
                        acc[k] += row[kind]["kept"]
                        acc[t] += row[kind]["total"]
            if ch["passes"]:
                for cls in CLASSES:
                    b = ch["passes"][-1]["cumulative"]["by_class"][cls]
                    slot = last_class.setdefault((c, cls), {"kept": [], "total": []})
                    slot["kept"].append(b["kept"])
                    slot["total"].append(b["total"])
    if not pooled:
        raise WashexpError("chain: no finished store run to report")
    chains = list(dict.fromkeys(c for c, _ in pooled))
    rows = []
    series: dict[str, list[tuple[int, float | None]]] = {}
    for c in chains:
        for (cc, stage), acc in pooled.items():
            if cc != c:
                continue
            cum = 100.0 * acc["ck"] / acc["ct"] if acc["ct"] else (100.0 if stage == "original" else None)
            pair = 100.0 * acc["pk"] / acc["pt"] if acc["pt"] else None
            rows.append(
                {
                    "chain": c,
                    "stage": stage,
                    "stores": acc["stores"],
                    "bytes": acc["bytes"],
                    "cumulative_pct": cum,
                    "pairwise_pct": pair,
                }
            )
            if stage.startswith("pass "):
                n = int(stage.removeprefix("pass "))
                series.setdefault(f"{c}: cumulative", []).append((n, cum))
                series.setdefault(f"{c}: pairwise", []).append((n, pair))
    stage_table = Table(
        "chain",
        "Chain: each pass sees only the previous output",
        (
            Column("chain", "chain"),
            Column("stage", "stage"),
            Column("stores", "stores"),
            Column("bytes", "bytes", lambda r: _int(r["bytes"])),
            Column("cumulative_pct", "cumulative recall", lambda r: _pct(r["cumulative_pct"])),
            Column("pairwise_pct", "pairwise recall", lambda r: _pct(r["pairwise_pct"])),
        ),
        tuple(rows),
        note="Cumulative: structured tokens of the original kept at this pass; pairwise: of the previous pass's output "
        "kept at this one; both pooled over stores (kept / corpus, summed). One-shot: the same compressor from the "
        "original straight to the chain's final size (its recall is cumulative). The gated washer runs the same "
        "number of passes on its own output, for contrast, with no one-shot.",
    )
    class_rows = [
        {
            "chain": c,
            "class": cls,
            "corpus": sum(v["total"]),
            "kept": sum(v["kept"]),
            "recall_pct": 100.0 * sum(v["kept"]) / sum(v["total"]) if sum(v["total"]) else None,
        }
        for (c, cls), v in last_class.items()
    ]
    class_table = Table(
        "chain_by_class",
        "Chain: by class at the last pass (cumulative)",
        (
            Column("chain", "chain"),
            Column("class", "class"),
            Column("corpus", "corpus count"),
            Column("kept", "kept"),
            Column("recall_pct", "recall", lambda r: _pct(r["recall_pct"])),
        ),
        tuple(class_rows),
    )
    plot = Plot(f"{stem}-chain.png", "cumulative vs pairwise structured-token recall by pass", _passes(series))
    return [stage_table, class_table], plot, instructions


def instructions_table(instructions: dict[str, str]) -> Table:
    return Table(
        "instructions",
        "What each arm was told, verbatim",
        (Column("arm", "arm"), Column("instruction", "instruction", lambda r: r["instruction"].replace("\n", " ⏎ "))),
        tuple({"arm": k, "instruction": v} for k, v in sorted(instructions.items())),
        note="A fair competitor, not a sabotaged one: the plain arm gets the plain control's own prompt plus the "
        "target in bytes (its share per file); truncate is a labelled model-free baseline, never a model.",
    )


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def _scatter(points: dict[str, tuple[float, float]]) -> bytes:
    fig, ax = plt.subplots(figsize=(10.0, 4.2))
    for name, (x, y) in points.items():
        ax.scatter([x], [y], s=60, label=name)
        ax.annotate(name, (x, y), textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.set_xlabel("saving % (bytes of the top-level *.md files)")
    ax.set_ylabel("structured-token recall %")
    ax.set_ylim(-2, 105)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left")
    fig.suptitle("Controlled experiment: recall vs saving per arm")
    return _png(fig)


def _passes(series: dict[str, list[tuple[int, float | None]]]) -> bytes:
    fig, ax = plt.subplots(figsize=(10.0, 4.2))
    for name, pts in series.items():
        pts = [(x, y) for x, y in pts if y is not None]
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.plot(xs, ys, marker="o", linestyle="--" if name.endswith("pairwise") else "-", label=name)
    ax.set_xlabel("pass")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("structured-token recall %")
    ax.set_ylim(-2, 105)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize=8)
    fig.suptitle("Chain: cumulative (vs the original) and pairwise (vs the previous pass) recall")
    return _png(fig)
