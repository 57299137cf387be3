"""Inventory validation: every malformed document gives a clear error naming line and field."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from faultkit.errors import InventoryError
from faultkit.inventory import load_inventory, parse_inventory
from tests.paths import REPO

GOOD = """\
prometheus:
  url: http://127.0.0.1:9090
nodes:
  - name: a
    engine: vllm
    base_url: http://127.0.0.1:8000
    model: m
    docker: {container: a}
    prometheus: {job: a}
    serving_config: good
    faults: [kill, pause]
    slo: {ttft_s: 1.0}
  - name: b
    engine: sim
    personality: sglang
    base_url: http://127.0.0.1:8001/
    model: m
    protected: true
    faults: ["*"]
serving_configs:
  good: {image: img, command: [serve], memory: 2g}
"""


def errors_of(text: str) -> list[str]:
    with pytest.raises(InventoryError) as info:
        parse_inventory(text, source="inv.yaml")
    return info.value.problems


def test_good_inventory_loads_with_defaults_and_overrides() -> None:
    inv = parse_inventory(GOOD, source="inv.yaml")
    a, b = inv.nodes
    assert a.base_url == "http://127.0.0.1:8000"
    assert b.base_url == "http://127.0.0.1:8001"  # trailing slash dropped
    assert inv.slo_for(a).ttft_s == 1.0
    assert inv.slo_for(b).ttft_s == inv.slo.ttft_s
    assert a.allows("kill") and not a.allows("partition")
    assert not b.allows("kill"), "protected nodes refuse every fault"
    assert b.profile_engine == "sglang"
    assert inv.serving_config("good").memory == "2g"


def test_typo_key_names_line_and_allowed_keys() -> None:
    problems = errors_of(GOOD.replace("    model: m\n    docker", "    modle: m\n    docker"))
    assert any(p.startswith("inv.yaml:7 nodes[0].modle: unknown key") for p in problems), problems
    assert any("nodes[0].model: Field required" in p for p in problems), problems


def test_bad_value_shows_value_and_allowed() -> None:
    (problem,) = errors_of(GOOD.replace("engine: vllm", "engine: vlm"))
    assert problem.startswith("inv.yaml:5 nodes[0].engine:")
    assert "'vlm'" in problem and "vllm" in problem


def test_unknown_fault_and_serving_config_are_errors() -> None:
    (problem,) = errors_of(GOOD.replace("[kill, pause]", "[kill, paws]"))
    assert "unknown fault 'paws'" in problem and "inv.yaml:11" in problem
    (problem,) = errors_of(GOOD.replace("serving_config: good", "serving_config: gold"))
    assert "'gold'" in problem and "have: good" in problem


def test_docker_host_scheme_checked() -> None:
    (problem,) = errors_of(
        GOOD.replace("docker: {container: a}", "docker: {container: a, host: http://x}")
    )
    assert "nodes[0].docker.host" in problem and "unix://" in problem


def test_not_yaml_and_not_a_mapping() -> None:
    (problem,) = errors_of("nodes: [\n  - a: b\n")
    assert problem.startswith("inv.yaml:") and "not valid YAML" in problem
    (problem,) = errors_of("- just\n- a list\n")
    assert "must be a mapping" in problem


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="no such inventory file"):
        load_inventory(tmp_path / "nope.yaml")


def test_testbed_inventory_is_valid() -> None:
    inv = load_inventory(REPO / "testbed" / "inventory.yaml")
    assert "llama" in inv.node_names
    for node in inv.nodes:
        assert node.base_url.startswith("http://127.0.0.1:"), "the lab talks to loopback only"


# Hypothesis: arbitrary YAML-ish documents and mutations of a good one never crash.
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10**6),
    st.floats(allow_nan=True),
    st.text(string.printable, max_size=12),
)
_values = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.text(string.ascii_letters + "_", min_size=1, max_size=10), children, max_size=4
        ),
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(doc=_values)
def test_any_document_gives_clear_error_or_loads(doc: object) -> None:
    text = yaml.safe_dump(doc)
    try:
        parse_inventory(text, source="gen.yaml")
    except InventoryError as exc:
        assert exc.problems and all(p.startswith("gen.yaml") for p in exc.problems)


@settings(max_examples=150, deadline=None)
@given(
    path=st.lists(
        st.sampled_from(
            [
                "nodes",
                0,
                1,
                "docker",
                "slo",
                "faults",
                "serving_configs",
                "good",
                "prometheus",
                "engine",
                "memory",
                "url",
            ]
        ),
        min_size=1,
        max_size=3,
    ),
    value=_values,
)
def test_mutated_good_inventory_gives_clear_error_or_loads(
    path: list[object], value: object
) -> None:
    doc = yaml.safe_load(GOOD)
    target = doc
    for key in path[:-1]:
        try:
            target = target[key]
        except (KeyError, IndexError, TypeError):
            return
    try:
        target[path[-1]] = value
    except (IndexError, TypeError):
        return
    try:
        parse_inventory(yaml.safe_dump(doc), source="gen.yaml")
    except InventoryError as exc:
        assert exc.problems and all(p.startswith("gen.yaml") for p in exc.problems), exc.problems
