"""Inventory rules that keep a protected node protected: no key given twice in one mapping,
no two nodes naming the same container on the same Docker host."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from faultkit.cli import cli
from faultkit.errors import InventoryError
from faultkit.inventory import Inventory, Node, load_inventory, parse_inventory

NODE = """\
  - name: {name}
    engine: llamacpp
    base_url: http://127.0.0.1:9
    model: m
    docker: {{container: {container}}}
    faults: [kill]
"""


def line_of(text: str, needle: str, nth: int = 1) -> int:
    hits = [i for i, line in enumerate(text.splitlines(), 1) if needle in line]
    return hits[nth - 1]


def test_duplicate_key_names_file_line_and_key(tmp_path: Path) -> None:
    text = "nodes:\n" + NODE.format(name="a", container="a") + (
        "    protected: true\n    protected: false\n"
    )
    path = tmp_path / "inv.yaml"
    path.write_text(text)
    with pytest.raises(InventoryError) as info:
        load_inventory(path)
    second = line_of(text, "protected", 2)
    first = line_of(text, "protected", 1)
    assert info.value.problems == [
        f"{path}:{second} nodes[0].protected: duplicate key 'protected' (first given at line "
        f"{first}); give each key once"
    ]


@pytest.mark.parametrize("text", [
    "prometheus: {url: http://a:9090}\nprometheus: {url: http://b:9090}\nnodes: []\n",
    "nodes:\n" + NODE.format(name="a", container="a").replace(
        "faults: [kill]", "faults: [kill]\n    docker: {container: b}"),
    "slo: {ttft_s: 1, ttft_s: 2}\nnodes:\n" + NODE.format(name="a", container="a"),
])
def test_duplicate_keys_anywhere_are_errors(text: str) -> None:
    with pytest.raises(InventoryError, match="duplicate key"):
        parse_inventory(text, source="x.yaml")


def test_yaml_merge_keys_are_not_duplicates() -> None:
    text = (
        "nodes:\n"
        "  - &base\n    name: a\n    engine: llamacpp\n    base_url: http://127.0.0.1:9\n"
        "    model: m\n"
        "  - <<: *base\n    name: b\n"
    )
    assert parse_inventory(text).node_names == ["a", "b"]


@pytest.mark.parametrize(("second", "host"), [
    ("a", ""),
    ("/a", ""),  # Docker's own spelling of a container name
    ("a", "\n    docker: {host: unix:///var/run/docker.sock/, container: a}"),
])
def test_two_nodes_naming_one_container_is_an_error(second: str, host: str) -> None:
    guarded = NODE.format(name="guarded", container="a") + "    protected: true\n"
    alias = NODE.format(name="alias", container=second)
    if host:
        alias = alias.replace(f"    docker: {{container: {second}}}", host.lstrip("\n"))
    text = "nodes:\n" + guarded + alias
    with pytest.raises(InventoryError) as info:
        parse_inventory(text, source="x.yaml")
    (problem,) = info.value.problems
    line = line_of(text, "container", 2)
    assert problem.startswith(f"x.yaml:{line} nodes[1].docker.container: node 'alias' names "
                              "container 'a' on unix:///var/run/docker.sock, which node "
                              "'guarded' already names")


def test_same_container_name_on_other_hosts_is_fine() -> None:
    text = "nodes:\n" + NODE.format(name="a", container="c") + NODE.format(
        name="b", container="c").replace(
        "docker: {container: c}", "docker: {host: tcp://gpu-2:2375, container: c}")
    assert parse_inventory(text).node_names == ["a", "b"]


def test_inventory_built_in_code_refuses_aliases_too() -> None:
    def node(name: str) -> Node:
        return Node(name=name, engine="llamacpp", base_url="http://127.0.0.1:9", model="m",
                    docker={"container": "x"})

    with pytest.raises(ValueError, match="node 'b' names container 'x'"):
        Inventory(nodes=[node("a"), node("b")])


def test_inventory_check_reports_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text("nodes:\n" + NODE.format(name="a", container="a")
                    + "    faults: [pause]\n")
    result = CliRunner().invoke(cli, ["inventory", "check", str(path)])
    assert result.exit_code == 1
    assert f"{path}:8 nodes[0].faults: duplicate key 'faults' (first given at line 7)" in (
        result.stderr)
