"""The gate's capability comparison (faultkit.gate.capability): which drops fail, what the
gate says, gate.md's table, and the figures read from a real simulator on loopback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from faultkit.gate.capability import (
    KV_RATIO_MIN,
    Capabilities,
    capability_regressions,
    read_capabilities,
)
from faultkit.gate.steady import SteadyPhase
from faultkit.inventory import Inventory, Node
from faultkit.load.profile import BACKGROUND_PROFILE
from faultkit.rundir import GateResult
from reports import render_gate
from reports.steady import capability_view
from tests.unit.simnode_helpers import running_node

SRC = "/v1/models max_model_len"
KV = "vllm:cache_config_info kv_cache_size_tokens"


def caps(context: int | None, kv: int | None) -> Capabilities:
    return Capabilities(context, SRC if context else "not read: no answer",
                        kv, KV if kv else "not read: engine llamacpp states no KV cache size")


def test_any_drop_of_the_context_limit_fails() -> None:
    assert capability_regressions(caps(4096, None), caps(4096, None)) == []
    assert capability_regressions(caps(4096, None), caps(8192, None)) == []  # more: fine
    (why,) = capability_regressions(caps(4096, None), caps(4095, None))
    assert why == ("context limit per request 4,095 tokens vs 4,096 on the current config: "
                   "prompts between them would be rejected")


def test_a_kv_cache_below_the_band_fails_with_the_sequences_it_holds() -> None:
    just_inside = int(16384 * KV_RATIO_MIN) + 1
    assert capability_regressions(caps(1024, 16384), caps(1024, just_inside)) == []
    (why,) = capability_regressions(caps(1024, 16384), caps(1024, 2048))
    assert why == ("KV cache 2,048 tokens vs 16,384 on the current config (×0.12, below "
                   "×0.9): 16 → 2 sequences of the 1,024-token limit at once")


def test_a_figure_not_read_on_either_side_is_not_judged() -> None:
    assert capability_regressions(caps(None, None), caps(1024, 2048)) == []
    assert capability_regressions(caps(4096, 16384), caps(None, None)) == []


def _phase() -> SteadyPhase:
    node = Node(name="n", engine="sim", personality="vllm", base_url="http://127.0.0.1:9",
                model="m")
    inventory = Inventory(nodes=[node], prometheus={"url": "http://127.0.0.1:9"})
    return SteadyPhase(node, inventory, 30.0, BACKGROUND_PROFILE, say=lambda _: None,
                       runs_dir=Path("/nonexistent/steady"), compare_capabilities=True)


def test_the_gate_says_what_the_candidate_serves_less_of_and_gate_md_shows_both(
    tmp_path: Path,
) -> None:
    phase = _phase()
    phase.capabilities = {"current": caps(4096, 16384), "candidate": caps(2048, 16384)}
    why = phase.capability_why("short-ctx")
    assert why is not None and why.startswith(
        "short-ctx serves less than the current config: context limit per request 2,048")
    data: dict[str, Any] = {"node": "n", "candidate": "short-ctx", "current": "good",
                            "decision": "fail", "why": why, "scenarios": [],
                            "steady_state": phase.to_json()}
    md = render_gate(GateResult.from_json(data), tmp_path / "gate.md").read_text()
    assert "### Capabilities" in md
    assert "| context limit per request | 4,096 tokens | 2,048 tokens |" in md
    assert "| KV cache | 16,384 tokens | 16,384 tokens |" in md
    assert "**context limit per request 2,048 tokens vs 4,096" in md
    phase.capabilities["candidate"] = caps(4096, 16384)
    assert phase.capability_why("good2") is None
    phase.prometheus_url = None  # not compared: gate.json says so, gate.md shows nothing
    assert phase.to_json()["capabilities"] is None


async def test_the_context_limit_is_read_from_the_engine_and_a_missing_kv_says_why(
    tmp_path: Path,
) -> None:
    async with running_node(tmp_path, max_model_len=2048) as sim:
        node = Node(name="n", engine="sim", personality="vllm", base_url=sim.url,
                    model="sim-model")
        found = await read_capabilities(node, "http://127.0.0.1:9")  # no Prometheus there
    assert found.context_tokens == 2048 and "max_model_len" in found.context_source
    assert found.kv_cache_tokens is None and found.kv_source.startswith("not read: ")


def test_fewer_sequences_at_once_fail() -> None:
    """llama.cpp serves a fixed number of slots: one fewer queues the users beyond it."""
    two, one = (Capabilities(256, "/props", None, "not read", n, "/props: total_slots")
                for n in (2, 1))
    assert capability_regressions(one, two) == []  # more slots: fine
    (why,) = capability_regressions(two, one)
    assert why == ("sequences at once 1 vs 2 on the current config: users beyond 1 at a time "
                   "would queue")


async def test_llama_cpp_states_its_slots_and_the_inventory_override_does_not(
    tmp_path: Path,
) -> None:
    """The slots come from llama-server's /props (a loopback stand-in answering as it
    does); a node whose context_limit the inventory overrides states no capability of
    the config, so its sequences are not compared."""
    from tests.unit.json_server import JsonServer

    props = {"default_generation_settings": {"n_ctx": 256}, "total_slots": 2}
    with JsonServer(lambda path, _q: props if path == "/props" else None) as server:
        node = Node(name="n", engine="llamacpp", base_url=server.url, model="m")
        found = await read_capabilities(node, "http://127.0.0.1:9")
        overridden = Node(name="n", engine="llamacpp", base_url=server.url, model="m",
                          context_limit=256, max_concurrency=4)
        declared = await read_capabilities(overridden, "http://127.0.0.1:9")
    assert (found.context_tokens, found.sequences) == (256, 2)
    assert found.sequences_source.endswith("total_slots")
    assert declared.sequences is None and declared.sequences_source == "not stated by the engine"
    md_rows = capability_view({"current": found.to_json(), "candidate": declared.to_json(),
                               "regressions": []})
    assert md_rows is not None
    assert {"label": "sequences at once", "current": "2",
            "candidate": "not stated by the engine"} in md_rows["rows"]
