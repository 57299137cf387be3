"""The simulated node in a throwaway container from the testbed image, as the testbed runs it.

Needs Docker and the image ``faultkit/base:bookworm`` (built by ``faultkit testbed up``);
the test is skipped only when that image is missing. Every container carries the label
``faultkit.owner=tests`` and is removed in a ``finally``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import httpx
import pytest

from faultkit.constants import LABEL_OWNER
from tests.unit.simnode_helpers import read_truth

pytestmark = pytest.mark.docker

IMAGE = "faultkit/base:bookworm"
REPO = Path(__file__).parents[2]
OOM_FLAGS = ["--gpu-memory-utilization", "0.99", "--no-enable-chunked-prefill",
             "--max-model-len", "4096"]


@pytest.fixture
def client() -> Iterator[Any]:
    dc = docker.from_env()
    try:
        dc.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        dc.close()
        pytest.skip(f"image {IMAGE} is not built yet: run `faultkit testbed up` first")
    yield dc
    dc.close()


def run_sim(dc: Any, state: Path, flags: list[str], *, restart: str) -> Any:
    state.mkdir(parents=True, exist_ok=True)
    return dc.containers.run(
        IMAGE,
        command=["python3", "-m", "testbed.simnode", "--personality", "vllm", "--host",
                 "0.0.0.0", "--port", "8000", "--model", "sim-llama-8b", "--load-seconds",
                 "1", "--speed", "10", "--admin", "--truth-file",
                 "/var/lib/simnode/truth.jsonl", *flags],
        name=f"faultkit-test-simnode-{uuid.uuid4().hex[:8]}",
        environment={"PYTHONPATH": "/opt/faultkit"},
        volumes={str(REPO): {"bind": "/opt/faultkit", "mode": "ro"},
                 str(state): {"bind": "/var/lib/simnode", "mode": "rw"}},
        ports={"8000/tcp": ("127.0.0.1", None)},
        restart_policy={"Name": restart},
        labels={LABEL_OWNER: "tests"},
        mem_limit="256m",
        detach=True,
    )


def host_url(container: Any) -> str | None:
    container.reload()
    bindings = (container.attrs["NetworkSettings"]["Ports"] or {}).get("8000/tcp")
    if not bindings:
        return None
    return f"http://127.0.0.1:{bindings[0]['HostPort']}"


def wait_healthy(container: Any, deadline_s: float = 30.0) -> str:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        url = host_url(container)
        if url:
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    return url
            except httpx.TransportError:
                pass
        time.sleep(0.2)
    raise AssertionError(f"container never healthy; logs:\n{container.logs(tail=40).decode()}")


def test_oom_kills_container_and_docker_restarts_it(client: Any, tmp_path: Path) -> None:
    state = tmp_path / "sim"
    container = run_sim(client, state, OOM_FLAGS, restart="on-failure")
    try:
        url = wait_healthy(container)
        ok = httpx.post(url + "/v1/completions", json={"prompt": "word " * 200,
                                                       "max_tokens": 4}, timeout=10)
        assert ok.status_code == 200
        try:
            r = httpx.post(url + "/v1/completions",
                           json={"prompt": "word " * 3000, "max_tokens": 4},
                           headers={"X-Request-Id": "oversized"}, timeout=10)
            assert r.status_code == 500
        except httpx.TransportError:
            pass  # the process may be gone before the answer is flushed
        end = time.monotonic() + 30
        while True:
            container.reload()
            if container.attrs["RestartCount"] >= 1:
                break
            assert time.monotonic() < end, "Docker did not restart the dead sim node"
            time.sleep(0.2)
        wait_healthy(container)
        assert container.attrs["RestartCount"] == 1
        everything = read_truth(state / "truth.jsonl")
        # this test's readiness polls after the restart are in the truth, after ``ready``
        all_names = [e["event"] for e in everything]
        last_ready = len(all_names) - 1 - all_names[::-1].index("ready")
        assert "health_ok" in all_names[last_ready:]
        events = [e for e in everything if e["event"] != "health_ok"]
        names = [e["event"] for e in events]
        assert names.count("started") == 2
        i_oom, i_dead = names.index("oom"), names.index("dead")
        assert names.index("ready") < i_oom < i_dead < len(names) - 1
        assert names[i_dead + 1:] == ["started", "engine_core", "ready"]
        assert events[i_dead]["exit_code"] == 1
        dropped = [e for e in events if e["event"] == "request_dropped"]
        assert [e["id"] for e in dropped] == ["oversized"]
        logs = container.logs().decode()
        assert "torch.OutOfMemoryError: CUDA out of memory" in logs
    finally:
        container.remove(force=True)


def test_bad_max_model_len_exits_1_at_startup(client: Any, tmp_path: Path) -> None:
    state = tmp_path / "sim"
    container = run_sim(client, state, ["--max-model-len", "16384"], restart="no")
    try:
        result = container.wait(timeout=30)
        assert result["StatusCode"] == 1
        logs = container.logs().decode()
        assert "ValueError: User-specified max_model_len (16384) is greater than" in logs
        events = read_truth(state / "truth.jsonl")
        assert [e["event"] for e in events] == ["started", "dead"]
    finally:
        container.remove(force=True)
