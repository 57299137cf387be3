"""SSE framing and stream classification, including hypothesis re-chunking properties."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from faultkit.load.sse import SSEParser, StreamOutcome, parse_stream


def _data(obj: object) -> str:
    return "data: " + json.dumps(obj, ensure_ascii=False)


def _content(text: str, finish: str | None = None) -> str:
    return _data({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]})


ROLE = _data({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
DONE = "data: [DONE]"


def _stream(events: list[str], eol: str = "\n") -> bytes:
    return "".join(e.replace("\n", eol) + eol + eol for e in events).encode()


def _key(out: StreamOutcome) -> tuple[object, ...]:
    """Everything about an outcome that must not depend on chunking (not the times)."""
    return (
        out.done,
        out.error_class,
        out.error_detail,
        out.chunks,
        out.content_chunks,
        len(out.itl_s),
        out.finish_reason,
        out.prompt_tokens,
        out.completion_tokens,
        out.t_first_token is None,
    )


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for p in [*points, len(data)]:
        pieces.append(data[last:p])
        last = p
    return pieces


# ------------------------------------------------------------------ plain examples


def test_complete_stream_is_ok_and_counts_content_chunks_only() -> None:
    usage = _data({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}})
    out = parse_stream(
        [_stream([ROLE, _content("a"), _content("b"), _content("c", "stop"), usage, DONE])]
    )
    assert out.ok
    assert (out.content_chunks, out.chunks) == (3, 5)
    assert (out.prompt_tokens, out.completion_tokens, out.finish_reason) == (7, 3, "stop")
    assert out.t_first_token == 0.0
    assert len(out.itl_s) == 2


def test_usage_read_from_any_chunk_and_choices_null_or_missing() -> None:
    extras: list[dict[str, object]] = [{"choices": None}, {}, {"choices": []}]
    for extra in extras:
        usage = _data({**extra, "usage": {"prompt_tokens": 2, "completion_tokens": 9}})
        out = parse_stream([_stream([_content("x"), usage, DONE])])
        assert out.ok
        assert out.completion_tokens == 9
    # llama.cpp: usage on the same chunk as finish_reason
    same = _data(
        {
            "choices": [{"delta": {"content": "z"}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 4},
        }
    )
    out = parse_stream([_stream([same, DONE])])
    assert (out.ok, out.completion_tokens, out.content_chunks) == (True, 4, 1)


def test_reasoning_content_counts_as_first_token_role_chunk_does_not() -> None:
    reasoning = _data({"choices": [{"delta": {"reasoning_content": "hmm"}}]})
    chunks = [_stream([ROLE]), _stream([reasoning]), _stream([_content("a"), DONE])]
    out = parse_stream(chunks)
    assert out.ok
    assert out.t_first_token == 1.0  # the reasoning chunk, not the role-only one
    assert out.content_chunks == 2


def test_completion_stream_text_field() -> None:
    text = _data({"choices": [{"index": 0, "text": " hi", "finish_reason": None}]})
    out = parse_stream([_stream([text, text, DONE])])
    assert (out.ok, out.content_chunks) == (True, 2)


def test_error_frames_after_200_fail_even_after_tokens_and_done() -> None:
    frames = [
        _data({"error": {"message": "engine dead", "type": "InternalServerError"}}),
        _data({"error": "Model is overloaded", "error_type": "overloaded"}),
        'error: {"code":500,"message":"slot failed"}',
        "event: error\ndata: something broke",
        'data: {"choices": [{"delta": {"content": "x"}, "finish_reason": "abort"}]}',
        "data: {not json",
    ]
    for frame in frames:
        out = parse_stream([_stream([_content("a"), frame, DONE])])
        assert not out.ok, frame
        assert out.error_class == "stream_error", frame
        assert out.error_detail


def test_error_message_is_kept_short_in_detail() -> None:
    frame = _data({"error": {"message": "x" * 1000}})
    out = parse_stream([_stream([frame, DONE])])
    assert out.error_detail is not None
    assert len(out.error_detail) <= 200


def test_missing_done_is_truncated() -> None:
    out = parse_stream([_stream([ROLE, _content("a"), _content("b")])])
    assert (out.ok, out.error_class, out.content_chunks) == (False, "truncated", 2)


def test_done_cut_in_half_is_truncated_but_done_without_blank_line_counts() -> None:
    body = _stream([_content("a")])
    assert parse_stream([body + b"data: [DO"]).error_class == "truncated"
    assert parse_stream([body + b"data: [DONE]"]).ok
    assert parse_stream([body + b"data: [DONE]\r"]).ok


def test_comments_keepalives_and_unknown_fields_are_ignored() -> None:
    body = b": ping\n\nid: 3\nretry: 10\n" + _stream([_content("a")]) + b":\n\n" + _stream([DONE])
    out = parse_stream([body])
    assert (out.ok, out.content_chunks, out.chunks) == (True, 1, 1)


def test_multiline_data_is_joined_with_newline() -> None:
    events = SSEParser().feed(b'data: {"a":\ndata: 1}\n\n')
    assert [e.data for e in events] == ['{"a":\n1}']


def test_utf8_split_inside_a_character() -> None:
    body = _stream([_content("héllo 🙂 世界"), DONE])
    cut = body.index("🙂".encode()) + 2  # in the middle of the 4-byte emoji
    parser = SSEParser()
    events = parser.feed(body[:cut]) + parser.feed(body[cut:]) + parser.close()
    assert json.loads(events[0].data or "")["choices"][0]["delta"]["content"] == "héllo 🙂 世界"


def test_crlf_split_between_reads_is_one_line_end() -> None:
    body = _stream([_content("a"), DONE], eol="\r\n")
    cut = body.index(b"\r") + 1
    assert _key(parse_stream([body[:cut], body[cut:]])) == _key(parse_stream([body]))
    assert parse_stream([body[:cut], body[cut:]]).ok


# ------------------------------------------------------------------ properties

_text = st.text(min_size=1, max_size=8).filter(lambda s: "\r" not in s and "\n" not in s)


@st.composite
def valid_streams(draw: st.DrawFn) -> tuple[bytes, int, int | None]:
    """A well-formed stream, the number of content chunks in it and its usage total."""
    chat = draw(st.booleans())
    n = draw(st.integers(0, 6))
    events: list[str] = []
    if chat and draw(st.booleans()):
        events.append(ROLE)
    for _ in range(n):
        text = draw(_text)
        if draw(st.booleans()):
            events.append(": keep-alive")
        if chat:
            events.append(_content(text))
        else:
            events.append(_data({"choices": [{"text": text}]}))
    usage: int | None = None
    if draw(st.booleans()):
        usage = draw(st.integers(0, 10_000))
        shapes: list[dict[str, object]] = [{"choices": []}, {"choices": None}, {}]
        shape = draw(st.sampled_from(shapes))
        events.append(_data({**shape, "usage": {"prompt_tokens": 3, "completion_tokens": usage}}))
    events.append(DONE)
    eol = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    return _stream(events, eol), n, usage


@st.composite
def broken_streams(draw: st.DrawFn) -> tuple[bytes, str]:
    """A stream broken in one way, and the class it must get."""
    body, _, _ = draw(valid_streams())
    how = draw(st.sampled_from(["no_done", "cut", "error_obj", "error_str", "error_field"]))
    done = body.rindex(b"data: [DONE]")
    if how == "no_done":
        return body[:done], "truncated"
    if how == "cut":
        return body[: draw(st.integers(0, done + len("data: [DO")))], "truncated"
    frame = {
        "error_obj": b'data: {"error": {"message": "boom"}}\n\n',
        "error_str": b'data: {"error": "boom", "error_type": "incomplete"}\n\n',
        "error_field": b'error: {"message": "boom"}\n\n',
    }[how]
    # insert at an event boundary before [DONE]
    bounds = [0] + [i + 2 for i in range(done) if body[i : i + 2] == b"\n\n"]
    at = draw(st.sampled_from([b for b in bounds if b <= done]))
    return body[:at] + frame + body[at:], "stream_error"


_cuts = st.lists(st.integers(0, 10_000), max_size=12)


@settings(max_examples=300, deadline=None)
@given(valid_streams(), _cuts)
def test_valid_streams_are_ok_under_any_chunking(
    stream: tuple[bytes, int, int | None], cuts: list[int]
) -> None:
    body, n, usage = stream
    out = parse_stream(_split(body, cuts))
    assert out.ok, out.error_detail
    assert out.content_chunks == n
    assert out.completion_tokens == usage
    assert _key(out) == _key(parse_stream([body]))


@settings(max_examples=300, deadline=None)
@given(broken_streams(), _cuts)
def test_broken_streams_fail_with_their_class_under_any_chunking(
    stream: tuple[bytes, str], cuts: list[int]
) -> None:
    body, expected = stream
    out = parse_stream(_split(body, cuts))
    assert not out.ok
    assert out.error_class == expected
    assert _key(out) == _key(parse_stream([body]))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), _cuts)
def test_arbitrary_bytes_never_raise_and_classify_independently_of_chunking(
    body: bytes, cuts: list[int]
) -> None:
    out = parse_stream(_split(body, cuts))
    assert out.error_class in (None, "truncated", "stream_error")
    assert _key(out) == _key(parse_stream([body]))
