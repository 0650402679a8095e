"""Needle matching: whitespace-normalized exact substring, the rule of CoalWash's score.mjs.

``norm`` collapses every whitespace run into one space, using JavaScript's ``\\s`` class (which
includes NBSP, U+2000..U+200A, U+2028/9, U+202F, U+205F, U+3000 and U+FEFF, and excludes
U+001C..U+001F that Python's ``str.isspace`` would take). There is no trimming, no case folding
and no Unicode normalization: a decomposed Thai sara-am does not match a composed one, and
that counts as a lost fact, by design.

Every check of a needle against a text calls :func:`contains` (or :func:`finder`, the same rule
with the text normalized once for many needles). One variant stands apart:
``washexp.wash.coalwash.score.needles_present``, score.mjs's own search on UTF-16 code units (a
lone surrogate in a needle can match half of an astral character there), kept so that ``washexp
score`` answers as score.mjs does; on text without lone surrogates the two agree.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_JS_WHITESPACE = re.compile("[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+")


def norm(text: str) -> str:
    """Collapse each whitespace run (JavaScript ``\\s+``) into a single space."""
    return _JS_WHITESPACE.sub(" ", text)


def contains(haystack: str, needle: str) -> bool:
    """Whether ``needle`` occurs in ``haystack`` after both are whitespace-normalized."""
    return finder(haystack)(needle)


def finder(haystack: str) -> Callable[[str], bool]:
    """:func:`contains` for many needles in one text, normalized once: ``found = finder(text)``,
    then ``found(needle)``."""
    hay = norm(haystack)
    return lambda needle: norm(needle) in hay
