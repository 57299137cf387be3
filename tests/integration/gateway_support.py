"""Loopback tooling for the LiteLLM gateway test: fake upstreams, a counting tap, the proxy.

Evidence about which upstream a request reached must not come from LiteLLM itself, so each
upstream sits behind a :class:`Tap`: a TCP relay on 127.0.0.1 that records, for every
request body it relays, the request's marker (``faultkit-req-<n>``, put in the prompt by
the test) and the time (epoch seconds). When the upstream behind it is dead, the tap reads
the request, records it as refused and resets the connection (``SO_LINGER 0``): LiteLLM
sees an error on a connection it had opened, where without the tap it would see
``ECONNREFUSED``; both are connection errors to its router (docs/gateway.md compares the
two). An upstream that dies mid-stream is passed on as it happened: a reset as a reset,
an end of stream as an end of stream.

Processes started here are stopped by the callers (``stop()`` / ``kill()``), always in
``finally``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_delay, wait_fixed

from testbed.litellm_node import litellm_runtime_env, proxy_command

REPO = Path(__file__).resolve().parents[2]
MARKER = re.compile(rb"faultkit-req-(\d+)\b")


def marker(n: int) -> str:
    """The text that names request ``n`` in its prompt (what the taps look for)."""
    return f"faultkit-req-{n}"


# ----------------------------------------------------------------------------- upstreams


@dataclass
class FakeUpstream:
    """``python -m faultkit.load.fakeserver --port 0`` as its own process (so it can be
    SIGKILLed like an engine)."""

    proc: subprocess.Popen[str]
    port: int

    @classmethod
    def start(cls) -> FakeUpstream:
        proc = subprocess.Popen(
            [sys.executable, "-m", "faultkit.load.fakeserver", "--port", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "listening 127.0.0.1:PORT"
        if not line.startswith("listening "):
            proc.kill()
            raise RuntimeError(f"fakeserver did not start: {line!r}")
        return cls(proc, int(line.rsplit(":", 1)[1]))

    def kill(self) -> float:
        """SIGKILL the process (reaped by :meth:`stop`); return the epoch time of the kill."""
        t = time.time()
        self.proc.send_signal(signal.SIGKILL)
        return t

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


# ----------------------------------------------------------------------------- tap


@dataclass(frozen=True)
class Attempt:
    """One request body the tap saw: request number, epoch time, whether the upstream
    behind the tap refused the connection."""

    request: int
    t: float
    refused: bool


@dataclass
class Tap:
    """A counting TCP relay 127.0.0.1:``port`` → 127.0.0.1:``backend``."""

    backend: int
    attempts: list[Attempt] = field(default_factory=list)
    port: int = 0
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()

    def requests(self, *, since: float = 0.0) -> list[Attempt]:
        return [a for a in self.attempts if a.t >= since]

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._relay(client_r, client_w)
        finally:
            self._tasks.discard(task)

    async def _relay(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        seen = _MarkerScanner()
        try:
            first = await client_r.read(65536)
        except OSError:
            first = b""
        if not first:
            client_w.close()
            return
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.backend)
        except OSError:
            # read until this request's marker is in (the body may follow the head)
            data = first
            with contextlib.suppress(TimeoutError, OSError):
                async with asyncio.timeout(1.0):
                    while not MARKER.search(data):
                        more = await client_r.read(65536)
                        if not more:
                            break
                        data += more
            for n in seen.feed(data):
                self.attempts.append(Attempt(n, time.time(), refused=True))
            _reset(client_w)
            return
        for n in seen.feed(first):
            self.attempts.append(Attempt(n, time.time(), refused=False))
        up_w.write(first)

        async def upstream() -> None:  # client → backend, scanning for markers
            try:
                while data := await client_r.read(65536):
                    for n in seen.feed(data):
                        self.attempts.append(Attempt(n, time.time(), refused=False))
                    up_w.write(data)
                    await up_w.drain()
            except OSError:
                pass
            up_w.close()

        async def downstream() -> None:  # backend → client; a reset stays a reset
            reset = False
            try:
                while data := await up_r.read(65536):
                    client_w.write(data)
                    await client_w.drain()
            except OSError:
                reset = True
            if reset:
                _reset(client_w)
            else:
                client_w.close()

        await asyncio.gather(upstream(), downstream())


class _MarkerScanner:
    """Markers in a byte stream fed in pieces, each reported once (even when split)."""

    def __init__(self) -> None:
        self._buf = b""
        self._offset = 0  # stream offset of _buf[0]
        self._counted_to = 0  # stream offset after the last reported marker

    def feed(self, data: bytes) -> list[int]:
        self._buf += data
        found = []
        for m in MARKER.finditer(self._buf):
            end = self._offset + m.end()
            if end > self._counted_to and m.end() < len(self._buf):  # \b needs the next byte
                found.append(int(m.group(1)))
                self._counted_to = end
        keep = 64
        if len(self._buf) > keep:
            self._offset += len(self._buf) - keep
            self._buf = self._buf[-keep:]
        return found


def _reset(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


# ----------------------------------------------------------------------------- proxy


class NotReady(Exception):
    """The proxy did not answer 200 on ``/health/readiness`` (yet)."""


@dataclass
class LocalProxy:
    """LiteLLM's proxy from the cached venv on 127.0.0.1 (one worker, master key set)."""

    proc: subprocess.Popen[bytes]
    base_url: str
    key: str
    log: Path

    @classmethod
    def start(cls, venv: Path, config: Path, port: int, key: str, log: Path) -> LocalProxy:
        env = {**os.environ, **litellm_runtime_env(), "LITELLM_MASTER_KEY": key}
        env.pop("DATABASE_URL", None)
        with log.open("wb") as out:
            proc = subprocess.Popen(
                proxy_command(str(venv / "bin" / "python"), str(config), host="127.0.0.1",
                              port=port),
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                cwd=log.parent,
            )  # fmt: skip
        return cls(proc, f"http://127.0.0.1:{port}", key, log)

    async def wait_ready(self, timeout_s: float) -> float:
        """Poll ``/health/readiness`` until 200; return the seconds it took (monotonic)."""
        start = time.monotonic()

        async def status(client: httpx.AsyncClient) -> int:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the proxy exited with {self.proc.returncode}: {self.tail()}")
            try:
                return (await client.get(f"{self.base_url}/health/readiness")).status_code
            except httpx.HTTPError:
                return 0

        async with httpx.AsyncClient(timeout=2.0) as client:
            async for attempt in AsyncRetrying(
                stop=stop_after_delay(timeout_s), wait=wait_fixed(0.25),
                retry=retry_if_exception_type(NotReady), reraise=True,
            ):  # fmt: skip
                with attempt:
                    code = await status(client)
                    if code != 200:
                        raise NotReady(f"{self.base_url}/health/readiness: {code or 'no answer'}")
        return time.monotonic() - start

    def tail(self, lines: int = 15) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
