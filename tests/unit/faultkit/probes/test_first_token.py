"""The first-token probe retries until the node serves and records every failed attempt."""

from __future__ import annotations

import httpx

from faultkit.probes.first_token import probe_first_token
from tests.unit.faults_fake import node

STREAM = (
    b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
    b"data: [DONE]\n\n"
)


def _serving_after(failures: list[httpx.Response | Exception]) -> httpx.MockTransport:
    """A transport that fails with each of ``failures`` in turn, then streams a token."""
    pending = list(failures)

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/chat/completions"
        if pending:
            item = pending.pop(0)
            if isinstance(item, Exception):
                raise item
            return item
        return httpx.Response(200, content=STREAM,
                              headers={"content-type": "text/event-stream"})

    return httpx.MockTransport(handler)


async def test_ready_but_not_serving_is_measured_not_dropped() -> None:
    transport = _serving_after([
        httpx.Response(503, json={"error": {"message": "model loading"}}),
        httpx.ConnectError("connection refused"),
        httpx.Response(200, content=b"data: [DONE]\n\n"),  # a stream with no content chunk
    ])
    probe = await probe_first_token(node(), deadline_s=10, transport=transport)
    assert probe.served and probe.finding is None
    assert probe.t_first_token is not None and probe.t_first_token >= probe.t_start
    assert [(a.http_status, a.error_class) for a in probe.attempts] == [
        (503, "http_5xx"), (None, "refused"), (200, "truncated")]
    assert "model loading" in probe.attempts[0].detail
    assert [a.elapsed_s for a in probe.attempts] == sorted(a.elapsed_s for a in probe.attempts)


async def test_never_serving_is_an_explicit_finding() -> None:
    def always_500(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, text="engine dead")

    probe = await probe_first_token(node(), deadline_s=0.8,
                                    transport=httpx.MockTransport(always_500))
    assert not probe.served and probe.t_first_token is None
    assert len(probe.attempts) >= 2
    assert probe.finding is not None
    assert "no first token within 0.8 s" in probe.finding and "engine dead" in probe.finding
    assert probe.to_json()["finding"] == probe.finding


async def test_error_frame_after_200_is_not_a_first_token() -> None:
    transport = _serving_after([
        httpx.Response(200, content=b'data: {"error": {"message": "CUDA error"}}\n\n'),
    ])
    probe = await probe_first_token(node(), deadline_s=10, transport=transport)
    assert probe.served
    assert [a.error_class for a in probe.attempts] == ["stream_error"]
