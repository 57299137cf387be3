"""The simulator's leak knob (``--leak-bytes-per-request``, the testbed's KNOWN BAD
sim-vllm-bad-leak): every accepted request keeps that much host memory for good, and the
truth file says how much is held — the evidence a soak's memory trend is checked against.

That the kept bytes are resident (written, not lazy zero pages) is shown where it can be
measured apart from everything else: in the node's own container, whose anonymous memory
grows at the truth file's rate (``tests/e2e``: the soak fails sim-vllm-bad-leak). In this
process the allocator may hand out memory an earlier test freed, so its RSS says nothing."""

from __future__ import annotations

from pathlib import Path

import httpx

from testbed.simnode.config import parse_args
from tests.unit.simnode_helpers import events_named, running_node

LEAK = 1 << 20


async def test_each_request_keeps_its_bytes_and_the_truth_counts_them(tmp_path: Path) -> None:
    async with running_node(tmp_path, leak_bytes_per_request=LEAK, zero_latency=True) as sim:
        async with httpx.AsyncClient(base_url=sim.url) as client:
            for _ in range(24):
                r = await client.post("/v1/completions", json={
                    "model": "sim-model", "prompt": "hello", "max_tokens": 2})
                assert r.status_code == 200
        held = [e["leaked_bytes"] for e in events_named(sim.truth_events(), "request_accepted")]
    assert held == [LEAK * (i + 1) for i in range(24)]


def test_the_flag_and_its_default() -> None:
    assert parse_args([]).leak_bytes_per_request == 0
    assert parse_args(["--leak-bytes-per-request", "262144"]).leak_bytes_per_request == 262144
