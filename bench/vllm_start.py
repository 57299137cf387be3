"""How long the real vLLM node takes to start, by executor backend and cache, in one run.

vLLM 0.32's CPU build starts three Python processes by default: the API server, the
engine core and, through the multiprocessing executor (``mp``), one worker; each imports
torch and vLLM again. With ``--distributed-executor-backend uni`` the worker runs inside
the engine core process (one device: nothing is lost; the engine core stays its own
process, so an engine death is still a child's). In a new container vLLM also inspects
the model class in a subprocess of its own unless ``VLLM_CACHE_ROOT/modelinfos`` holds
the answer: the lab shares that cache (``testbed.vllm_node.vllm_cache_dir``).

Variants: ``mp`` and ``uni`` with a cache of the container's own (empty at start, as
every new container had before), and ``uni`` with the lab's shared cache (warmed by one
start first, not counted). Each round starts serving config ``vllm-good`` once per
variant, in rotating order, in a throwaway container, and times container start → first
``/health`` 200 and → the first streamed token.

    .venv/bin/python bench/vllm_start.py [--rounds 3] [--json bench/results/vllm-start.json]

Run it on an otherwise idle machine (the lab's vLLM node may be up, idle).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

from testbed.engine import ensure_docker_engine
from testbed.images import ensure_base_image
from testbed.vllm.scratch import ScratchVllm

#: variant → (executor backend, the container's own empty cache instead of the shared one)
VARIANTS: dict[str, tuple[str, bool]] = {
    "mp, own cache": ("mp", True),
    "uni, own cache": ("uni", True),
    "uni, shared cache": ("uni", False),
}


def first_token_s(base_url: str, started_mono: float, timeout_s: float = 120) -> float:
    """Seconds from the container's start until a streamed completion's first content."""
    body = {"model": "tiny-vllm", "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 4, "stream": True}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=body,
                              timeout=30) as response:
                if response.status_code == 200:
                    for line in response.iter_lines():
                        if '"content"' in line:
                            return time.monotonic() - started_mono
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"no first token from {base_url} within {timeout_s} s")


def one_start(image: str, variant: str) -> dict[str, float]:
    backend, own_cache = VARIANTS[variant]
    node = ScratchVllm.start("vllm-good", image,
                             env={"VLLM_CACHE_ROOT": "/tmp/vllm-cache"} if own_cache else None,
                             extra_args=("--distributed-executor-backend", backend))
    try:
        ready = node.wait_ready(300) - node.started_mono
        token = first_token_s(node.base_url, node.started_mono)
        processes = node.container.exec_run(["ps", "-eo", "comm="]).output.decode().split()
    finally:
        node.remove()
    return {"ready_s": round(ready, 2), "first_token_s": round(token, 2),
            "python_processes": sum(1 for p in processes if p.startswith(("python", "VLLM")))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    image = ensure_base_image(ensure_docker_engine(print), print)
    one_start(image, "uni, shared cache")  # warm the shared cache
    names = list(VARIANTS)
    runs: dict[str, list[dict[str, float]]] = {v: [] for v in names}
    for i in range(args.rounds):
        for variant in names[i % len(names):] + names[:i % len(names)]:
            result = one_start(image, variant)
            runs[variant].append(result)
            print(f"round {i + 1} {variant}: ready {result['ready_s']:.1f} s, first token "
                  f"{result['first_token_s']:.1f} s, {result['python_processes']:.0f} processes")
    summary: dict[str, Any] = {
        v: {"ready_s_median": statistics.median(r["ready_s"] for r in runs[v]),
            "first_token_s_median": statistics.median(r["first_token_s"] for r in runs[v]),
            "runs": runs[v]}
        for v in names
    }
    base = summary["mp, own cache"]["ready_s_median"]
    summary["ready_ratio_to_mp_own_cache"] = {
        v: round(summary[v]["ready_s_median"] / base, 3) for v in names}
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"}, indent=1))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
