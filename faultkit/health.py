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
