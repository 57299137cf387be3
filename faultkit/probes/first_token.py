"""The first-token probe: when does a node that says it is ready actually serve?

A readiness endpoint answering 200 does not mean the node answers a completion: vLLM's
``/health`` turns 200 before its first request compiles a graph, a llama.cpp slot may
still be loading, a gateway may not have an upstream yet. The gap between "ready" and "first
token" is a figure users want, so this probe never gives up silently: it retries a tiny
streamed chat request until a content chunk arrives or the deadline passes, and records every
failed attempt (epoch time, HTTP status, error class, detail).

Time base: ``FirstTokenProbe.t_*`` are Unix epoch seconds; ``elapsed_s`` values are
monotonic seconds since the probe began.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from faultkit.inventory import Node

#: Pause between two failed attempts (seconds). Short: the gap being measured is often < 1 s.
RETRY_INTERVAL_S = 0.25
#: Upper bound of one attempt, so that one hung request cannot eat the whole deadline.
ATTEMPT_TIMEOUT_S = 15.0


@dataclass(frozen=True, slots=True)
class FirstTokenAttempt:
    """One failed attempt: when it was sent, how long it took, and how it failed."""

    t: float
    elapsed_s: float
    http_status: int | None
    error_class: str
    detail: str


@dataclass(slots=True)
class FirstTokenProbe:
    """Outcome of :func:`probe_first_token`.

    ``t_first_token`` is when the first content chunk arrived (None: never within the
    deadline, and ``finding`` says so with the last failure).
    """

    t_start: float
    deadline_s: float
    t_first_token: float | None = None
    attempts: list[FirstTokenAttempt] = field(default_factory=list)

    @property
    def served(self) -> bool:
        return self.t_first_token is not None

    @property
    def finding(self) -> str | None:
        if self.served:
            return None
        last = self.attempts[-1] if self.attempts else None
        how = f"; last attempt: {last.error_class} ({last.detail})" if last else ""
        return (
            f"no first token within {self.deadline_s:g} s after the node reported ready "
            f"({len(self.attempts)} attempts{how})"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "t_start": self.t_start,
            "deadline_s": self.deadline_s,
            "t_first_token": self.t_first_token,
            "attempts": [asdict(a) for a in self.attempts],
            "finding": self.finding,
        }


def _request_body(node: Node) -> dict[str, Any]:
    return {
        "model": node.model,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 2,
        "stream": True,
    }


def _has_content(line: str) -> bool:
    """True for an SSE data line whose first choice carries non-empty (reasoning) content."""
    if not line.startswith("data:"):
        return False
    payload = line[5:].strip()
    if not payload or payload == "[DONE]":
        return False
    try:
        chunk = json.loads(payload)
    except json.JSONDecodeError:
        return False
    choices = chunk.get("choices") if isinstance(chunk, dict) else None
    if not choices or not isinstance(choices[0], dict):
        return False
    delta = choices[0].get("delta") or {}
    text = choices[0].get("text")  # the completions API
    return bool(delta.get("content") or delta.get("reasoning_content") or text)


async def _attempt(
    client: httpx.AsyncClient, node: Node, timeout_s: float
) -> tuple[bool, int | None, str, str]:
    """One streamed request: (got a content chunk, HTTP status, error class, detail)."""
    headers = {"Authorization": f"Bearer {key}"} if (key := node.api_key()) else {}
    try:
        async with client.stream(
            "POST",
            node.base_url + "/v1/chat/completions",
            json=_request_body(node),
            headers=headers,
            timeout=timeout_s,
        ) as response:
            if response.status_code != 200:
                body = (await response.aread())[:160].decode("utf-8", "replace")
                cls = (
                    "http_429"
                    if response.status_code == 429
                    else ("http_4xx" if response.status_code < 500 else "http_5xx")
                )
                return False, response.status_code, cls, body.strip() or "(empty body)"
            async for line in response.aiter_lines():
                if _has_content(line):
                    return True, 200, "", ""
                if line.startswith("data:") and '"error"' in line:
                    return False, 200, "stream_error", line[5:].strip()[:160]
            return False, 200, "truncated", "stream ended without a content chunk"
    except httpx.ConnectError as exc:
        cls = "refused" if "refused" in str(exc).lower() else "connect_error"
        return False, None, cls, str(exc)[:160]
    except httpx.TimeoutException as exc:
        return False, None, "timeout", type(exc).__name__
    except httpx.HTTPError as exc:
        return False, None, "reset", f"{type(exc).__name__}: {exc}"[:160]


async def probe_first_token(
    node: Node,
    *,
    deadline_s: float,
    transport: httpx.AsyncBaseTransport | None = None,
) -> FirstTokenProbe:
    """Retry a tiny streamed chat request until a content chunk arrives (or the deadline).

    Never raises for a sick node: failures are recorded in ``attempts``. ``transport`` is
    for tests (``httpx.MockTransport``).
    """
    result = FirstTokenProbe(t_start=time.time(), deadline_s=deadline_s)
    start = time.monotonic()
    async with httpx.AsyncClient(transport=transport) as client:
        while True:
            left = deadline_s - (time.monotonic() - start)
            if left <= 0:
                return result
            t_sent, sent_mono = time.time(), time.monotonic()
            ok, status, cls, detail = await _attempt(
                client, node, min(ATTEMPT_TIMEOUT_S, max(left, 0.5))
            )
            if ok:
                result.t_first_token = time.time()
                return result
            result.attempts.append(
                FirstTokenAttempt(
                    t=t_sent,
                    elapsed_s=round(sent_mono - start, 3),
                    http_status=status,
                    error_class=cls,
                    detail=detail,
                )
            )
            await asyncio.sleep(min(RETRY_INTERVAL_S, max(0.0, left)))
