"""The simulator's engine core is a process of its own (``testbed.simnode.enginecore``): a
SIGSTOP of it stalls the engine while the API answers (vLLM: ``/health`` 200, gauges
frozen; SGLang: ``/health`` 503), SIGCONT resumes it, and its death kills the node with
exit 1. The signals here are real ones, sent by the test to the real child process; the
truth file is the simulator's own account, read against what the test did."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import httpx

from tests.unit.simnode_helpers import events_named, running_node

FAST = {"speed": 50.0}


def _metric(text: str, name: str) -> float:
    line = next(ln for ln in text.splitlines() if ln.startswith(name + "{") or
                ln.startswith(name + " "))
    return float(line.rsplit(" ", 1)[1])


async def test_a_stopped_core_stalls_the_engine_while_vllm_health_stays_200(
        tmp_path: Path) -> None:
    async with running_node(tmp_path, **FAST) as n, \
            httpx.AsyncClient(base_url=n.url, timeout=10) as c:
        engine = n.node.engine
        assert engine is not None and engine.core is not None and engine.core.pid
        running = asyncio.create_task(c.post("/v1/completions", json={
            "prompt": "x", "max_tokens": 400, "ignore_eos": True}))
        await asyncio.sleep(0.1)
        before = (await c.get("/metrics")).text
        # the core generates on meanwhile, so its counter has moved by the stop (read just
        # before the stop, a busy machine's core may not have produced a token since)
        await asyncio.sleep(0.2)
        t_stop = time.time()
        os.kill(engine.core.pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(0.5)
            frozen = (await c.get("/metrics")).text
            await asyncio.sleep(0.3)
            assert (await c.get("/health")).status_code == 200  # the API cannot see it
            assert not running.done()
            later = (await c.get("/metrics")).text
            # the gauges and the token counter freeze with the core
            assert _metric(later, "vllm:num_requests_running") == 1
            assert (_metric(later, "vllm:generation_tokens_total")
                    == _metric(frozen, "vllm:generation_tokens_total")
                    > _metric(before, "vllm:generation_tokens_total"))
        finally:
            os.kill(engine.core.pid, signal.SIGCONT)
        t_cont = time.time()
        r = await asyncio.wait_for(running, 10)
        assert r.json()["usage"]["completion_tokens"] == 400
        # the stall the test caused (a starved machine may add short ones of its own:
        # a beat late by more than STALLED_AFTER_S): dated within a beat or two of the
        # test's SIGSTOP, and resumed after its SIGCONT
        (stalled,) = events_named(n.truth_events(), "engine_stalled",
                                  lambda e: e["since"] >= t_stop - 0.1)
        assert stalled["since"] <= t_stop + 0.05
        assert events_named(n.truth_events(), "engine_resumed",
                            lambda e: t_cont <= e["t"] <= t_cont + 0.5)


async def test_a_stopped_core_fails_sglang_health(tmp_path: Path) -> None:
    async with running_node(tmp_path, personality="sglang", health_check_timeout_s=0.2,
                            **FAST) as n, httpx.AsyncClient(base_url=n.url) as c:
        engine = n.node.engine
        assert engine is not None and engine.core is not None and engine.core.pid
        os.kill(engine.core.pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(0.4)
            assert (await c.get("/health")).status_code == 503
        finally:
            os.kill(engine.core.pid, signal.SIGCONT)
        await asyncio.sleep(0.1)
        assert (await c.get("/health")).status_code == 200


async def test_a_killed_core_fails_the_requests_in_flight_and_exits_1(tmp_path: Path) -> None:
    async with running_node(tmp_path, oom_exit_delay_s=0.05, **FAST) as n, \
            httpx.AsyncClient(base_url=n.url, timeout=10) as c:
        engine = n.node.engine
        assert engine is not None and engine.core is not None and engine.core.pid
        running = asyncio.create_task(c.post("/v1/completions", json={
            "prompt": "x", "max_tokens": 2000, "ignore_eos": True, "stream": True}))
        await asyncio.sleep(0.1)
        os.kill(engine.core.pid, signal.SIGKILL)
        r = await asyncio.wait_for(running, 5)
        assert "EngineCore encountered an issue" in r.text
        await asyncio.sleep(0.3)
        assert n.exits == [1]
        events = n.truth_events()
        (died,) = events_named(events, "engine_core_died")
        assert died["exit_code"] == -signal.SIGKILL
        assert events_named(events, "dead", lambda e: e["reason"] == "engine_core_died")
        assert events_named(events, "request_dropped",
                            lambda e: e["reason"] == "engine_core_died")
