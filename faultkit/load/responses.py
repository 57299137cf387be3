"""Read what a node answered: non-200 error bodies and non-streamed 200 answers.

:func:`http_error` classifies a non-200 status (``http_429``/``http_4xx``/``http_5xx``,
else ``other``), reads up to :data:`ERROR_BODY_BYTES` of its body and says whether it is
an OpenAI-style error body (a JSON object whose ``error`` is an object or a string, or
vLLM's older ``{"object": "error", "message": ...}``). :func:`parse_whole` interprets a
non-streamed JSON answer as a one-chunk :class:`~faultkit.load.sse.StreamOutcome`
(``stream_error`` when it is not an answer). Details are at most ~200 characters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from faultkit.load.sse import StreamOutcome

# Enough for a validation error that echoes the request: a cut body would not parse as
# JSON, and the rejection would wrongly look unclean.
ERROR_BODY_BYTES = 65536


def http_error(status: int, raw: bytes) -> tuple[str, str, bool]:
    """Error class, ``"HTTP <status>: <message>"`` and whether the body is an OpenAI-style
    error body, for a non-200 response whose body began with ``raw`` (at most
    :data:`ERROR_BODY_BYTES` of it; what arrived, if the connection broke)."""
    if status == 429:
        error_class = "http_429"
    elif 400 <= status < 500:
        error_class = "http_4xx"
    elif 500 <= status < 600:
        error_class = "http_5xx"
    else:
        error_class = "other"
    message, openai_error = _error_body(raw[:ERROR_BODY_BYTES])
    return error_class, f"HTTP {status}: {message}", openai_error


def _error_body(raw: bytes) -> tuple[str, bool]:
    """The message of an error body, and whether it is an OpenAI-style error body.

    OpenAI-style: a JSON object whose ``error`` is an object or a string, or vLLM's older
    top-level ``{"object": "error", "message": ...}``.
    """
    text = raw.decode("utf-8", "replace")
    try:
        obj = json.loads(text)
    except ValueError:
        return _squash(text), False
    if not isinstance(obj, dict):
        return _squash(text), False
    err = obj.get("error")
    if isinstance(err, dict):
        return _squash(str(err.get("message") or err.get("type") or err)), True
    if isinstance(err, str):
        return _squash(err), True
    if obj.get("object") == "error" and "message" in obj:
        return _squash(str(obj["message"])), True
    msg = err if err is not None else obj.get("message") or obj.get("detail") or obj
    return _squash(str(msg)), False


def _body_message(raw: bytes) -> str:
    return _error_body(raw)[0]


def _squash(text: str) -> str:
    return " ".join(text.split())[:200]


def parse_whole(raw: bytes, t: float) -> StreamOutcome:
    """Interpret a non-streamed JSON answer (status 200) as a one-chunk outcome at ``t``."""
    out = StreamOutcome(done=True, chunks=1)
    try:
        obj = json.loads(raw)
    except ValueError:
        out.error_class, out.error_detail = "stream_error", f"body is not JSON: {raw[:120]!r}"
        return out
    if not isinstance(obj, dict) or "error" in obj:
        why = _body_message(raw)
        out.error_class, out.error_detail = "stream_error", f"error body after 200: {why}"
        return out
    usage = obj.get("usage")
    if isinstance(usage, dict):
        if isinstance(usage.get("prompt_tokens"), int):
            out.prompt_tokens = usage["prompt_tokens"]
        if isinstance(usage.get("completion_tokens"), int):
            out.completion_tokens = usage["completion_tokens"]
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices:
        out.error_class, out.error_detail = "stream_error", "answer has no choices"
        return out
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message")
    text: object = message.get("content") if isinstance(message, dict) else choice.get("text")
    reason = choice.get("finish_reason")
    if isinstance(reason, str):
        out.finish_reason = reason
        if reason in ("error", "abort"):
            out.error_class, out.error_detail = "stream_error", f"finish_reason {reason!r}"
    if text:
        out.t_first_token = out.t_last_token = t
        out.content_chunks = 1
    return out


def response_header(headers: Mapping[str, str], name: str) -> str | None:
    """Response header ``name`` (at most 120 characters), or None when absent or empty;
    ``headers`` as :mod:`faultkit.load.http1` gives them, names lower-case."""
    value = headers.get(name.lower())
    return value[:120] if value else None


def header_count(value: str | None) -> int | None:
    """A header's value as a count ≥ 0 (``"2"`` → 2); None when absent or not one."""
    if value is None or not value.strip().isdigit():
        return None
    return int(value.strip())
