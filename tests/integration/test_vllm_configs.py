"""The vLLM node's known-bad serving configs, each in its own throwaway container.

Kept apart from test_vllm_node.py so its shared container is gone first (one vLLM at a time).
"""

from __future__ import annotations

import asyncio
import re
import time

import httpx
import pytest

from testbed.engine import ensure_docker_engine
from testbed.images import ensure_base_image
from testbed.vllm.scratch import ScratchVllm

pytestmark = pytest.mark.docker

MODEL = "tiny-vllm"


@pytest.fixture(scope="module")
def base_image() -> str:
    host = ensure_docker_engine(print)
    return ensure_base_image(host, print)


def test_bad_max_model_len_exits_nonzero_and_restart_policy_gives_up(base_image: str) -> None:
    vllm = ScratchVllm.start("vllm-bad-maxlen", base_image)
    try:
        retries = vllm.config.restart_max_retries
        deadline = time.monotonic() + 60 * (retries + 1)
        state = vllm.state()
        while time.monotonic() < deadline:
            state = vllm.state()
            if state["Status"] == "exited" and vllm.restart_count() >= retries:
                break
            time.sleep(0.5)
        assert state["Status"] == "exited", state
        assert state["ExitCode"] == 1
        assert vllm.restart_count() == retries, "on-failure:N restarts exactly N times"
        time.sleep(2)
        assert vllm.state()["Status"] == "exited", "the policy must have given up"
        logs = vllm.logs(2000)
        assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in logs
        assert vllm.health() is None
    finally:
        vllm.remove()


def _preemptions(text: str) -> float:
    values = re.findall(r"^vllm:num_preemptions_total\{[^}]*\} (\S+)$", text, re.MULTILINE)
    assert values, "vllm:num_preemptions_total missing from /metrics"
    return sum(float(v) for v in values)


async def test_small_kv_cache_preempts_under_concurrent_long_requests(base_image: str) -> None:
    vllm = ScratchVllm.start("vllm-small-kv", base_image)
    try:
        await asyncio.to_thread(vllm.wait_ready, 240.0)
        async with httpx.AsyncClient(base_url=vllm.base_url, timeout=180) as client:
            before = _preemptions((await client.get("/metrics")).text)
            prompt = " token" * 400
            body = {"model": MODEL, "prompt": prompt, "max_tokens": 400, "ignore_eos": True}
            responses = await asyncio.gather(
                *(client.post("/v1/completions", json=body) for _ in range(16))
            )
            after = _preemptions((await client.get("/metrics")).text)
        assert [r.status_code for r in responses] == [200] * 16
        assert all(r.json()["usage"]["completion_tokens"] == 400 for r in responses)
        assert before == 0
        assert after > before, "16 x ~800-token sequences in a 2,048-token cache must preempt"
        print(f"vllm-small-kv: num_preemptions_total {before:g} → {after:g}")
    finally:
        vllm.remove()
