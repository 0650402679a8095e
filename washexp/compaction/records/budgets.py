"""Methods at matched budgets: retention (and fact accuracy) against what each arm spends.

"Masking keeps more" says nothing when masking spends eight times the tokens. Per cohort, from
the arm tables' own means (local Qwen input tokens, one meter for every arm):

- ``matched_budget``: each baseline (any arm that is neither Full nor S nor H) beside the S arm and
  the H arm whose mean input tokens are nearest its own, with each score's difference;
- ``frontier``: every arm, cheapest first, and per score whether another arm beats it (no lower
  score at no more tokens, and better in one); the arms no other beats are that score's frontier.

The scores are retention, and fact accuracy where a reader answered (``measured``).
"""

from __future__ import annotations

from washexp.export.records import Column, Table, through

SUMMARIES = ("S", "H")


def _tokens(v: float) -> str:
    return f"{v:,.1f}"


def _signed(v: float) -> str:
    return f"{v:+.3f}"


def budget_tables(arm_tables: list[Table], methods: dict[str, str], measured: bool) -> list[Table]:
    scores = ("retention", "fact_accuracy") if measured else ("retention",)
    out = []
    for table in arm_tables:
        cohort = table.key.removeprefix("arms_")
        rows = [r for r in table.rows if all(r.get(k) is not None for k in ("input_tokens", *scores))]
        out += [_matched(cohort, rows, methods, scores), _frontier(cohort, rows, scores)]
    return [t for t in out if t.rows]


def _name(score: str) -> str:
    return score.replace("_", " ")


def _matched(cohort: str, rows: list[dict], methods: dict[str, str], scores: tuple[str, ...]) -> Table:
    out = []
    for base in (r for r in rows if methods[r["arm"]] not in (*SUMMARIES, "full")):
        for summary in SUMMARIES:
            mine = [r for r in rows if methods[r["arm"]] == summary]
            if not mine:
                continue
            near = min(mine, key=lambda r: (abs(r["input_tokens"] - base["input_tokens"]), r["input_tokens"]))
            row = {"arm": base["arm"], "tokens": base["input_tokens"], "against": near["arm"],
                   "against_tokens": near["input_tokens"],
                   "token_ratio": base["input_tokens"] / near["input_tokens"]}  # fmt: skip
            for s in scores:
                row |= {s: base[s], f"against_{s}": near[s], f"{s}_difference": base[s] - near[s]}
            out.append(row)
    columns = (
        Column("arm", "baseline"),
        Column("tokens", "mean input tokens", through("tokens", _tokens)),
        Column("against", "nearest S/H arm"),
        Column("against_tokens", "its tokens", through("against_tokens", _tokens)),
        Column("token_ratio", "tokens: baseline / it", through("token_ratio", "{:.2f}".format)),
        *(
            c
            for s in scores
            for c in (
                Column(s, _name(s)),
                Column(f"against_{s}", f"its {_name(s)}"),
                Column(f"{s}_difference", f"{_name(s)}: baseline - it", through(f"{s}_difference", _signed)),
            )
        ),
    )
    note = "The nearest by mean input tokens (local Qwen count); a ratio far from 1 says no S or H arm spends as much."
    return Table(f"matched_budget_{cohort}", f"Baselines against S and H at the nearest budget, {cohort}", columns,
                 tuple(out), note=note)  # fmt: skip


def _beats(o: dict, r: dict, score: str) -> bool:
    """``o`` beats ``r``: no more tokens and no lower score, and fewer tokens or a higher score."""
    cheaper, better = o["input_tokens"] - r["input_tokens"], o[score] - r[score]
    return cheaper <= 0 and better >= 0 and (cheaper < 0 or better > 0)


def _frontier(cohort: str, rows: list[dict], scores: tuple[str, ...]) -> Table:
    out = []
    main = scores[-1]  # the record's score: fact accuracy where measured, else retention
    for r in sorted(rows, key=lambda r: (r["input_tokens"], -r[main], r["arm"])):
        row = {"arm": r["arm"], "tokens": r["input_tokens"]}
        for s in scores:
            better = [o for o in rows if _beats(o, r, s)]
            cheapest = min(better, key=lambda o: (o["input_tokens"], o["arm"]))["arm"] if better else ""
            row |= {s: r[s], f"{s}_frontier": not better, f"{s}_beaten_by": cheapest}
        out.append(row)
    columns = (
        Column("arm", "arm"),
        Column("tokens", "mean input tokens", through("tokens", _tokens)),
        *(
            c
            for s in scores
            for c in (
                Column(s, _name(s)),
                Column(f"{s}_frontier", f"on the {_name(s)} frontier"),
                Column(f"{s}_beaten_by", f"{_name(s)}: beaten by (cheapest)"),
            )
        ),
    )
    names = " and ".join(_name(s) for s in scores)
    note = (
        "An arm is beaten on a score when another arm scores no lower at no more mean input tokens, "
        "and higher or at fewer tokens; the cheapest such arm is named."
    )
    return Table(f"frontier_{cohort}", f"Tokens against {names}: the frontier, {cohort}", columns, tuple(out),
                 note=note)  # fmt: skip
