"""Record plots: matplotlib (Agg), PNG bytes, one panel per cohort.

Same data, same bytes: no dates from the clock in a title, fixed size and dpi, and the PNG's
only metadata is matplotlib's Software line.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend is chosen first)
from matplotlib.ticker import MaxNLocator, ScalarFormatter  # noqa: E402

from washexp.engine.ledger import plural  # noqa: E402

COLORS = {"S": "tab:blue", "H": "tab:orange", "mask": "tab:green", "Full": "black"}
FULL = "Full (the whole trajectory)"
_SIZE, _DPI = (10.0, 4.2), 110
BARS = "bars: 95% sign-flip interval over tasks"
BANDS = "bands: 95% sign-flip interval over tasks"


@dataclass(frozen=True)
class Bar:
    """An arm's interval over its tasks (the headline table's, ``records.decisions.mean_interval``)."""

    low: float
    high: float
    tasks: int


Bars = Mapping[str, Mapping[tuple[str, int | None], Bar]]
"""cohort -> (method, top-N) -> its bar (Full and the closed book: top-N None)."""


def _bar(ax, x: float, y: float, bar: Bar | None, color, cohort_tasks: int | None) -> None:
    """The interval as an error bar at (x, y); the arm's task count beside it when it is not the
    panel's (an arm that did not run every task)."""
    if bar is None:
        return
    yerr = [[max(0.0, y - bar.low)], [max(0.0, bar.high - y)]]
    ax.errorbar([x], [y], yerr=yerr, fmt="none", ecolor=color, elinewidth=1.2, capsize=3, alpha=0.55)
    if bar.tasks != cohort_tasks:
        ax.annotate(f"n={bar.tasks}", (x, bar.high), textcoords="offset points", xytext=(2, 2), fontsize=7, color=color)


def score_vs_n(
    by_cohort: Mapping[str, Mapping[str, Sequence[tuple[int, float]]]],
    full: Mapping[str, float | None],
    ylabel: str,
    title: str,
    tasks: Mapping[str, int],
    bars: Bars | None = None,
) -> bytes:
    """``by_cohort[cohort][method]`` = [(N, score)]; Full drawn as a horizontal line; ``tasks``:
    each cohort's task count, in its panel's title; ``bars``: each arm's interval (Full's a band).
    Methods sit a little apart on x so their bars do not overlap."""
    fig, axes = plt.subplots(1, len(by_cohort), figsize=_SIZE, squeeze=False, sharey=True)
    for ax, (cohort, series) in zip(axes[0], by_cohort.items(), strict=True):
        mine = (bars or {}).get(cohort, {})
        drawn = [m for m, points in series.items() if points]
        for i, method in enumerate(drawn):
            dodge = 0.06 * (i - (len(drawn) - 1) / 2)
            xs, ys = zip(*series[method], strict=True)
            color = COLORS.get(method) or plt.rcParams["axes.prop_cycle"].by_key()["color"][i % 10]
            ax.plot([x + dodge for x in xs], ys, marker="o", color=color, label=f"{method} summary + Top N units")
            for x, y in zip(xs, ys, strict=True):
                _bar(ax, x + dodge, y, mine.get((method, x)), color, tasks.get(cohort))
        if full.get(cohort) is not None:
            ax.axhline(full[cohort], color=COLORS["Full"], linestyle="--", label=FULL)
            band = mine.get(("full", None))
            if band is not None:
                ax.axhspan(band.low, band.high, color=COLORS["Full"], alpha=0.07, linewidth=0)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        _finish_axes(ax, cohort, "Top N (Jev evidence units fused with the summary)", tasks.get(cohort))
    return _png(fig, axes, ylabel, title + (f" ({BARS})" if any((bars or {}).values()) else ""))


def tokens_vs_score(
    by_cohort: Mapping[str, Sequence[tuple[str, int | None, float, float]]],
    ylabel: str,
    title: str,
    tasks: Mapping[str, int],
    bars: Bars | None = None,
) -> bytes:
    """``by_cohort[cohort]`` = [(method, top-N, mean input tokens, score)]: S and H as lines
    through N = 0..5 (each point labelled with its N), Full (``method == "full"``) as a star;
    ``tasks``: each cohort's task count, in its panel's title; ``bars``: each arm's interval."""
    fig, axes = plt.subplots(1, len(by_cohort), figsize=_SIZE, squeeze=False, sharey=True)
    for ax, (cohort, points) in zip(axes[0], by_cohort.items(), strict=True):
        mine = (bars or {}).get(cohort, {})
        for method, offset in (("S", (4, -11)), ("H", (-9, 5))):
            arm = sorted((n, x, y) for m, n, x, y in points if m == method)
            if not arm:
                continue
            ax.plot(
                [x for _, x, _ in arm],
                [y for _, _, y in arm],
                marker="o",
                color=COLORS[method],
                label=f"{method} summary + Top N units (point labels: N)",
            )
            for n, x, y in arm:
                ax.annotate(str(n), (x, y), textcoords="offset points", xytext=offset, fontsize=8, color=COLORS[method])
                _bar(ax, x, y, mine.get((method, n)), COLORS[method], tasks.get(cohort))
        for m, n, x, y in points:
            if m == "full":
                ax.scatter([x], [y], marker="*", s=160, color=COLORS["Full"], zorder=3, label=FULL)
                _bar(ax, x, y, mine.get(("full", n)), COLORS["Full"], tasks.get(cohort))
        _finish_axes(ax, cohort, "mean input tokens per context (Qwen tokens)", tasks.get(cohort))
    return _png(fig, axes, ylabel, title + (f" ({BARS})" if any((bars or {}).values()) else ""))


def loss_scatter(by_cohort: Mapping[str, Sequence[tuple[str, int | None, float, float]]], title: str) -> bytes:
    """``by_cohort[cohort]`` = [(method, top-N, compaction loss, reading loss)]: one colour per
    method, its arms joined through N (point labels: N; Full and whole methods a single point)."""
    fig, axes = plt.subplots(1, len(by_cohort), figsize=_SIZE, squeeze=False, sharey=True)
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (cohort, points) in zip(axes[0], by_cohort.items(), strict=True):
        methods = list(dict.fromkeys(m for m, *_ in points))
        for i, method in enumerate(methods):
            arm = sorted((-1 if n is None else n, x, y) for m, n, x, y in points if m == method)
            color = COLORS.get("Full" if method == "full" else method, cycle[i % len(cycle)])
            name = "Full" if method == "full" else method
            ax.plot([x for _, x, _ in arm], [y for _, _, y in arm], marker="o", color=color, label=name)
            for n, x, y in arm:
                if n >= 0:
                    ax.annotate(str(n), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8, color=color)
        ax.set_xlim(-0.02, 1.02)
        _finish_axes(ax, cohort, "compaction loss (dropped and missed)")
        ax.legend(loc="upper right")
    return _png(fig, axes, "reading loss (kept but missed)", title)


def survival_curves(
    by_arm: Mapping[str, Mapping[int, Sequence[tuple[int, float]]]],
    title: str,
    bands: Mapping[str, Mapping[int, Sequence[tuple[int, float, float]]]] | None = None,
    tasks: Mapping[str, Mapping[int, int]] | None = None,
) -> bytes:
    """``by_arm[arm][k]`` = [(cycle, survival)]: one panel per arm (four to a row), one line per k
    (darker: more segments), the cycle on x; ``bands[arm][k]`` = [(cycle, low, high)], each
    cycle's interval over tasks, shaded in the line's colour; ``tasks[arm][k]``: the tasks behind
    a line, in its legend label."""
    cols = max(1, min(4, len(by_arm)))
    rows = max(1, -(-len(by_arm) // cols))
    size = (max(_SIZE[0], 3.0 * cols), 3.4 * rows + 0.8)
    fig, axes = plt.subplots(rows, cols, figsize=size, squeeze=False, sharey=True)
    panels = [ax for row in axes for ax in row]
    for ax, (arm, curves) in zip(panels, by_arm.items(), strict=False):
        top = max(curves, default=1)
        for k, points in sorted(curves.items()):
            shade = plt.get_cmap("viridis")(0.85 - 0.75 * (k - 1) / max(1, top - 1))
            if points:
                xs, ys = zip(*points, strict=True)
                n = (tasks or {}).get(arm, {}).get(k)
                ax.plot(
                    xs, ys, marker="o", color=shade, label=f"k={k}" + ("" if n is None else f" ({plural(n, 'task')})")
                )
            band = (bands or {}).get(arm, {}).get(k)
            if band:
                cx, lows, highs = zip(*band, strict=True)
                ax.fill_between(cx, lows, highs, color=shade, alpha=0.15, linewidth=0)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(arm, fontsize=10)
        ax.set_xlabel("cycle")
        ax.set_ylim(-0.02, 1.08)
        ax.grid(alpha=0.3)
    for ax in panels[len(by_arm) :]:
        ax.set_visible(False)
    panels[0].legend(loc="lower left", fontsize=8)  # the first arm (Full, when run) sits at 1.0: room below
    for row in axes[1:]:
        row[0].set_ylabel("facts seen so far that survive")
    if bands:
        title += f" ({BANDS})"
    return _png(fig, axes, "facts seen so far that survive", title)


def _finish_axes(ax, cohort: str, xlabel: str, tasks: int | None = None) -> None:
    """``tasks``: how many tasks each point averages (a reader weighs a mean over 4 tasks by it)."""
    count = "" if tasks is None else f" ({plural(tasks, 'task')})"
    ax.set_title(f"{cohort} cohort{count}")
    ax.set_xlabel(xlabel)
    ax.set_ylim(-0.02, 1.08)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # an empty panel has nothing to name (matplotlib warns)
        ax.legend(loc="lower right")


def _png(fig, axes, ylabel: str, title: str) -> bytes:
    axes[0][0].set_ylabel(ylabel)
    fig.suptitle(title)
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=_DPI)
    plt.close(fig)
    return buf.getvalue()


def lines(series: Mapping[str, Sequence[tuple[float, float]]], xlabel: str, ylabel: str, title: str) -> bytes:
    """One panel, one line per named series of (x, y) points (e.g. tokens per session per arm)."""
    fig, axes = plt.subplots(1, 1, figsize=_SIZE, squeeze=False)
    ax = axes[0][0]
    for name, points in series.items():
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, marker=".", label=name, drawstyle="steps-post")
    ax.set_xlabel(xlabel)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left")
    return _png(fig, axes, ylabel, title)


def cliff_curves(
    by_method: Mapping[str, Sequence[tuple[int, float]]],
    half: Sequence[tuple[int, float]],
    xlabel: str,
    ylabel: str,
    title: str,
) -> bytes:
    """The cliff: one line per method of (grid value, mean score), the x axis in powers of two,
    and half of Full's mean score dashed (the edge a method falls off)."""
    fig, axes = plt.subplots(1, 1, figsize=_SIZE, squeeze=False)
    ax = axes[0][0]
    for name, points in by_method.items():
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, marker="o", label=name, color=COLORS.get(name))
    if half:
        xs, ys = zip(*half, strict=True)
        ax.plot(xs, ys, linestyle="--", color=COLORS["Full"], label="half of Full's")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(ScalarFormatter())  # 1024, not 2^10: the grid as the tables write it
    ax.set_xlabel(xlabel)
    ax.set_ylim(-0.02, 1.08)
    ax.grid(alpha=0.3)
    ax.legend(loc="best")
    return _png(fig, axes, ylabel, title)
