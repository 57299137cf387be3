"""LoopWatch: a stall of the event loop is noticed from outside it, with what the process did."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path

from faultkit.runtime.loopwatch import LoopStall, LoopWatch


def _block_in_a_syscall(seconds: float) -> None:
    time.sleep(seconds)  # what a blocking call in the loop does: no CPU, no progress


def _spin(seconds: float) -> None:
    """Compute for ``seconds`` of this thread's own CPU time (on a busy machine that takes
    longer on the clock, and the CPU the stall shows is still there)."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


async def _the_one_stall_of(act: Callable[[float], None]) -> LoopStall:
    """Run ``act(0.8)`` in the loop between two quiet moments; the single stall it caused."""
    async with LoopWatch(threshold_s=0.2) as watch:
        await asyncio.sleep(0.2)
        act(0.8)
        await asyncio.sleep(0.3)
    (stall,) = watch.stalls
    return stall


async def test_a_blocking_call_in_the_loop_is_one_stall_with_its_place_and_no_cpu() -> None:
    stall = await _the_one_stall_of(_block_in_a_syscall)
    assert 0.6 <= stall.duration_s <= 2.0
    assert any("_block_in_a_syscall" in frame for frame in stall.stack), stall.stack
    assert stall.cpu_s_by_thread.get("MainThread", 0.0) < 0.3  # it slept: the CPU was free
    assert "stall" in stall.summary() and "_block_in_a_syscall" in stall.summary()


async def test_a_loop_that_computes_shows_its_cpu() -> None:
    stall = await _the_one_stall_of(_spin)
    assert any("_spin" in frame for frame in stall.stack), stall.stack
    assert stall.cpu_s_by_thread.get("MainThread", 0.0) >= 0.25  # noticed 0.2 s in, ran on


async def test_a_loop_that_keeps_running_has_no_stall() -> None:
    async with LoopWatch(threshold_s=0.2) as watch:
        for _ in range(20):
            await asyncio.sleep(0.02)
    assert watch.stalls == []


def test_a_stall_round_trips_through_its_json() -> None:
    stall = LoopStall(t_start=1.0, duration_s=0.5, stack=["a.py:1 in f"],
                      cpu_s_by_thread={"MainThread": 0.4}, procs_running=3)
    assert LoopStall.from_json(stall.to_json()) == stall
    assert "MainThread 0.40 s" in stall.summary() and "3 runnable tasks" in stall.summary()


async def test_a_run_writes_the_stall_its_action_caused_to_loop_stalls_json(
    tmp_path: Path,
) -> None:
    """The experiment's wiring: a real run_action on a loopback server (no Docker, no
    Prometheus) whose action blocks the loop leaves that stall in ``loop-stalls.json``."""
    from faultkit.experiment import Experiment
    from faultkit.inventory import Inventory, Node
    from faultkit.load.fakeserver import serve
    from faultkit.load.profile import LoadProfile
    from faultkit.rundir import RunDir

    runner, port = await serve()
    try:
        node = Node(name="n", engine="vllm", base_url=f"http://127.0.0.1:{port}", model="ok",
                    slo={"recovery_hold_s": 0.5, "recovery_s_max": 5})
        exp = Experiment(
            scenario="action", node=node,
            inventory=Inventory(nodes=[node], prometheus={"url": "http://127.0.0.1:1"}),
            run=RunDir(tmp_path), load_profile=LoadProfile(rate=10, output_tokens=4,
                                                           input_tokens=8),
        )

        async def action(_: Experiment) -> None:
            _block_in_a_syscall(0.8)

        await exp.run_action("noop", action, describe="blocks the loop", baseline_s=1.0)
    finally:
        await runner.cleanup()
    stalls = [LoopStall.from_json(s) for s in json.loads(
        (tmp_path / "loop-stalls.json").read_text())]
    assert [s for s in stalls if any("_block_in_a_syscall" in f for f in s.stack)
            and s.duration_s >= 0.6], stalls
