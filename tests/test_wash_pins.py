"""Every pin form CoalWash's apply.mjs refuses to touch, and the ones it keeps washable: one table."""

from __future__ import annotations

import pytest

from washexp.wash.coalwash.pins import PIN_READ_BYTES, is_pinned, pin_verdict


def fm(inner: str, nl: str = "\n") -> str:
    return f"---{nl}{inner}{nl}---{nl}# Notes{nl}{nl}a fact{nl}"


# JavaScript's \s, member by member (the floor's whitespace), plus CRLF and nothing
JS_WS = ["", "\r\n", *map(chr, [0x20, 0x09, 0x0A, 0x0D, 0x0B, 0x0C, 0xA0, 0x1680, *range(0x2000, 0x200B)]),
         *map(chr, [0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF])]  # fmt: skip

PINNED = {
    "plain": fm("pinned: true"),
    "json-quoted key": fm('"pinned": true'),
    "single-quoted key": fm("'pinned': true"),
    "yes": fm("pinned: yes"),
    "True": fm("pinned: True"),
    "TRUE": fm("pinned: TRUE"),
    "quoted true": fm('pinned: "true"'),
    "comment after": fm("pinned: true # keep"),
    "no space": fm("pinned:true"),
    "indented": fm("  pinned: true"),
    "indented block": fm("  title: x\n  pinned: true"),
    "nbsp before colon": fm("pinned\u00a0: true"),
    "value on the next line": fm("pinned:\n  true"),
    "key split across lines": fm("pinned\n: true"),
    "empty value": fm("pinned:"),
    "maybe": fm("pinned: maybe"),
    "0": fm("pinned: 0"),
    "1": fm("pinned: 1"),
    "[]": fm("pinned: []"),
    "n (YAML 1.1 false, refused on purpose)": fm("pinned: n"),
    "fence + U+200B": "---\u200b\npinned: true\n---\nx\n",
    "fence + U+3164": "---\u3164\ntitle: x\n---\nx\n",
    "fence + U+2800": "---\u2800\ntitle: x\n---\nx\n",
    "fence + nbsp": "---\u00a0\npinned: true\n---\nx\n",
    "U+200B before the fence": "\u200b---\npinned: true\n---\nx\n",
    "BOM then fence": "\ufeff---\npinned: true\n---\nx\n",
    "two BOMs": "\ufeff\ufeff---\ntitle: x\n---\nx\n",
    "NUL in the head": "---\n\0title: x\n---\n",
    "U+FFFD in the head": "\ufffd---\ntitle: x\n---\n",
    "CRLF block": fm("pinned: true", "\r\n"),
    "CRLF-mixed (bare CR)": "---\r\n  title: x\r  pinned: true\r\n---\r\nx\r\n",
    "bare CR fence": "---\rpinned: true\r---\rx\r",
    "never closes": "---\npinned: false\ntitle: x\n",
    "a tab in the indentation": fm("title: x\n\tpinned: false"),
    "indented less than the first": fm("  title: x\npinned: false"),
    "a line that is no key": fm("title: x\nthis is not yaml"),
    "flow mapping": fm("{pinned: true}"),
    "explicit key": fm("? pinned\n: true"),
    "non-ASCII key": fm("pinnéd: false"),
    "document end inside": fm("title: x\n...\npinned: false"),
}

UNPINNED = {
    "no frontmatter": "# Notes\n\na fact\n",
    "title only": fm("title: only"),
    "unpinned: true": fm("unpinned: true"),
    "pinnedBy": fm("pinnedBy: alice"),
    "pinned_at": fm("pinned_at: 2026-07-28"),
    "false": fm("pinned: false"),
    "False": fm("pinned: False"),
    "FALSE": fm("pinned: FALSE"),
    "no": fm("pinned: no"),
    "off": fm("pinned: off"),
    "quoted false": fm('pinned: "false"'),
    "false with a comment": fm("pinned: false # was pinned last week"),
    "nested": fm("nested:\n  pinned: true"),
    "list item": fm("- pinned: true"),
    "commented out": fm("# pinned: true"),
    "in the body": "# plain\npinned: true\n",
    "a diff line": "--- a/file.txt\npinned: true\n---\n",
    "a longer rule": "----\npinned: true\n---\n",
    "BOM, clean block": "\ufeff---\ntitle: x\n---\nx\n",
    "CRLF, clean block": fm("pinned: false", "\r\n"),
}


@pytest.mark.parametrize("name", list(PINNED))
def test_a_pin_form_is_a_pin(name):
    assert is_pinned(PINNED[name]) is True


@pytest.mark.parametrize("name", list(UNPINNED))
def test_a_file_without_a_pin_stays_washable(name):
    assert is_pinned(UNPINNED[name]) is False


def test_every_whitespace_variant_of_the_floor_is_a_pin():
    """pinned<w>:<w>true<w>, each JavaScript whitespace in each of the three slots: 27 x 3 = 81."""
    variants = []
    for slot in range(3):
        for w in JS_WS:
            s = [" ", " ", ""]
            s[slot] = w
            variants.append(f"pinned{s[0]}:{s[1]}true{s[2]}")
    assert len(variants) == 81
    unpinned = [v for v in variants if not is_pinned(fm(v))]
    assert unpinned == []


# Issue 36: the pin is read the way CoalWash's JavaScript reads it. A JavaScript line ends at
# LF, CR, U+2028 or U+2029, so its m-flag floor ^pinned\s*:\s*true\s*$ sees a line Python's
# re.MULTILINE does not; its `.` stops at the same breaks, so a comment ends there.
JS_READS_A_PIN = {
    "U+2028 makes the floor a line": fm("title: x\u2028pinned: true"),
    "U+2029 makes the floor a line": fm("title: x\u2029pinned: true"),
    "a CR inside a key line's value": fm("title: x\rpinned: true"),
    "between two U+2028": fm("title: x\u2028pinned: true\u2028owner: y"),
    "between two U+2029": fm("title: x\u2029pinned: true\u2029owner: y"),
    "a comment does not run across U+2028": fm("pinned: no #x\u2028y"),
    "a comment does not run across U+2029": fm("pinned: off #x\u2029y"),
    "capital P (keys fold case)": fm("Pinned: true"),
    "capital P, yes": fm("PINNED: yes"),
}
# Characters JavaScript's trim and \s and Python's strip and \s read differently: next to a pinned
# key, the file is pinned whatever either reading says (our wider rule).
LANGUAGES_DISAGREE = {
    "U+0085 after false": fm("pinned: false\x85"),
    "U+001C after off": fm("pinned: off\x1c"),
    "U+001F after no": fm("pinned: no\x1f"),
    "U+FEFF after false": fm("pinned: false\ufeff"),
    "U+180E after false": fm("pinned: false\u180e"),
}


@pytest.mark.parametrize("name", [*JS_READS_A_PIN, *LANGUAGES_DISAGREE])
def test_a_javascript_pin_is_a_pin(name):
    text = {**JS_READS_A_PIN, **LANGUAGES_DISAGREE}[name]
    assert is_pinned(text) is True
    assert is_pinned(text.encode("utf-8")) is True


def test_the_disagreement_rule_needs_a_pinned_key():
    assert is_pinned(fm("title: a\x85b")) is False
    assert is_pinned(fm("title: a\u2028b\nPinned: false")) is True


@pytest.mark.parametrize(
    ("text", "marker"),
    [
        (fm("pinned: true"), True),
        (fm("Pinned: true"), True),
        (fm("title: x\u2028pinned: true"), True),
        (fm("title: x\u2029pinned: true\u2029owner: y"), True),  # the floor's $ stops at U+2029 too
        (fm("pinned: maybe"), True),
        ("---\npinned: true\n", False),  # never closes: incapacity
        (fm("title: x\nnot yaml"), False),
        (fm("pinned: false\x85"), True),  # JavaScript trim keeps U+0085: not a clearing value
        (fm("pinned: false\ufeff"), False),  # JavaScript clears it; our wider rule pins it
    ],
)
def test_a_pin_carries_its_tier(text, marker):
    """A marker pin (the user marked the file) refuses the whole plan; incapacity refuses the file."""
    v = pin_verdict(text)
    assert v.pinned is True
    assert v.marker is marker
    assert (v.why is None) is marker


def test_a_block_that_does_not_close_in_the_64k_window_is_a_pin():
    """CoalWash reads 64 KiB: a block whose closing fence lies past it is unverifiable, hence pinned,
    even when the whole file would read as unpinned."""
    body = "a: b\n" * ((PIN_READ_BYTES // 5) + 10)
    text = f"---\n{body}pinned: false\n---\nx\n"
    assert len(text.encode()) > PIN_READ_BYTES
    assert is_pinned(text) is True
    assert pin_verdict(text).marker is False
    short = f"---\n{'a: b' + chr(10) * 1}pinned: false\n---\nx\n"
    assert is_pinned(short) is False


def test_a_fence_on_the_window_cut_is_no_close():
    """A ``\\n---`` ending exactly at byte 65,536 of a longer file is not a close (the block may go on)."""
    head = "---\n" + "a: b\n" * 13000
    pad = PIN_READ_BYTES - len(head.encode()) - len("\n---")
    head += "c: " + "x" * (pad - 3) + "\n---"
    assert len(head.encode()) == PIN_READ_BYTES
    assert is_pinned(head + "\npinned: false\n---\n") is True  # cut at the window: unverifiable
    assert is_pinned(head) is False  # the whole file: its end is a real close


@pytest.mark.parametrize(
    "text, why",
    [
        ("---\ntitle: x\n", "frontmatter unverifiable inside the pin read window"),
        ("\u200b---\ntitle: x\n---\n", "a hidden fence"),
        (
            "---\ntitle: x\u2028pinnedish: 1\n---\n",
            "a character JavaScript and Python read differently, beside a pinned key",
        ),
    ],
)
def test_an_incapacity_pin_says_why_for_the_refusal_line(text, why):
    # pin_screen names each refused file with this reason
    assert pin_verdict(text) == pin_verdict(text.encode("utf-8"))
    v = pin_verdict(text)
    assert (v.pinned, v.marker, v.why) == (True, False, why)


def test_bad_bytes_and_lone_surrogates_are_an_incapacity_pin_not_an_error():
    # read as node reads them (U+FFFD), and a U+FFFD in the head leaves the block unverifiable;
    # a str with a lone surrogate is read as the bytes it would be written as
    unverifiable = "frontmatter unverifiable inside the pin read window"
    for data in (b"---\ntitle: x\n---\n\xff\xfe body\n", "---\ntitle: x\n---\n\ud800 body\n"):
        v = pin_verdict(data)
        assert (v.pinned, v.marker, v.why) == (True, False, unverifiable)


def test_only_quotes_are_taken_off_a_value():
    assert not is_pinned("---\npinned: 'no'\n---\n")
    assert is_pinned("---\npinned: XnoX\n---\n")  # another wrapping character is no quote: not a clearing word
