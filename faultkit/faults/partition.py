"""The partition fault: the node's container cut off from its clients.

- ``mode=refuse``: disconnect the container from every Docker network; revert reconnects
  each with the same aliases and static IP. Clients going through the published port get
  their connection reset (docker-proxy cannot reach the engine). A cut watch
  (:mod:`faultkit.faults.cutwatch`) probes the node's endpoint while Docker acts and dates
  the cut by the last answer before it: Docker's own event comes at the end of its
  operation, 0.1–0.7 s after the cut. Works through the Docker API on any host.
- ``mode=blackhole``: iptables ``DROP`` of everything except loopback in the container's
  netns (``nsenter -t PID -n``): clients hang until they time out. Needs the node's own
  host: this machine through `nsenter` for a local engine, a helper container there for
  any other (:mod:`faultkit.platform`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, ClassVar

from faultkit.errors import FaultError
from faultkit.faults.cutwatch import CutSeen, CutWatch
from faultkit.faults.network import NetnsFault
from faultkit.faults.params import Param, ParamSpec
from faultkit.platform import netns

#: partition refuse: how long the cut watch may wait for the node's first answer before the
#: disconnect (none: the cut cannot be bracketed, Docker's event dates it), and for the cut
#: once Docker's call returned (the cut comes first; this bounds a node still answering)
_WATCH_ANSWER_S = 0.5
_WATCH_CUT_S = 1.0


class Partition(NetnsFault):
    kind: ClassVar[str] = "partition"
    PARAMS: ClassVar[ParamSpec] = {"mode": Param(str, "refuse", choices=("refuse", "blackhole"))}
    effect_required: ClassVar[str] = "mechanism"

    def effect_spec(self) -> dict[str, Any]:
        """``refuse``: the cut watch's observation dates the cut; failing that, Docker's own
        ``disconnect`` event (written when Docker's operation ends: 0.1 s after the cut
        idle, most of a second under load), and the call's confirmation stays the required
        evidence. ``blackhole``: the rules' confirmation."""
        spec = super().effect_spec()
        if self.params.get("mode") == "refuse":
            spec["docker_actions"] = ["network_disconnect"]
        return spec

    def what(self) -> str:
        if self.params["mode"] == "blackhole":
            return "drop every packet in the container's netns (clients time out)"
        return "disconnect the container from its networks (clients are refused/reset)"

    @classmethod
    def enters_netns(cls, params: Mapping[str, Any]) -> bool:
        return params.get("mode") == "blackhole"

    async def _prepare(self) -> list[dict[str, Any]]:
        await self._check_target()
        self.mode = self.params["mode"]
        if self.mode == "blackhole":
            return [self._purge_step()]
        if self.mode != "refuse":
            raise FaultError(f"partition mode={self.mode!r}: use refuse or blackhole")
        endpoints = await asyncio.to_thread(self.platform.endpoints, self.container)
        steps = []
        for network, ep in endpoints.items():
            ipam = ep.get("IPAMConfig") or {}
            steps.append(self.step(
                "connect", network=network,
                aliases=[a for a in (ep.get("Aliases") or []) if a],
                ipv4_address=ipam.get("IPv4Address") or None,
                links=list(ep.get("Links") or []),
            ))
        self.result["networks"] = list(endpoints)
        return steps

    async def _apply(self) -> None:
        if self.mode == "blackhole":
            pid = await self._pid()
            self.acting("iptables DROP in the container's netns")
            for chain, iface in (("INPUT", "-i"), ("OUTPUT", "-o")):
                await self.act(
                    netns.add_rule, pid, "filter", chain, ["!", iface, "lo", "-j", "DROP"], self.id
                )
            self.effect_in_place("DROP rules on INPUT and OUTPUT (all but lo) in the netns")
            self._blackhole_pid = pid
            return
        networks = ", ".join(self.result["networks"])
        cut = await self._disconnect_watched(networks)
        self.effect_in_place(f"disconnected from {networks}")
        if cut is not None:
            self.result["cut_bracket_s"] = round(cut.bracket_s, 6)
            self.effect_observed(cut.last_answer, cut.describe(), bracket_s=cut.bracket_s,
                                 failure=cut.failure)

    async def _disconnect_watched(self, networks: str) -> CutSeen | None:
        """Disconnect every network while a cut watch probes the node's endpoint; the cut it
        saw (None: it could not bracket one, or the endpoint is not plain ``http://``)."""
        try:
            watch = CutWatch(self.node.base_url, self.node.health_path)
        except ValueError:  # TLS: no watch, Docker's event dates the cut
            await self._disconnect(networks)
            return None
        watch.start()
        try:
            await asyncio.to_thread(watch.wait_answered, _WATCH_ANSWER_S)
            await self._disconnect(networks)
            await asyncio.to_thread(watch.wait_cut, _WATCH_CUT_S)
        finally:
            cut = await asyncio.to_thread(watch.stop)
        return cut

    async def _disconnect(self, networks: str) -> None:
        self.acting(f"disconnect from {networks}")
        for network in self.result["networks"]:
            await self.act(self.platform.disconnect, self.container, network)

    async def _before_undo(self) -> None:
        """A blackhole that dropped nothing cut nothing off: say so (the run is INCONCLUSIVE)."""
        pid = getattr(self, "_blackhole_pid", None)
        if pid is None:
            return
        dropped = await asyncio.to_thread(
            netns.matched_packets, pid, "filter", netns.comment_for(self.id)
        )
        self.result["dropped_packets"] = dropped
        if dropped == 0:
            self.effect_missing("the DROP rules matched no packet: nothing was cut off")
