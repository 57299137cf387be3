"""Network faults on a node's container: loss, bandwidth, latency, and their shared base
:class:`NetnsFault` (partition, which uses it too, is :mod:`faultkit.faults.partition`).

Mechanisms (``result["mode"]`` and the events' ``mode`` say which one ran):

- ``loss percent=P``: ``tc netem loss`` where the kernel has ``sch_netem``; otherwise
  (mode ``iptables``) ``-m statistic --mode random --probability P/100 -j DROP`` on the
  container's INPUT (as Pumba's iptables mode does).
- ``bandwidth rate=1mbit``: ``tc tbf`` as the root qdisc (handle fa17:) of every interface.
- ``latency delay_ms=D jitter_ms=J``: ``tc netem delay`` where available (mode ``netem``);
  otherwise (mode ``proxy``) a harness-run :class:`~faultkit.proxy.DelayProxy` plus an
  iptables ``nat OUTPUT`` REDIRECT of the node's published loopback port to the proxy,
  which forwards to the container's bridge IP and port (so its own upstream connection is
  never redirected); for a node on another Docker host, to the published port itself, its
  connections carrying the socket mark :data:`PROXY_MARK`, which the REDIRECT skips. That
  mode acts on this machine's loopback only: it delays this machine's clients of the node
  (the harness, a local Prometheus), never the node's other clients. Only *new*
  connections take the redirect; keep-alive connections opened before the injection keep the
  direct path. The delay is one-way, on the node's
  answers, as netem on the container's egress would be. The revert first turns the proxy
  into a pass-through (no connection is delayed after ``revert_start``), then removes the
  REDIRECT; ``revert_end`` does not wait for the proxy's lingering keep-alive connections
  to drain (that happens after it, bounded at 10 s).

Every rule carries ``-m comment --comment faultkit:<fault-id>``; every qdisc handle fa17:.
Needs root on this machine for a local Docker host.

Blast radius, checked before anything is journaled or touched (:class:`FaultRefused`):

- every network fault refuses a container that has no network namespace of its own
  (``HostConfig.NetworkMode`` ``host``, or ``container:<other>``): ``nsenter`` would reach
  the host's own namespace, or another container's;
- the faults that enter the netns (``partition mode=blackhole``, ``loss``, ``bandwidth``,
  ``latency``) act on the node's own host (:mod:`faultkit.platform`): for a ``unix://``
  engine through ``nsenter`` into a PID that ``/proc/<pid>/cgroup`` proves to be the
  container's (:mod:`faultkit.docker.hostpid`), for any other from a helper container there,
  joined to the container's namespace. ``partition mode=refuse`` works through the Docker
  API alone.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar
from urllib.parse import urlsplit

from faultkit.errors import FaultError, FaultRefused, FaultUnsupported
from faultkit.faults.base import Fault
from faultkit.faults.params import Param, ParamSpec
from faultkit.platform import Netns, netns
from faultkit.proxy import DelayProxy

#: tc rates (``1mbit``, ``500kbit``, ``10mbps``) and sizes (``32kbit``, ``64kb``, ``1500``),
#: as ``tc`` parses them; the number must be above 0.
_TC_RATE = re.compile(r"(?i)(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps)")
_TC_SIZE = re.compile(r"(?i)(\d+(?:\.\d+)?)(b|k|kb|m|mb|g|gb|kbit|mbit|gbit)?")
#: the socket mark of the delay proxy's upstream connections (a remote node's published
#: port): the REDIRECT of that port skips packets carrying it
PROXY_MARK = 0xFA17
#: one way of added delay or jitter: up to a minute
_DELAY_MAX_MS = 60_000


def _positive(pattern: re.Pattern[str]) -> Callable[[str], bool]:
    """A check: the whole value matches ``pattern`` and its number is above 0."""

    def check(value: str) -> bool:
        match = pattern.fullmatch(value)
        return match is not None and float(match.group(1)) > 0

    return check


class NetnsFault(Fault):
    """The network faults' base (partition's too): the blast-radius checks, the container's
    PID (its netns), netem."""

    @classmethod
    def enters_netns(cls, params: Mapping[str, Any]) -> bool:
        """Whether the fault acts inside the container's netns (``nsenter -t PID``)."""
        return True

    async def _check_target(self) -> None:
        """Refuse a container without a netns of its own; prove its PID if it will be used.

        Read-only; called first in ``_prepare``, so a refusal touches nothing.
        """
        attrs = await asyncio.to_thread(self.platform.inspect, self.container)
        mode = str((attrs.get("HostConfig") or {}).get("NetworkMode") or "")
        if mode == "host" or mode.startswith("container:"):
            shared = "the host's own" if mode == "host" else f"container {mode[10:]!r}'s"
            raise FaultRefused(
                f"refused: {self.kind} on {self.node.name!r}: container {self.container!r} "
                f"runs with network mode {mode!r}, so its network namespace is {shared} and "
                f"the fault would hit that too. Give the node a network of its own (a bridge "
                f"network) to run network faults on it. Nothing was done."
            )
        if self.enters_netns(self.params):
            await asyncio.to_thread(self.platform.netns, self.container, self.id)

    async def _pid(self) -> Netns:
        """Where to run iptables/tc in the container's netns (a host PID proven again just
        before it is used, or a helper container on the node's host)."""
        return await asyncio.to_thread(self.platform.netns, self.container, self.id)

    async def _netem(self, pid: Netns) -> bool:
        ok = await self.act(netns.netem_available, pid)  # probes with a qdisc
        self.result["netem_available"] = ok
        return ok

    def _purge_step(self, table: str = "filter", *, host: bool = False) -> dict[str, Any]:
        step = self.step("iptables_purge", table=table, comment=netns.comment_for(self.id))
        if host:
            step["container"] = None
        return step


class Loss(NetnsFault):
    kind: ClassVar[str] = "loss"
    PARAMS: ClassVar[ParamSpec] = {
        "percent": Param(float, 30.0, gt=0, le=100, unit="%"),
        "mode": Param(str, "auto", choices=("auto", "netem", "iptables")),
    }
    effect_required: ClassVar[str] = "mechanism"

    def what(self) -> str:
        return f"drop {self.params['percent']}% of packets reaching the container"

    async def _prepare(self) -> list[dict[str, Any]]:
        await self._check_target()
        if not 0 < self.params["percent"] <= 100:
            raise FaultError(f"loss percent={self.params['percent']}: must be in (0, 100]")
        return [self._purge_step(), self.step("qdisc_delete")]

    async def _apply(self) -> None:
        pid = await self._pid()
        want = self.params["mode"]
        use_netem = want == "netem" or (want == "auto" and await self._netem(pid))
        self.mode = "netem" if use_netem else "iptables"
        self.result["mode"] = self.mode
        self.acting(f"drop {self.params['percent']}% of packets ({self.mode})")
        if use_netem:
            for dev in await asyncio.to_thread(netns.interfaces, pid):
                await self.act(
                    netns.add_root_qdisc, pid, dev, ["netem", "loss", f"{self.params['percent']}%"]
                )
            self.effect_in_place("netem loss qdisc on every interface")
            return
        probability = f"{self.params['percent'] / 100:.4f}"
        spec = ["!", "-i", "lo", "-m", "statistic", "--mode", "random",
                "--probability", probability, "-j", "DROP"]
        await self.act(netns.add_rule, pid, "filter", "INPUT", spec, self.id)
        self.effect_in_place(f"iptables statistic DROP p={probability} on INPUT")


class Bandwidth(NetnsFault):
    kind: ClassVar[str] = "bandwidth"
    PARAMS: ClassVar[ParamSpec] = {
        "rate": Param(str, "1mbit", check=_positive(_TC_RATE),
                      hint="a tc rate above 0, such as 1mbit, 500kbit or 10mbps"),
        "burst": Param(str, "32kbit", check=_positive(_TC_SIZE),
                       hint="a tc size above 0, such as 32kbit, 64kb or 1500"),
        "latency_ms": Param(int, 400, gt=0, le=_DELAY_MAX_MS, unit="ms"),
    }
    effect_required: ClassVar[str] = "mechanism"

    def what(self) -> str:
        return f"limit the container's egress to {self.params['rate']} (tc tbf)"

    async def _prepare(self) -> list[dict[str, Any]]:
        await self._check_target()
        self.mode = "tbf"
        return [self.step("qdisc_delete")]

    async def _apply(self) -> None:
        pid = await self._pid()
        p = self.params
        self.acting(f"tc tbf rate {p['rate']}")
        for dev in await asyncio.to_thread(netns.interfaces, pid):
            await self.act(netns.add_root_qdisc, pid, dev, [
                "tbf", "rate", p["rate"], "burst", p["burst"], "latency", f"{p['latency_ms']}ms",
            ])
        self.effect_in_place(f"tbf qdisc at {p['rate']} on every interface")


class Latency(NetnsFault):
    kind: ClassVar[str] = "latency"
    PARAMS: ClassVar[ParamSpec] = {
        "delay_ms": Param(float, 200.0, gt=0, le=_DELAY_MAX_MS, unit="ms"),
        "jitter_ms": Param(float, 0.0, ge=0, le=_DELAY_MAX_MS, unit="ms"),
        "mode": Param(str, "auto", choices=("auto", "netem", "proxy")),
    }
    effect_required: ClassVar[str] = "mechanism"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._proxy: DelayProxy | None = None

    def what(self) -> str:
        return (f"delay the node's answers by {self.params['delay_ms']} ms "
                f"± {self.params['jitter_ms']} ms (netem, or a delay proxy without it)")

    async def _prepare(self) -> list[dict[str, Any]]:
        await self._check_target()
        if self.params["mode"] not in ("auto", "netem", "proxy"):
            raise FaultError(f"latency mode={self.params['mode']!r}: use auto, netem or proxy")
        return [self.step("qdisc_delete"), self._purge_step("nat", host=True)]

    async def _apply(self) -> None:
        pid = await self._pid()
        want = self.params["mode"]
        use_netem = want == "netem" or (want == "auto" and await self._netem(pid))
        self.mode = "netem" if use_netem else "proxy"
        self.result["mode"] = self.mode
        if use_netem:
            delay = [f"{self.params['delay_ms']}ms"]
            if self.params["jitter_ms"]:
                delay.append(f"{self.params['jitter_ms']}ms")
            self.acting(f"netem delay {' '.join(delay)}")
            for dev in await asyncio.to_thread(netns.interfaces, pid):
                await self.act(netns.add_root_qdisc, pid, dev, ["netem", "delay", *delay])
            self.effect_in_place("netem delay qdisc on every interface")
            return
        await self._apply_proxy()

    async def _apply_proxy(self) -> None:
        url = urlsplit(self.node.base_url)
        if url.hostname not in ("127.0.0.1", "localhost") or url.port is None:
            raise FaultUnsupported(
                f"latency without netem needs the node on a 127.0.0.1 port; {self.node.base_url} "
                "is not (load sch_netem on the node's host to use mode=netem instead)"
            )
        # no qdisc in this mode: its undo step would only lengthen the revert (on a remote
        # host each of its commands is a helper container, ~1 s in all, while the node is
        # already undelayed), so it goes before anything is done
        await self.drop_undo("qdisc_delete")
        # a local engine: forward to the container's bridge IP, which the REDIRECT of the
        # published port does not catch. Any other: the published port itself (the node's
        # host is elsewhere; its bridge is not reachable from here), the proxy's own
        # connections marked so that the REDIRECT skips them.
        remote = self.platform.uses_helpers
        upstream = ("127.0.0.1", url.port) if remote else await asyncio.to_thread(
            self._upstream, url.port)
        self._proxy = DelayProxy(upstream, self.params["delay_ms"] / 1000,
                                 self.params["jitter_ms"] / 1000,
                                 mark=PROXY_MARK if remote else None)
        port = await self._proxy.start()
        self.result.update(proxy_port=port, upstream=f"{upstream[0]}:{upstream[1]}")
        skip = ["-m", "mark", "!", "--mark", hex(PROXY_MARK)] if remote else []
        spec = ["-d", "127.0.0.1/32", "-p", "tcp", "--dport", str(url.port), *skip,
                "-j", "REDIRECT", "--to-ports", str(port)]
        self.acting(f"redirect 127.0.0.1:{url.port} to the delay proxy on :{port}")
        await self.act(netns.add_rule, None, "nat", "OUTPUT", spec, self.id)
        self.effect_in_place(f"nat OUTPUT REDIRECT to the delay proxy :{port} in place")

    def _upstream(self, published: int) -> tuple[str, int]:
        """The container's bridge IP and the container port behind ``published``."""
        attrs = self.platform.inspect(self.container)
        container_port = None
        for key, bindings in (attrs.get("HostConfig", {}).get("PortBindings") or {}).items():
            if any(str(b.get("HostPort")) == str(published) for b in bindings or []):
                container_port = int(key.split("/")[0])
        networks = attrs.get("NetworkSettings", {}).get("Networks") or {}
        ips = [ep.get("IPAddress") for ep in networks.values() if ep.get("IPAddress")]
        if container_port is None or not ips:
            raise FaultUnsupported(
                f"cannot find the container port behind 127.0.0.1:{published} or the "
                f"container's IP for {self.container}; is the port published?"
            )
        return str(ips[0]), container_port

    async def _before_undo(self) -> None:
        # the delay ends for every connection when the revert starts, keep-alive ones
        # opened through the proxy included; the REDIRECT goes next (undo steps)
        if self._proxy is not None:
            self._proxy.pass_through()

    async def _after_undo(self) -> None:
        if self._proxy is not None:
            self._proxy.pass_through()  # an inject that failed half-way skips _before_undo
            self.result["proxied_connections"] = self._proxy.connections

    async def _after_revert_end(self) -> None:
        # a keep-alive connection opened through the proxy (a scraper's, a probe's) stays
        # open after the REDIRECT is gone, and stop() lets it drain for up to 10 s: that
        # wait is a pass-through, no longer the fault, so it comes after revert_end
        if self._proxy is not None:
            proxy, self._proxy = self._proxy, None
            await proxy.stop()
