"""A minimal OpenAI-compatible server that misbehaves on request, for tests and benchmarks.

Not an engine simulator (that is ``testbed/simnode``): it exists to make every way a
response can end reproducible on loopback. The **model name** selects the behaviour,
``MODE[,key=value…]``, e.g. ``ok``, ``slow,delay=0.05``, ``reset,after=3``, ``status,code=429``:

==================  ==============================================================
``ok`` (default)    role chunk, ``max_tokens`` content chunks, usage chunk, ``[DONE]``
``burst``           like ``ok``, the whole (cached) stream written at once (benchmark)
``slow``            ``delay`` seconds between content chunks
``error_object``    ``after`` tokens, then ``data: {"error": {...}}`` and ``[DONE]``
``error_string``    ``after`` tokens, then ``data: {"error": "..."}`` (TGI) and ``[DONE]``
``error_field``     ``after`` tokens, then an SSE ``error:`` field (llama.cpp) and ``[DONE]``
``truncated``       ``after`` tokens, then a clean end of body without ``[DONE]``
``reset``           ``after`` tokens, then the socket is aborted mid-stream
``close_after``     like ``ok``, then closes the kept-alive connection without announcing it:
                    at once (as llama.cpp's server does) or ``linger`` s later
``status``          HTTP ``code`` (default 500) with an OpenAI-style error body
``hang_headers``    never sends the response headers
``hang_first``      sends the role-only chunk, then nothing
==================  ==============================================================

Each content chunk carries ``t_send`` (epoch seconds when it was written); ``GET /stats``
returns ``{request id: t_send of the first content chunk}`` keyed by ``X-Request-Id``.
Run standalone: ``python -m faultkit.load.fakeserver --port 8000`` (binds 127.0.0.1 only).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

from aiohttp import web

__all__ = ["make_app", "serve", "serve_in_subprocess"]

_FIRST_SEND: web.AppKey[dict[str, float]] = web.AppKey("first_send", dict)


def _mode(model: str) -> tuple[str, dict[str, str]]:
    mode, *params = model.split(",")
    return mode, dict(p.partition("=")[::2] for p in params)


def _chunk(chat: bool, text: str | None, *, finish: str | None = None, role: bool = False) -> bytes:
    if chat:
        delta: dict[str, Any] = {"role": "assistant", "content": ""} if role else {"content": text}
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
    else:
        choice = {"index": 0, "text": text or "", "finish_reason": finish}
    obj = {"id": "x", "object": "chunk", "choices": [choice], "t_send": time.time()}
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _usage(prompt: str, n: int) -> bytes:
    usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": n}
    return b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n"


async def _models(request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": "fake", "object": "model"}]})


async def _health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def _stats(request: web.Request) -> web.Response:
    return web.json_response(request.app[_FIRST_SEND])


async def _generate(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    chat = request.path.endswith("/chat/completions")
    mode, params = _mode(str(body.get("model", "ok")))
    n = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
    prompt = (
        " ".join(str(m.get("content", "")) for m in body.get("messages", []))
        if chat
        else str(body.get("prompt", ""))
    )
    if mode == "status":
        code = int(params.get("code", "500"))
        err = {"message": f"fake error {code}", "type": "FakeError", "code": code}
        return web.json_response({"error": err}, status=code)
    if mode == "hang_headers":
        await asyncio.sleep(3600)
    if not body.get("stream"):
        text = " ".join(["tok"] * n)
        answer: dict[str, Any] = {"message": {"role": "assistant", "content": text}}
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
        choice.update(answer if chat else {"text": text})
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": n}
        return web.json_response({"id": "x", "choices": [choice], "usage": usage})

    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    after = int(params.get("after", str(max(1, n // 2))))
    delay = float(params.get("delay", "0"))
    rid = request.headers.get("X-Request-Id")
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

    if mode == "burst":
        await resp.write(_burst_body(chat, n, include_usage))
        await resp.write_eof()
        return resp

    if chat:
        await resp.write(_chunk(chat, None, role=True))
    if mode == "hang_first":
        await asyncio.sleep(3600)
    stop_at = after if mode in _BROKEN else n
    for i in range(stop_at):
        if delay:
            await asyncio.sleep(delay)
        chunk = _chunk(chat, " tok", finish="length" if i == n - 1 else None)
        if i == 0 and rid is not None:
            request.app[_FIRST_SEND][rid] = time.time()  # just before the write
        await resp.write(chunk)
    if mode == "reset":
        assert request.transport is not None
        sock = request.transport.get_extra_info("socket")
        if sock is not None:  # linger 0: the kernel sends RST, as when a process dies
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        request.transport.abort()
        return resp
    if mode == "truncated":
        await resp.write_eof()
        return resp
    if mode == "error_object":
        await resp.write(b'data: {"error":{"message":"fake engine died","type":"EngineDead"}}\n\n')
    elif mode == "error_string":
        await resp.write(b'data: {"error":"fake failure","error_type":"incomplete"}\n\n')
    elif mode == "error_field":
        await resp.write(b'error: {"code":500,"message":"fake slot failure"}\n\n')
    elif include_usage:
        await resp.write(_usage(prompt, n))
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    if mode == "close_after" and request.transport is not None:
        linger = float(params.get("linger", "0"))
        if linger:
            asyncio.get_running_loop().call_later(linger, request.transport.close)
        else:  # at once, as llama.cpp's server: its FIN follows the last chunk
            request.transport.close()
    return resp


@functools.lru_cache(maxsize=64)
def _burst_body(chat: bool, n: int, include_usage: bool) -> bytes:
    """A whole stream, built once per shape so the server costs almost nothing per request."""
    parts = [_chunk(chat, None, role=True)] if chat else []
    parts += [_chunk(chat, " tok") for _ in range(n - 1)]
    parts.append(_chunk(chat, " tok", finish="length"))
    if include_usage:
        parts.append(_usage("", n))
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


_BROKEN = frozenset({"error_object", "error_string", "error_field", "truncated", "reset"})


def make_app() -> web.Application:
    app = web.Application()
    app[_FIRST_SEND] = {}
    app.router.add_post("/v1/chat/completions", _generate)
    app.router.add_post("/v1/completions", _generate)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/health", _health)
    app.router.add_get("/stats", _stats)
    return app


async def serve(port: int = 0, host: str = "127.0.0.1") -> tuple[web.AppRunner, int]:
    """Start the app on ``host:port`` (0 = any free port); return the runner and the port.

    ``runner.cleanup()`` gives hanging handlers 0.2 s, then cancels them.
    """
    runner = web.AppRunner(make_app(), access_log=None, handle_signals=False, shutdown_timeout=0.2)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024)
    await site.start()
    server = site._server
    assert isinstance(server, asyncio.Server)
    return runner, int(server.sockets[0].getsockname()[1])


@contextlib.contextmanager
def serve_in_subprocess() -> Iterator[str]:
    """Run the server in a child process on a free loopback port; yield its base URL.

    Another process, so that its timing is independent of the caller's event loop (a
    truth source for client timestamps, a load target that does not share its loop).
    """
    proc = subprocess.Popen([sys.executable, "-m", "faultkit.load.fakeserver", "--port", "0"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        yield f"http://127.0.0.1:{int(line.rsplit(':', 1)[1])}"
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()

    async def forever() -> None:
        _, port = await serve(args.port)
        print(f"listening 127.0.0.1:{port}", flush=True)
        await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(forever())


if __name__ == "__main__":
    main()
