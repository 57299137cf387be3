"""The simulated node as a real process on loopback: exit codes, messages, load-delay semantics.

Each test starts ``python -m testbed.simnode`` (stdlib + aiohttp only) on an ephemeral port.
Set ``SIMNODE_PYTHON`` to run the node under another interpreter, e.g. one with Debian
bookworm's aiohttp 3.8.4, to check the container's runtime without Docker.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.paths import REPO
from tests.unit.simnode_helpers import events_named, parse_sse, read_truth

PYTHON = os.environ.get("SIMNODE_PYTHON", sys.executable)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def sim_process(tmp_path: Path, *args: str) -> Iterator[tuple[subprocess.Popen[str], str, Path]]:
    port = free_port()
    truth = tmp_path / "truth.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [PYTHON, "-m", "testbed.simnode", "--port", str(port),
         "--truth-file", str(truth), *args],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        yield proc, f"http://127.0.0.1:{port}", truth
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.communicate(timeout=10)


def wait_status(url: str, deadline_s: float = 10.0) -> int:
    """Poll until something answers; return the first HTTP status seen."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            return httpx.get(url, timeout=1).status_code
        except httpx.TransportError:
            time.sleep(0.05)
    raise AssertionError(f"{url} never answered")


def test_max_model_len_above_model_max_exits_1_with_vllm_message(tmp_path: Path) -> None:
    with sim_process(tmp_path, "--max-model-len", "16384", "--model-max-len", "8192") as (
            proc, _, truth):
        _, err = proc.communicate(timeout=15)
    assert proc.returncode == 1
    assert "ValueError: User-specified max_model_len (16384) is greater than the derived " \
           "max_model_len" in err
    events = read_truth(truth)
    assert [e["event"] for e in events] == ["started", "dead"]
    assert events[1]["reason"] == "startup_validation"
    assert events[1]["exit_code"] == 1


def test_too_little_kv_cache_exits_1_after_load(tmp_path: Path) -> None:
    with sim_process(tmp_path, "--max-model-len", "4096", "--gpu-memory-utilization", "0.72",
                     "--load-seconds", "0.3") as (proc, _, truth):
        _, err = proc.communicate(timeout=15)
    assert proc.returncode == 1
    assert "ValueError: To serve at least one request with the models's max seq len (4096)" \
        in err
    events = read_truth(truth)
    assert events[-1]["event"] == "dead"
    assert events[-1]["t"] - events[0]["t"] >= 0.3


def test_vllm_port_is_closed_while_loading(tmp_path: Path) -> None:
    with sim_process(tmp_path, "--load-seconds", "1.5") as (proc, url, truth):
        time.sleep(0.5)
        with pytest.raises(httpx.ConnectError):
            httpx.get(url + "/health", timeout=1)
        assert wait_status(url + "/health") == 200
        started, core, ready = read_truth(truth)[:3]
        assert (started["event"], core["event"], ready["event"]) == (
            "started", "engine_core", "ready")
        assert ready["t"] - started["t"] >= 1.5
        proc.terminate()
        assert proc.wait(timeout=10) == 0  # SIGTERM: graceful, so on-failure does not restart


def test_sglang_answers_503_while_loading(tmp_path: Path) -> None:
    with sim_process(tmp_path, "--personality", "sglang", "--load-seconds", "1.5") as (
            _proc, url, truth):
        assert wait_status(url + "/health") == 503
        r = httpx.post(url + "/v1/completions", json={"prompt": "x"}, timeout=5)
        assert r.status_code == 503
        deadline = time.monotonic() + 10
        while httpx.get(url + "/health", timeout=2).status_code != 200:
            assert time.monotonic() < deadline, "sglang personality never became healthy"
            time.sleep(0.1)
        assert events_named(read_truth(truth), "ready")


def test_long_prompt_oom_kills_the_process(tmp_path: Path) -> None:
    flags = ("--gpu-memory-utilization", "0.99", "--no-enable-chunked-prefill",
             "--max-model-len", "4096", "--load-seconds", "0", "--speed", "20")
    with sim_process(tmp_path, *flags) as (proc, url, truth):
        assert wait_status(url + "/health") == 200
        with httpx.Client(base_url=url, timeout=10) as c:
            ok = c.post("/v1/completions", json={"prompt": "word " * 500, "max_tokens": 3})
            assert ok.status_code == 200  # a medium prompt fits
            with c.stream("POST", "/v1/completions",
                          json={"prompt": "word " * 2500, "max_tokens": 3, "stream": True},
                          headers={"X-Request-Id": "long-1"}) as r:
                assert r.status_code == 200
                body = r.read().decode()
        frames = parse_sse(body)
        assert frames[-1] == "[DONE]"
        err = json.loads(frames[-2])["error"]
        assert err["code"] == 500
        assert "EngineCore" in err["message"]
        code = proc.wait(timeout=10)
        _, stderr = proc.communicate(timeout=5)
    assert code == 1
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate" in stderr
    events = read_truth(truth)
    names = [e["event"] for e in events]
    assert names[:3] == ["started", "engine_core", "ready"]
    assert names.index("oom") < names.index("dead") == len(names) - 1
    oom = events_named(events, "oom")[0]
    assert oom["tried_bytes"] > oom["free_bytes"]
    assert oom["in_flight"] == ["long-1"]
    assert events_named(events, "request_dropped", lambda e: e["id"] == "long-1")
    assert events[-1]["exit_code"] == 1
    assert events[-1]["t"] - oom["t"] >= 0.4
