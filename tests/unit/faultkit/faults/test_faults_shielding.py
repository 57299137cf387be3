"""Acts are shielded: a cancellation that arrives mid-act waits for the act to end, and the
revert runs after it, so the undo never races an act still running in a worker thread."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from faultkit.faults import undo
from faultkit.faults.base import Fault
from faultkit.faults.params import ParamSpec
from faultkit.journal import FaultJournal
from tests.unit.faults_fake import node

#: what the fake node looks like, and every operation on it in the order it happened
NODE: dict[str, str] = {}
ORDER: list[str] = []


@undo.op("ordered_restore")
def _ordered_restore(step: Mapping[str, Any]) -> str:
    ORDER.append("undo")
    NODE["state"] = "ok"
    return "restored"


class SlowFault(Fault):
    """Breaks the fake node in a worker thread that takes ``act_s`` seconds."""

    kind: ClassVar[str] = "pause"
    PARAMS: ClassVar[ParamSpec] = {"act_s": (float, 0.3), "coroutine": (bool, False)}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.started = threading.Event()

    async def _prepare(self) -> list[dict[str, Any]]:
        return [{"op": "ordered_restore"}]

    def _break(self) -> None:
        ORDER.append("act start")
        self.started.set()
        time.sleep(self.params["act_s"])
        NODE["state"] = "broken"
        ORDER.append("act end")

    async def _break_async(self) -> None:
        ORDER.append("act start")
        self.started.set()
        await asyncio.sleep(self.params["act_s"])
        NODE["state"] = "broken"
        ORDER.append("act end")

    async def _apply(self) -> None:
        if self.params["coroutine"]:
            await self.shielded(self._break_async())
        else:
            await self.act(self._break)
        ORDER.append("after act")  # never reached when cancelled mid-act


@pytest.fixture(autouse=True)
def _clean() -> None:
    NODE.clear()
    ORDER.clear()


async def _cancel_mid_act(fault: SlowFault, *, times: int = 1) -> None:
    task = asyncio.ensure_future(fault.inject())
    assert await asyncio.to_thread(fault.started.wait, 5)
    for _ in range(times):
        task.cancel()
        await asyncio.sleep(0.02)
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.parametrize("coroutine", [False, True], ids=["thread", "coroutine"])
async def test_cancel_mid_act_reverts_after_the_act_ended(tmp_path: Path, coroutine: bool) -> None:
    fault = SlowFault(node(), journal=FaultJournal(tmp_path), coroutine=coroutine)
    await _cancel_mid_act(fault)
    assert ORDER == ["act start", "act end", "undo"]
    assert NODE["state"] == "ok"
    assert not fault.active
    (record,) = FaultJournal(tmp_path).records()
    assert record.state == "reverted"
    assert FaultJournal(tmp_path).nodes.holders() == []


async def test_repeated_cancellation_mid_act_still_waits(tmp_path: Path) -> None:
    fault = SlowFault(node(), journal=FaultJournal(tmp_path), act_s=0.4)
    await _cancel_mid_act(fault, times=3)
    assert ORDER == ["act start", "act end", "undo"]
    assert NODE["state"] == "ok"


async def test_revert_waits_for_an_act_still_running(tmp_path: Path) -> None:
    """Even when the act was not awaited by _apply (left running), revert waits for it."""
    fault = SlowFault(node(), journal=FaultJournal(tmp_path), act_s=0.3)
    await fault.inject()
    ORDER.clear()
    fault.started.clear()
    stray = asyncio.ensure_future(fault.act(fault._break))
    assert await asyncio.to_thread(fault.started.wait, 5)
    await fault.revert()
    assert stray.done()
    assert ORDER == ["act start", "act end", "undo"]
    assert NODE["state"] == "ok"


async def test_a_plain_run_is_unchanged(tmp_path: Path) -> None:
    async with SlowFault(node(), journal=FaultJournal(tmp_path), act_s=0.01):
        assert NODE["state"] == "broken"
    assert ORDER == ["act start", "act end", "after act", "undo"]
    assert NODE["state"] == "ok"


class SlowJournal(FaultJournal):
    """A journal whose record write takes a while (an fsync on a busy disk)."""

    writing = threading.Event()

    def begin(self, record: Any) -> None:
        self.writing.set()
        time.sleep(0.2)
        super().begin(record)


async def test_cancel_while_the_record_is_written_marks_it_reverted(tmp_path: Path) -> None:
    """Ctrl-C that lands during the journal write: the write ends, nothing acts, and the
    record on disk reads reverted (no ``applying`` record left for the sweep)."""
    SlowJournal.writing.clear()
    fault = SlowFault(node(), journal=SlowJournal(tmp_path), act_s=0.01)
    task = asyncio.ensure_future(fault.inject())
    assert await asyncio.to_thread(SlowJournal.writing.wait, 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ORDER == ["undo"]  # never acted; the undo ran as for any written record
    (record,) = FaultJournal(tmp_path).records()
    assert record.state == "reverted"
    assert FaultJournal(tmp_path).unreverted() == []
