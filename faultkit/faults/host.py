"""``host_restart``: the node's whole Docker host goes away and comes back ("GPU node restart").

``node_restart`` restarts the inference containers while the host's Docker engine stays
up. Here the *host* restarts: its engine and every process on it end at once, the engine
boots again, and each container comes back only if its restart policy brings it back.

How a host restarts is the operator's, never guessed: the fault runs the shell command
``command`` given to it, once, on this machine (``ssh gpu-2 sudo systemctl reboot``; the
testbed's second host: ``docker restart -t 0 faultkit-h2-docker``). Nothing restarts a
host without it, and the sweep never replays it (it journals no undo step). Refused for a
node whose Docker engine is this machine's own (``unix://``): the harness would restart
itself; and, as ``node_restart``, when another inventory node on that host is protected or
does not allow ``host_restart``.

``_apply`` runs the command, then waits (at most ``down_timeout_s``) until the host's
engine stops answering (``result["host_down_s"]``, from the act; ``None`` if it never
went down: the command did nothing, and the run is INCONCLUSIVE). The revert waits for the
engine to answer again (``engine_back_s``) and for every inventory node on the host to be
ready (``nodes_ready_s``: node → seconds from the act, ``None`` when it did not come back
within ``ready_timeout_s``: ``not_back`` names them; the harness does not start them).
Detection and lost requests are the experiment's measurement, as for every fault.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Mapping
from typing import Any, ClassVar

from faultkit.docker import hostpid
from faultkit.errors import FaultError, FaultRefused, NodeNotReady
from faultkit.faults.base import Fault
from faultkit.faults.locks import NodeLock
from faultkit.faults.params import Param, ParamSpec
from faultkit.inventory import Inventory, Node
from faultkit.probes.health import wait_ready


class HostRestart(Fault):
    kind: ClassVar[str] = "host_restart"
    spans_outage: ClassVar[bool] = True
    effect_required: ClassVar[str] = "mechanism"  # the host's engine stopped answering
    PARAMS: ClassVar[ParamSpec] = {
        "command": (str, None),
        "down_timeout_s": Param(float, 30.0, gt=0, le=600, unit="s"),
        "back_timeout_s": Param(float, 300.0, gt=0, le=3600, unit="s"),
        "ready_timeout_s": Param(float, 120.0, gt=0, le=3600, unit="s"),
    }

    @classmethod
    def check_blast_radius(
        cls, node: Node, inventory: Inventory | None, params: Mapping[str, Any]
    ) -> None:
        if not params.get("command"):
            raise FaultRefused(
                f"refused: host_restart on {node.name!r} needs command=…, the command that "
                "restarts its host (e.g. `ssh gpu-2 sudo systemctl reboot`); faultkit never "
                "guesses how to restart a machine. Nothing was done.")
        if node.docker is None or hostpid.is_local(node.docker.host):
            raise FaultRefused(
                f"refused: host_restart on {node.name!r}: its Docker engine is this machine's "
                "own, and restarting it would restart the harness too. Nothing was done.")
        for other in inventory.nodes if inventory is not None else []:
            if (other.name != node.name and other.docker is not None
                    and other.docker.host == node.docker.host and not other.allows(cls.kind)):
                raise FaultRefused(
                    f"refused: host_restart on {node.name!r} would also take down node "
                    f"{other.name!r} (same Docker host {node.docker.host}), which is protected "
                    "or does not allow host_restart. Nothing was done.")

    def host_nodes(self) -> list[Node]:
        """This node and every other inventory node on the same Docker host."""
        assert self.node.docker is not None
        host = self.node.docker.host
        others = [n for n in (self.inventory.nodes if self.inventory else [])
                  if n.name != self.node.name and n.docker is not None and n.docker.host == host]
        return [self.node, *others]

    def node_locks(self) -> list[NodeLock]:
        return [NodeLock(n) for n in self.host_nodes()]

    def _sweep_steps(self) -> list[dict[str, Any]]:
        return []  # no helper runs on the host (and it is away while the revert starts)

    def what(self) -> str:
        host = self.node.docker.host if self.node.docker else "?"
        return (f"restart the whole Docker host {host} (`{self.params['command']}`), with "
                f"{', '.join(n.name for n in self.host_nodes())}")

    async def _prepare(self) -> list[dict[str, Any]]:
        running = await asyncio.to_thread(self.platform.running_names)
        self.result["containers"] = running
        return []  # nothing the harness could undo: the host comes back by itself or not

    def _run_command(self) -> None:
        command = str(self.params["command"])
        try:
            proc = subprocess.run(["sh", "-c", command], capture_output=True, text=True,
                                  timeout=120, check=False)
        except subprocess.TimeoutExpired as exc:
            raise FaultError(f"host_restart: `{command}` did not return in 120 s") from exc
        self.result["command_exit"] = proc.returncode
        if proc.returncode not in (0, 255):  # ssh ends 255 when the host drops it: fine
            raise FaultError(f"host_restart: `{command}` failed (exit {proc.returncode}): "
                             f"{(proc.stderr or proc.stdout).strip()[-300:]}")

    async def _apply(self) -> None:
        self._t0 = time.monotonic()
        self.acting(f"restart the host: `{self.params['command']}`")
        await self.act(self._run_command)
        down = await self._poll(lambda up: not up, self.params["down_timeout_s"])
        self.result["host_down_s"] = down
        if down is None:
            self.effect_missing(f"the host's engine kept answering for "
                                f"{self.params['down_timeout_s']:g} s after the command")
        else:
            self.effect_in_place(f"the host's engine stopped answering {down:.2f} s after "
                                 "the command began")

    async def _poll(self, want: Any, within_s: float) -> float | None:
        """Seconds from the act until ``want(engine answers)`` holds, polled every 0.1 s."""
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            if want(await asyncio.to_thread(self.platform.engine_answers, 2.0)):
                return round(time.monotonic() - self._t0, 3)
            await asyncio.sleep(0.1)
        return None

    async def _after_undo(self) -> None:
        if not hasattr(self, "_t0"):
            return
        back = await self._poll(lambda up: up, self.params["back_timeout_s"])
        self.result["engine_back_s"] = back
        if back is None:
            raise FaultError(f"host_restart: the engine at {self.platform.url} did not answer "
                             f"within {self.params['back_timeout_s']:g} s")

        async def ready(node: Node) -> float | None:
            try:
                await wait_ready(node, timeout_s=self.params["ready_timeout_s"])
            except NodeNotReady:
                return None
            return round(time.monotonic() - self._t0, 3)

        nodes = self.host_nodes()
        times = await asyncio.gather(*(ready(n) for n in nodes))
        self.result["nodes_ready_s"] = {n.name: t for n, t in zip(nodes, times, strict=True)}
        self.result["not_back"] = [n.name for n, t in zip(nodes, times, strict=True) if t is None]
