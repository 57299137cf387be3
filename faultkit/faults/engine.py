"""``kill_process``: the engine dies *inside* its container, and nothing but the node's own
supervision may bring it back.

``kill`` ends the container's main process; real engines die otherwise: vLLM's engine core
(a child process) is OOM-killed or crashes and the API server above it exits — with status
0 in some versions, which an ``on-failure`` restart policy never restarts — or stays up
answering errors. ``kill_process match=REGEX`` sends ``signal`` (default SIGKILL) to every
process of the container whose command line matches (``re.search``) — but not the
container's main process (its init) when another process matches — from the host's PID
namespace of the node's host, each PID proven to be the container's and signalled through a
pidfd (:mod:`faultkit.platform`: by the harness for a local engine, by a helper container
with the host's PID namespace on any other). Then revert waits for the node to serve again
by itself (``ready_timeout_s``); if it
does not, and the container has stopped, the harness starts it — an intervention: the
node did not recover, the harness repaired it, and the run says so.

``t_effect`` is when the signalled processes were gone from the host's process table
(polled every 10 ms). Revert first waits until the node *shows* the death (health failing,
the container stopped or restarting: ``death_showed_s``), then for it to serve again.

``result``: ``matched`` (each killed process: pid and command line), ``restart_policy``
(the container's *effective* policy, from ``docker inspect``), ``container_died`` and
``exit_code`` (when the container went down), ``restart_count_before``/``_after``,
``time_to_ready_s``, ``time_to_first_token_s`` (as for ``kill``), and
``never_restarted`` — a finding in words when the container exited and its policy did not
bring it back (exit 0 under ``on-failure``, or policy ``no``).

Refused before anything is done when no process matches (the message lists the
container's processes), or when the container is not running.
"""

from __future__ import annotations

import asyncio
import re
import signal
import time
from typing import Any, ClassVar

import httpx

from faultkit.errors import FaultParamError, FaultRefused
from faultkit.faults.params import Param, ParamSpec
from faultkit.faults.process import READY_TIMEOUT, _ReadyMixin
from faultkit.probes.health import probe

#: signals that end an engine the ways engines end
SIGNALS = ("SIGKILL", "SIGTERM", "SIGSEGV", "SIGABRT")
#: how long the signalled processes may take to exit (a SIGTERM handler flushing)
GONE_WITHIN_S = 10.0
#: how long the node may keep looking alive after its engine died
DEATH_SHOWS_S = 30.0


class KillProcess(_ReadyMixin):
    """Kill the container's processes whose command line matches ``match``."""

    kind: ClassVar[str] = "kill_process"
    revert_runs_undo: ClassVar[bool] = False  # wait for the node's own supervision first
    effect_required: ClassVar[str] = "mechanism"  # the signalled processes exited
    PARAMS: ClassVar[ParamSpec] = {
        "match": (str, None),
        "signal": Param(str, "SIGKILL", choices=SIGNALS),
        "ready_timeout_s": READY_TIMEOUT,
        "first_token": (bool, True),
    }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        pattern = self.params["match"]
        if not pattern:
            raise FaultParamError(
                "kill_process match: must be given as match=REGEX, searched in each process's "
                "command line (e.g. match=EngineCore, match=llama-server)",
                param="match", allowed="a regular expression")
        try:
            self.pattern = re.compile(pattern)
        except re.error as exc:
            raise FaultParamError(f"kill_process match: {pattern!r} is not a regular "
                                  f"expression ({exc})", param="match",
                                  allowed="a regular expression") from None

    def what(self) -> str:
        return (f"{self.params['signal']} to the container's processes matching "
                f"/{self.params['match']}/ (the engine dies inside; its supervision must bring "
                "it back)")

    def _matching(self) -> tuple[str, list[tuple[int, str]], list[tuple[int, str]]]:
        """The container's id, its processes, and those to signal: the ones whose command
        line matches, but not the container's main process when another one matches (an
        init such as docker-init carries its child's command line in its own; the engine
        dying under it is this fault, the init dying is ``kill``)."""
        attrs = self.platform.inspect(self.container)
        container_id = str(attrs.get("Id") or "")
        policy = ((attrs.get("HostConfig") or {}).get("RestartPolicy") or {})
        self.result["restart_policy"] = policy.get("Name") or "no"
        # running, and its PIDs are the node's host's (proven by cgroup, there)
        main, processes = self.platform.processes(self.container, self.id)
        matched = [p for p in processes if self.pattern.search(p[1])]
        below_main = [p for p in matched if p[0] != main]
        return container_id, processes, below_main or matched

    async def _prepare(self) -> list[dict[str, Any]]:
        steps = await super()._prepare()
        _, processes, matched = await asyncio.to_thread(self._matching)
        if not matched:
            listing = "; ".join(f"{pid} {cmd[:80]}" for pid, cmd in processes) or "none"
            raise FaultRefused(
                f"refused: kill_process on {self.node.name!r}: no process of container "
                f"{self.container!r} matches /{self.params['match']}/ (its processes: "
                f"{listing}). Nothing was done.")
        return steps

    async def _apply(self) -> None:
        self._t0 = time.monotonic()
        _, _, matched = await asyncio.to_thread(self._matching)
        sig = signal.Signals[self.params["signal"]]
        self.result["matched"] = [{"pid": pid, "cmdline": cmd[:200]} for pid, cmd in matched]
        self.acting(f"{sig.name} to {len(matched)} process(es) matching "
                    f"/{self.params['match']}/: {', '.join(str(p) for p, _ in matched)}")
        signalled = await self.act(self.platform.signal_processes, self.container,
                                   [pid for pid, _ in matched], sig, self.id)
        self.result["exited_before_signal"] = [pid for pid, _ in matched
                                               if pid not in signalled]
        if not signalled:
            self.effect_missing(f"every process matching /{self.params['match']}/ had exited "
                                f"before its {sig.name}: this fault did not end them")
            return
        # the engine is dead when the processes signalled are gone (a SIGTERM may be handled)
        gone = await asyncio.to_thread(self.platform.wait_gone, signalled, GONE_WITHIN_S,
                                       self.id)
        if gone:
            self.effect_in_place(f"{len(matched)} process(es) matching /{self.params['match']}/ "
                                 "exited")
        else:
            self.effect_missing(f"the process(es) signalled with {sig.name} were still running "
                                f"{GONE_WITHIN_S:g} s later")

    async def _after_undo(self) -> None:
        await self._wait_for_the_death_to_show()
        await self._wait_back(self._t0)
        before = self.result.get("restart_count_before", 0)
        after = self.result.get("restart_count_after", before)
        self.result["container_died"] = after > before or "never_restarted" in self.result

    async def _wait_for_the_death_to_show(self) -> None:
        """Until the node shows the engine's death — its health fails, or its container
        stops or restarts — so that "ready again" is not read before the death (vLLM's API
        server answers /health for a moment after its engine core died). Bounded by
        :data:`DEATH_SHOWS_S`; ``result["death_showed_s"]`` is when, None if never."""
        before = self.result.get("restart_count_before", 0)
        deadline = time.monotonic() + DEATH_SHOWS_S
        async with httpx.AsyncClient() as client:
            while time.monotonic() < deadline:
                st = await asyncio.to_thread(self.platform.state, self.container)
                down = not st.running or st.restarting or st.restart_count > before
                if down or not (await probe(self.node, client, timeout_s=1.0)).ok:
                    self.result["death_showed_s"] = round(time.monotonic() - self._t0, 3)
                    return
                await asyncio.sleep(0.1)
        self.result["death_showed_s"] = None

    def _stayed_down(self, status: str, exit_code: int | None) -> None:
        """The container stopped and its restart policy left it so: the finding, in words."""
        policy = self.result.get("restart_policy", "no")
        self.result["exit_code"] = exit_code
        clean_exit = " (on-failure never restarts an exit 0)" if (
            policy == "on-failure" and exit_code == 0) else ""
        self.result["never_restarted"] = (
            f"the container exited {exit_code} ({status}) and its restart policy "
            f"'{policy}' did not bring it back{clean_exit}")
