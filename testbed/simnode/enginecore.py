"""The simulated engine core: a process of its own, so the engine can stall while the API
server keeps answering — as vLLM's ``VLLM::EngineCore`` or SGLang's scheduler can.

``python testbed/simnode/enginecore.py --beat-fd N`` (run by path: the child imports the
standard library only, never the simulator's package) writes its clock (``time.time()``,
8 bytes: one atomic pipe write) to descriptor ``N`` every :data:`BEAT_S` and exits when the
write fails (its API server is gone). The API server (:class:`CoreLink`) lets the engine
step only while the beats arrive:

- a SIGSTOP of this process (faultkit's ``stall``) stops the beats; :data:`STALLED_AFTER_S`
  later the engine stops stepping, its gauges freeze, and ``/health`` answers as the
  personality's engine does (vLLM: 200; SGLang: 503 after its health timeout);
- SIGCONT resumes the beats, and the engine resumes;
- the process's death (``kill_process``) ends the beats for good: the engine is dead,
  every request in flight fails, and the API server exits 1 — vLLM's "EngineCore
  encountered an issue".

The truth file dates each transition: ``engine_stalled`` (``since``: the core's own clock
at its last beat, the stop to within one beat, whatever the API server's event loop was
doing), ``engine_resumed`` and ``engine_core_died``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

#: one beat: the core's ``time.time()``
BEAT = struct.Struct("=d")
#: how often the core beats
BEAT_S = 0.02
#: the engine steps only on a beat at most this old: a step never runs more than a few
#: beats past the core's stop
STEP_ON_BEAT_S = 0.06
#: beats missed for this long mean the core is stopped (10 beats: a busy machine's
#: scheduling delay is not a stall): the truth's ``engine_stalled``, the gauges frozen
STALLED_AFTER_S = 0.2
#: how often the API server looks at the beats
WATCH_S = 0.02


def main(argv: Sequence[str] | None = None) -> int:
    """The core process: beat until the API server stops listening."""
    parser = argparse.ArgumentParser(prog="testbed/simnode/enginecore.py")
    parser.add_argument("--beat-fd", type=int, required=True)
    fd = parser.parse_args(argv).beat_fd
    while True:
        try:
            os.write(fd, BEAT.pack(time.time()))
        except (BrokenPipeError, OSError):
            return 0
        time.sleep(BEAT_S)


async def cancelled(task: asyncio.Task[None] | None) -> None:
    """Cancel ``task`` (if any) and wait until it has ended."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class CoreLink:
    """The API server's side: starts the core process and watches its beats.

    ``on_stall(since_epoch)``, ``on_resume()`` and ``on_death(exit_code)`` are called from
    the event loop on each transition."""

    def __init__(self, *, on_stall: Callable[[float], None], on_resume: Callable[[], None],
                 on_death: Callable[[int | None], None]) -> None:
        self._on_stall = on_stall
        self._on_resume = on_resume
        self._on_death = on_death
        self._proc: subprocess.Popen[bytes] | None = None
        self._read_fd: int | None = None
        self._last_beat = time.time()
        self.stalled = False
        self.dead = False
        self._task: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--beat-fd", str(write_fd)],
                pass_fds=(write_fd,), stdin=subprocess.DEVNULL,
            )
        finally:
            os.close(write_fd)
        self._read_fd = read_fd
        self._last_beat = time.time()
        self._task = asyncio.get_running_loop().create_task(self._watch(),
                                                           name="simnode-core-watch")

    def can_step(self) -> bool:
        """True when the core's last beat is at most :data:`STEP_ON_BEAT_S` old (read now)."""
        self._check()
        return (not self.stalled and not self.dead
                and time.time() - self._last_beat <= STEP_ON_BEAT_S)

    async def stop(self) -> None:
        await cancelled(self._task)
        self._task = None
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            await asyncio.to_thread(self._proc.wait)
        if self._read_fd is not None:
            os.close(self._read_fd)
            self._read_fd = None

    async def _watch(self) -> None:
        while not self.dead:
            self._check()
            await asyncio.sleep(WATCH_S)

    def _check(self) -> None:
        if self.dead or self._read_fd is None:
            return
        try:
            got = os.read(self._read_fd, 4096)
        except BlockingIOError:
            got = None
        if got == b"":  # every writer gone: the core died
            self.dead = True
            code = self._proc.wait() if self._proc is not None else None
            self._on_death(code)
            return
        if got and len(got) >= BEAT.size:  # whole beats only: 4096 is a multiple of 8
            (self._last_beat,) = BEAT.unpack_from(got, len(got) - BEAT.size)
            if self.stalled:
                self.stalled = False
                self._on_resume()
        elif not self.stalled and time.time() - self._last_beat > STALLED_AFTER_S:
            self.stalled = True
            self._on_stall(self._last_beat)


if __name__ == "__main__":
    sys.exit(main())
