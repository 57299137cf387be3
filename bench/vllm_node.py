"""Figures for the real vLLM node (serving config vllm-good) in its container, on this machine.

Starts a throwaway container (``faultkit.owner=tests``) ``--starts`` times and prints:

* start time: container start → first ``/health`` 200 (monotonic seconds), per start;
* memory: the container cgroup's peak (cgroup v1 ``memory.max_usage_in_bytes`` or v2
  ``memory.peak``; includes page cache of the mounted venv) and the summed RSS of its
  processes after the load;
* idle CPU: the container's CPU use over 5 s with no requests (% of one core);
* decode speed: completion tokens/s seen by the client for 1 stream and for 16 concurrent
  streams (``/v1/completions``, 256 tokens each, ``ignore_eos``; wall time includes prefill).

    .venv/bin/python bench/vllm_node.py [--starts 3]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

import httpx

from testbed.engine import ensure_docker_engine
from testbed.images import ensure_base_image
from testbed.vllm.scratch import ScratchVllm

MAX_TOKENS = 256


def cgroup_peak_bytes(container_id: str) -> int | None:
    for path in (
        Path(f"/sys/fs/cgroup/memory/docker/{container_id}/memory.max_usage_in_bytes"),
        Path(f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/memory.peak"),
    ):
        if path.exists():
            return int(path.read_text())
    return None


def rss_bytes(node: ScratchVllm) -> int:
    out = node.container.exec_run(["ps", "-eo", "rss="]).output.decode()
    return sum(int(v) for v in out.split()) * 1024


def cpu_seconds(node: ScratchVllm) -> float:
    stats = node.container.stats(stream=False)
    return float(stats["cpu_stats"]["cpu_usage"]["total_usage"]) / 1e9


async def decode_tokens_per_s(base_url: str, streams: int) -> float:
    body = {"model": "tiny-vllm", "prompt": "The model token server", "max_tokens": MAX_TOKENS,
            "ignore_eos": True}
    async with httpx.AsyncClient(base_url=base_url, timeout=300) as client:
        await client.post("/v1/completions", json={**body, "max_tokens": 8})  # warm-up
        start = time.monotonic()
        responses = await asyncio.gather(
            *(client.post("/v1/completions", json=body) for _ in range(streams))
        )
        elapsed = time.monotonic() - start
    tokens: int = sum(r.json()["usage"]["completion_tokens"] for r in responses)
    return tokens / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=3)
    args = parser.parse_args()
    image = ensure_base_image(ensure_docker_engine(print), print)
    start_times = []
    for i in range(args.starts):
        node = ScratchVllm.start("vllm-good", image)
        try:
            ready = node.wait_ready(300)
            start_times.append(ready - node.started_mono)
            print(f"start {i + 1}: /health 200 after {start_times[-1]:.1f} s")
            if i < args.starts - 1:
                continue
            idle0 = cpu_seconds(node)
            time.sleep(5)
            idle_pct = (cpu_seconds(node) - idle0) / 5 * 100
            one = asyncio.run(decode_tokens_per_s(node.base_url, 1))
            sixteen = asyncio.run(decode_tokens_per_s(node.base_url, 16))
            peak = cgroup_peak_bytes(node.container.id)
            rss = rss_bytes(node)
        finally:
            node.remove()
    print(f"start time (s): {', '.join(f'{t:.1f}' for t in start_times)}")
    print(f"idle CPU: {idle_pct:.0f} % of one core")
    print(f"decode: 1 stream {one:.0f} tokens/s; 16 streams {sixteen:.0f} tokens/s")
    peak_text = f"{peak / 2**30:.2f} GiB" if peak is not None else "n/a"
    print(f"memory: cgroup peak {peak_text} (incl. page cache); RSS after load "
          f"{rss / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
