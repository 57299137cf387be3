"""Readiness probes: one GET of a node's health endpoint, and waiting until it answers OK.

A probe never raises for a sick node: refused connections, timeouts and 5xx are results
(``ok=False`` with ``detail``), because "the node is down" is data, not an error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx
from tenacity import AsyncRetrying, RetryError, retry_if_result, stop_after_delay, wait_fixed

from faultkit.errors import NodeNotReady
from faultkit.inventory import Node


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """Outcome of one readiness probe at epoch time ``t`` (``latency_s`` is monotonic)."""

    t: float
    ok: bool
    status: int | None
    detail: str
    latency_s: float


def health_url(node: Node) -> str:
    return node.base_url + node.health_path


async def probe(node: Node, client: httpx.AsyncClient, *, timeout_s: float = 2.0) -> ProbeResult:
    """GET the node's health endpoint once; 2xx is ready, anything else is not."""
    t = time.time()
    start = time.monotonic()
    try:
        response = await client.get(health_url(node), timeout=timeout_s)
    except httpx.ConnectError as exc:
        detail = "refused" if "refused" in str(exc).lower() else f"connect error: {exc}"
        return ProbeResult(t, False, None, detail, time.monotonic() - start)
    except httpx.TimeoutException:
        return ProbeResult(t, False, None, "timeout", time.monotonic() - start)
    except httpx.HTTPError as exc:
        return ProbeResult(t, False, None, f"{type(exc).__name__}: {exc}", time.monotonic() - start)
    ok = 200 <= response.status_code < 300
    detail = "ok" if ok else f"HTTP {response.status_code} {response.text[:120]}"
    return ProbeResult(t, ok, response.status_code, detail, time.monotonic() - start)


async def wait_ready(
    node: Node,
    *,
    timeout_s: float = 120.0,
    interval_s: float = 0.25,
    client: httpx.AsyncClient | None = None,
) -> ProbeResult:
    """Poll until the node's health endpoint answers 2xx; raise NodeNotReady at the deadline."""
    own = client is None
    http = client or httpx.AsyncClient()
    last = ProbeResult(time.time(), False, None, "not probed yet", 0.0)
    try:
        async for attempt in AsyncRetrying(
            stop=stop_after_delay(timeout_s),
            wait=wait_fixed(interval_s),
            retry=retry_if_result(lambda result: not result.ok),
        ):
            with attempt:
                last = await probe(node, http)
            attempt.retry_state.set_result(last)
    except RetryError:
        raise NodeNotReady(node.name, health_url(node), timeout_s, last.detail) from None
    finally:
        if own:
            await http.aclose()
    return last


# ----------------------------------------------------------------------------- gateways

#: Gateway engines → the endpoint that tries every upstream through the gateway and names
#: the ones it could not reach. LiteLLM 1.108: ``GET /health`` sends one request to each
#: deployment and answers ``{"healthy_endpoints": [...], "unhealthy_endpoints": [...]}``,
#: each with its ``model_id`` (the lab's deployment id is the upstream node's name) and,
#: when unhealthy, its ``error`` (docs/gateway.md, "Health endpoints"). Its readiness
#: endpoint stays 200 with every upstream dead, so it cannot tell a config whose upstream
#: URL is wrong from a good one.
UPSTREAM_HEALTH_PATHS: dict[str, str] = {"litellm": "/health"}


@dataclass(frozen=True, slots=True)
class UpstreamHealth:
    """What a gateway said of its upstreams. ``checked``: the gateway answered the check
    (False: no such endpoint for its engine, or no usable answer; ``detail`` says why);
    ``healthy``: deployment ids it reached; ``unhealthy``: id → its error."""

    checked: bool
    healthy: tuple[str, ...] = ()
    unhealthy: tuple[tuple[str, str], ...] = ()
    detail: str = ""

    def to_json(self) -> dict[str, object]:
        return {"checked": self.checked, "healthy": list(self.healthy),
                "unhealthy": dict(self.unhealthy), "detail": self.detail}


def parse_upstream_health(body: object) -> UpstreamHealth:
    """LiteLLM's ``/health`` answer as :class:`UpstreamHealth` (unchecked when it is not
    that shape). A deployment is named by its ``model_id``, else its ``api_base``."""
    if not isinstance(body, dict) or not isinstance(body.get("unhealthy_endpoints"), list):
        return UpstreamHealth(False, detail=f"not an upstream health answer: {str(body)[:120]}")

    def name(entry: object) -> str:
        if not isinstance(entry, dict):
            return str(entry)[:80]
        return str(entry.get("model_id") or entry.get("api_base") or "?")

    healthy = tuple(name(e) for e in body.get("healthy_endpoints") or [])
    def error(entry: object) -> str:
        lines = str(entry.get("error") or "").splitlines() if isinstance(entry, dict) else []
        return lines[0][:200] if lines else ""

    unhealthy = tuple((name(e), error(e)) for e in body["unhealthy_endpoints"])
    return UpstreamHealth(True, healthy, unhealthy, "ok" if not unhealthy else "unhealthy")


async def upstream_health(
    node: Node, client: httpx.AsyncClient, *, timeout_s: float = 15.0
) -> UpstreamHealth:
    """Ask gateway ``node`` to try each of its upstreams (:data:`UPSTREAM_HEALTH_PATHS`);
    sends the node's API key when it has one. Never raises for the answer."""
    path = UPSTREAM_HEALTH_PATHS.get(node.engine)
    if node.kind != "gateway" or path is None:
        return UpstreamHealth(False, detail=f"no upstream health check for engine {node.engine}")
    key = node.api_key()
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        response = await client.get(node.base_url + path, headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return UpstreamHealth(False, detail=f"{type(exc).__name__}: {exc}"[:200])
    if response.status_code != 200:
        return UpstreamHealth(False, detail=f"HTTP {response.status_code} {response.text[:120]}")
    try:
        return parse_upstream_health(response.json())
    except ValueError:
        return UpstreamHealth(False, detail=f"not JSON: {response.text[:120]}")
