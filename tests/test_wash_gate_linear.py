"""The gate's linear-time parts give exactly what the plain spelling of each gives.

Each fast part is held, on seeded random input built to hit its edges, to the straightforward form
it replaces (the original's regex spelling, a survivor loop over every candidate, ``tok in text``
per token, a UTF-16 offset table, a full scan of the text beside the distinct-line scan). The traps:
a number regex that opens on ``[-+\\d]`` and forgets the lookbehind of ``\\b`` or the sign's; a
masked version turning ``](1.2.3`` + line break into link whitespace that reaches the next line.
"""

from __future__ import annotations

import random
import re
from bisect import bisect_left, bisect_right
from collections import Counter

import pytest

from washexp.wash.coalwash import gate, inventory
from washexp.wash.coalwash.inventory import ORIGINAL_PATTERNS

PIECES = [
    *"0123456789 .,-+%/kKvV_#:aAx\n",
    *["May", "Jan", "v1", "verified", "PROVEN", "100%", "Measured", "confirmed", "c0nfirmed", ".md", ".json"],
    *["a.b", "é", "🙂", "ſ", "\u212a", "[[", "]]", "](", "\r\n", "\r", "x|y", "2026-05-14", "14-May-2026"],
    *["1.2.3", "<https://a.b/c>", "http://x.y/", "```", "~~~", "---", "key: v", "#12", "abc1234", "44,192"],
    *["\t", "\u00a0", "`", '"', "\u201c", "\u201d", "ab12cd3", "f-1.py"],
]


NUMERIC = [*"0123456789012345.,-+%kK/ ", ",192", ",000", "1,234", "3k", "12.5", "1-May-2026", "14-May-", "-Dec-2025"]
NUMERIC += ["2026-", "-05-", "2026-05", "-14", "4/5", "/12", "v2.", "v0.9", "v1.2.3"]


def _text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(PIECES if rng.random() < 0.6 else NUMERIC) for _ in range(rng.randint(0, n)))


@pytest.mark.parametrize("name", sorted(ORIGINAL_PATTERNS))
def test_each_compiled_pattern_matches_what_the_originals_spelling_matches(name):
    original = re.compile(ORIGINAL_PATTERNS[name], re.ASCII | (re.IGNORECASE if name == "CLAIM_MARKER" else 0))
    fast = getattr(inventory, name)
    assert fast.pattern != original.pattern  # else there is nothing to hold
    rng = random.Random(name)
    hits = 0
    for _ in range(2000):
        text = _text(rng, 24)
        want = [(m.span(), m.groups()) for m in original.finditer(text)]
        assert [(m.span(), m.groups()) for m in fast.finditer(text)] == want, text
        hits += bool(want)
    assert hits > 40  # the random text does hit the pattern


def _lines_text(rng: random.Random) -> str:
    lines = [_text(rng, 8) for _ in range(rng.randint(1, 8))]
    lines += [rng.choice(lines) for _ in range(rng.randint(0, 4))]  # duplicate lines
    rng.shuffle(lines)
    return rng.choice(["\n", "\r\n"]).join(lines) + rng.choice(["", "\n", "\r\n"])


def _full_scan(text: str) -> inventory.Inventory:
    inv = inventory.Inventory()
    inv.add(text)
    inv.count_lines([text])
    return inv


@pytest.mark.parametrize(
    "text",
    [
        "foo\n](1.2.3\nfoo\n12 runs\n",  # the blanked version reaches the next line: a link to "12"
        "[[a\nx\n[[b\nx\nb]]\n",  # the wikilink holds the duplicate line: [[b\nx\nb]], not [[b\nb]]
        "[[a\n[[b\nb]]\n[[b\n",
        "- 44,192 runs\r\n- 44,192 runs\r\nv1.2 and 2026-05-14\r\n",
    ],
)
def test_one_texts_inventory_is_the_full_scans_on_the_traps(text):
    inventory._inventory_of.cache_clear()
    fast, full = inventory.take_inventory([text]), _full_scan(text)
    assert (fast.values, fast.counts, fast.frontmatter_incomplete) == (
        full.values,
        full.counts,
        full.frontmatter_incomplete,
    )


def test_one_texts_inventory_is_the_full_scans_on_random_texts():
    rng = random.Random(29)
    shortcut = 0
    for _ in range(1500):
        text = _lines_text(rng)
        inventory._inventory_of.cache_clear()
        fast, full = inventory.take_inventory([text]), _full_scan(text)
        assert list(fast.values.items()) == list(full.values.items()), text  # the order too
        assert (fast.counts, fast.frontmatter_incomplete) == (full.counts, full.frontmatter_incomplete), text
        distinct = "\n".join(dict.fromkeys(inventory.lines(text)))
        shortcut += distinct != text and inventory._line_local(text) and inventory._line_local(distinct)
    assert 500 < shortcut < 1450  # both paths are exercised


def _anchors_by_table(text: str) -> dict[str, str]:
    """evidence_anchors as first written: a UTF-16 offset per code point, windows by bisect."""
    out: dict[str, str] = {}
    units = [0]
    for c in text:
        units.append(units[-1] + (2 if ord(c) > 0xFFFF else 1))
    for m in inventory.CLAIM_MARKER.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        line_end = text.find("\n", m.start())
        line_end = len(text) if line_end < 0 else line_end
        lo = bisect_left(units, max(units[line_start], units[m.start()] - 200))
        hi = bisect_right(units, min(units[line_end], units[m.end()] + 200)) - 1
        win = text[lo:hi]
        toks = list(dict.fromkeys(inventory._all(win, inventory.ISSUE_REF)))
        toks += [t for t in dict.fromkeys(inventory._all(win, inventory.HEX_ID)) if inventory._is_hex_evidence(t)]
        toks += list(dict.fromkeys(inventory._all(win, inventory.FILE_REF)))
        for t in toks:
            out.setdefault(t, m[0])
    return out


def _tokens_by_run(text: str) -> set[str]:
    found = set(inventory._all(text, inventory.ISSUE_REF)) | set(inventory._all(text, inventory.HEX_ID))
    for run in inventory._all(text, inventory._FILE_RUN):
        found.update(inventory._all(run[:256], inventory.FILE_REF))
    return found


def test_evidence_windows_and_tokens_are_the_plain_forms():
    rng = random.Random(5)
    words = ["verified", "100%", "#1234", "c19e528b", "notes.md", "🙂", "設定", "x" * 190, "\n", " ", "a.b-" * 70]
    near_edge = 0
    for _ in range(600):
        text = "".join(rng.choice(words) + rng.choice(["", " "]) for _ in range(rng.randint(1, 30)))
        assert inventory.evidence_anchors(text) == _anchors_by_table(text), text
        assert list(inventory.evidence_anchors(text)) == list(_anchors_by_table(text))
        assert inventory.evidence_tokens(text) == _tokens_by_run(text), text
        near_edge += "🙂" in text and "x" * 190 in text and "verified" in text
    assert near_edge > 40


def test_occurring_is_a_substring_test_per_token():
    rng = random.Random(11)
    for _ in range(1500):
        alphabet = rng.choice(["ab1#.-", "abc123#.-_x", "0123456789abcdef"])
        text = "".join(rng.choice(alphabet + "é🙂 \n") for _ in range(rng.randint(0, 80)))
        tokens = {"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))) for _ in range(rng.randint(0, 30))}
        assert gate.occurring(tokens, text) == {t for t in tokens if t in text}
    deep = [f"{'ab' * k}{'c' * (70 - k)}" for k in range(70)]  # nested past the cap: token by token
    assert gate._trie_pattern(_trie(deep)) is None
    assert gate.occurring(deep, "x" + deep[3] + "y") == {deep[3]}


def _trie(tokens):
    trie: dict = {}
    for tok in tokens:
        node = trie
        for ch in tok:
            node = node.setdefault(ch, {})
        node[""] = True
    return trie


def _first_survivor(tok: str, after_numbers: list[str]) -> str | None:
    """The survivor loop as the original writes it: every candidate, in inventory order."""
    o = gate._parse_number(tok)
    if o.kind not in ("percent", "plain") or o.sig < 2:
        return None
    for cand in after_numbers:
        c = gate._parse_number(cand)
        if c.kind == o.kind and c.ulp > o.ulp and abs(o.value - c.value) < c.ulp:
            return cand
    return None


def test_the_indexed_survivors_name_the_first_coarser_survivor():
    rng = random.Random(3)

    def number() -> str:
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 4)))
        known = rng.choice(["44", "45", "44192", "44000", "0.92"])
        body = rng.choice([digits, f"{digits}.{rng.randint(0, 999)}", known])
        return rng.choice(
            [body, body + "%", body + rng.choice("kK"), body + "0" * rng.randint(1, 4), "9" * 400, "1" + "0" * 310]
        )

    named = Counter()
    for _ in range(600):
        after = list(dict.fromkeys(number() for _ in range(rng.randint(0, 40))))
        candidates = gate._survivor_candidates(after)
        for _ in range(20):
            tok = number()
            got = gate._rounded_survivor(tok, candidates)
            assert got == _first_survivor(tok, after), (tok, after)
            named[got is not None] += 1
    assert named[True] > 500


def _numbers_as_written(text: str) -> list[str]:
    """numberScanList as the original writes it: its own regexes, every pass over the whole text."""
    rx = {name: re.compile(src, re.ASCII) for name, src in ORIGINAL_PATTERNS.items()}

    def mask(t: str, pattern: re.Pattern) -> str:
        return pattern.sub(lambda m: " " * len(m[0]), t)

    for p in ("ISO_DATE", "DMY_DATE", "VERSION", "V_SHORT_VERSION"):
        text = mask(text, rx[p])
    for p in (inventory.MDLINK_DEST, inventory.AUTOLINK, inventory.BARE_URL):
        text = mask(text, p)
    out = [m[0].replace(",", "") for m in rx["COMMA_NUM"].finditer(text)]
    text = mask(text, rx["COMMA_NUM"])
    for p in ("MAGNITUDE", "PERCENT", "RATIO", "DECIMAL", "INTEGER"):
        out += [m[0] for m in rx[p].finditer(text)]
        text = mask(text, rx[p])
    return out


def test_numbers_read_from_the_digit_runs_alone_are_the_whole_texts():
    rng = random.Random(17)
    found = 0
    for _ in range(1500):
        text = _lines_text(rng) + rng.choice(["", " abc.def-x_y/z", "x" * 50])
        assert inventory.numbers(text) == _numbers_as_written(text), text
        found += len(inventory.numbers(text))
    assert found > 3000


def _parse_as_written(tok: str) -> gate._Num:
    """parseNumToken as the original writes it: three regex shapes, no shortcut for an integer."""
    percent = tok.endswith("%")
    body = tok[:-1] if percent else tok
    if re.fullmatch(r"[0-9]+/[0-9]+", body):
        return gate._Num("ratio")
    if m := re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)[kK]", body):
        decimals = len(m[1].partition(".")[2])
        value, ulp = float(m[1]) * 1000, 1000 / gate._pow10(decimals)
    elif re.fullmatch(r"[0-9]+(?:\.[0-9]+)?", body):
        decimals = len(body.partition(".")[2])
        value = float(body)
        ulp = 1 / gate._pow10(decimals) if decimals else gate._pow10(len(body) - len(body.rstrip("0")))
    else:
        return gate._Num("unknown")
    return gate._Num("percent" if percent else "plain", value, ulp, len(re.sub(r"[.kK]", "", body).lstrip("0")))


def test_a_number_parses_as_the_original_parses_it():
    rng = random.Random(23)
    for _ in range(5000):
        tok = "".join(rng.choice("0000123456789.kK%/-\u0e51\u00b2") for _ in range(rng.randint(0, 6)))
        assert gate._parse_number(tok) == _parse_as_written(tok), tok
    for tok in ["0", "00", "440", "44000", "1" + "0" * 400, "9" * 400 + "%", "\u0e51\u0e52", "12\u00b2"]:
        assert gate._parse_number(tok) == _parse_as_written(tok), tok
