"""Incremental Server-Sent Events parsing and OpenAI stream interpretation.

Two layers, both pure and independent of the transport:

* :class:`SSEParser` turns arbitrary byte chunks (however TCP split them) into complete SSE
  events. Framing follows the WHATWG SSE rules the engines rely on (ENGINES.md §3): lines
  end in ``\\n``, ``\\r\\n`` or ``\\r``; an event ends at a blank line; lines starting with
  ``:`` are comments (keep-alive pings) and are ignored; a line without ``:`` is a field
  with an empty value. Lines are split as bytes and decoded one complete line at a time, so
  a multibyte UTF-8 character split across reads is decoded correctly (invalid bytes become
  U+FFFD rather than an exception).
* :class:`StreamInterpreter` reads those events as an OpenAI-compatible completion stream
  and decides how it ended: ``ok`` only when ``data: [DONE]`` arrived and no error was seen.
  ``stream_error`` for a ``data:`` JSON object with a top-level ``error`` key (object or
  string, TGI style), an SSE ``error:`` field or ``event: error`` (llama.cpp), a frame that
  is not valid JSON, or a ``finish_reason`` of ``error``/``abort``; ``truncated`` when the
  stream ended without ``[DONE]``. ``usage`` is read from whichever chunk carries it, and a
  chunk whose ``choices`` is missing, ``null`` or ``[]`` is treated the same way.

Classification depends only on the concatenated bytes, never on how they were chunked
(property-tested in ``tests/unit/faultkit/load/test_load_sse.py``). Times passed in are
whatever clock the caller uses; the interpreter only stores them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

__all__ = ["SSEEvent", "SSEParser", "StreamInterpreter", "StreamOutcome", "parse_stream"]

_LINE_SPLIT = re.compile(rb"\r\n|\r|\n")
_json_decode = json.JSONDecoder().decode


def _decode(text: str) -> Any:
    """Parse one JSON frame: orjson (3x faster: this is the per-chunk cost), stdlib fallback.

    The fallback keeps the stdlib's wider acceptance (NaN, huge integers), so the choice of
    parser never changes a classification.
    """
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return _json_decode(text)


_ABNORMAL_FINISH = frozenset({"error", "abort"})


class SSEEvent(NamedTuple):
    """One dispatched SSE event: ``event`` type (``message`` by default) and its data.

    ``error`` holds the value of a non-standard ``error:`` field (llama.cpp), else None.
    (A NamedTuple, not a frozen dataclass: it is built once per chunk on the hot path.)
    """

    data: str | None
    event: str = "message"
    error: str | None = None


class SSEParser:
    """Feed bytes, get complete :class:`SSEEvent` objects; call :meth:`close` at EOF."""

    __slots__ = ("_buf", "_data", "_error", "_event")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[str] = []
        self._event = ""
        self._error: str | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Consume ``chunk`` and return the events it completed (possibly none)."""
        buf = self._buf + chunk if self._buf else chunk
        if b"\r" not in buf:
            lines = buf.split(b"\n")
            self._buf = lines.pop()
        else:
            # A trailing "\r" may be the first half of "\r\n": keep it until the next byte.
            hold = buf.endswith(b"\r")
            lines = _LINE_SPLIT.split(buf[:-1] if hold else buf)
            rest = lines.pop()
            self._buf = rest + b"\r" if hold else rest
        events: list[SSEEvent] = []
        data = self._data
        for raw in lines:
            # Fast path for the two lines every chunk consists of: "data: ..." and "".
            if raw[:6] == b"data: ":
                data.append(raw[6:].decode("utf-8", "replace"))
            elif not raw and data and self._error is None and not self._event:
                events.append(SSEEvent("\n".join(data) if len(data) > 1 else data[0]))
                data.clear()
            else:
                self._line(raw, events)
        return events

    def feed_data(self, chunk: bytes) -> list[str] | None:
        """The fast path of :meth:`feed` for what engines send: when the parser holds no
        partial event and ``chunk`` is whole ``data: …`` events, each one line ended by a
        blank line (no ``\r``), return their data (the same events :meth:`feed` would
        dispatch, all of type ``message``); else consume nothing and return None."""
        if self._buf or self._data or self._event or self._error is not None:
            return None
        if b"\r" in chunk:
            return None
        parts = chunk.split(b"\n\n")
        rest = parts.pop()
        out: list[str] = []
        for part in parts:
            if part[:6] != b"data: " or b"\n" in part:
                if not part:
                    continue  # a blank line with no event pending: nothing
                return None
            out.append(part[6:].decode("utf-8", "replace"))
        self._buf = rest
        return out

    def close(self) -> list[SSEEvent]:
        """End of stream: a final line or event without its terminator is still dispatched.

        Being lenient here (as vLLM's benchmark is with a trailing complete JSON) cannot
        turn a broken stream into a success: a cut-off JSON frame does not parse, and
        ``[DONE]`` is only recognised when it arrived whole.
        """
        events: list[SSEEvent] = []
        buf, self._buf = self._buf, b""
        if buf.endswith(b"\r"):
            buf = buf[:-1]
            if buf:
                self._line(buf, events)
            self._line(b"", events)
        elif buf:
            self._line(buf, events)
        self._line(b"", events)
        return events

    def _line(self, raw: bytes, events: list[SSEEvent]) -> None:
        if not raw:
            if self._data or self._error is not None:
                data = "\n".join(self._data) if self._data else None
                events.append(SSEEvent(data, self._event or "message", self._error))
            self._data.clear()
            self._event = ""
            self._error = None
            return
        if raw[0] == 0x3A:  # ":" comment / keep-alive
            return
        line = raw.decode("utf-8", "replace")
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "error":
            self._error = value
        # "id", "retry" and unknown fields are ignored, as the SSE spec says.


@dataclass(slots=True)
class StreamOutcome:
    """What a stream amounted to. Times are the caller's clock (None when never seen)."""

    done: bool = False
    error_class: str | None = None  # "stream_error" | "truncated" | None (ok)
    error_detail: str | None = None
    t_first_token: float | None = None
    t_last_token: float | None = None
    chunks: int = 0
    content_chunks: int = 0
    itl_s: list[float] = field(default_factory=list)
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    @property
    def ok(self) -> bool:
        return self.done and self.error_class is None


class StreamInterpreter:
    """Interpret SSE events of an OpenAI chat or completion stream.

    A *content chunk* is a ``data:`` frame whose choices carry non-empty ``delta.content``
    or ``delta.reasoning_content`` (chat) or ``text`` (completions); its time is the time of
    the read that completed it. ``t_first_token`` is the first content chunk's time,
    ``itl_s`` the gaps between successive content chunks. After ``[DONE]`` everything is
    ignored. The first error wins and is never overwritten.
    """

    __slots__ = ("_eof", "_parser", "outcome")

    def __init__(self) -> None:
        self._parser = SSEParser()
        self.outcome = StreamOutcome()
        self._eof = False

    def feed(self, chunk: bytes, t: float) -> None:
        """Consume bytes received at time ``t``."""
        frames = self._parser.feed_data(chunk)
        if frames is None:
            for event in self._parser.feed(chunk):
                self._event(event, t)
            return
        for data in frames:
            self._message(data, t)

    def _message(self, data: str, t: float) -> None:
        """A plain ``data:`` event (the fast path of :meth:`_event`, the same rules)."""
        out = self.outcome
        if out.done:
            return
        if data[:1] != "{":
            self._event(SSEEvent(data), t)
            return
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            self._event(SSEEvent(data), t)  # the stdlib's wider acceptance, or a bad frame
            return
        if type(obj) is not dict or "error" in obj:
            self._event(SSEEvent(data), t)
            return
        out.chunks += 1
        self._chunk(obj, t)

    def close(self, t: float) -> StreamOutcome:
        """End of stream at ``t``: finish parsing and settle the classification.

        An unterminated last frame that is not valid JSON is the cut-off remainder of a
        truncated stream, not an error frame, so it is ignored.
        """
        self._eof = True
        for event in self._parser.close():
            self._event(event, t)
        out = self.outcome
        if out.error_class is None and not out.done:
            out.error_class = "truncated"
            out.error_detail = (
                f"stream ended without [DONE] after {out.chunks} chunks "
                f"({out.content_chunks} with content)"
            )
        return out

    def _fail(self, detail: str) -> None:
        if self.outcome.error_class is None:
            self.outcome.error_class = "stream_error"
            self.outcome.error_detail = detail[:200]

    def _event(self, event: SSEEvent, t: float) -> None:
        out = self.outcome
        if out.done:
            return
        data, kind, error = event
        if error is not None:
            self._fail(f"SSE error field: {error}")
        if kind == "error":
            self._fail(f"SSE error event: {data or ''}")
            return
        if data is None:
            return
        if data[:1] != "{" and data.strip() == "[DONE]":
            out.done = True
            return
        out.chunks += 1
        try:
            obj = _decode(data)
        except ValueError:
            if self._eof:
                out.chunks -= 1
            else:
                self._fail(f"frame is not JSON: {data[:120]!r}")
            return
        if type(obj) is not dict:
            self._fail(f"frame is not a JSON object: {data[:120]!r}")
            return
        if "error" in obj:
            self._fail(f"error frame after 200: {_error_message(obj)}")
            return
        self._chunk(obj, t)

    def _chunk(self, obj: dict[str, Any], t: float) -> None:
        """A completion chunk (a JSON object without ``error``): usage, content, finish."""
        out = self.outcome
        usage = obj.get("usage")
        if usage and isinstance(usage, dict):
            prompt = usage.get("prompt_tokens")
            completion = usage.get("completion_tokens")
            if isinstance(prompt, int):
                out.prompt_tokens = prompt
            if isinstance(completion, int):
                out.completion_tokens = completion
        choices = obj.get("choices")
        if not isinstance(choices, list):
            return
        content = False
        for choice in choices:
            if type(choice) is not dict:
                continue
            delta = choice.get("delta")
            if type(delta) is dict:
                if delta.get("content") or delta.get("reasoning_content"):
                    content = True
            else:
                text = choice.get("text")
                if text and isinstance(text, str):
                    content = True
            reason = choice.get("finish_reason")
            if reason and isinstance(reason, str):
                out.finish_reason = reason
                if reason in _ABNORMAL_FINISH:
                    self._fail(f"finish_reason {reason!r}")
        if content:
            if out.t_first_token is None:
                out.t_first_token = t
            else:
                assert out.t_last_token is not None
                out.itl_s.append(t - out.t_last_token)
            out.t_last_token = t
            out.content_chunks += 1


def _error_message(obj: dict[str, Any]) -> str:
    """The human part of an OpenAI/TGI/legacy-vLLM error body, as one short line."""
    err = obj.get("error")
    if isinstance(err, dict):
        msg = err.get("message") or err.get("type") or json.dumps(err)[:200]
    elif err is not None:
        msg = str(err)
    else:
        msg = str(obj.get("message") or json.dumps(obj)[:200])
    return " ".join(str(msg).split())[:200]


def parse_stream(chunks: list[bytes]) -> StreamOutcome:
    """Interpret a whole stream given as chunks (times are the chunk indices)."""
    interp = StreamInterpreter()
    for i, chunk in enumerate(chunks):
        interp.feed(chunk, float(i))
    return interp.close(float(len(chunks)))
