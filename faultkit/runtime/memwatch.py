"""Sampling a container's memory while something runs (``test_soak``'s memory trend).

``async with MemoryWatch(docker, container) as watch: ...`` samples
:meth:`faultkit.docker.host.DockerHost.memory_stats` every ``interval_s`` in a worker thread
until the block ends; ``watch.samples`` holds one :class:`MemorySample` per answer (epoch
seconds, when the answer came) and ``watch.errors`` what failed (a sample that failed is
missing, never invented). The judgement of the trend is :func:`slo.trend.memory_trend`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from types import TracebackType

from faultkit.docker.host import DockerHost
from faultkit.errors import DockerError


@dataclass(frozen=True, slots=True)
class MemorySample:
    """The container's memory at epoch ``t``: anonymous bytes (None: not reported), Docker's
    usage and the limit (None: none)."""

    t: float
    anon: int | None
    usage: int
    limit: int | None


@dataclass
class MemoryWatch:
    docker: DockerHost
    container: str
    interval_s: float = 1.0
    samples: list[MemorySample] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> MemoryWatch:
        self._task = asyncio.create_task(self._sample(), name="faultkit-memwatch")
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _sample(self) -> None:
        while True:
            started = time.monotonic()
            try:
                stats = await asyncio.to_thread(self.docker.memory_stats, self.container)
                self.samples.append(MemorySample(time.time(), stats.anon, stats.usage,
                                                 stats.limit))
            except DockerError as exc:
                self.errors.append(f"{time.time():.3f}: {exc}")
            await asyncio.sleep(max(0.0, self.interval_s - (time.monotonic() - started)))
