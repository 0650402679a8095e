"""How fast is ``washexp gate`` against CoalWash's own ``fidelity-gate.mjs`` under Node?

    python bench/bench_gate.py [--repeats 7] [--seed 29] [--only NAME]
                               [--node-gate /tmp/coalwash/scripts/lib/fidelity-gate.mjs]
                               [--equivalence 800]

Generates (seeded, in memory; written to a temporary folder for Node, deleted afterwards) four
before/after pairs of memory text:

- ``drop-heavy-512k``: 512 KB of value-dense notes (dates, versions, links, wikilinks, code spans,
  quotes, fences, comma-grouped counts, percents, ratios); the after-text cuts a third of the
  lines, rounds many exact numbers (``44,192`` -> ``44k``, ``64.6%`` -> ``65%``) and collapses
  repeated values onto fewer lines: thousands of drops, precision drops among them;
- ``marker-heavy-1m``: 1 MB of claims (``verified``, ``measured``, ``confirmed``, ``100%``) citing
  hex ids, issue refs and file names; the after-text cuts most citations and keeps the claims:
  thousands of orphaned evidence anchors;
- ``no-final-newline-256k``: 256 KB, a short head then one long pasted line (claims, values,
  citations) and no final newline; the after-text changes a few words;
- ``prose-no-final-nl-256k``: 256 KB of short prose lines, a value on one in ten, no final
  newline; the after-text changes a few words.

Times washexp's ``gate.check`` in this process (the inventory caches cleared before every run)
and, given ``--node-gate`` (a copy of CoalWash's ``scripts/lib/fidelity-gate.mjs``; ``node`` on
PATH; neither is part of washexp or its CI), ``checkFidelity`` in a Node process per run on the
same texts (one untimed warm-up call, then the timed call; the file reads are outside both
timings). Runs are interleaved (washexp, node, washexp, node ...) so a shared machine's load hits
both alike; it prints the median wall and CPU time of each and the ratio, and checks the two
verdicts are identical (drops in order with their type, value, occurrences, survivor and marker;
warnings; pass).

``--equivalence N`` gates N random edits (of the committed wash stores' files and of generated
value-dense text: cut spans and lines, duplicated and reordered lines, rounded and re-signed
numbers, hazards inserted, CRLF, no final newline, frontmatter damage) with both and compares
every verdict; it exits 1 on the first difference, printing the pair.

Exit: 0 ran (and every verdict matched), 1 a verdict differed or Node failed, 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from washexp.wash.coalwash import gate, inventory  # noqa: E402

NODE_DRIVER = r"""
import { readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
const [gatePath, mode, a, b, out] = process.argv.slice(2);
const { checkFidelity } = await import(pathToFileURL(gatePath).href);
const verdict = (r) => ({ pass: r.pass, drops: r.drops, warnings: r.warnings });
if (mode === 'time') {
  const orig = readFileSync(a, 'utf8');
  const next = readFileSync(b, 'utf8');
  checkFidelity(orig, next);  // warm-up: V8 has compiled the regexes and the hot loops
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const r = checkFidelity(orig, next);
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  const c = process.cpuUsage(c0);
  writeFileSync(out, JSON.stringify({ wall, cpu: (c.user + c.system) / 1e6, verdict: verdict(r) }));
} else {
  const pairs = JSON.parse(readFileSync(a, 'utf8'));
  writeFileSync(out, JSON.stringify(pairs.map(([o, n]) => verdict(checkFidelity(o, n)))));
}
"""

# --- generated text -----------------------------------------------------------------------------

WORDS = (  # noqa: SIM905 (a word list reads better as text)
    "the build cache lockfile runner deploy config key token budget retry index memory store wash note "
    "pinned release hotfix migrate schema rollback endpoint latency queue worker shard replica backup "
    "review owner decision lesson regression flaky timeout window quota staging canary ledger"
).split()
OTHER = "café naïve Zürich 設定 記憶 น้ำหนัก กำหนด สำคัญ déjà-vu 🙂".split()  # noqa: SIM905
MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()  # noqa: SIM905
MARKERS = ["verified", "measured", "confirmed", "proven", "100%", "Verified"]
EXTS = ["md", "mjs", "json", "py", "log", "yml", "sh", "txt"]


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(OTHER) if rng.random() < 0.08 else rng.choice(WORDS) for _ in range(n))


def _hex(rng: random.Random) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(rng.choice([7, 8, 12, 40])))


def _value(rng: random.Random, i: int) -> str:
    """One structured value; ``i`` keeps most of them distinct."""
    k = rng.randrange(14)
    if k == 0:
        return f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}"
    if k == 1:
        return f"{1 + i % 28}-{MONTHS[i % 12]}-{2020 + i % 9}"
    if k == 2:
        return f"v{i % 7}.{i % 31}.{i}"
    if k == 3:
        return f"[[topic-{i}|{rng.choice(WORDS)} notes]]"
    if k == 4:
        return f"[docs](https://example.com/{rng.choice(WORDS)}/{i})"
    if k == 5:
        return f"https://ci.example.org/runs/{i}?step={i % 9}"
    if k == 6:
        return f"`{rng.choice(WORDS)} --{rng.choice(WORDS)}={i}`"
    if k == 7:
        return f"\u201c{_words(rng, 3)} {i}\u201d"
    if k == 8:
        return f"{i // 1000 + 1},{i % 1000:03d}"
    if k == 9:
        return f"{i % 97}.{i % 10}%"
    if k == 10:
        return f"{i % 50}/{i % 50 + 3}"
    if k == 11:
        return f"{(i % 900) / 10 + 0.05:.2f}"
    if k == 12:
        return f"~{i % 400 + 2}.{i % 10}k"
    return str(1000 + i)


def _round(tok: str) -> str:
    """A coarser spelling of a number (the precision class), or the token unchanged."""
    body = tok.rstrip("%")
    try:
        x = float(body.replace(",", ""))
    except ValueError:
        return tok
    if tok.endswith("%"):
        return f"{round(x)}%"
    if "," in tok:
        return f"{round(x / 1000)}k"
    return f"{round(x)}" if "." in tok else tok


def drop_heavy(rng: random.Random, size: int) -> tuple[str, str]:
    before, after, i = [], [], 0
    total = 0
    while total < size:
        if rng.random() < 0.04:  # a fenced example
            block = ["```sh", *(f"  run {rng.choice(WORDS)} --n {i + j}" for j in range(4)), "```"]
            before += block
            after += block if rng.random() < 0.5 else [block[0], block[1], block[-1]]
            total += sum(len(b) + 1 for b in block)
            i += 4
            continue
        vals = [_value(rng, i + j) for j in range(4)]
        i += 4
        line = f"- {_words(rng, 5)} {vals[0]} {_words(rng, 3)} {vals[1]}, {vals[2]} and {vals[3]} {_words(rng, 4)}"
        before.append(line)
        total += len(line.encode()) + 1
        r = rng.random()
        if r < 0.33:
            continue  # the line is cut: its values drop
        if r < 0.6:
            line = " ".join(_round(w) for w in line.split(" "))
        after.append(line)
        if rng.random() < 0.1:  # a value repeated on a second line, the repeat cut after
            before.append(f"  (again: {vals[0]})")
    return "\n".join(before) + "\n", "\n".join(after) + "\n"


def _claim(rng: random.Random, i: int, keep: float = 0.8) -> tuple[str, str]:
    cites = [f"#{1000 + i}", _hex(rng), f"{rng.choice(WORDS)}-{i}.{rng.choice(EXTS)}"]
    marker = rng.choice(MARKERS)
    head = f"- {_words(rng, 4)} {marker} {_words(rng, 2)}"
    before = f"{head} ({', '.join(cites)}) {_words(rng, 3)}"
    kept = [c for c in cites if rng.random() < keep]
    after = f"{head} ({', '.join(kept)}) {_words(rng, 3)}" if kept else f"{head} {_words(rng, 3)}"
    return before, after


def marker_heavy(rng: random.Random, size: int) -> tuple[str, str]:
    before, after, i, total = [], [], 0, 0
    while total < size:
        b, a = zip(*(_claim(rng, i + j) for j in range(rng.randint(1, 3))), strict=True)
        i += len(b)
        before.append(" ".join(b))
        after.append(" ".join(a))
        total += len(before[-1].encode()) + 1
    return "\n".join(before) + "\n", "\n".join(after) + "\n"


def no_final_newline(rng: random.Random, size: int) -> tuple[str, str]:
    head = ["---", "name: pasted-log", "description: a run log pasted as one line", "---", "", "# Pasted"]
    parts, i, total = [], 0, sum(len(h) + 1 for h in head)
    while total < size:
        claim = _claim(rng, i)[0] if i % 20 == 0 else f"{_words(rng, 4)} {_value(rng, i)}"
        part = f"{claim} {_value(rng, i + 1)} {_words(rng, 3)}"
        parts.append(part)
        total += len(part.encode()) + 1
        i += 1
    before = "\n".join(head) + "\n" + " ".join(parts)
    edited = list(parts)
    for k in rng.sample(range(len(parts)), 5):
        edited[k] = edited[k].replace(" the ", " a ", 1)
    return before, "\n".join(head) + "\n" + " ".join(edited)


CASES = ["drop-heavy-512k", "marker-heavy-1m", "no-final-newline-256k", "prose-no-final-nl-256k"]


def prose(rng: random.Random, size: int) -> tuple[str, str]:
    lines: list[str] = []
    total = 0
    while total < size:
        lines.append(f"- {_words(rng, 12)} {_value(rng, len(lines)) if rng.random() < 0.1 else ''}")
        total += len(lines[-1].encode()) + 1
    before = "\n".join(lines)  # no final newline
    return before, before.replace(" the ", " a ", 3)


def cases(seed: int) -> dict[str, tuple[str, str]]:
    return {
        "drop-heavy-512k": drop_heavy(random.Random(seed), 512 * 1024),
        "marker-heavy-1m": marker_heavy(random.Random(seed + 1), 1024 * 1024),
        "no-final-newline-256k": no_final_newline(random.Random(seed + 2), 256 * 1024),
        "prose-no-final-nl-256k": prose(random.Random(seed + 3), 256 * 1024),
    }


# --- verdicts -----------------------------------------------------------------------------------


def py_verdict(result: gate.GateResult) -> dict:
    """washexp's verdict in the original's shape (its drops list ends with the hazards)."""
    drops = []
    for d in result.drops + result.hazards:
        out = {"type": d.type, "value": d.value}
        if d.after:
            out["occurrences"] = {"orig": d.before, "kept": d.after}
        if d.survivor:
            out["survivor"] = d.survivor
        if d.marker:
            out["marker"] = d.marker
        drops.append(out)
    return {"pass": result.passed, "drops": drops, "warnings": result.warnings}


def py_check(before: str, after: str) -> gate.GateResult:
    """One cold gate call: the inventory's per-text caches emptied first."""
    inventory.token_lists.cache_clear()
    inventory._inventory_of.cache_clear()
    return gate.check(before, after)


class NodeGate:
    def __init__(self, gate_path: Path, work: Path):
        self.gate_path, self.work = gate_path, work
        self.driver = work / "driver.mjs"
        self.driver.write_text(NODE_DRIVER, encoding="utf-8")

    def _run(self, mode: str, a: Path, b: Path | str) -> object:
        out = self.work / "out.json"
        done = subprocess.run(
            ["node", str(self.driver), str(self.gate_path), mode, str(a), str(b), str(out)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"node failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
        return json.loads(out.read_text(encoding="utf-8"))

    def time(self, before: Path, after: Path) -> dict:
        return self._run("time", before, after)

    def verdicts(self, pairs: list[tuple[str, str]]) -> list[dict]:
        path = self.work / "pairs.json"
        path.write_text(json.dumps(pairs, ensure_ascii=False), encoding="utf-8")
        return self._run("batch", path, "-")


def _timed(before: str, after: str) -> tuple[float, float, dict]:
    c0, t0 = time.process_time(), time.perf_counter()
    result = py_check(before, after)
    return time.perf_counter() - t0, time.process_time() - c0, py_verdict(result)


def bench(args, node: NodeGate | None, work: Path) -> int:
    status = 0
    for name, (before, after) in cases(args.seed).items():
        if args.only and name != args.only:
            continue
        b_path, a_path = work / f"{name}.before.md", work / f"{name}.after.md"
        b_path.write_text(before, encoding="utf-8", newline="")
        a_path.write_text(after, encoding="utf-8", newline="")
        py_wall, py_cpu, js_wall, js_cpu = [], [], [], []
        py_v = js_v = None
        for _ in range(args.repeats):
            wall, cpu, py_v = _timed(before, after)
            py_wall.append(wall)
            py_cpu.append(cpu)
            if node:
                got = node.time(b_path, a_path)
                js_wall.append(got["wall"])
                js_cpu.append(got["cpu"])
                js_v = got["verdict"]
        kb = len(before.encode()) // 1024
        n_drops = len(py_v["drops"])
        line = (
            f"{name:<23} {kb:>5} KB  {n_drops:>5} drops  washexp {statistics.median(py_wall):7.3f} s"
            f" (cpu {statistics.median(py_cpu):.3f})"
        )
        if node:
            jw, jc = statistics.median(js_wall), statistics.median(js_cpu)
            same = js_v == py_v
            line += (
                f"  node {jw:7.3f} s (cpu {jc:.3f})  ratio {statistics.median(py_wall) / jw:5.2f}"
                f" (cpu {statistics.median(py_cpu) / jc:5.2f})  verdicts {'identical' if same else 'DIFFER'}"
            )
            if not same:
                status = 1
        print(line, flush=True)
    return status


# --- random-edit equivalence ----------------------------------------------------------------------


def _base_texts(rng: random.Random) -> list[str]:
    texts = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "fixtures" / "wash").glob("*/*.md"))]
    texts += [drop_heavy(random.Random(rng.random()), 6000)[0] for _ in range(6)]
    texts += [marker_heavy(random.Random(rng.random()), 6000)[0] for _ in range(6)]
    texts += [no_final_newline(random.Random(rng.random()), 3000)[0] for _ in range(3)]
    return texts


HAZARDS = ["\u0e4d\u0e32", "\ufeff", "\u200b", "\u202e", "\u2066", "\u200d", "\u200c", "\u0e33", "\U0001f600"]


def _edit(rng: random.Random, text: str) -> str:
    for _ in range(rng.randint(1, 5)):
        lines = text.split("\n")
        at = rng.randrange(len(text) + 1)
        move = rng.randrange(12)
        if move == 0:  # cut a span
            text = text[:at] + text[at + rng.randint(1, 80) :]
        elif move == 1 and len(lines) > 1:  # cut a line
            del lines[rng.randrange(len(lines))]
            text = "\n".join(lines)
        elif move == 2 and lines:  # duplicate a line
            k = rng.randrange(len(lines))
            lines.insert(rng.randrange(len(lines) + 1), lines[k])
            text = "\n".join(lines)
        elif move == 3:  # round the numbers of a stretch
            end = min(len(text), at + 400)
            text = text[:at] + " ".join(_round(w) for w in text[at:end].split(" ")) + text[end:]
        elif move == 4:  # a sign, a digit
            text = text[:at] + rng.choice(["-", "+", "0", "9", ".", ",", "%", "k", "/"]) + text[at:]
        elif move == 5:  # a hazard
            text = text[:at] + rng.choice(HAZARDS) + text[at:]
        elif move == 6:  # a BOM or a hazard at the start
            text = rng.choice(HAZARDS[:3]) + text
        elif move == 7:
            text = text.replace("\n", "\r\n") if rng.random() < 0.5 else text.replace("\r\n", "\n")
        elif move == 8:
            text = text.rstrip("\n")
        elif move == 9:  # cut a proof marker or a citation
            for word in rng.sample(["verified", "measured", "100%", "#", "confirmed", ".md", "`", '"', "[["], 2):
                text = text.replace(word, "", rng.randint(1, 3))
        elif move == 10:  # frontmatter damage or a fence
            text = rng.choice(["---\n", "---\r", "--- a/file\n", "```\n", "~~~~\n", "---\nkey: v\n---\n"]) + text
        else:  # swap two lines
            if len(lines) > 2:
                i, j = rng.sample(range(len(lines)), 2)
                lines[i], lines[j] = lines[j], lines[i]
                text = "\n".join(lines)
    return text


def equivalence(n: int, seed: int, node: NodeGate) -> int:
    rng = random.Random(seed)
    texts = _base_texts(rng)
    pairs = []
    for _ in range(n):
        before = rng.choice(texts)
        if rng.random() < 0.3:
            before = _edit(rng, before)  # a store that already carries damage
        pairs.append((before, _edit(rng, before)))
    t0 = time.perf_counter()
    ours = [py_verdict(py_check(b, a)) for b, a in pairs]
    t1 = time.perf_counter()
    theirs = node.verdicts(pairs)
    t2 = time.perf_counter()
    blocked = sum(not v["pass"] for v in ours)
    for k, (mine, real) in enumerate(zip(ours, theirs, strict=True)):
        if mine != real:
            print(f"equivalence: pair {k} differs\n  before={pairs[k][0]!r}\n  after={pairs[k][1]!r}")
            print(f"  washexp={json.dumps(mine, ensure_ascii=False)}\n  node   ={json.dumps(real, ensure_ascii=False)}")
            return 1
    print(
        f"equivalence: {n} random edits (seed {seed}), {blocked} blocked, "
        f"{sum(len(v['drops']) for v in ours)} drops: every verdict identical "
        f"(washexp {t1 - t0:.2f} s, node {t2 - t1:.2f} s incl. start-up)"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--seed", type=int, default=29)
    p.add_argument("--only", choices=CASES, help="time this input only")
    p.add_argument("--node-gate", type=Path, help="a copy of CoalWash's scripts/lib/fidelity-gate.mjs")
    p.add_argument("--equivalence", type=int, default=0, metavar="N", help="also compare N random edits")
    args = p.parse_args(argv)
    if args.repeats < 0:
        p.error("--repeats must be 0 (no timing) or more")
    if args.node_gate and not args.node_gate.is_file():
        p.error(f"--node-gate {args.node_gate}: no such file")
    if args.node_gate and not shutil.which("node"):
        p.error("--node-gate needs node on PATH")
    if args.equivalence and not args.node_gate:
        p.error("--equivalence needs --node-gate")
    with tempfile.TemporaryDirectory(prefix="bench-gate-") as tmp:
        work = Path(tmp)
        node = NodeGate(args.node_gate.resolve(), work) if args.node_gate else None
        try:
            status = bench(args, node, work) if args.repeats else 0
            if args.equivalence and status == 0:
                status = equivalence(args.equivalence, args.seed, node)
        except RuntimeError as err:
            print(f"bench_gate: {err}", file=sys.stderr)
            return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
