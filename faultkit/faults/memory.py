"""``memory_squeeze``: lower the container's memory limit under its usage → the kernel OOM-kills it.

Params: ``limit`` (e.g. ``32m``; default: ``fraction`` × current usage, at least 4 MiB)
and ``fraction`` (0.5). The fault is in effect (``inject_end``) once the new limit is set;
``result`` gets ``usage_before``, ``limit_before``/``memswap_before``, ``limit_applied``
(bytes), and after revert ``oom_killed``, ``restart_count_before``/``after`` and
``time_to_ready_s`` (monotonic seconds from the start of the revert). Revert restores both
limits exactly (memory and memory+swap), starts the container if it is down (the sweep
after a dead harness too: its limit restored, a container the squeeze left exited is
started) and waits until the node is ready again — with the lowered limit a restarted engine
may OOM-loop until then.

Kernel difference (``mode`` in ``result`` and events): with cgroup v2 the kernel accepts a
limit under the usage and OOM-kills at once (mode ``under_usage``). cgroup v1 refuses a
limit it cannot reclaim down to ("unable to set memory limit"); then the tightest limit
it accepts is searched in 256 KiB steps from just under the usage up to usage + ``headroom``
(mode ``above_usage``). An engine whose memory is steady would then never notice, so the
fault adds ``pressure``: it writes a file to the container's ``/dev/shm`` (tmpfs pages are
charged to the container and cannot be reclaimed), taking the container over its limit —
the OOM killer then kills the engine, as a genuine squeeze would. ``/dev/shm`` is empty
again after the restart; revert also deletes the file.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from typing import Any, ClassVar

from faultkit.docker.containers import ContainerState
from faultkit.errors import DockerError, FaultError
from faultkit.faults.params import Param, ParamSpec
from faultkit.faults.process import READY_TIMEOUT, _ReadyMixin

_PRESSURE_FILE = "/dev/shm/.faultkit-memory-squeeze"
_DOCKER_MIN = 6 * 1024**2  # Docker refuses memory limits below 6 MiB
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_bytes(text: str) -> int:
    """``512m`` / ``2g`` / ``1048576`` → bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([bkmg]?)b?\s*", text.lower())
    if not match:
        raise FaultError(f"memory size {text!r}: use e.g. 32m, 1g or a byte count")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def _size_at_least(minimum: int) -> Callable[[str], bool]:
    """A check: the value is a memory size (:func:`parse_bytes`) of ``minimum`` bytes or more."""

    def check(value: str) -> bool:
        try:
            return parse_bytes(value) >= minimum
        except FaultError:
            return False

    return check


class MemorySqueeze(_ReadyMixin):
    kind: ClassVar[str] = "memory_squeeze"
    # in effect once Docker applied the lower limit (its "update" event), or once the kernel
    # OOM-killed the engine under it (its "oom" event), whichever Docker reports first:
    # Docker writes "update" when its call returns, and the call can last until the kernel
    # has reclaimed or killed — the engine can be killed, and monitoring see it, seconds
    # before "update" (docs/definitions.md, "t_effect"). On cgroup v1 the kernel may
    # refuse several limits first, which change nothing.
    effect_docker_actions: ClassVar[tuple[str, ...]] = ("update", "oom")
    effect_required: ClassVar[str] = "docker"
    PARAMS: ClassVar[ParamSpec] = {
        "limit": Param(str, None, check=_size_at_least(_DOCKER_MIN),
                       hint="a memory size of at least 6m (Docker's minimum), such as 32m or 1g"),
        # a fraction of the usage: the point is a limit *under* what the engine uses
        "fraction": Param(float, 0.5, gt=0, lt=1, unit="(of the current usage)"),
        "headroom": Param(str, "1m", check=_size_at_least(0),
                          hint="a memory size, such as 1m or 512k"),
        "pressure": Param(str, "8m", check=_size_at_least(1),
                          hint="a memory size above 0, such as 8m"),
        "ready_timeout_s": READY_TIMEOUT,
        "first_token": (bool, False),
    }
    #: the container's state just before a normal revert's undo steps (None: not read)
    _state_before_undo: ContainerState | None = None

    def what(self) -> str:
        target = self.params["limit"] or f"{self.params['fraction']:.0%} of its usage"
        return f"lower the memory limit to {target} (OOM kill); revert restores it"

    async def _prepare(self) -> list[dict[str, Any]]:
        name = self.container
        memory, memswap = await asyncio.to_thread(self.platform.memory_limits, name)
        usage = await asyncio.to_thread(self.platform.memory_usage, name)
        st = await asyncio.to_thread(self.platform.state, name)
        self.result.update(limit_before=memory, memswap_before=memswap, usage_before=usage,
                           restart_count_before=st.restart_count)
        if self.params["limit"]:
            limit = parse_bytes(self.params["limit"])
        else:
            limit = max(_DOCKER_MIN, int(usage * self.params["fraction"]))
        self.result["limit_applied"] = limit
        # then start the container if the squeeze left it down (OOM-killed, and its restart
        # policy gave up or its engine restarted meanwhile): a sweep after a dead harness
        # runs only these steps, and a node restored to its limit but left down is not back
        return [self.step("memory", memory=memory, memswap=memswap), self.step("start")]

    async def _apply(self) -> None:
        limit = self.result["limit_applied"]
        self.mode = "under_usage"
        self.acting(f"lower the memory limit to {limit} bytes")
        try:
            # once: cgroup v1's refusal is a 5xx that the walk below answers, not a retry
            await self.act_once(self.platform.set_memory_limits, self.container, limit, limit)
        except DockerError as exc:
            if "unable to set memory limit" not in str(exc):
                raise
            # cgroup v1 refuses a limit it cannot reclaim down to (v2 OOM-kills at once).
            # Each refused attempt made the kernel reclaim what it could (page cache), so
            # walk the limit down in 5 % steps of the usage; what is left is the engine's
            # own memory, and its next allocations OOM it.
            self.mode = "above_usage"
            refused = str(exc)[-160:]
            step = 256 * 1024
            limit = 0
            for attempt in range(8 + parse_bytes(self.params["headroom"]) // step):
                # usage moves under load: read it again for every attempt
                usage = await asyncio.to_thread(self.platform.memory_usage, self.container)
                limit = max(_DOCKER_MIN, usage - 4 * step + attempt * step)
                try:
                    await self.act_once(self.platform.set_memory_limits, self.container, limit,
                                        limit)
                    break
                except DockerError as again:
                    if "unable to set memory limit" not in str(again):
                        raise
            else:
                raise FaultError(
                    f"memory_squeeze: the kernel refused every limit up to {limit} bytes "
                    f"(usage {usage}); give a larger headroom= or use cgroup v2"
                )
            self.result.update(limit_applied=limit, mode=self.mode, refused=refused)
            await self._add_pressure(limit)

    async def _add_pressure(self, limit: int) -> None:
        """Fill /dev/shm past the limit so the engine, not the filler, is OOM-killed."""
        usage = await asyncio.to_thread(self.platform.memory_usage, self.container)
        size = max(0, limit - usage) + parse_bytes(self.params["pressure"])
        await self.add_undo(self.step("exec", command=["rm", "-f", _PRESSURE_FILE]))
        try:
            code, output = await self.act_once(  # once: a retry could fill a restarted engine
                self.platform.exec, self.container,
                ["sh", "-c", f"head -c {size} /dev/zero > {_PRESSURE_FILE}"],
            )
        except DockerError as exc:  # the container died under the exec: the squeeze worked
            code, output = -1, str(exc)
        # exit 137/1 is expected when the OOM killer strikes mid-write; note what happened
        self.result.update(pressure_bytes=size, pressure_exit=code, pressure_output=output[-200:])

    async def _before_undo(self) -> None:
        """Docker's OOM evidence before the undo's ``start`` (which clears it) runs."""
        self._state_before_undo = await asyncio.to_thread(self.platform.state, self.container)

    async def _after_undo(self) -> None:
        st = await asyncio.to_thread(self.platform.state, self.container)
        seen = [st] if self._state_before_undo is None else [st, self._state_before_undo]
        self.result["oom_killed"] = any(s.oom_killed for s in seen) or max(
            s.restart_count for s in seen) > self.result["restart_count_before"]
        if not st.running and not st.restarting:
            await asyncio.to_thread(self.platform.start, self.container)
        await self._wait_back(self.t_revert_mono or time.monotonic())
