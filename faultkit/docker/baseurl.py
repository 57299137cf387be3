"""Is a node's ``base_url`` served by its ``docker.container``? A pure check on ``docker inspect``.

A fault acts on the container; the load, the probes and the measurement go to the
``base_url``. When the two are different processes, the fault hits one and the run
measures the other, and passes. :func:`check_base_url` decides from the inventory node
and its container's ``docker inspect`` attributes alone (no Docker call, no network):

- **served** when the base_url's host is loopback (``127.0.0.1``, ``localhost``, ``::1``)
  and the container publishes that port on that address or on every address
  (``HostConfig.PortBindings`` / ``NetworkSettings.Ports``, host IP ``127.0.0.1``,
  ``0.0.0.0`` or empty; ``::1``/``::`` for IPv6) — on a remote engine (``tcp://``,
  ``ssh://``) the host must instead be the engine's own host name (loopback too when the
  engine's URL is loopback, as the testbed's second host is), published on every address
  or on that address; or when the host is the container's own IP on one of its
  networks and the port is one it exposes or publishes;
- **not served** when the container demonstrably does not publish (or expose) that port;
- **unproven** when nothing here can tell: the container runs with ``--network host`` or
  in another container's network namespace (any process of that namespace may hold the
  port), the host is a name or an address that is neither loopback nor the container's
  (a Docker DNS alias, a gateway, a LAN address), or a loopback base_url reaches a remote
  engine (a tunnel, or another process).

Only *served* lets a fault that acts on the container run (:mod:`faultkit.faults.admission`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from faultkit.inventory import Node

__all__ = ["BaseUrlCheck", "Outcome", "check_base_url"]

Outcome = Literal["served", "not_served", "unproven"]

_FIX = "fix the inventory's base_url or docker.container"
_ALL_V4 = frozenset({"", "0.0.0.0"})
_ALL_V6 = frozenset({"", "::"})


@dataclass(frozen=True, slots=True)
class BaseUrlCheck:
    """The outcome of :func:`check_base_url` and why, in one line (what to fix, if anything)."""

    outcome: Outcome
    reason: str

    @property
    def proven(self) -> bool:
        """True only when the container is shown to serve the base_url."""
        return self.outcome == "served"


@dataclass(frozen=True, slots=True)
class _Binding:
    """One published port: host address (``""`` = every address), host ports, container port."""

    host_ip: str
    first: int
    last: int
    target: str  # "8000/tcp"

    def covers(self, port: int) -> bool:
        return self.first <= port <= self.last

    def __str__(self) -> str:
        ip = self.host_ip or "*"
        ip = f"[{ip}]" if ":" in ip else ip
        ports = str(self.first) if self.first == self.last else f"{self.first}-{self.last}"
        return f"{ip}:{ports} → {self.target}"


def check_base_url(node: Node, attrs: Mapping[str, Any]) -> BaseUrlCheck:
    """Whether ``node.base_url`` reaches ``node.docker.container``, from its inspect ``attrs``."""
    container = node.docker.container if node.docker is not None else "?"
    where = f"node {node.name}: base_url {node.base_url}"
    if node.docker is None:
        return BaseUrlCheck("unproven", f"{where}: the node has no docker: entry to check")
    url = urlsplit(node.base_url)
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError:
        return BaseUrlCheck("unproven", f"{where}: its port is not a number; {_FIX}")
    host = (url.hostname or "").lower()
    config: Mapping[str, Any] = attrs.get("Config") or {}
    host_config: Mapping[str, Any] = attrs.get("HostConfig") or {}
    settings: Mapping[str, Any] = attrs.get("NetworkSettings") or {}
    mode = str(host_config.get("NetworkMode") or "")
    if mode == "host" or mode.startswith("container:"):
        netns = ("the host's (--network host)" if mode == "host"
                 else f"container {mode.partition(':')[2]}'s (--network {mode})")
        return BaseUrlCheck("unproven", (
            f"{where}: container {container} shares {netns} network namespace, so any "
            f"process in it may hold port {port} and faultkit cannot prove the fault and the "
            f"load reach the same process; run {container} on a bridge network with its "
            f"port published (-p 127.0.0.1:{port}:<engine port>)"))
    bindings = _bindings(host_config, settings)
    published = ", ".join(str(b) for b in bindings) or "no port"
    engine_host = urlsplit(node.docker.host).hostname if node.docker.host.startswith(
        ("tcp://", "ssh://")) else None
    if _is_loopback(host):
        # an engine reached at this machine's loopback (the testbed's second host, a local
        # tunnel) publishes its ports there too: the engine-host rule below decides
        if engine_host is not None and not _is_loopback(engine_host):
            return BaseUrlCheck("unproven", (
                f"{where} is this machine's loopback, but container {container} runs on "
                f"{node.docker.host} (a tunnel or another process may answer here); use "
                f"http://{engine_host}:<published port> (it publishes {published})"))
        return _published_match(where, container, host, port, bindings, published)
    if engine_host is not None and host == engine_host.lower():
        return _published_match(where, container, host, port, bindings, published)
    ips = _container_ips(settings)
    if _same_ip(host, ips):
        exposed = _exposed(config, host_config, settings)
        if f"{port}/tcp" in exposed:
            return BaseUrlCheck("served", (
                f"{where} is container {container}'s own IP and port {port}/tcp, which it "
                "exposes"))
        return BaseUrlCheck(
            "not_served" if exposed else "unproven",
            f"{where} is container {container}'s IP, but it does not expose port {port}/tcp "
            f"(exposes: {', '.join(sorted(exposed)) or 'nothing'}); {_FIX}")
    running = (attrs.get("State") or {}).get("Running")
    known = ", ".join(ips) or ("none: it is not running" if running is False else "none")
    return BaseUrlCheck("unproven", (
        f"{where}: host {host or '?'} is neither loopback nor one of container {container}'s "
        f"IPs ({known}), so faultkit cannot prove the fault and the load reach the same "
        f"process; use http://127.0.0.1:<published port> (it publishes {published}), or "
        f"{_FIX}"))


def _published_match(where: str, container: str, host: str, port: int,
                     bindings: Iterable[_Binding], published: str) -> BaseUrlCheck:
    """Served when a binding publishes ``port`` on an address that ``host`` reaches."""
    for binding in bindings:
        if binding.covers(port) and binding.host_ip in _addresses_for(host):
            return BaseUrlCheck("served", (
                f"{where} is served by container {container} (published {binding})"))
    return BaseUrlCheck("not_served", (
        f"{where} is not served by container {container} (it publishes {published}); {_FIX}"))


def _addresses_for(host: str) -> frozenset[str]:
    """The binding host IPs a connection to ``host`` can arrive on."""
    if host == "localhost":
        return _ALL_V4 | _ALL_V6 | {"127.0.0.1", "::1"}
    try:
        address = ipaddress.ip_address(host)
    except ValueError:  # a host name (a remote engine's): only a binding on every address
        return _ALL_V4 | _ALL_V6
    if address.version == 6:
        return _ALL_V6 | {str(address)}
    return _ALL_V4 | {str(address)}


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _same_ip(host: str, ips: Iterable[str]) -> bool:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return any(ipaddress.ip_address(ip) == address for ip in ips)


def _bindings(host_config: Mapping[str, Any], settings: Mapping[str, Any]) -> list[_Binding]:
    """Every TCP port published, from the config and (when running) the live settings."""
    found: dict[tuple[str, int, int, str], _Binding] = {}
    for source in (host_config.get("PortBindings"), settings.get("Ports")):
        for key, entries in (source or {}).items():
            target = key if "/" in key else f"{key}/tcp"
            if not target.endswith("/tcp"):
                continue
            for entry in entries or []:
                span = _port_span(str(entry.get("HostPort") or ""))
                if span is None:  # "" : a port Docker picks at start (read when running)
                    continue
                binding = _Binding(str(entry.get("HostIp") or ""), *span, target)
                found[(binding.host_ip, binding.first, binding.last, target)] = binding
    return list(found.values())


def _port_span(text: str) -> tuple[int, int] | None:
    first, _, last = text.partition("-")
    try:
        return int(first), int(last or first)
    except ValueError:
        return None


def _container_ips(settings: Mapping[str, Any]) -> list[str]:
    """The container's addresses on its networks (empty while it is not running)."""
    ips = [str(settings.get("IPAddress") or ""), str(settings.get("GlobalIPv6Address") or "")]
    for endpoint in (settings.get("Networks") or {}).values():
        ips += [str((endpoint or {}).get("IPAddress") or ""),
                str((endpoint or {}).get("GlobalIPv6Address") or "")]
    valid = []
    for ip in dict.fromkeys(ips):
        try:
            valid.append(str(ipaddress.ip_address(ip)))
        except ValueError:
            continue
    return valid


def _exposed(config: Mapping[str, Any], host_config: Mapping[str, Any],
             settings: Mapping[str, Any]) -> set[str]:
    """The ports the container exposes or publishes, as ``"8000/tcp"``."""
    keys: set[str] = set()
    for source in (config.get("ExposedPorts"), host_config.get("PortBindings"),
                   settings.get("Ports")):
        keys.update(k if "/" in k else f"{k}/tcp" for k in (source or {}))
    return keys
