"""``truncate``: a deterministic, model-free compressor that cuts a store to a byte target.

A labelled baseline, never a model: the cheapest cut that reaches a size, so the controlled
experiment has an ungated arm offline. It does not read what the text says. Its rule, stated
verbatim in every record as the instruction it was given (:data:`RULE`):

    every top-level *.md file keeps the same share of its own bytes, in store order: file i may
    use floor(bytes_i x target / store bytes) bytes plus what the files before it left unused;
    it is cut to one byte under that (never inside a character), back to its last space or line
    break, trailing whitespace dropped, and ends with one line break; a file already within its
    share is left as it is.

So the store lands at or a little under the target (the last file gives back at most its last
partial word); the band check (±5 %) is the measurement's, not this module's.
"""

from __future__ import annotations

from collections.abc import Mapping

NAME = "truncate"
RULE = (
    "truncate (deterministic, no model): every top-level *.md file keeps the same share of its own bytes, in store "
    "order: file i may use floor(bytes_i x target / store bytes) bytes plus what the files before it left unused; "
    "it is cut to one byte under that (never inside a character), back to its last space or line break, trailing "
    "whitespace dropped, and ends with one line break; a file already within its share is left as it is."
)


def size(files: Mapping[str, str]) -> int:
    """A store's size: the UTF-8 bytes of its top-level ``*.md`` files."""
    return sum(len(t.encode("utf-8")) for t in files.values())


def _cut(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    head = data[: max(limit - 1, 0)].decode("utf-8", "ignore")  # a partial last character goes
    at = max(head.rfind(" "), head.rfind("\n"))
    head = (head[:at] if at > 0 else head).rstrip()
    return head + "\n" if head else ""


def truncate(files: Mapping[str, str], target: int) -> dict[str, str]:
    """``files`` cut to at most ``target`` bytes by :data:`RULE` (names and order kept)."""
    if target < 0:
        raise ValueError(f"target {target} bytes: must be >= 0")
    total = size(files)
    if total <= target:
        return dict(files)
    out, carry = {}, 0
    for name, text in files.items():
        share = len(text.encode("utf-8")) * target // total + carry
        out[name] = _cut(text, share)
        carry = share - len(out[name].encode("utf-8"))
    return out
