"""Gateway nodes in the inventory: ``kind: gateway``, ``engine: litellm``, ``upstreams``.

A broken ``upstreams`` entry is one problem at its own line; ``inventory check`` prints
exactly that line (exit 1, README "Exit codes"), every other command exits 2 with it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from faultkit.cli import cli
from faultkit.errors import InventoryError
from faultkit.inventory import Inventory, Node, parse_inventory, upstream_problems

HEAD = """\
nodes:
  - name: a
    engine: sim
    personality: vllm
    base_url: http://127.0.0.1:8001
    model: m
  - name: b
    engine: llamacpp
    base_url: http://127.0.0.1:8002
    model: m
"""
GATEWAY = """\
  - name: {name}
    kind: gateway
    engine: litellm
    base_url: {url}
    model: chat
    health_path: /health/readiness
    upstreams:
{upstreams}"""


def gateway(upstreams: list[str], name: str = "gw", url: str = "http://127.0.0.1:4000") -> str:
    items = "".join(f"      - {u}\n" for u in upstreams)
    return GATEWAY.format(name=name, url=url, upstreams=items)


def line_of(text: str, needle: str, nth: int = 1) -> int:
    """1-based line of the ``nth`` line containing ``needle``."""
    hits = [i for i, line in enumerate(text.splitlines(), 1) if needle in line]
    return hits[nth - 1]


def problems(text: str) -> list[str]:
    with pytest.raises(InventoryError) as info:
        parse_inventory(text, source="inv.yaml")
    return info.value.problems


def test_a_gateway_over_two_engines_is_valid() -> None:
    inventory = parse_inventory(HEAD + gateway(["a", "b"]))
    gw = inventory.node("gw")
    assert (gw.kind, gw.engine, gw.upstreams) == ("gateway", "litellm", ["a", "b"])
    assert inventory.node("a").kind == "engine"


def test_unknown_upstream_is_one_error_at_its_line() -> None:
    text = HEAD + gateway(["a", "nope"])
    assert problems(text) == [
        f"inv.yaml:{line_of(text, '- nope')} nodes[2].upstreams[1]: gateway 'gw' lists "
        "upstream 'nope', which is not a node of this inventory (engine nodes: a, b)"
    ]


def test_a_gateway_listing_itself_is_refused() -> None:
    text = HEAD + gateway(["gw"])
    assert problems(text) == [
        f"inv.yaml:{line_of(text, '- gw')} nodes[2].upstreams[0]: gateway 'gw' lists itself "
        "as an upstream; list engine nodes"
    ]


def test_an_upstream_that_is_a_gateway_is_refused() -> None:
    text = HEAD + gateway(["a"]) + gateway(["gw"], name="gw2", url="http://127.0.0.1:4001")
    assert problems(text) == [
        f"inv.yaml:{line_of(text, '- gw')} nodes[3].upstreams[0]: gateway 'gw2' lists upstream "
        "'gw', which is a gateway itself; gateways are not chained: list its upstreams instead"
    ]


def test_an_upstream_listed_twice_is_refused() -> None:
    text = HEAD + gateway(["a", "b", "a"])
    assert problems(text) == [
        f"inv.yaml:{line_of(text, '- a', nth=2)} nodes[2].upstreams[2]: gateway 'gw' lists "
        "upstream 'a' twice; give it once"
    ]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("engine: litellm", "engine: vllm"), "a gateway's engine must be litellm (got 'vllm')"),
        (("kind: gateway", "kind: engine"), "engine 'litellm' is a gateway: set kind: gateway"),
        (("kind: gateway", "kind: router"), "Input should be 'engine' or 'gateway'"),
    ],
)
def test_kind_and_engine_must_agree(edit: tuple[str, str], message: str) -> None:
    text = HEAD + gateway(["a"]).replace(*edit)
    found = problems(text)
    assert len(found) == 1 and message in found[0], found
    assert found[0].startswith("inv.yaml:")


def test_a_gateway_needs_upstreams_and_an_engine_has_none() -> None:
    empty = HEAD + gateway([]).replace("    upstreams:\n", "    upstreams: []\n")
    assert "a gateway needs upstreams" in problems(empty)[0]
    engine_with = HEAD.replace("    model: m\n", "    model: m\n    upstreams: [b]\n", 1)
    assert "only a gateway (kind: gateway) has upstreams" in problems(engine_with)[0]


def test_inventory_built_in_code_refuses_a_chain_too() -> None:
    def gw(name: str, upstreams: list[str]) -> Node:
        return Node(
            name=name,
            kind="gateway",
            engine="litellm",
            base_url="http://127.0.0.1:9",
            model="chat",
            upstreams=upstreams,
        )

    engine = Node(name="a", engine="llamacpp", base_url="http://127.0.0.1:8", model="m")
    with pytest.raises(ValueError, match="'g1', which is a gateway itself"):
        Inventory(nodes=[engine, gw("g1", ["a"]), gw("g2", ["g1"])])
    with pytest.raises(ValueError, match="'zz', which is not a node"):
        Inventory(nodes=[engine, gw("g1", ["zz"])])


def test_upstream_problems_ignores_engine_nodes() -> None:
    # an engine's upstreams are refused by Node itself; this check only reads gateways'
    assert upstream_problems([("a", "engine", ["nope"]), ("g", "gateway", ["a"])]) == []


def test_malformed_upstreams_are_left_to_validation() -> None:
    text = HEAD + gateway(["a"]).replace("      - a\n", "      - {x: 1}\n")
    found = problems(text)
    assert len(found) == 1 and "nodes[2].upstreams[0]" in found[0], found
    assert "Input should be a valid string" in found[0]


def test_inventory_check_prints_one_line_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    text = HEAD + gateway(["a", "nope"])
    path.write_text(text)
    result = CliRunner().invoke(cli, ["inventory", "check", str(path)])
    assert result.exit_code == 1  # "a check found problems" (README, exit codes)
    assert result.stderr.splitlines() == [
        f"{path}:{line_of(text, '- nope')} nodes[2].upstreams[1]: gateway 'gw' lists upstream "
        "'nope', which is not a node of this inventory (engine nodes: a, b)"
    ]


def test_other_commands_refuse_the_inventory_as_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text(HEAD + gateway(["gw"]))
    result = CliRunner().invoke(
        cli, ["inject", "kill", "--node", "a", "--inventory", str(path), "--dry-run"]
    )
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {path}:"), lines
    assert "gateway 'gw' lists itself as an upstream" in lines[0]
