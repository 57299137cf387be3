"""Shared helpers for the simnode unit tests: in-process nodes, SSE parsing, truth files."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from testbed.simnode import SimConfig, SimNode
from testbed.simnode.truth import parse_truth


@dataclass
class Running:
    node: SimNode
    url: str
    exits: list[int] = field(default_factory=list)
    truth: Path | None = None

    def truth_events(self) -> list[dict[str, Any]]:
        assert self.truth is not None
        return read_truth(self.truth)


@asynccontextmanager
async def running_node(tmp_path: Path, **overrides: Any) -> AsyncIterator[Running]:
    """A node on 127.0.0.1, ephemeral port, no load delay; ``exit_fn`` only records codes."""
    truth = tmp_path / f"truth-{overrides.get('personality', 'vllm')}.jsonl"
    cfg = replace(SimConfig(port=0, load_seconds=0.0, admin=True, truth_file=str(truth)),
                  **overrides)
    exits: list[int] = []
    node = SimNode(cfg, exit_fn=exits.append)
    await node.start()
    try:
        yield Running(node, f"http://127.0.0.1:{node.port}", exits, truth)
    finally:
        await node.stop()


def read_truth(path: Path) -> list[dict[str, Any]]:
    events, _cut_short = parse_truth(path.read_text())
    return events


def parse_sse(body: str) -> list[str]:
    """Split an SSE body into ``data:`` payloads; asserts the framing is exactly engine-like."""
    assert body.endswith("\n\n"), "stream must end with a blank line"
    frames = body[:-2].split("\n\n")
    out = []
    for frame in frames:
        assert frame.startswith("data: "), f"not a data frame: {frame[:80]!r}"
        assert "\n" not in frame
        out.append(frame[len("data: "):])
    return out


def events_named(events: list[dict[str, Any]], name: str,
                 pred: Callable[[dict[str, Any]], bool] = lambda e: True) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == name and pred(e)]
