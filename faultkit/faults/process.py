"""Process faults on a node's container: kill, stop (cold start), restart, pause, node_restart.

``kill`` versus ``kill docker_kill=true`` — the difference surprises people:

- default: SIGKILL of the container's main process *from the host*
  (``os.kill(host_pid, SIGKILL)``). That is a crash: the container exits 137 and Docker's
  restart policy (``on-failure``, ``always``, ``unless-stopped``) restarts it. Lab containers
  run with ``init=True``, so the main process is docker-init; its death takes the container
  down just the same.
- ``docker_kill=true``: ``docker kill``. Docker records that as a *manual* stop and does
  **not** restart the container, whatever its restart policy. Revert then starts it.

The default acts on the node's own host (:mod:`faultkit.platform`): the PID is that host's,
and ``/proc/<pid>/cgroup`` must name the container's id before the signal is sent. For a
local engine (``unix://``) the harness does it itself (:mod:`faultkit.docker.hostpid`); for any
other, a helper container with the host's PID namespace does it there, created through the
node's Docker API. There is no API-only way to the same crash: a SIGKILL through the API
*is* ``docker kill``, a manual stop that no restart policy undoes.

For ``kill`` "revert" means: wait until the node is ready again (the restart policy's job);
if it is not back within ``ready_timeout_s``, start the container and wait again.
``result`` carries ``restart_count_before``/``restart_count_after``, ``exit_code``,
``time_to_ready_s`` (from the kill / the start, monotonic seconds) and
``time_to_first_token_s`` (first content chunk of a tiny chat request, retried until the
ready timeout — see :mod:`faultkit.probes.first_token`), ``ready_not_serving_s`` (the gap between
the two) and ``first_token_attempts``; when no token ever arrives, ``time_to_first_token_s``
is None and ``first_token_finding`` says why.
"""

from __future__ import annotations

import asyncio
import re
import signal
import time
from collections.abc import Mapping
from typing import Any, ClassVar

from tenacity import AsyncRetrying, retry_if_result, stop_after_delay, wait_fixed

from faultkit.errors import DockerError, FaultRefused, FaultUnsupported, NodeNotReady
from faultkit.faults.base import Fault
from faultkit.faults.locks import NodeLock
from faultkit.faults.params import Param, ParamSpec
from faultkit.inventory import Inventory, Node
from faultkit.model.events import EventKind
from faultkit.probes.first_token import probe_first_token
from faultkit.probes.health import wait_ready

_LABEL = re.compile(r"[^=\s]+(=\S*)?")
#: Docker's words when the container's cgroup freezer cannot freeze it (runc, cgroup v1:
#: "OCI runtime pause failed: unable to freeze: unknown")
_FREEZE_FAILED = re.compile(r"\bfreez", re.IGNORECASE)
#: How long a revert may wait for the node to serve again: > 0 and at most an hour.
READY_TIMEOUT = Param(float, None, gt=0, le=3600, unit="s")
#: ``docker stop``/``restart`` grace before SIGKILL: 0 (kill at once) to 10 minutes.
STOP_TIMEOUT = Param(int, 10, ge=0, le=600, unit="s")


class _ReadyMixin(Fault):
    """Shared "wait until the node serves again" logic (used by the revert of several faults)."""

    def _ready_timeout(self) -> float:
        value = self.params.get("ready_timeout_s")
        if value:
            return float(value)
        if self.inventory is not None and self.node.serving_config:
            return self.inventory.serving_config(self.node.serving_config).ready_timeout_s
        return 120.0

    async def _wait_back(self, t0_mono: float) -> None:
        """Wait for readiness; start the container if it stays down; record times from t0."""
        name = self.container
        try:
            await wait_ready(self.node, timeout_s=self._ready_timeout())
        except NodeNotReady:
            st = await asyncio.to_thread(self.platform.state, name)
            if st.running or st.restarting:
                raise
            self._stayed_down(st.status, st.exit_code)
            self.emit(EventKind.START_AFTER_DEADLINE, status=st.status)
            self.intervened(
                "docker start",
                f"the container stayed {st.status} for {self._ready_timeout():g} s "
                "(its restart policy did not bring it back); the harness started it",
            )
            await asyncio.to_thread(self.platform.start, name)
            await wait_ready(self.node, timeout_s=self._ready_timeout())
        self.result["time_to_ready_s"] = round(time.monotonic() - t0_mono, 3)
        st = await asyncio.to_thread(self.platform.state, name)
        self.result["restart_count_after"] = st.restart_count
        if st.restart_count > self.result.get("restart_count_before", st.restart_count):
            self.emit(EventKind.RESTARTED, restart_count=st.restart_count)
        self.emit(EventKind.READY, time_to_ready_s=self.result["time_to_ready_s"])
        if self.params.get("first_token", True):
            await self._measure_first_token(t0_mono)

    def _stayed_down(self, status: str, exit_code: int | None) -> None:
        """Called when the container stayed down past the ready timeout, before the harness
        starts it (a fault records its finding here); ``exit_code`` as Docker reports it."""

    async def _measure_first_token(self, t0_mono: float) -> None:
        """Time to the first content chunk after ready; never silently absent.

        Retries until the ready timeout. ``time_to_first_token_s`` counts from the same t0 as
        ``time_to_ready_s``; ``ready_not_serving_s`` is the gap between the two. If no token
        arrives, ``first_token_finding`` says why (the last failure) and ``first_token`` is
        emitted with ``served=False`` — a finding of the run, not a missing figure.
        """
        probe = await probe_first_token(self.node, deadline_s=self._ready_timeout())
        self.result["first_token_attempts"] = [
            {"t": a.t, "elapsed_s": a.elapsed_s, "http_status": a.http_status,
             "error_class": a.error_class, "detail": a.detail}
            for a in probe.attempts
        ]
        if probe.t_first_token is None:
            self.result["time_to_first_token_s"] = None
            self.result["first_token_finding"] = probe.finding
            self.emit(EventKind.FIRST_TOKEN, served=False, finding=probe.finding,
                      attempts=len(probe.attempts))
            return
        elapsed = time.monotonic() - t0_mono - (time.time() - probe.t_first_token)
        self.result["time_to_first_token_s"] = round(elapsed, 3)
        self.result["ready_not_serving_s"] = round(
            max(0.0, elapsed - self.result["time_to_ready_s"]), 3
        )
        self.emit(EventKind.FIRST_TOKEN, served=True,
                  time_to_first_token_s=self.result["time_to_first_token_s"],
                  ready_not_serving_s=self.result["ready_not_serving_s"],
                  failed_attempts=len(probe.attempts))

    async def _prepare(self) -> list[dict[str, Any]]:
        st = await asyncio.to_thread(self.platform.state, self.container)
        self.result["restart_count_before"] = st.restart_count
        return [self.step("start")]


class Kill(_ReadyMixin):
    """SIGKILL the container's main process (a crash), or ``docker kill`` (a manual stop)."""

    kind: ClassVar[str] = "kill"
    revert_runs_undo: ClassVar[bool] = False  # wait for the restart policy first
    effect_docker_actions: ClassVar[tuple[str, ...]] = ("die",)
    effect_required: ClassVar[str] = "docker"
    PARAMS: ClassVar[ParamSpec] = {
        "docker_kill": (bool, False),
        "ready_timeout_s": READY_TIMEOUT,
        "first_token": (bool, True),
    }

    def what(self) -> str:
        if self.params["docker_kill"]:
            return "`docker kill` (manual stop: Docker will NOT restart it; revert starts it)"
        return "SIGKILL of the main process from the host (crash: the restart policy acts)"

    async def _prepare(self) -> list[dict[str, Any]]:
        steps = await super()._prepare()
        if not self.params["docker_kill"]:  # refused here, before the journal, if unproven
            await asyncio.to_thread(self.platform.processes, self.container, self.id)
        return steps

    async def _apply(self) -> None:
        self.mode = "docker_kill" if self.params["docker_kill"] else "sigkill"
        self._t0 = time.monotonic()
        if self.params["docker_kill"]:
            pid_before = await asyncio.to_thread(self.platform.host_pid, self.container)
            self.acting("docker kill")
            await self.act(self.platform.docker_kill, self.container)
        else:
            pid_before, _ = await asyncio.to_thread(self.platform.processes, self.container,
                                                    self.id)
            self.result["killed_pid"] = pid_before
            how = " (from a helper container there)" if self.platform.uses_helpers else ""
            self.acting(f"SIGKILL to pid {pid_before} on the node's host{how}")
            if not await self.act(self.platform.signal_processes, self.container,
                                  [pid_before], signal.SIGKILL, self.id):
                self.effect_missing(f"pid {pid_before} had exited before the SIGKILL: the "
                                    "container went down by itself, not by this fault")
                return
        # the fault is in effect once the container has gone down (it may be back already)
        before = self.result["restart_count_before"]
        async for attempt in AsyncRetrying(stop=stop_after_delay(10), wait=wait_fixed(0.05),
                                           retry=retry_if_result(lambda down: not down),
                                           retry_error_callback=lambda _: False):
            with attempt:
                st = await asyncio.to_thread(self.platform.state, self.container)
                down = not st.running or st.restart_count > before or st.pid != pid_before
            attempt.retry_state.set_result(down)
        self.result["exit_code"] = st.exit_code
        if st.running:  # already restarted: Docker has reset ExitCode, its die event has it
            died = await asyncio.to_thread(self.platform.last_exit_code, self.container,
                                           time.time() - 15)
            if died is not None:
                self.result["exit_code"] = died

    async def _after_undo(self) -> None:
        if self.params["docker_kill"]:  # Docker will not restart it: start it now
            await asyncio.to_thread(self.platform.start, self.container)
        await self._wait_back(self._t0)


class Stop(_ReadyMixin):
    """``docker stop`` (graceful: SIGTERM, then SIGKILL after ``stop_timeout_s``); revert starts it.

    The cold-start path: ``result`` has ``time_to_ready_s`` and ``time_to_first_token_s``
    measured from the start at revert.
    """

    kind: ClassVar[str] = "stop"
    spans_outage: ClassVar[bool] = True
    effect_docker_actions: ClassVar[tuple[str, ...]] = ("die",)
    effect_required: ClassVar[str] = "docker"
    PARAMS: ClassVar[ParamSpec] = {
        "stop_timeout_s": STOP_TIMEOUT,
        "ready_timeout_s": READY_TIMEOUT,
        "first_token": (bool, True),
    }

    def what(self) -> str:
        return "docker stop; revert starts it and measures the cold start"

    async def _apply(self) -> None:
        timeout = self.params["stop_timeout_s"]
        self.acting("docker stop")
        await self.act(self.platform.stop, self.container, timeout_s=timeout)

    async def _after_undo(self) -> None:
        # measured from the start of the revert, i.e. the `docker start` of the undo step
        await self._wait_back(self.t_revert_mono)


class Restart(_ReadyMixin):
    """``docker restart``; the injection lasts until the node is ready again (cold start)."""

    kind: ClassVar[str] = "restart"
    spans_outage: ClassVar[bool] = True
    effect_docker_actions: ClassVar[tuple[str, ...]] = ("die",)
    effect_required: ClassVar[str] = "docker"
    PARAMS: ClassVar[ParamSpec] = {
        "stop_timeout_s": STOP_TIMEOUT,
        "ready_timeout_s": READY_TIMEOUT,
        "first_token": (bool, True),
    }

    def what(self) -> str:
        return "docker restart; records time to ready and to first token"

    async def _apply(self) -> None:
        self._t0 = time.monotonic()
        self.acting("docker restart")
        await self.act(self.platform.restart, self.container,
                       timeout_s=self.params["stop_timeout_s"])

    async def _after_undo(self) -> None:
        if "time_to_ready_s" not in self.result:
            await self._wait_back(self._t0)


class Pause(Fault):
    """``docker pause``: the engine freezes with its port open (requests and scrapes hang)."""

    kind: ClassVar[str] = "pause"
    effect_docker_actions: ClassVar[tuple[str, ...]] = ("pause",)
    effect_required: ClassVar[str] = "docker"

    def what(self) -> str:
        return "docker pause (port stays open, nothing answers); revert unpauses"

    async def _prepare(self) -> list[dict[str, Any]]:
        return [self.step("unpause")]

    async def _apply(self) -> None:
        self.acting("docker pause")
        try:
            await self.act(self.platform.pause, self.container)
        except DockerError as exc:
            if not _FREEZE_FAILED.search(str(exc)):
                raise
            # the operator chooses another way to hang the engine: never a silent switch
            raise FaultUnsupported(
                f"{exc} — this host's cgroup freezer cannot freeze the container, so `pause` "
                "cannot hang this node; choose another way to hang its engine in the "
                "inventory (e.g. SIGSTOP of the engine's processes): faultkit never switches "
                "by itself"
            ) from exc


class NodeRestart(Fault):
    """The node's Docker host "reboots": its inference containers restart at once.

    By default only the running containers of *inventory nodes* on the node's Docker host
    restart (this node and its neighbours there; without an inventory, this node alone):
    anything else on the host (Prometheus, another team's service) is a bystander and is
    left running (``result["not_restarted"]`` lists it). ``all_containers=true`` restarts
    every running container on the host, as a real reboot would. ``label`` (e.g.
    ``faultkit.owner=tests``) narrows either set to containers carrying that label.
    ``stop_timeout_s=0`` (default) kills them like a power cut. Refused when another
    inventory node on the same Docker host is protected or does not allow ``node_restart``.
    """

    kind: ClassVar[str] = "node_restart"
    spans_outage: ClassVar[bool] = True
    effect_docker_actions: ClassVar[tuple[str, ...]] = ("die",)
    effect_required: ClassVar[str] = "docker"
    PARAMS: ClassVar[ParamSpec] = {
        "label": Param(str, None, check=lambda v: bool(_LABEL.fullmatch(v)),
                       hint="a Docker label filter: KEY or KEY=VALUE, no spaces"),
        "stop_timeout_s": Param(int, 0, ge=0, le=600, unit="s"),
        "ready_timeout_s": READY_TIMEOUT,
        "all_containers": (bool, False),
    }

    @classmethod
    def check_blast_radius(
        cls, node: Node, inventory: Inventory | None, params: Mapping[str, Any]
    ) -> None:
        if inventory is None or node.docker is None:
            return
        for other in inventory.nodes:
            if other.name == node.name or other.docker is None:
                continue
            if other.docker.host == node.docker.host and not other.allows(cls.kind):
                raise FaultRefused(
                    f"refused: node_restart on {node.name!r} would also restart node "
                    f"{other.name!r} (same Docker host {node.docker.host}), which is protected "
                    "or does not allow node_restart. Nothing was done."
                )

    def _host_nodes(self) -> list[Node]:
        """This node and every other inventory node on the same Docker host."""
        if self.inventory is None or self.node.docker is None:
            return [self.node]
        host = self.node.docker.host
        return [self.node, *(n for n in self.inventory.nodes if n.name != self.node.name
                             and n.docker is not None and n.docker.host == host)]

    def node_locks(self) -> list[NodeLock]:
        """Every inventory node on the Docker host: all of them go down."""
        return [NodeLock(n) for n in self._host_nodes()]

    def what(self) -> str:
        label = self.params["label"]
        if self.params["all_containers"]:
            scope = "ALL containers"
        else:
            nodes = ", ".join(n.name for n in self._host_nodes())
            scope = f"the inventory nodes' containers ({nodes})"
        scope += f" labelled {label}" if label else ""
        return f"restart {scope} on {self.node.docker.host if self.node.docker else '?'}"

    async def _prepare(self) -> list[dict[str, Any]]:
        running = await asyncio.to_thread(self.platform.running_names, self.params["label"])
        if self.params["all_containers"]:
            names = running
        else:
            ours = {n.docker.container for n in self._host_nodes() if n.docker is not None}
            names = [name for name in running if name in ours]
            self.result["not_restarted"] = sorted(set(running) - ours)
        self.result["containers"] = names
        # undo: make sure each one runs again (restart already brings them back)
        return [self.step("start", container=name) for name in names]

    async def _apply(self) -> None:
        timeout = self.params["stop_timeout_s"]
        self.acting(f"docker restart of {len(self.result['containers'])} containers")
        await asyncio.gather(*(
            self.act(self.platform.restart, name, timeout_s=timeout)
            for name in self.result["containers"]
        ))

    async def _after_undo(self) -> None:
        timeout = float(self.params["ready_timeout_s"] or 120.0)
        nodes = [self.node]
        if self.inventory is not None:
            restarted = set(self.result.get("containers", []))
            nodes = [
                n for n in self.inventory.nodes if n.docker and n.docker.container in restarted
            ]
        await asyncio.gather(*(wait_ready(n, timeout_s=timeout) for n in nodes))
