"""Each error class, produced by a real loopback server (``faultkit.load.fakeserver``)."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from aiohttp import web

from faultkit.load import LoadGenerator, LoadProfile, Target
from faultkit.load.fakeserver import serve
from faultkit.load.ledger import Ledger
from faultkit.records import ERROR_CLASSES, RequestRecord, read_ledger

FAST = {"first_token_timeout_s": 0.3, "total_timeout_s": 0.7, "connect_timeout_s": 0.5}


@pytest.fixture
async def server() -> AsyncIterator[str]:
    runner, port = await serve()
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def _one(base_url: str, model: str, **profile: object) -> RequestRecord:
    values = {"concurrency": 1, "requests": 1, "output_tokens": 6, **FAST, **profile}
    result = await LoadGenerator(Target("t", base_url, model), LoadProfile.from_dict(values)).run()
    assert result.violations == []
    assert len(result.records) == 1
    return result.records[0]


@pytest.mark.parametrize(
    ("model", "error_class"),
    [
        ("error_object,after=2", "stream_error"),
        ("error_string,after=2", "stream_error"),
        ("error_field,after=2", "stream_error"),
        ("truncated,after=3", "truncated"),
        ("reset,after=3", "reset"),
        ("status,code=429", "http_429"),
        ("status,code=400", "http_4xx"),
        ("status,code=503", "http_5xx"),
        ("hang_headers", "timeout_first_token"),
        ("hang_first", "timeout_first_token"),
        ("slow,delay=0.2", "timeout_total"),
    ],
)
async def test_error_class_from_live_server(server: str, model: str, error_class: str) -> None:
    record = await _one(server, model, output_tokens=20)
    assert record.status == "fail"
    assert record.error_class == error_class
    assert record.error_class in ERROR_CLASSES
    assert record.error_detail
    assert record.t_end >= record.t_invoke


async def test_broken_streams_keep_the_tokens_that_arrived(server: str) -> None:
    record = await _one(server, "error_object,after=3")
    assert record.content_chunks == 3
    assert record.http_status == 200
    assert record.t_first_token is not None


async def test_http_error_detail_has_status_and_message(server: str) -> None:
    record = await _one(server, "status,code=429")
    assert record.error_detail == "HTTP 429: fake error 429"
    assert record.http_status == 429


async def test_timeout_total_applies_after_first_token(server: str) -> None:
    record = await _one(server, "slow,delay=0.2", output_tokens=20)
    assert record.t_first_token is not None  # first token came, total deadline hit later
    assert record.error_class == "timeout_total"


def _closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    sock.close()
    return port


async def test_refused_on_closed_port() -> None:
    record = await _one(f"http://127.0.0.1:{_closed_port()}", "ok")
    assert (record.status, record.error_class) == ("fail", "refused")
    assert record.t_first_byte is None


@pytest.fixture
def full_backlog() -> Iterator[int]:
    """A port whose accept queue is full: the kernel drops new SYNs, connects hang."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    port = int(srv.getsockname()[1])
    fillers = []
    for _ in range(4):
        c = socket.socket()
        c.setblocking(False)
        c.connect_ex(("127.0.0.1", port))
        fillers.append(c)
    yield port
    for c in fillers:
        c.close()
    srv.close()


async def test_timeout_connect_on_full_backlog(full_backlog: int) -> None:
    url = f"http://127.0.0.1:{full_backlog}"
    record = await _one(url, "ok", connect_timeout_s=0.2, first_token_timeout_s=2.0)
    assert (record.status, record.error_class) == ("fail", "timeout_connect")


@pytest.mark.parametrize("endpoint", ["chat", "completion"])
@pytest.mark.parametrize("stream", [True, False])
async def test_ok_requests_both_endpoints_stream_and_not(
    server: str, endpoint: str, stream: bool
) -> None:
    record = await _one(server, "ok", endpoint=endpoint, stream=stream, output_tokens=7)
    assert (record.status, record.error_class) == ("ok", None)
    assert record.kind == endpoint
    assert record.output_tokens == 7
    assert record.output_tokens_from_usage
    assert record.t_first_token is not None
    assert record.t_invoke <= record.t_first_token <= record.t_end
    if stream:
        assert record.content_chunks == 7
        assert len(record.itl_s) == 6


async def test_without_usage_tokens_are_counted_chunks(server: str) -> None:
    record = await _one(server, "ok", include_usage=False, output_tokens=5)
    assert record.status == "ok"
    assert (record.output_tokens, record.output_tokens_from_usage) == (5, False)


class _Capture:
    """A loopback server that records request bodies and headers and answers one stream."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, object]] = []
        self.headers: list[dict[str, str]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.bodies.append(await request.json())
        self.headers.append({k.lower(): v for k, v in request.headers.items()})
        return web.json_response({"error": {"message": "nope"}}, status=401)


async def test_request_body_headers_and_key_never_in_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cap = _Capture()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", cap.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.2)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        target = Target("t", f"http://127.0.0.1:{port}/v1", "m", "vllm", api_key="sk-SECRET")
        profile = LoadProfile(concurrency=1, requests=2, input_tokens=50, output_tokens=9)
        ledger_path = tmp_path / "ledger.jsonl"
        result = await LoadGenerator(target, profile, ledger=Ledger(ledger_path)).run()
    finally:
        await runner.cleanup()
    body = cap.bodies[0]
    assert body["max_tokens"] == 9
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["ignore_eos"] is True
    assert 45 <= len(str(body["messages"][0]["content"]).split()) <= 50  # type: ignore[index]
    assert cap.bodies[0] != cap.bodies[1]  # prompts differ per request
    assert cap.headers[0]["authorization"] == "Bearer sk-SECRET"
    assert cap.headers[0]["x-request-id"] == result.records[0].id
    assert [r.error_class for r in result.records] == ["http_4xx", "http_4xx"]
    assert "SECRET" not in ledger_path.read_text()
    assert "SECRET" not in repr(target)
    assert read_ledger(ledger_path) == result.records
    assert json.loads(ledger_path.read_text().splitlines()[0])["error_detail"] == "HTTP 401: nope"


async def test_tgi_gets_no_ignore_eos() -> None:
    target = Target("t", "http://127.0.0.1:1", "m", "tgi")
    from faultkit.load.client import RequestRunner
    from faultkit.load.ledger import Clock

    runner = RequestRunner(None, target, LoadProfile(), clock=Clock(), ledger=Ledger())  # type: ignore[arg-type]
    assert "ignore_eos" not in json.loads(runner.body(0))
    assert runner.body(3) == runner.body(3)


async def test_fresh_connection_per_request_avoids_spurious_resets(server: str) -> None:
    """A server closing kept-alive connections after each stream (llama.cpp does) must not
    make healthy requests look reset; with keep-alive the hazard is real."""
    model = "close_after,linger=0"
    fresh = LoadProfile(concurrency=1, requests=30, output_tokens=4)
    result = await LoadGenerator(Target("t", server, model), fresh).run()
    assert [r.status for r in result.records] == ["ok"] * 30
    reused = fresh.replace(keepalive=True)
    result = await LoadGenerator(Target("t", server, model), reused).run()
    assert any(r.error_class == "reset" for r in result.records)
