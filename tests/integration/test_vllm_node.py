"""The real vLLM node (vllm-good) in its container: API, metrics, 400s, crash and restart.

One throwaway container (``faultkit.owner=tests``, free 127.0.0.1 port) is shared by the
module; the destructive tests (engine death, SIGKILL) run last, in file order. Only one
vLLM instance runs at a time on this 2-core machine.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from testbed.engine import ensure_docker_engine
from testbed.images import ensure_base_image
from testbed.vllm.scratch import ScratchVllm

pytestmark = pytest.mark.docker

MODEL = "tiny-vllm"
READY_TIMEOUT_S = 240.0


@pytest.fixture(scope="module")
def base_image() -> str:
    host = ensure_docker_engine(print)
    return ensure_base_image(host, print)


@pytest.fixture(scope="module")
def vllm(base_image: str) -> Iterator[ScratchVllm]:
    scratch = ScratchVllm.start("vllm-good", base_image)
    try:
        ready = scratch.wait_ready(READY_TIMEOUT_S)
        print(f"vllm-good: /health 200 after {ready - scratch.started_mono:.1f} s")
        yield scratch
    finally:
        scratch.remove()


def _chat(content: str, **extra: object) -> dict[str, object]:
    return {"model": MODEL, "messages": [{"role": "user", "content": content}], **extra}


def test_streamed_chat_completion_reaches_done(vllm: ScratchVllm) -> None:
    frames: list[str] = []
    body = _chat("hello from faultkit", stream=True, max_tokens=16)
    with httpx.stream("POST", f"{vllm.base_url}/v1/chat/completions", json=body,
                      timeout=60) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        buffer = ""
        for text in response.iter_text():
            buffer += text
        frames = [f.removeprefix("data: ") for f in buffer.split("\n\n") if f.strip()]
    assert frames[-1] == "[DONE]"
    chunks = [json.loads(f) for f in frames[:-1]]
    assert all("error" not in c for c in chunks)
    assert chunks[0]["model"] == MODEL
    assert any(c["choices"] and c["choices"][0]["delta"].get("content") for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")


def test_metrics_carry_the_families_alerts_use(vllm: ScratchVllm) -> None:
    # one non-streamed request so the TTFT histogram has an observation
    done = httpx.post(f"{vllm.base_url}/v1/chat/completions", json=_chat("hi", max_tokens=4),
                      timeout=60)
    assert done.status_code == 200
    text = httpx.get(f"{vllm.base_url}/metrics", timeout=30).text
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE))
    assert types.get("vllm:num_requests_running") == "gauge"
    assert types.get("vllm:kv_cache_usage_perc") == "gauge"
    assert types.get("vllm:time_to_first_token_seconds") == "histogram"
    count = re.search(r'^vllm:time_to_first_token_seconds_count\{[^}]*model_name="tiny-vllm"'
                      r'[^}]*\} (\S+)$', text, re.MULTILINE)
    assert count is not None
    assert float(count.group(1)) >= 1
    assert 'le="+Inf"' in text


def test_prompt_over_max_model_len_gets_400_with_error_body(vllm: ScratchVllm) -> None:
    prompt = " token" * 3000  # > 1024 tokens whatever the tokenizer merges
    tokens = httpx.post(f"{vllm.base_url}/tokenize", json={"model": MODEL, "prompt": prompt},
                        timeout=30).json()["count"]
    assert tokens > 1024
    response = httpx.post(f"{vllm.base_url}/v1/chat/completions",
                          json=_chat(prompt, max_tokens=8), timeout=60)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == 400
    assert error["type"] == "BadRequestError"
    assert re.search(r"maximum (context|model) length", error["message"])


def test_engine_death_exits_nonzero_and_on_failure_restarts(vllm: ScratchVllm) -> None:
    """vLLM itself exits 0 after an engine death; the entrypoint makes that exit 3."""
    restarts = vllm.restart_count()
    killed = vllm.container.exec_run(["pkill", "-KILL", "-f", "VLLM::EngineCore"])
    assert killed.exit_code == 0, killed.output
    saw_503 = False
    deadline = time.monotonic() + 30
    while vllm.restart_count() == restarts and time.monotonic() < deadline:
        saw_503 = saw_503 or vllm.health(timeout_s=1.0) == 503
        time.sleep(0.1)
    assert vllm.restart_count() == restarts + 1, vllm.logs(40)
    assert "exiting 3 so the restart policy acts" in vllm.logs(400)
    vllm.wait_ready(READY_TIMEOUT_S)
    print(f"engine death: /health 503 seen before the restart: {saw_503}")


def test_sigkill_of_main_process_restarts_and_is_ready_again(
    vllm: ScratchVllm, record_property: Callable[[str, object], None]
) -> None:
    restarts = vllm.restart_count()
    killed_at = time.monotonic()
    os.kill(vllm.host_pid(), signal.SIGKILL)
    # the kill reaches the namespace's processes asynchronously: a /health right after it
    # can still be answered by the dying server, so the restart comes first
    deadline = killed_at + 30
    while vllm.restart_count() == restarts and time.monotonic() < deadline:
        time.sleep(0.1)
    ready = vllm.wait_ready(READY_TIMEOUT_S)
    assert vllm.restart_count() == restarts + 1
    assert vllm.state()["Running"]
    time_to_ready = ready - killed_at
    record_property("vllm_sigkill_time_to_ready_s", round(time_to_ready, 2))
    print(f"SIGKILL → /health 200 again after {time_to_ready:.1f} s")
    response = httpx.post(f"{vllm.base_url}/v1/chat/completions",
                          json=_chat("still there?", max_tokens=4), timeout=60)
    assert response.status_code == 200
