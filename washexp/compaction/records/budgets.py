"""Methods at matched budgets: retention (and fact accuracy) against what each arm spends.

"Masking keeps more" says nothing when masking spends eight times the tokens. Per cohort, from
the arm tables' own means (local Qwen input tokens, one meter for every arm):

- ``matched_budget``: each baseline (any arm that is neither Full nor S nor H) beside the S arm and
  the H arm whose mean input tokens are nearest its own;
- ``frontier``: every arm, cheapest first, and whether another arm beats it (higher score at no
  more tokens); the arms no other beats are the frontier.
"""

from __future__ import annotations

from washexp.export.records import Column, Table

SUMMARIES = ("S", "H")


def budget_tables(arm_tables: list[Table], methods: dict[str, str], measured: bool) -> list[Table]:
    score = "fact_accuracy" if measured else "retention"
    out = []
    for table in arm_tables:
        cohort = table.key.removeprefix("arms_")
        rows = [r for r in table.rows if r.get("input_tokens") is not None and r.get(score) is not None]
        out += [_matched(cohort, rows, methods, score), _frontier(cohort, rows, score)]
    return [t for t in out if t.rows]


def _matched(cohort: str, rows: list[dict], methods: dict[str, str], score: str) -> Table:
    out = []
    for base in (r for r in rows if methods[r["arm"]] not in (*SUMMARIES, "full")):
        for summary in SUMMARIES:
            mine = [r for r in rows if methods[r["arm"]] == summary]
            if not mine:
                continue
            near = min(mine, key=lambda r: (abs(r["input_tokens"] - base["input_tokens"]), r["input_tokens"]))
            out.append(
                {
                    "arm": base["arm"],
                    "tokens": base["input_tokens"],
                    "score": base[score],
                    "against": near["arm"],
                    "against_tokens": near["input_tokens"],
                    "against_score": near[score],
                    "difference": base[score] - near[score],
                    "token_ratio": base["input_tokens"] / near["input_tokens"],
                }
            )
    name = score.replace("_", " ")
    columns = (
        Column("arm", "baseline"),
        Column("tokens", "mean input tokens"),
        Column("score", name),
        Column("against", "nearest S/H arm"),
        Column("against_tokens", "its tokens"),
        Column("against_score", f"its {name}"),
        Column("difference", f"{name}: baseline - it"),
        Column("token_ratio", "tokens: baseline / it"),
    )
    note = "The nearest by mean input tokens (local Qwen count); a ratio far from 1 says no S or H arm spends as much."
    return Table(f"matched_budget_{cohort}", f"Baselines against S and H at the nearest budget, {cohort}", columns,
                 tuple(out), note=note)  # fmt: skip


def _frontier(cohort: str, rows: list[dict], score: str) -> Table:
    out = []
    for r in sorted(rows, key=lambda r: (r["input_tokens"], -r[score], r["arm"])):
        better = [o for o in rows if o["input_tokens"] <= r["input_tokens"] and o[score] > r[score]]
        cheapest = min(better, key=lambda o: (o["input_tokens"], o["arm"]))["arm"] if better else ""
        out.append({"arm": r["arm"], "tokens": r["input_tokens"], "score": r[score], "frontier": not better,
                    "beaten_by": cheapest})  # fmt: skip
    name = score.replace("_", " ")
    columns = (
        Column("arm", "arm"),
        Column("tokens", "mean input tokens"),
        Column("score", name),
        Column("frontier", "on the frontier"),
        Column("beaten_by", "beaten by (cheapest)"),
    )
    note = f"An arm is beaten when another has a higher {name} at no more mean input tokens."
    return Table(f"frontier_{cohort}", f"Tokens against {name}: the frontier, {cohort}", columns, tuple(out), note=note)
