"""Smoke: every node streams a completion to [DONE] and Prometheus scrapes it.

The first thing to run against a new inventory: if this fails, no fault scenario can mean
anything.
"""

from __future__ import annotations

import json

import httpx
import pytest

from faultkit import Inventory, Node
from faultkit.load.profile import Target


def _headers(node: Node) -> dict[str, str]:
    key = node.api_key()
    return {"Authorization": f"Bearer {key}"} if key else {}


def test_streams_a_completion(node: Node) -> None:
    payload = {
        "model": node.model,
        "messages": [{"role": "user", "content": "Say hello."}],
        "max_tokens": 8,
        "stream": True,
    }
    # a sampled answer may end at its first token (EOS), and then carries no content: ask
    # for the tokens, as the load generator does, where the engine takes the flag
    if Target.from_node(node).supports_ignore_eos:
        payload["ignore_eos"] = True
    frames: list[str] = []
    with httpx.stream(
        "POST",
        f"{node.base_url}/v1/chat/completions",
        json=payload,
        headers=_headers(node),
        timeout=60,
    ) as response:
        assert response.status_code == 200, response.read()[:300]
        frames = [
            line.removeprefix("data: ")
            for line in response.iter_lines()
            if line.startswith("data: ")
        ]
    assert frames and frames[-1] == "[DONE]", f"stream did not end with [DONE]: {frames[-3:]}"
    chunks = [json.loads(f) for f in frames[:-1]]
    assert not any("error" in c for c in chunks), chunks
    assert any((c.get("choices") or [{}])[0].get("delta", {}).get("content") for c in chunks)


def test_is_scraped_by_prometheus(node: Node, faultkit_inventory: Inventory) -> None:
    if node.prometheus is None:
        pytest.skip(f"node {node.name} names no Prometheus job in the inventory")
    url = faultkit_inventory.prometheus.url
    try:
        body = httpx.get(
            f"{url}/api/v1/query", params={"query": f'up{{job="{node.prometheus.job}"}}'}, timeout=5
        ).json()
    except httpx.HTTPError as exc:
        pytest.fail(f"Prometheus at {url} is unreachable: {exc}")
    result = body["data"]["result"]
    assert result, f"Prometheus has no up series for job {node.prometheus.job!r}"
    assert all(r["value"][1] == "1" for r in result), result
