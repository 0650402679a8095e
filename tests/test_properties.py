"""Property-based tests (issue 12) of four rules that are easy to get subtly wrong: the strict
grader, the needle normaliser, the range sugar and the scorer's whitespace rule."""

from __future__ import annotations

import copy
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from washexp.app import expand_ranges
from washexp.compaction.scoring.grading import strict_equal, unordered_equal
from washexp.errors import WashexpError
from washexp.needles import contains, norm
from washexp.wash.coalwash.score import needles_present

FAST = settings(max_examples=80, deadline=None)

JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
NOT_JS_SPACE = "\x1c\x1d\x1e\x1f\u200b\u0085"
"""Python's ``str.isspace`` takes U+001C..U+001F and U+0085; JavaScript's ``\\s`` does not (nor U+200B)."""

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12,
)
text = st.text(alphabet=st.sampled_from("ab-c.\u0e33\u0e4d\u0e32" + JS_SPACE + NOT_JS_SPACE), max_size=30)


def other_type(value):
    """The same content under another JSON type: strict grading must never accept it."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return float(value)
    if isinstance(value, float):
        return str(value)
    if isinstance(value, str):
        return [value]
    if value is None:
        return "null"
    return json.dumps(value)


# --- the strict grader ----------------------------------------------------------------------------


@FAST
@given(json_values)
def test_strict_equal_holds_for_a_value_and_its_json_round_trip(value):
    assert strict_equal(value, copy.deepcopy(value))
    assert strict_equal(value, json.loads(json.dumps(value)))


@FAST
@given(json_values)
def test_strict_equal_never_accepts_another_type(value):
    assert not strict_equal(value, other_type(value))
    assert not strict_equal({"v": value}, {"v": other_type(value)})  # nor deep inside


@FAST
@given(st.lists(json_values, max_size=6), st.randoms(use_true_random=False))
def test_unordered_fields_ignore_order_and_nothing_else(items, rnd):
    shuffled = items[:]
    rnd.shuffle(shuffled)
    assert unordered_equal(items, shuffled)
    if items:
        changed = shuffled[:]
        changed[0] = other_type(changed[0])
        assert not unordered_equal(items, changed)
        assert not unordered_equal(items, shuffled[:-1])


# --- the needle normaliser ------------------------------------------------------------------------


@FAST
@given(text)
def test_norm_collapses_each_js_whitespace_run_to_one_space_and_keeps_the_rest(s):
    n = norm(s)
    assert norm(n) == n
    assert not re.search(f"[{JS_SPACE}]{{2}}", n) and not re.search(f"[{JS_SPACE}]", n.replace(" ", ""))
    assert [c for c in n if c not in JS_SPACE] == [c for c in s if c not in JS_SPACE]  # no case or Unicode change
    assert all(c in n for c in NOT_JS_SPACE if c in s)


@FAST
@given(text, st.data())
def test_every_substring_of_a_text_is_found_in_it(s, data):
    start = data.draw(st.integers(0, len(s)))
    end = data.draw(st.integers(start, len(s)))
    assert contains(s, s[start:end])


def test_no_unicode_normalisation():
    assert not contains("\u0e33", "\u0e4d\u0e32")  # a decomposed sara am is a lost fact


# --- the range sugar ------------------------------------------------------------------------------


@FAST
@given(st.from_regex(r"[a-z][a-z_.]{0,8}", fullmatch=True), st.integers(-50, 50), st.integers(0, 20))
def test_a_range_is_inclusive_of_both_ends(key, lo, width):
    hi = lo + width
    (arg,) = expand_ranges([f"{key}={lo}..{hi}"])
    assert arg == f"{key}=range({lo},{hi + 1})"
    assert list(eval(arg.partition("=")[2])) == list(range(lo, hi + 1))  # what Hydra's range() sweeps


@FAST
@given(st.integers(-50, 50), st.integers(1, 20))
def test_an_empty_range_is_refused(hi, gap):
    with pytest.raises(WashexpError, match="empty range"):
        expand_ranges([f"topn={hi + gap}..{hi}"])


@FAST
@given(st.text(max_size=20).filter(lambda a: not re.fullmatch(r"[\w.]+=-?\d+\.\.-?\d+", a)))
def test_anything_else_passes_through(arg):
    assert expand_ranges([arg]) == [arg]


# --- the scorer's whitespace rule -----------------------------------------------------------------


@FAST
@given(st.lists(text.filter(str.strip), min_size=1, max_size=6), text)
def test_the_scorer_answers_norm_needle_in_norm_haystack(needles, filler):
    haystack = filler.join(needles[::2]) + filler  # some needles present, some (maybe) not
    assert needles_present(needles, haystack) == [norm(n) in norm(haystack) for n in needles]


@FAST
@given(st.lists(st.text(alphabet="abc-", min_size=1, max_size=6), min_size=2, max_size=6), st.data())
def test_any_whitespace_run_between_words_matches_any_other(words, data):
    def gap() -> str:
        return data.draw(st.text(alphabet=JS_SPACE, min_size=1, max_size=3))

    needle = "".join(w + gap() for w in words[:-1]) + words[-1]
    haystack = "x" + gap() + "".join(w + gap() for w in words) + "y"
    assert needles_present([needle], haystack) == [True]
    # U+001F is whitespace to Python's str.split, not to JavaScript's \s: no match across it
    assert needles_present([" ".join(words)], "\x1f".join(words)) == [False]
