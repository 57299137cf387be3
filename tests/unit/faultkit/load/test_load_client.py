"""Each error class, produced by a real loopback server (``faultkit.load.fakeserver``)."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import socket
import struct
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from faultkit.load import LoadGenerator, LoadProfile, Target, classify_exception
from faultkit.load.connections import ConnectionPool
from faultkit.load.dialer import ConnectError, ConnectTimeout, Server
from faultkit.load.fakeserver import serve
from faultkit.load.ledger import Ledger
from faultkit.model.records import ERROR_CLASSES, RequestRecord, is_clean_rejection, read_ledger

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


async def test_reuse_never_costs_a_request_on_a_server_that_closes_after_each_stream(
    server: str,
) -> None:
    """A server closing kept-alive connections after each stream (llama.cpp does): the
    default reuse finds the pooled connection closed before writing to it, stops reusing
    connections to that server, and every request succeeds."""
    model = "close_after,linger=0"
    checked = LoadProfile(concurrency=1, requests=30, output_tokens=4)
    result = await LoadGenerator(Target("t", server, model), checked).run()
    assert [r.status for r in result.records] == ["ok"] * 30
    assert result.connections is not None
    assert result.connections.found_closed >= 1
    assert result.connections.no_reuse == (server.removeprefix("http://"),)


async def test_unchecked_reuse_shows_the_hazard_the_check_removes(server: str) -> None:
    """The same server through plain reuse (the pool's checks off, as most clients
    reuse): requests die as false resets."""
    plain = ConnectionPool(checked=False)
    try:
        profile = LoadProfile(concurrency=1, requests=30, output_tokens=4)
        gen = LoadGenerator(Target("t", server, "close_after,linger=0"), profile, pool=plain)
        result = await gen.run()
    finally:
        plain.close()
    assert any(r.error_class == "reset" for r in result.records)


async def test_reuse_on_a_server_that_keeps_connections(server: str) -> None:
    # the warm-up's connections prove the server keeps them (connections.py, rule 3)
    profile = LoadProfile(concurrency=2, requests=40, output_tokens=4, warmup=2)
    result = await LoadGenerator(Target("t", server, "ok"), profile).run()
    assert [r.status for r in result.records] == ["ok"] * 40
    assert result.connections is not None
    assert result.connections.reused >= 36  # all but the first per worker (and a spare)
    assert result.connections.found_closed == 0
    fresh = await LoadGenerator(
        Target("t", server, "ok"), profile.replace(reuse_connections=False)
    ).run()
    assert fresh.connections is not None and fresh.connections.reused == 0


def test_peer_closed_sees_fin_reset_and_stray_bytes_but_not_an_idle_connection() -> None:
    from faultkit.load.connections import peer_closed

    for how in ("idle", "fin", "bytes", "rst"):
        listener = socket.create_server(("127.0.0.1", 0))
        client = socket.create_connection(listener.getsockname())
        peer, _ = listener.accept()
        if how == "fin":
            peer.close()
        elif how == "bytes":
            peer.sendall(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
        elif how == "rst":
            peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            peer.close()
        try:
            assert peer_closed(client.fileno()) is (how != "idle"), how
        finally:
            client.close()
            if how in ("idle", "bytes"):
                peer.close()
            listener.close()


def test_keepalive_in_a_profile_string_still_means_reuse() -> None:
    assert LoadProfile.from_string("keepalive=false").reuse_connections is False
    assert LoadProfile.from_string("").reuse_connections is True
    assert LoadProfile.from_string("", reuse_connections=False).reuse_connections is False
    assert LoadProfile.from_string("keepalive=1", reuse_connections=False).reuse_connections


def test_fault_experiments_open_one_connection_per_request() -> None:
    from faultkit.load.profile import BACKGROUND_PROFILE
    from testbed.truth import TRUTH_LOAD

    assert BACKGROUND_PROFILE.reuse_connections is False
    assert TRUTH_LOAD.reuse_connections is False


# ------------------------------------------------------------------ clean rejections

_OPENAI = json.dumps({"error": {"message": "overloaded", "type": "ServiceUnavailable"}})
_CANNED: dict[str, tuple[int, str, str]] = {
    "503_openai": (503, _OPENAI, "application/json"),
    "500_openai": (500, _OPENAI, "application/json"),
    "502_openai": (502, _OPENAI, "application/json"),
    "400_html": (400, "<html><body><h1>400 Bad Request</h1></body></html>", "text/html"),
    "429_string": (429, json.dumps({"error": "rate limited"}), "application/json"),
    "400_vllm_old": (
        400,
        json.dumps({"object": "error", "message": "too long", "type": "BadRequestError"}),
        "application/json",
    ),
    "503_empty": (503, "", "text/plain"),
    "422_fastapi": (422, json.dumps({"detail": [{"msg": "field required"}]}), "application/json"),
    "400_long": (
        400,
        json.dumps({"error": {"message": "bad input: " + "x" * 20_000}}),
        "application/json",
    ),
}


async def _canned(request: web.Request) -> web.StreamResponse:
    code, body, content_type = _CANNED[(await request.json())["model"]]
    return web.Response(status=code, text=body, content_type=content_type)


@pytest.fixture
async def canned() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", _canned)
    runner = web.AppRunner(app, shutdown_timeout=0.2)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


@pytest.mark.parametrize(
    ("model", "error_class", "error_body", "clean"),
    [
        ("503_openai", "http_5xx", True, True),
        ("500_openai", "http_5xx", True, False),
        ("502_openai", "http_5xx", True, False),
        ("400_html", "http_4xx", False, False),
        ("429_string", "http_429", True, True),
        ("400_vllm_old", "http_4xx", True, True),
        ("503_empty", "http_5xx", False, False),
        ("422_fastapi", "http_4xx", False, False),
        ("400_long", "http_4xx", True, True),  # longer than one read: still whole
    ],
)
async def test_error_body_and_clean_rejection_from_live_server(
    canned: str, model: str, error_class: str, error_body: bool, clean: bool
) -> None:
    record = await _one(canned, model)
    assert (record.status, record.error_class) == ("fail", error_class)
    assert record.error_body is error_body
    assert is_clean_rejection(record) is clean
    assert record.error_detail is not None and record.error_detail.startswith("HTTP ")


async def test_fakeserver_status_mode_is_a_clean_rejection(server: str) -> None:
    record = await _one(server, "status,code=503")
    assert record.error_body and is_clean_rejection(record)
    assert record.error_detail == "HTTP 503: fake error 503"


def _rec(status: str, http: int | None, error_body: bool, cls: str | None) -> RequestRecord:
    return RequestRecord(
        id="r", node="n", kind="chat", t_invoke=1.0, status=status,  # type: ignore[arg-type]
        t_end=2.0, http_status=http, error_class=cls, error_body=error_body,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("record", "clean"),
    [
        (_rec("fail", 503, True, "http_5xx"), True),
        (_rec("fail", 500, True, "http_5xx"), False),
        (_rec("fail", 400, False, "http_4xx"), False),  # HTML / empty body
        (_rec("fail", 429, True, "http_429"), True),
        (_rec("fail", 404, True, "http_4xx"), True),
        (_rec("fail", 503, False, "http_5xx"), False),
        (_rec("fail", 200, False, "stream_error"), False),
        (_rec("fail", None, False, "refused"), False),
        (_rec("ok", 200, False, None), False),
    ],
)
def test_is_clean_rejection_rule(record: RequestRecord, clean: bool) -> None:
    assert is_clean_rejection(record) is clean


# ------------------------------------------------------------------ client exhaustion

_SERVER = Server("10.0.0.1", 8000)


@pytest.mark.parametrize("code", [errno.EMFILE, errno.ENFILE, errno.EADDRNOTAVAIL, errno.ENOBUFS])
def test_client_resource_exhaustion_is_client_exhausted(code: int) -> None:
    os_err = OSError(code, os.strerror(code))
    as_connection_error = ConnectionError(code, os.strerror(code))
    for exc in (
        ConnectError(_SERVER, os_err),
        os_err,
        as_connection_error,  # would otherwise read as a reset too
    ):
        error_class, detail = classify_exception(exc)
        assert error_class == "client_exhausted", exc
        assert errno.errorcode[code] in detail


def test_exhaustion_found_in_errno_less_and_chained_errors() -> None:
    multi = OSError("Multiple exceptions: [Errno 24] Too many open files, [Errno 24] Too many")
    assert classify_exception(multi)[0] == "client_exhausted"
    try:
        try:
            raise OSError(errno.EMFILE, "Too many open files")
        except OSError as inner:
            raise RuntimeError("resolver failed") from inner
    except RuntimeError as outer:
        assert classify_exception(outer)[0] == "client_exhausted"


@pytest.mark.parametrize(
    ("exc", "error_class"),
    [
        (ConnectError(_SERVER, ConnectionRefusedError(errno.ECONNREFUSED, "x")), "refused"),
        (ConnectionResetError(errno.ECONNRESET, "reset"), "reset"),
        (BrokenPipeError(errno.EPIPE, "broken pipe"), "reset"),
        (ConnectError(_SERVER, OSError(errno.ENETUNREACH, "unreachable")), "other"),
        (ConnectError(_SERVER, ConnectionResetError(errno.ECONNRESET, "x")), "reset"),
        (ConnectError(_SERVER, OSError(errno.ECONNABORTED, "aborted")), "reset"),
        (ConnectTimeout(_SERVER, 0.5), "timeout_connect"),
        (TimeoutError(), "timeout_total"),
        (ValueError("nope"), "other"),
    ],
)  # fmt: skip
def test_other_errors_are_not_client_exhausted(exc: BaseException, error_class: str) -> None:
    assert classify_exception(exc)[0] == error_class


async def test_no_local_address_left_is_client_exhausted(server: str) -> None:
    """EADDRNOTAVAIL through the pool's real connect path (binding an address not ours)."""
    pool = ConnectionPool(local_addr=("192.0.2.1", 0), reuse=False)
    try:
        profile = LoadProfile(concurrency=1, requests=2, **FAST)  # type: ignore[arg-type]
        result = await LoadGenerator(Target("t", server, "ok"), profile, pool=pool).run()
    finally:
        pool.close()
    assert [r.error_class for r in result.records] == ["client_exhausted"] * 2
    assert all("EADDRNOTAVAIL" in (r.error_detail or "") for r in result.records)


async def test_waiting_for_the_client_pool_is_client_exhausted(server: str) -> None:
    """A request waits for the pool until its own first-token deadline (3 s); the other
    holds the only connection, streaming a token every 0.5 s, until its total deadline
    (4 s): a second apart, whatever the machine's load.

    With both hung before their first token, the two 3 s deadlines tied: on a busy CI
    machine (the unit tests on two workers) the holder's fired first, freed the connection
    and the waiter got it, and both read ``timeout_first_token``."""
    pool = ConnectionPool(limit=1)
    try:
        profile = LoadProfile(concurrency=2, requests=2, output_tokens=20,
                              first_token_timeout_s=3.0, total_timeout_s=4.0,
                              connect_timeout_s=0.3)
        gen = LoadGenerator(Target("t", server, "slow,delay=0.5"), profile, pool=pool)
        result = await gen.run()
    finally:
        pool.close()
    classes = sorted(r.error_class or "" for r in result.records)
    assert classes == ["client_exhausted", "timeout_total"]
    pooled = next(r for r in result.records if r.error_class == "client_exhausted")
    assert pooled.error_detail == "no free connection in the client's pool (limit 1) in time"


_EMFILE_CLIENT = """
import asyncio, json, os, resource, sys
from faultkit.load import LoadGenerator, LoadProfile, Target

async def main(url):
    profile = LoadProfile(concurrency=8, requests=8, first_token_timeout_s=0.5)
    gen = LoadGenerator(Target("t", url, "hang_headers"), profile)
    fds = {int(f) for f in os.listdir("/proc/self/fd")}
    lowest_free = min(set(range(len(fds) + 1)) - fds)
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free + 3, hard))
    result = await gen.run()
    print(json.dumps([r.error_class for r in result.records]))

asyncio.run(main(sys.argv[1]))
"""


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc (Linux)")
async def test_too_many_open_files_is_client_exhausted(server: str) -> None:
    """A client out of file descriptors (its own RLIMIT_NOFILE, in a subprocess)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _EMFILE_CLIENT, server, stdout=subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0
    classes = json.loads(out)
    assert len(classes) == 8
    assert "client_exhausted" in classes
    assert set(classes) <= {"client_exhausted", "timeout_first_token"}


async def _gateway(request: web.Request) -> web.StreamResponse:
    """A gateway's answers: 200 naming its upstream, or its own 500 naming none."""
    model = (await request.json())["model"]
    if model == "all-failed":
        body = '{"error": {"message": "Connection error. LiteLLM Retried: 2 times"}}'
        return web.Response(status=500, text=body, content_type="application/json")
    answer = {"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]}
    retries = "2" if model == "retried" else "not-a-count" if model == "garbled" else "0"
    return web.json_response(answer, headers={"x-litellm-model-id": "sim-sglang",
                                              "x-litellm-attempted-retries": retries})


@pytest.fixture
async def gateway() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", _gateway)
    runner = web.AppRunner(app, shutdown_timeout=0.2)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


async def test_served_by_records_the_gateways_upstream_header(gateway: str) -> None:
    profile = LoadProfile.from_dict({"concurrency": 1, "requests": 1, "stream": False, **FAST})
    target = Target("gw", gateway, "chat", "litellm", served_by_header="x-litellm-model-id")
    (ok,) = (await LoadGenerator(target, profile).run()).records
    assert (ok.status, ok.served_by) == ("ok", "sim-sglang")
    failed_target = Target("gw", gateway, "all-failed", "litellm",
                           served_by_header="x-litellm-model-id")
    (failed,) = (await LoadGenerator(failed_target, profile).run()).records
    assert (failed.status, failed.http_status, failed.served_by) == ("fail", 500, None)
    plain = Target("gw", gateway, "chat", "litellm")  # no header asked for: nothing recorded
    (unrecorded,) = (await LoadGenerator(plain, profile).run()).records
    assert unrecorded.served_by is None and unrecorded.gateway_retries is None


async def test_gateway_retries_records_litellms_attempted_retries_header(gateway: str) -> None:
    profile = LoadProfile.from_dict({"concurrency": 1, "requests": 1, "stream": False, **FAST})
    found = {}
    for model in ("chat", "retried", "garbled", "all-failed"):
        target = Target("gw", gateway, model, "litellm",
                        retries_header="x-litellm-attempted-retries")
        (record,) = (await LoadGenerator(target, profile).run()).records
        found[model] = record.gateway_retries
    # a value that is not a count, and an answer without the header, record nothing
    assert found == {"chat": 0, "retried": 2, "garbled": None, "all-failed": None}


def test_a_gateway_node_asks_for_litellms_upstream_header() -> None:
    from faultkit.inventory import Node

    gw = Node(name="gw", kind="gateway", engine="litellm", base_url="http://127.0.0.1:4000",
              model="chat", upstreams=["a"])
    engine = Node(name="a", engine="vllm", base_url="http://127.0.0.1:8000", model="m")
    assert Target.from_node(gw).served_by_header == "x-litellm-model-id"
    assert Target.from_node(engine).served_by_header is None
    assert Target.from_node(gw).retries_header == "x-litellm-attempted-retries"
    assert Target.from_node(engine).retries_header is None


@pytest.mark.parametrize(
    "profile",
    [
        LoadProfile(),
        LoadProfile(endpoint="completion", stream=False),
        LoadProfile(extra_body={"temperature": 0, "note": "é\x00\"quoted\""}),
        LoadProfile(extra_body={"messages": []}),  # replaces the prompt: no template
    ],
)
@pytest.mark.parametrize("model", ["m", 'm\u00e9"'])
def test_the_body_template_writes_the_bytes_json_dumps_writes(
    profile: LoadProfile, model: str
) -> None:
    """The body is encoded once around its prompt (client._template); each request's bytes
    must still be exactly ``json.dumps`` of the whole body."""
    from faultkit.load.client import RequestRunner
    from faultkit.load.ledger import Clock
    from faultkit.load.prompts import synthetic_prompt

    target = Target("t", "http://127.0.0.1:1", model)
    runner = RequestRunner(None, target, profile, clock=Clock(), ledger=Ledger())  # type: ignore[arg-type]
    for index in (0, 7, 123_456):
        prompt = synthetic_prompt(profile.input_tokens, seed=profile.seed, index=index)
        whole = json.dumps(runner.bodies.as_dict(prompt), separators=(",", ":")).encode()
        assert runner.body(index) == whole


def test_synthetic_prompts_are_deterministic_distinct_and_sized() -> None:
    from faultkit.load.prompts import WORDS, synthetic_prompt

    a = synthetic_prompt(32, seed=0, index=5)
    assert a == synthetic_prompt(32, seed=0, index=5)
    assert a != synthetic_prompt(32, seed=1, index=5)
    assert a != synthetic_prompt(32, seed=0, index=6)
    assert a.split()[0] == "5"
    assert all(w in WORDS for w in a.split()[1:])
    for n in (1, 2, 32, 4000):
        assert len(synthetic_prompt(n, seed=3, index=9).split()) == n
    assert synthetic_prompt(40, seed=0, index=5).startswith(a[: a.rindex(" ")])


async def test_no_request_reuses_a_connection_before_the_server_proves_it_keeps_them(
    server: str,
) -> None:
    """A server that closes each streamed connection a little after the stream (its FIN
    late, as a busy server's is): a poll right after the response finds it open, and a
    request reusing it is cut off mid-stream. Rule 3 (connections.py): nothing is reused
    before a connection has stayed open PROOF_S, so the server is found closing first."""
    model = "close_after,linger=0.05,delay=0.02"
    profile = LoadProfile(concurrency=4, requests=24, output_tokens=5)
    result = await LoadGenerator(Target("t", server, model), profile).run()
    assert [r.status for r in result.records] == ["ok"] * 24
    assert result.connections is not None
    assert result.connections.reused == 0
    assert result.connections.proven == ()
    assert result.connections.no_reuse == (server.removeprefix("http://"),)


async def test_a_server_that_keeps_connections_is_proven_during_the_run(server: str) -> None:
    """No warm-up: the first requests get fresh connections; once one has stayed open
    PROOF_S the server is proven and the rest reuse."""
    profile = LoadProfile(concurrency=2, requests=12, output_tokens=4)
    result = await LoadGenerator(Target("t", server, "slow,delay=0.05"), profile).run()
    assert [r.status for r in result.records] == ["ok"] * 12
    assert result.connections is not None
    assert result.connections.proven == (server.removeprefix("http://"),)
    assert result.connections.reused >= 1
    assert result.connections.found_closed == 0


async def test_a_name_is_tried_at_each_of_its_addresses_in_turn(server: str) -> None:
    """``localhost`` may resolve to ``::1`` first while the server listens on 127.0.0.1
    only: the connection goes to the next address, which is tried first from then on. The
    name's addresses are set here, as a resolver may give them (this machine's gives one)."""
    port = int(server.rsplit(":", 1)[1])
    pool = ConnectionPool(reuse=False)
    pool._dialer.addresses["localhost"] = ["::1", "127.0.0.1"]
    try:
        profile = LoadProfile(concurrency=1, requests=3, output_tokens=2, **FAST)  # type: ignore[arg-type]
        result = await LoadGenerator(
            Target("t", f"http://localhost:{port}", "ok"), profile, pool=pool
        ).run()
    finally:
        pool.close()
    assert [r.status for r in result.records] == ["ok"] * 3
    assert pool._dialer.addresses["localhost"] == ["127.0.0.1", "::1"]

