"""Streaming throughput of one simulated node in zero-latency mode, measured by a local client.

Starts ``python -m testbed.simnode --zero-latency`` on loopback, streams chat completions
with an aiohttp client from ``--concurrency`` workers for ``--seconds``, and prints the
tokens/s the client received (tokens counted from the usage chunk; every token is its own
SSE frame). Target on the 2-core dev box: >= 20,000 tokens/s.

    .venv/bin/python bench/simnode_stream.py [--seconds 5] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def wait_ready(session: aiohttp.ClientSession, url: str) -> None:
    for _ in range(200):
        try:
            async with session.get(url + "/health") as r:
                if r.status == 200:
                    return
        except aiohttp.ClientConnectionError:
            pass
        await asyncio.sleep(0.05)
    raise SystemExit("simnode did not become ready")


async def worker(session: aiohttp.ClientSession, url: str, stop_at: float, max_tokens: int,
                 totals: dict[str, int]) -> None:
    body = {"messages": [{"role": "user", "content": "benchmark"}], "max_tokens": max_tokens,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    while time.monotonic() < stop_at:
        frames = 0
        done = False
        async with session.post(url + "/v1/chat/completions", json=body) as r:
            buf = b""
            async for chunk in r.content.iter_any():
                buf += chunk
                *events, buf = buf.split(b"\n\n")
                for ev in events:
                    frames += 1
                    if ev == b"data: [DONE]":
                        done = True
                    elif b'"usage"' in ev:
                        totals["tokens"] += json.loads(ev[6:])["usage"]["completion_tokens"]
        totals["frames"] += frames
        totals["requests"] += 1 if done else 0


async def run(args: argparse.Namespace) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "testbed.simnode", "--port", str(port), "--zero-latency",
        "--load-seconds", "0", "--max-num-seqs", "256", "--personality", args.personality,
        env={**os.environ, "PYTHONPATH": str(REPO)}, stderr=subprocess.DEVNULL,
    )
    try:
        conn = aiohttp.TCPConnector(limit=args.concurrency)
        async with aiohttp.ClientSession(connector=conn) as session:
            await wait_ready(session, url)
            totals = {"tokens": 0, "frames": 0, "requests": 0}
            t0 = time.monotonic()
            stop_at = t0 + args.seconds
            await asyncio.gather(*(worker(session, url, stop_at, args.max_tokens, totals)
                                   for _ in range(args.concurrency)))
            elapsed = time.monotonic() - t0
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)
    me = resource.getrusage(resource.RUSAGE_SELF)
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    rate = totals["tokens"] / elapsed
    print(f"personality={args.personality} concurrency={args.concurrency} "
          f"max_tokens={args.max_tokens} elapsed={elapsed:.2f}s")
    print(f"requests={totals['requests']} tokens={totals['tokens']} frames={totals['frames']}")
    print(f"cpu seconds: client={me.ru_utime + me.ru_stime:.2f} "
          f"server={child.ru_utime + child.ru_stime:.2f} (of {elapsed:.2f} s wall, "
          f"{os.cpu_count()} cores, load avg {os.getloadavg()[0]:.1f})")
    print(f"tokens/s={rate:,.0f} (target >= 20,000) {'OK' if rate >= 20_000 else 'BELOW TARGET'}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--max-tokens", type=int, default=512)
    p.add_argument("--personality", choices=["vllm", "sglang"], default="vllm")
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()
