"""The CoalWash scorer: a faithful Python port of the benchmark's ``score.mjs``, output for output.

    washexp score FIXTURE STORE [--json] [--round N] [--model NAME] [--phase P] [--date YYYY-MM-DD]
    washexp score --size DIR

Matching rule: a muscle needle is *kept* and a fat needle is *not removed* when the needle, with
each whitespace run collapsed to one space (JavaScript's ``\\s``, see ``washexp.needles.norm``),
is an exact, case-sensitive substring of the store's top-level ``*.md`` files joined with "\\n"
in sorted-name order and collapsed the same way. There is no trimming and no Unicode
normalization, so a needle can match across a file boundary and a decomposed Thai sara-am is a
lost fact. The no-op check compares the fixture's and the store's ``*.md`` file sets and their
exact contents. Percentages are ``toFixed(1)`` strings, ``n/a`` on an empty denominator; tokens
are the caliper's ``~est``, an estimate. A loss is a result (exit 0); exit 1 means usage or I/O.

The JavaScript value rules that reach the output (``String()``, ``Number()``, ``toFixed``,
``JSON.stringify``) are emulated here, so odd ``expected.json`` values print as node prints them.
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import math
import os
import posixpath
import re
import sys
from collections.abc import Iterable, Mapping
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import ahocorasick_rs

from washexp.errors import WashexpError
from washexp.needles import norm
from washexp.tokens import caliper_estimate
from washexp.wash.coalwash.files import md_names
from washexp.wash.store.apply import refuse_torn

FOLLOWS = (
    "score.mjs of the CoalWash benchmark (TheColliery/.github benchmarks/CoalWash/score.mjs at commit 0eafe905; "
    "the protocol was written for CoalWash v0.1.0-beta.5)"
)
"""The release this port follows, as every wash run and record names it."""

USAGE = (
    "usage: washexp score <fixtureDir> <storeDir> [--round N] [--model NAME] [--phase p] [--json] [--date YYYY-MM-DD]"
)

_SHORT = 3
"""Needles this short are searched one by one: they may occur so often that listing every
overlapping automaton match would cost more than a direct scan."""

_UNDEFINED = object()  # a JSON key that is absent: JavaScript's ``undefined``


# ---- JavaScript value rules -------------------------------------------------------------------


def _double(x: int | float) -> float:
    """A JSON number as JavaScript holds it: the nearest double, infinite past the range."""
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def js_number_str(x: int | float) -> str:
    """``String(x)`` for a number (ECMAScript Number::toString): shortest round-trip digits,
    plain notation for exponents -7 < n <= 21, otherwise ``1.5e+21`` style."""
    x = _double(x)
    if math.isnan(x):
        return "NaN"
    if x == 0:
        return "0"  # -0 prints as 0
    if x < 0:
        return "-" + js_number_str(-x)
    if math.isinf(x):
        return "Infinity"
    _, digits, exp = Decimal(repr(x)).as_tuple()  # repr is the shortest round-trip form, as in JS
    assert isinstance(exp, int)  # a finite number's: NaN and infinity returned above
    s = "".join(map(str, digits)).rstrip("0")
    exp += len(digits) - len(s)
    k, n = len(s), exp + len(s)
    if k <= n <= 21:
        return s + "0" * (n - k)
    if 0 < n <= 21:
        return s[:n] + "." + s[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + s
    e = f"{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"
    return f"{s[0]}e{e}" if k == 1 else f"{s[0]}.{s[1:]}e{e}"


_JS_TRIM = "\t\n\v\f\r \u00a0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000\ufeff"
_DECIMAL = re.compile(r"[+-]?(?:Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)")
_RADIX = {"x": (16, re.compile(r"[0-9a-fA-F]+")), "o": (8, re.compile(r"[0-7]+")), "b": (2, re.compile(r"[01]+"))}


def js_to_number(text: str) -> float:
    """``Number(text)``: trims JS whitespace; empty is 0; decimal, ``Infinity`` and unsigned
    ``0x``/``0o``/``0b`` literals; anything else (``1_000``, ``inf``, ``-0x1``) is NaN."""
    s = text.strip(_JS_TRIM)
    if not s:
        return 0.0
    if len(s) > 2 and s[0] == "0" and s[1].lower() in _RADIX:
        base, digits = _RADIX[s[1].lower()]
        return _double(int(s[2:], base)) if digits.fullmatch(s[2:]) else math.nan
    if not _DECIMAL.fullmatch(s):
        return math.nan  # Python's float() would also take "inf", "nan" and "1_0"
    if s.lstrip("+-") == "Infinity":
        return -math.inf if s[0] == "-" else math.inf
    return float(s)


def to_fixed_1(x: float) -> str:
    """``x.toFixed(1)``: rounds the exact binary double half away from zero, so 0.05 (stored as
    0.05000000000000000277) gives "0.1" while 1.005*100 (100.49999999999999) gives "100.5"."""
    if math.isnan(x):
        return "NaN"
    if abs(x) >= 1e21:
        return js_number_str(x)
    if x == 0:
        x = 0.0  # -0 prints without its sign
    return str(Decimal(x).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))


def pct(n: int, d: int) -> str:
    """score.mjs's percentage: ``(n / d * 100).toFixed(1)``, or ``n/a`` when ``d`` is 0."""
    return to_fixed_1(n / d * 100) if d else "n/a"


def js_string(value: Any) -> str:
    """``String(value)`` for a value parsed from JSON (``_UNDEFINED`` for an absent key)."""
    if value is _UNDEFINED:
        return "undefined"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return js_number_str(value)
    if isinstance(value, list):
        return ",".join("" if v is None else js_string(v) for v in value)  # Array.prototype.join
    if isinstance(value, dict):
        return "[object Object]"
    return value


def _truthy(value: Any) -> bool:
    """JavaScript truthiness of a JSON value: every list and object is truthy, even empty."""
    if isinstance(value, list | dict):
        return True
    return bool(value) and not (isinstance(value, float) and math.isnan(value))


_SURROGATE = re.compile("[\ud800-\udfff]")


def _js_json_string(s: str) -> str:
    # JSON.stringify escapes lone surrogates as \udxxx; json.dumps would emit them raw.
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(s, ensure_ascii=False))


def _js_keys(obj: dict) -> list[str]:
    """A parsed object's keys in JavaScript's order: array-index keys ascending, then the rest."""
    index = [k for k in obj if k.isdecimal() and k.isascii() and str(int(k)) == k and int(k) < 2**32 - 1]
    rest = [k for k in obj if k not in set(index)]
    return sorted(index, key=int) + rest


def js_json(value: Any, indent: str = "  ", _level: int = 0) -> str:
    """``JSON.stringify(value, null, 2)``: numbers as JS prints them, NaN and infinities as null."""
    pad, inner = indent * _level, indent * (_level + 1)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        x = _double(value)
        return js_number_str(x) if math.isfinite(x) else "null"
    if isinstance(value, str):
        return _js_json_string(value)
    if isinstance(value, list):
        if not value:
            return "[]"
        return "[\n" + ",\n".join(inner + js_json(v, indent, _level + 1) for v in value) + "\n" + pad + "]"
    if not value:
        return "{}"
    items = (f"{inner}{_js_json_string(k)}: {js_json(value[k], indent, _level + 1)}" for k in _js_keys(value))
    return "{\n" + ",\n".join(items) + "\n" + pad + "}"


# ---- matching -----------------------------------------------------------------------------------


def _utf16_contains(haystack: str, needle: str) -> bool:
    """JavaScript's ``includes`` on UTF-16 code units: a lone surrogate in a needle can match
    half of an astral character, which a code-point search would never do."""
    hay = haystack.encode("utf-16-le", "surrogatepass")
    pat = needle.encode("utf-16-le", "surrogatepass")
    i = hay.find(pat)
    while i % 2:  # -1 is odd too, hence the explicit stop below
        if i == -1:
            return False
        i = hay.find(pat, i + 1)
    return True


def needles_present(needles: list[str], haystack: str, *, haystack_normalised: bool = False) -> list[bool]:
    """For each needle, whether ``norm(needle)`` occurs in ``norm(haystack)``: the answer of
    ``norm(needle) in norm(haystack)`` (JavaScript ``includes``), found in one pass.

    The one needle search that does not call ``washexp.needles.contains``: score.mjs searches
    UTF-16 code units, and ``washexp score`` answers as it does (a lone surrogate in a needle
    matches half of an astral character here, never in ``contains``).

    An empty needle is always present. Distinct long needles go through one overlapping
    Aho-Corasick scan, so a needle inside or overlapping another is still found; very short
    needles and those holding lone surrogates are searched directly. Pass
    ``haystack_normalised=True`` when ``haystack`` is already ``norm``-ed (saves a pass).
    """
    hay = haystack if haystack_normalised else norm(haystack)
    keys = [norm(n) for n in needles]
    found: dict[str, bool] = {}
    scan: list[str] = []
    wide: list[bool] = []  # whether the haystack holds surrogates, computed at most once

    def direct(key: str) -> bool:
        if not wide:
            wide.append(bool(_SURROGATE.search(hay)))
        if wide[0] or _SURROGATE.search(key):
            return _utf16_contains(hay, key)
        return key in hay

    for key in dict.fromkeys(keys):
        if key == "":
            found[key] = True
        elif len(key) <= _SHORT or _SURROGATE.search(key):
            found[key] = direct(key)
        else:
            found[key] = False
            scan.append(key)
    if scan:
        try:
            matches = ahocorasick_rs.AhoCorasick(scan).find_matches_as_indexes(hay, overlapping=True)
        except UnicodeEncodeError:  # the haystack holds lone surrogates: code units, one by one
            matches = [(i, 0, 0) for i, key in enumerate(scan) if _utf16_contains(hay, key)]
        for index, _, _ in matches:
            found[scan[index]] = True
    return [found[k] for k in keys]


# ---- reading --------------------------------------------------------------------------------------

_UV_MESSAGES = {
    errno.ENOENT: "no such file or directory",
    errno.ENOTDIR: "not a directory",
    errno.EACCES: "permission denied",
    errno.EISDIR: "illegal operation on a directory",
    errno.ELOOP: "too many symbolic links encountered",
    errno.EPERM: "operation not permitted",
}


def _node_reason(err: OSError, syscall: str, path: str) -> str:
    """An OSError worded as node words it: ``ENOENT: no such file or directory, scandir 'x'``."""
    code = errno.errorcode.get(err.errno or 0, "EIO")
    text = _UV_MESSAGES.get(err.errno or 0) or (err.strerror or "i/o error").lower()
    return f"{code}: {text}, {syscall} '{path}'"


def _decode(raw: bytes) -> str:
    # node's 'utf8' decoding: invalid sequences become U+FFFD, a BOM stays.
    return raw.decode("utf-8", "replace")


def _read_raw(folder: str | Path) -> dict[str, bytes]:
    """name -> bytes of the folder's top-level ``*.md`` files (``washexp.wash.coalwash.files`` order)."""
    try:
        names = md_names(folder)
    except OSError as err:
        raise WashexpError(f"cannot read {folder}: {_node_reason(err, 'scandir', str(folder))}") from None
    out = {}
    for name in names:
        path = os.path.join(folder, name)
        try:
            with open(path, "rb") as f:
                out[name] = f.read()
        except OSError as err:
            raise WashexpError(f"cannot read {path}: {_node_reason(err, 'open', path)}") from None
    return out


def read_store(folder: str | Path) -> dict[str, str]:
    """name -> text of the store's top-level ``*.md`` files, sorted, decoded as node decodes
    them (invalid UTF-8 becomes U+FFFD rather than an error; a BOM is kept)."""
    return {name: _decode(raw) for name, raw in _read_raw(folder).items()}


def read_expected(fixture_dir: str | Path) -> Any:
    """The parsed ``expected.json`` of a fixture (any JSON value, as ``JSON.parse`` allows)."""
    path = posixpath.normpath(os.path.join(fixture_dir, "expected.json"))
    try:
        with open(path, "rb") as f:
            text = _decode(f.read())
        return json.loads(text, parse_constant=_reject_constant)
    except OSError as err:
        reason = _node_reason(err, "open", path)
    except ValueError as err:  # JSONDecodeError, NaN/Infinity, a BOM: JSON.parse refuses these too
        reason = str(err)
    except RecursionError:
        reason = "nesting too deep"
    raise WashexpError(f"cannot read expected.json in {fixture_dir}: {reason}")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def size(folder: str | Path) -> tuple[int, int, int]:
    """(files, bytes, ~est tokens) of a store's ``*.md`` files: bytes are the UTF-8 length of
    the decoded text; the caliper estimate is rounded per file, then summed."""
    texts = read_store(folder)
    return (
        len(texts),
        sum(len(t.encode("utf-8")) for t in texts.values()),
        sum(caliper_estimate(t) for t in texts.values()),
    )


# ---- scoring --------------------------------------------------------------------------------------


def changed_files(fixture_files: Mapping[str, str | bytes], store_files: Mapping[str, str | bytes]) -> list[str]:
    """The no-op check: ``<name> (deleted)`` / ``(modified)`` in the fixture's order, then
    ``<name> (added)`` in the store's. Bytes that differ but decode to the same text (two
    invalid sequences both read as U+FFFD) count as unchanged, as in node."""
    out = []
    for name, before in fixture_files.items():
        if name not in store_files:
            out.append(f"{name} (deleted)")
        elif not _same(before, store_files[name]):
            out.append(f"{name} (modified)")
    out.extend(f"{name} (added)" for name in store_files if name not in fixture_files)
    return out


def _same(a: str | bytes, b: str | bytes) -> bool:
    if a == b:
        return True
    a = _decode(a) if isinstance(a, bytes) else a
    b = _decode(b) if isinstance(b, bytes) else b
    return a == b


def _entries(expected: Any, key: str, where: str) -> list[dict]:
    """``expected[key] || []`` with each entry as an object (a non-object entry has no fields)."""
    value = expected.get(key) if isinstance(expected, dict) else None
    if not _truthy(value):
        return []
    if not isinstance(value, list):
        raise WashexpError(f"{where}: {key} is not a list (score.mjs cannot map it either)")
    if None in value:  # `null.needle` throws in score.mjs; a number or string entry just has no fields
        raise WashexpError(f"{where}: {key}[{value.index(None)}] is null (score.mjs throws here)")
    return [e if isinstance(e, dict) else {} for e in value]


def _tidy_round(value: int | float) -> int | float:
    """A round as a Python number: integral finite doubles become ints; NaN stays NaN."""
    x = _double(value)
    return int(x) if math.isfinite(x) and x.is_integer() and abs(x) < 2**53 else x


def _sorted_files(files: Mapping[str, Any]) -> dict[str, Any]:
    return {name: files[name] for name in sorted(files, key=lambda n: n.encode("utf-16-be", "surrogatepass"))}


def _planted(expected: Any, fixture_name: str) -> tuple[list[dict], list[dict]]:
    """The muscle and fat entries ``expected.json`` names."""
    if expected is None:
        raise WashexpError(f"expected.json of {fixture_name}: null has no muscle or fat (score.mjs throws here)")
    where = f"expected.json of {fixture_name}"
    return _entries(expected, "muscle", where), _entries(expected, "fat", where)


def _present(entries: Iterable[dict], texts: Mapping[str, str]) -> list[bool]:
    """Whether each entry's needle is in ``texts`` (score.mjs's rule: all files joined, collapsed)."""
    needles = [js_string(e.get("needle", _UNDEFINED)) for e in entries]
    return needles_present(needles, norm("\n".join(texts.values())), haystack_normalised=True)


def _build(
    expected: Any,
    store_texts: Mapping[str, str],
    changed: list[str],
    fixture_name: str,
    round: int | float | None,
    model: str | None,
    phase: str | None,
    date: str | dt.date | None,
) -> dict:
    muscle, fat = _planted(expected, fixture_name)
    present = _present((*muscle, *fat), store_texts)
    kept, still = present[: len(muscle)], present[len(muscle) :]
    lost = [e.get("id") for e, hit in zip(muscle, kept, strict=True) if not hit]
    remaining = [e.get("id") for e, hit in zip(fat, still, strict=True) if hit]
    fixture = expected.get("fixture") if isinstance(expected, dict) else None
    result: dict[str, Any] = {"fixture": fixture if _truthy(fixture) else fixture_name}
    if round is not None:
        result["round"] = _tidy_round(round)
    if model is not None:
        result["model"] = model
    if phase is not None:
        result["phase"] = phase
    if date is None:
        date = dt.datetime.now(dt.UTC).date()
    result["date"] = date.isoformat()[:10] if isinstance(date, dt.date) else date
    removed = len(fat) - len(remaining)
    result["muscle"] = {
        "total": len(muscle),
        "kept": len(muscle) - len(lost),
        "lost": lost,
        "lossPct": pct(len(lost), len(muscle)),
    }
    result["fat"] = {
        "total": len(fat),
        "removed": removed,
        "remaining": remaining,
        "removalPct": pct(removed, len(fat)),
    }
    result["noOp"] = {
        "expected": isinstance(expected, dict) and expected.get("expectNoOp") is True,
        "actual": not changed,
        "changed": changed,
    }
    return result


def score_texts(
    expected: Any,
    fixture_files: Mapping[str, str],
    store_files: Mapping[str, str],
    fixture_name: str,
    *,
    round: int | float | None = None,
    model: str | None = None,
    phase: str | None = None,
    date: str | dt.date | None = None,
) -> dict:
    """Score texts already in memory: ``expected`` is the parsed manifest, the file maps are
    name -> text of the ``*.md`` files (sorted here by UTF-16 code unit, as read from disk),
    ``fixture_name`` stands in when the manifest names no fixture. Same result as ``score``."""
    fixture_files, store_files = _sorted_files(fixture_files), _sorted_files(store_files)
    changed = changed_files(fixture_files, store_files)
    return _build(expected, store_files, changed, fixture_name, round, model, phase, date)


def _basename(path: str) -> str:
    """node's ``path.basename``: trailing slashes do not count."""
    return path.rstrip("/").rpartition("/")[2]


def score(
    fixture_dir: str | Path,
    store_dir: str | Path,
    *,
    round: int | float | None = None,
    model: str | None = None,
    phase: str | None = None,
    date: str | dt.date | None = None,
) -> dict:
    """Score ``store_dir`` against the fixture's ``expected.json``: the ``--json`` object of
    score.mjs, keys in its order (``round``/``model``/``phase`` only when given; ``date`` is
    today's UTC date unless pinned). Raises ``WashexpError`` when a folder or the manifest
    cannot be read."""
    expected = read_expected(fixture_dir)
    fixture_raw = _read_raw(fixture_dir)
    _refuse_washed(fixture_dir, expected, fixture_raw)
    store_raw = _read_raw(store_dir)
    store_texts = {name: _decode(raw) for name, raw in store_raw.items()}
    changed = changed_files(fixture_raw, store_raw)  # bytes first: no decode when equal
    return _build(expected, store_texts, changed, _basename(str(fixture_dir)), round, model, phase, date)


def _refuse_washed(fixture_dir: str | Path, expected: Any, fixture_raw: Mapping[str, bytes]) -> None:
    """A fixture states every needle its ``expected.json`` plants; a first argument that lacks one
    has been washed (its arguments swapped, most likely), and scoring it would give wrong numbers
    with exit 0. A washed copy may keep its ``expected.json``: its presence proves nothing. A
    departure from score.mjs, which scores whatever it is given."""
    muscle, fat = _planted(expected, _basename(str(fixture_dir)))
    texts = {name: _decode(raw) for name, raw in fixture_raw.items()}
    absent = [e.get("id") for e, hit in zip((*muscle, *fat), _present((*muscle, *fat), texts), strict=True) if not hit]
    if absent:
        raise WashexpError(
            f"{fixture_dir} is not a fixture: it lacks {len(absent)} of the {len(muscle) + len(fat)} needles its "
            f"expected.json plants ({_join_ids(absent[:5])}{', ...' if len(absent) > 5 else ''}); a washed store "
            "goes second (washexp score FIXTURE STORE)"
        )


def _join_ids(ids: Iterable[Any]) -> str:
    return ", ".join("" if i is None else js_string(i) for i in ids)


def render_text(result: dict) -> str:
    """score.mjs's five text lines (each ending in a newline) for a ``score`` result."""
    r = result
    rnd = f"round {js_number_str(r['round'])}" if "round" in r else ""
    tag = " · ".join(t for t in (r.get("model"), rnd, r.get("phase")) if t)
    m, f, noop = r["muscle"], r["fat"], r["noOp"]
    lost = f" · LOST: {_join_ids(m['lost'])}" if m["lost"] else ""
    remaining = f" · remaining: {_join_ids(f['remaining'])}" if f["remaining"] else ""
    rem_pct = "n/a" if f["removalPct"] == "n/a" else f"{f['removalPct']}%"
    changed = ", ".join(noop["changed"])
    if noop["expected"]:
        verdict = (
            "no-op: PASS (store untouched, as a lean store must be)"
            if noop["actual"]
            else f"no-op: FAIL — expected untouched, changed: {changed}"
        )
    else:
        verdict = f"changed files: {changed}" if noop["changed"] else "changed files: none"
    lines = [
        f"CoalWash score · {js_string(r['fixture'])}{f' · {tag}' if tag else ''} · {r['date']}",
        f"muscle: {m['kept']}/{m['total']} kept · fact-loss {m['lossPct']}%{lost}",
        f"fat: {f['removed']}/{f['total']} removed ({rem_pct}){remaining}",
        verdict,
        "fidelity: 0 facts lost" if not m["lost"] else f"fidelity: {len(m['lost'])} FACT(S) LOST",
    ]
    return "\n".join(lines) + "\n"


# ---- command line ---------------------------------------------------------------------------------


def _emit(text: str, stream=None) -> None:
    """Write as node's console does: UTF-8, a lone surrogate as U+FFFD."""
    stream = stream or sys.stdout
    data = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    buffer = getattr(stream, "buffer", None)
    if buffer is None:
        stream.write(data)
        return
    stream.flush()
    buffer.write(data.encode("utf-8"))
    buffer.flush()


def _flag(args: list[str], name: str) -> str | None:
    """The word after the first ``--name``, if any (score.mjs's ``flag``)."""
    try:
        i = args.index(f"--{name}")
    except ValueError:
        return None
    return args[i + 1] if i + 1 < len(args) else None


def _date_flag(args: list[str]) -> str | None:
    if "--date" not in args:
        return None
    text = _flag(args, "date") or ""
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            return dt.date.fromisoformat(text).isoformat()
    except ValueError:
        pass
    raise WashexpError(f"--date needs a date YYYY-MM-DD, got {text!r}")


def _argv_text(arg: str) -> str:
    # node decodes argv as UTF-8 with U+FFFD; Python keeps undecodable bytes as lone surrogates
    return arg.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def main(argv: list[str]) -> int:
    """``washexp score``: score.mjs's arguments, output and exit codes (0 scored, 1 usage/IO).

    As in score.mjs, every word not starting with ``--`` is positional, flag values included,
    so flags go after the two folders; ``--size`` counts only as the first word."""
    args = list(argv)
    try:
        if args and args[0] == "--size":
            folder = args[1] if len(args) > 1 else ""
            if not folder:
                raise WashexpError("--size needs a dir")
            refuse_torn(folder)
            files, nbytes, tokens = size(folder)
            _emit(f"{_argv_text(folder)} · {files} file(s) · {nbytes} bytes · ~{tokens} tok (~est)\n")
            return 0
        positional = [a for a in args if not a.startswith("--")]
        if len(positional) < 2 or not positional[0] or not positional[1]:
            raise WashexpError(USAGE)
        for folder in positional[:2]:
            refuse_torn(folder)  # read-only: it never rolls a journal back, it names it
        date = _date_flag(args)
        raw_round = _flag(args, "round")
        # An empty --round value is falsy in JS and dropped; a non-number becomes NaN, which
        # score.mjs prints as `round NaN` and JSON null: a defect kept for output fidelity.
        round_ = js_to_number(raw_round) if raw_round else None
        model, phase = _flag(args, "model"), _flag(args, "phase")
        result = score(
            positional[0],
            positional[1],
            round=round_,
            model=None if model is None else _argv_text(model),
            phase=None if phase is None else _argv_text(phase),
            date=date,
        )
    except WashexpError as err:  # score.mjs's own line and code: 1 for usage and I/O alike
        _emit(f"score: {err}\n", sys.stderr)
        return 1
    _emit(js_json(result) + "\n" if "--json" in args else render_text(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
