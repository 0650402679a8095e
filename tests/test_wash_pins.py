"""Every pin form CoalWash's apply.mjs refuses to touch, and the ones it keeps washable: one table."""

from __future__ import annotations

import pytest

from washexp.wash.pins import is_pinned


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
