"""Structured output: what the reader and the ranker ask the server for (``model.structured_output``).

- the reader: a schema built per task from its fact keys and nothing else (never an expected
  value): one object ``{"facts": {...}}`` with every field required and no other key;
- the ranker (Jev): ``{"scores": [...]}`` with exactly one number from 0 to 100 per unit, the
  shape ``openai_roles.parse_scores`` reads (issue 49: a 0.5B model's free-text rankings were
  unreadable on every primary task).

Summarisers, H and washers write free text. Servers take a schema in two forms
(``shared/reference/structured-output.md``):

- ``json_schema``: OpenAI's form (OpenAI, vLLM, llama.cpp's own ``llama-server``);
- ``json_object``: ``{"type": "json_object", "schema": ...}``, llama-cpp-python's server, which
  refuses the ``json_schema`` form (HTTP 500) and constrains decoding by a grammar from the schema;
- ``off``: nothing is sent; the reader answers as the prompt alone asks.

A server that refuses the form is an endpoint error (the run fails, one line), never a low score.
Grading does not change: ``compaction.grading`` counts a reply out of shape apart.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

FORMATS = ("json_schema", "json_object", "off")
ANY_VALUE = {"anyOf": [{"type": t} for t in ("string", "integer", "number", "boolean", "array", "object", "null")]}
"""A fact may be any JSON value. Spelled out: llama-cpp-python reads an empty schema ``{}`` as an
object and made a 0.5B model answer ``{"type": "number", "value": 1}`` for ``1``."""


def facts_schema(fields: Iterable[str]) -> dict[str, Any]:
    """``{"facts": {field: any JSON value, ...}}``, every field required, nothing else allowed."""
    names = list(fields)
    facts = {
        "type": "object",
        "properties": {f: ANY_VALUE for f in names},
        "required": names,
        "additionalProperties": False,
    }
    return {"type": "object", "properties": {"facts": facts}, "required": ["facts"], "additionalProperties": False}


def scores_schema(count: int) -> dict[str, Any]:
    """``{"scores": [count numbers from 0 to 100]}``, nothing else allowed."""
    score = {"type": "number", "minimum": 0, "maximum": 100}
    scores = {"type": "array", "items": score, "minItems": count, "maxItems": count}
    return {"type": "object", "properties": {"scores": scores}, "required": ["scores"], "additionalProperties": False}


def response_format(form: str, fields: Iterable[str]) -> dict[str, Any] | None:
    """The ``response_format`` a reader's request carries in ``form`` (None for ``off``)."""
    return _wrap(form, "facts", lambda: facts_schema(fields))


def ranking_format(form: str, count: int) -> dict[str, Any] | None:
    """The ``response_format`` a ranking request over ``count`` units carries in ``form``."""
    return _wrap(form, "scores", lambda: scores_schema(count))


def _wrap(form: str, name: str, schema) -> dict[str, Any] | None:
    if form == "off":
        return None
    if form == "json_schema":
        # Not strict: OpenAI's strict mode wants a type for every value, and a fact may be any JSON.
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema(), "strict": False}}
    if form == "json_object":
        return {"type": "json_object", "schema": schema()}
    raise ValueError(f"structured output {form!r}: expected one of {', '.join(FORMATS)}")
