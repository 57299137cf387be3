"""``stall``: the engine stops making progress while its container keeps running — SIGSTOP of
the engine's processes, SIGCONT on revert.

Real engines hang this way (docs/faults.md, "stall"): vLLM's engine core stuck while its API
server answers ``/health`` 200, SGLang's scheduler gone while ``/health_generate`` stays
green. ``stall match=REGEX`` stops every process of the container whose command line
matches (``re.search``; default: the node's ``engine_process`` pattern, e.g.
``VLLM::EngineCore``) — but not the container's main process when another one matches,
as :mod:`.engine`'s ``kill_process`` chooses them — so an API server in another process
keeps answering. ``whole=true`` stops every process of the container instead: a freeze as
``docker pause`` makes it, for a host whose cgroup freezer cannot freeze the container
(cgroup v1's "unable to freeze"; the inventory's ``pause_with: sigstop``).

The signals go from the node's own host, each PID proven to be the container's
(:mod:`faultkit.platform`). The undo step (``resume``: SIGCONT every process of the
container) is journaled before the first SIGSTOP, so a harness killed mid-fault leaves
nothing stopped after ``faultkit sweep``.

``t_effect`` is when every signalled process was stopped (state ``T``, polled every 10 ms).
``result``: ``stopped`` (each process: pid and command line) and ``whole``.
"""

from __future__ import annotations

import asyncio
import re
import signal
from typing import Any, ClassVar

from faultkit.errors import FaultRefused
from faultkit.faults.base import Fault
from faultkit.faults.params import ParamSpec

#: how long the SIGSTOPs may take to hold
STOPPED_WITHIN_S = 5.0


class Stall(Fault):
    """SIGSTOP the engine's processes (or every process of the container); SIGCONT on revert."""

    kind: ClassVar[str] = "stall"
    effect_required: ClassVar[str] = "mechanism"  # every signalled process is stopped
    PARAMS: ClassVar[ParamSpec] = {
        "match": (str, None),
        "whole": (bool, False),
    }

    def _pattern(self) -> re.Pattern[str] | None:
        """The processes to stop: ``match``, else the node's engine pattern; None with
        ``whole``."""
        if self.params["whole"]:
            return None
        given = self.params["match"] or self.node.engine_process_pattern
        if not given:
            raise FaultRefused(
                f"refused: stall on {self.node.name!r}: no match=REGEX given and the "
                f"inventory names no engine_process for engine {self.node.engine!r}. Nothing "
                "was done.")
        try:
            return re.compile(given)
        except re.error as exc:
            raise FaultRefused(f"refused: stall match {given!r} is not a regular expression "
                               f"({exc}). Nothing was done.") from None

    def what(self) -> str:
        if self.params["whole"]:
            return ("SIGSTOP of every process of the container (its port stays open, nothing "
                    "answers); revert sends SIGCONT")
        target = self.params["match"] or self.node.engine_process_pattern
        return (f"SIGSTOP of the container's processes matching /{target}/ (the engine stops; "
                "its API may keep answering); revert sends SIGCONT")

    def _targets(self) -> list[tuple[int, str]]:
        """The processes to stop, as (PID, command line), each proven the container's."""
        main, processes = self.platform.processes(self.container, self.id)
        pattern = self._pattern()
        if pattern is None:
            return processes
        matched = [p for p in processes if pattern.search(p[1])]
        below_main = [p for p in matched if p[0] != main]
        if not matched:
            listing = "; ".join(f"{pid} {cmd[:80]}" for pid, cmd in processes) or "none"
            raise FaultRefused(
                f"refused: stall on {self.node.name!r}: no process of container "
                f"{self.container!r} matches /{pattern.pattern}/ (its processes: {listing}). "
                "Nothing was done.")
        return below_main or matched

    async def _prepare(self) -> list[dict[str, Any]]:
        await asyncio.to_thread(self._targets)  # refused here, before anything is journaled
        return [self.step("resume", fault_id=self.id)]

    async def _apply(self) -> None:
        targets = await asyncio.to_thread(self._targets)
        pids = [pid for pid, _ in targets]
        self.result["whole"] = self.params["whole"]
        self.result["stopped"] = [{"pid": pid, "cmdline": cmd[:200]} for pid, cmd in targets]
        self.acting(f"SIGSTOP to {len(pids)} process(es): {', '.join(map(str, pids))}")
        signalled = await self.act(self.platform.signal_processes, self.container, pids,
                                   signal.SIGSTOP, self.id)
        if not signalled:
            self.effect_missing("every process sent SIGSTOP had exited before it: nothing "
                                "was stopped")
            return
        if await asyncio.to_thread(self.platform.wait_stopped, signalled, STOPPED_WITHIN_S,
                                   self.id):
            self.effect_in_place(f"{len(pids)} process(es) stopped (SIGSTOP held)")
        else:
            self.effect_missing(f"the process(es) sent SIGSTOP were not all stopped "
                                f"{STOPPED_WITHIN_S:g} s later")
