"""Request-field validation, as vLLM's and SGLang's pydantic request models do it.

Both engines answer a wrongly typed or out-of-range sampling field with HTTP 400 (vLLM
turns pydantic's 422 into a 400 ``BadRequestError``; SGLang does the same), so a client
bug never reaches the engine. ``null`` is valid for every optional field.
"""

from __future__ import annotations

from typing import Any


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


#: field -> (check, what it must be)
_RULES: dict[str, tuple[Any, str]] = {
    "temperature": (lambda v: _is_number(v) and v >= 0, "a number >= 0"),
    "top_p": (lambda v: _is_number(v) and 0 < v <= 1, "a number in (0, 1]"),
    "top_k": (_is_int, "an integer"),
    "n": (lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
    "seed": (_is_int, "an integer"),
    "stream": (lambda v: isinstance(v, bool), "a boolean"),
    "ignore_eos": (lambda v: isinstance(v, bool), "a boolean"),
    "stream_options": (lambda v: isinstance(v, dict), "an object"),
    "presence_penalty": (lambda v: _is_number(v) and -2 <= v <= 2, "a number in [-2, 2]"),
    "frequency_penalty": (lambda v: _is_number(v) and -2 <= v <= 2, "a number in [-2, 2]"),
}


def invalid_field(payload: dict[str, Any]) -> tuple[str, str] | None:
    """(field, message) for the first invalid sampling field, or None when all are valid."""
    for name, (ok, must) in _RULES.items():
        value = payload.get(name)
        if value is not None and not ok(value):
            return name, f"1 validation error: {name}: Input should be {must} (got {value!r:.60})"
    return None
