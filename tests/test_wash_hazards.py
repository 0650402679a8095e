"""Hazards at parity with CoalWash v1.1.0 ``fidelity-gate.mjs``: every class the original reports,
the port reports, in the original's order and wording (``--json`` too).

The table below is the original's hazard list, read from its ``checkFidelity`` (the encoding
tripwires): the type, the exact value it prints, the character(s), and where a character counts
(anywhere in the text, at offset 0, or past offset 0). A hazard is *introduced* when the after-text
has it and the before-text does not, at that place. Random edits of the project's own store files
(the real shape: index, topic files, Thai, Windows paths) are gated and the port's hazards compared
with what the table says; the trap it guards: an edit whose only hazard is a mid-string U+FEFF, or
a hazard worded differently from the original, in a store's per-file view.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from washexp.wash.coalwash import gate

ROOT = Path(__file__).resolve().parents[1]

# (type, value as the original prints it, characters, where)
ORIGINAL = [
    ("thai-sara-am-decomposed", "U+0E4D+U+0E32 introduced (must stay U+0E33)", "\u0e4d\u0e32", "anywhere"),
    ("bom-introduced", "U+FEFF at file start", "\ufeff", "start"),
    ("zwsp-introduced", "U+200B zero-width space", "\u200b", "anywhere"),
    *(
        (
            "bidi-control-introduced",
            f"U+{cp:04X} {name} (Trojan-Source bidi/zero-width) introduced",
            chr(cp),
            "anywhere",
        )
        for cp, name in [
            (0x202A, "LRE"),
            (0x202B, "RLE"),
            (0x202C, "PDF"),
            (0x202D, "LRO"),
            (0x202E, "RLO"),
            (0x2066, "LRI"),
            (0x2067, "RLI"),
            (0x2068, "FSI"),
            (0x2069, "PDI"),
            (0x200D, "ZWJ"),
        ]
    ),
    ("bom-introduced", "U+FEFF mid-string (zero-width no-break space)", "\ufeff", "past-start"),
]
INHERITED_SARA_AM = (
    "decomposed Thai sara-am present in BOTH versions (pre-existing — consider NFC-normalizing separately)"
)

INSERTS = [chars for _, _, chars, _ in ORIGINAL] + ["\u200c", "\u2060", "\u0e33", "\U0001f600", "x", "\n"]


def _has(text: str, chars: str, where: str) -> bool:
    if where == "start":
        return text.startswith(chars)
    return chars in (text[1:] if where == "past-start" else text)


def expected(before: str, after: str) -> list[tuple[str, str]]:
    return [(t, v) for t, v, c, w in ORIGINAL if _has(after, c, w) and not _has(before, c, w)]


def _texts() -> list[tuple[str, str]]:
    return [(p.name, p.read_text(encoding="utf-8")) for p in sorted((ROOT / "fixtures" / "wash").glob("*/*.md"))]


def _edit(rng: random.Random, text: str) -> str:
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(text) + 1)
        move = rng.random()
        if move < 0.55:
            text = text[:at] + rng.choice(INSERTS) + text[at:]
        elif move < 0.75:
            text = rng.choice(INSERTS) + text
        elif move < 0.9:
            text = text[:at] + text[at + rng.randint(1, 40) :]
        else:
            text = text[1:]
    return text


def _pairs(seed: int, n: int) -> list[tuple[str, str, str]]:
    rng, texts = random.Random(seed), _texts()
    out = []
    for _ in range(n):
        name, before = rng.choice(texts)
        if rng.random() < 0.25:  # a store that already carries one (inherited, never blocked)
            at = 0 if rng.random() < 0.5 else rng.randrange(len(before))
            before = before[:at] + rng.choice(INSERTS[:14]) + before[at:]
        out.append((name, before, _edit(rng, before)))
    return out


PAIRS = _pairs(25, 300)


def test_the_table_is_the_original_hazard_list_and_each_class_is_exercised():
    seen = {pair for _, before, after in PAIRS for pair in expected(before, after)}
    assert seen == {(t, v) for t, v, _, _ in ORIGINAL}  # every class fires at least once below


@pytest.mark.parametrize("i", range(len(PAIRS)))
def test_one_text_names_the_originals_hazards_in_its_words(i):
    _, before, after = PAIRS[i]
    result = gate.check(before, after)
    want = expected(before, after)
    assert [(h.type, h.value) for h in result.hazards] == want
    assert result.introduced == [f"{t}:{v}" for t, v in want]
    if want:
        assert not result.passed
    inherited = "\u0e4d\u0e32" in before and "\u0e4d\u0e32" in after
    assert (INHERITED_SARA_AM in result.warnings) == inherited


def test_a_store_names_each_hazard_with_its_file_and_the_originals_words():
    rng = random.Random(7)
    for _ in range(60):
        picks = rng.sample(PAIRS, 3)
        before = {f"{k}-{name}": b for k, (name, b, _) in enumerate(picks)}
        after = {f"{k}-{name}": a for k, (name, _, a) in enumerate(picks)}
        result = gate.check_store(before, after)
        want = [
            {"type": t, "value": v, "count": 1, "file": f}
            for f in sorted(before, key=lambda n: n.encode("utf-16-be"))
            if before[f] != after[f]
            for t, v in expected(before[f], after[f])
        ]
        assert json.loads(json.dumps(result.to_dict()))["hazards"] == want
