"""``LoopWatch``: notice when the run's event loop stalls, and record what the process did.

The load client, the observer and the fault share one asyncio loop
(docs/architecture.md, "One event loop"). When that loop cannot run, requests leave late
and probes are stamped late, and the run is judged on the harness's stall, not the node's
(``client_stalled``, docs/definitions.md). The ledger shows *that* the client was late;
this module records *why*, from outside the loop:

- a heartbeat task stamps the loop's progress every ``beat_s``;
- a watcher thread sees the stamp go stale for ``threshold_s`` and, at that moment, takes
  the loop thread's stack (where it is stuck, if it is running Python code at all), and
  every thread's CPU time (``/proc/self/task/<tid>/stat``);
- when the loop beats again it records a :class:`LoopStall`: when, how long, the stack,
  each thread's CPU seconds during the stall, and how many of the machine's tasks were
  runnable (``procs_running`` of ``/proc/stat``) when it began.

How to read one: a thread with CPU ≈ the stall's length held the interpreter (a blocking
call or a C extension, named by its stack); CPU ≈ 0 everywhere, with many runnable tasks,
means the machine did not schedule the harness. The stalls go to the run directory
(``loop-stalls.json``, docs/run-directory.md). The watcher reads ``/proc`` only on a stall,
so a quiet run costs a thread that wakes every 50 ms.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["LoopStall", "LoopWatch"]

#: a stall shorter than this is not recorded (the client's own lateness bound is 0.5 s)
THRESHOLD_S = 0.25
#: frames of the loop thread's stack kept in a record
STACK_FRAMES = 12
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class LoopStall:
    """One stall of the loop: ``t_start`` (epoch s), ``duration_s``, and its evidence."""

    t_start: float
    duration_s: float
    #: the loop thread's innermost frames when the stall was noticed ("file:line in func")
    stack: list[str]
    #: CPU seconds each thread (by name) used from the moment the stall was noticed
    #: (``threshold_s`` into it) to its end; threads that used none are left out
    cpu_s_by_thread: dict[str, float] = field(default_factory=dict)
    #: the machine's runnable tasks when the stall was noticed (None: unknown)
    procs_running: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LoopStall:
        return cls(**data)

    def summary(self) -> str:
        """One line: how long, who used the CPU, where the loop was."""
        busy = ", ".join(f"{name} {cpu:.2f} s" for name, cpu in sorted(
            self.cpu_s_by_thread.items(), key=lambda kv: -kv[1])[:3]) or "no thread"
        where = self.stack[-1] if self.stack else "unknown"
        queue = "" if self.procs_running is None else f", {self.procs_running} runnable tasks"
        return (f"{self.duration_s:.2f} s stall: CPU {busy}{queue}; the loop thread was at "
                f"{where}")


def _thread_cpu_s() -> dict[int, float]:
    """CPU seconds (user + system) of each thread of this process, by native thread id."""
    found: dict[int, float] = {}
    with contextlib.suppress(OSError):
        for tid in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                raw = Path(f"/proc/self/task/{tid}/stat").read_text()
                fields = raw[raw.rindex(")") + 2:].split()
                found[int(tid)] = (int(fields[11]) + int(fields[12])) / _TICK
    return found


def _procs_running() -> int | None:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("procs_running "):
                return int(line.split()[1])
    return None


def _stack_of(thread_id: int) -> list[str]:
    frame = sys._current_frames().get(thread_id)
    if frame is None:
        return []
    return [f"{Path(f.filename).name}:{f.lineno} in {f.name}"
            for f in traceback.extract_stack(frame)[-STACK_FRAMES:]]


class LoopWatch:
    """Async context manager: watch the running loop; :attr:`stalls` afterwards."""

    def __init__(self, threshold_s: float = THRESHOLD_S, beat_s: float = 0.05) -> None:
        self.threshold_s = threshold_s
        self.beat_s = beat_s
        self.stalls: list[LoopStall] = []
        self._beat = time.monotonic()
        self._stop = threading.Event()
        self._task: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        self._loop_thread_id = 0

    async def __aenter__(self) -> LoopWatch:
        self._loop_thread_id = threading.get_ident()
        self._beat = time.monotonic()
        self._task = asyncio.create_task(self._heartbeat(), name="faultkit-loopwatch")
        self._thread = threading.Thread(target=self._watch, name="faultkit-loopwatch",
                                        daemon=True)
        self._thread.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 2.0)

    async def _heartbeat(self) -> None:
        while True:
            self._beat = time.monotonic()
            await asyncio.sleep(self.beat_s)

    def _watch(self) -> None:
        while not self._stop.wait(self.beat_s):
            beat = self._beat
            age = time.monotonic() - beat
            if age < self.threshold_s:
                continue
            t_start = time.time() - age
            stack = _stack_of(self._loop_thread_id)
            cpu_before = _thread_cpu_s()
            running = _procs_running()
            while self._beat == beat and not self._stop.wait(self.beat_s / 2):
                pass
            resumed = self._beat if self._beat != beat else time.monotonic()  # else: stopped
            duration = resumed - beat - self.beat_s
            cpu_after = _thread_cpu_s()
            names = {t.native_id: t.name for t in threading.enumerate()}
            cpu = {
                names.get(tid, f"thread {tid}"): round(after - cpu_before.get(tid, 0.0), 3)
                for tid, after in cpu_after.items()
                if after - cpu_before.get(tid, 0.0) > 0
            }
            self.stalls.append(LoopStall(
                t_start=round(t_start, 3), duration_s=round(max(duration, age), 3),
                stack=stack, cpu_s_by_thread=cpu, procs_running=running,
            ))
