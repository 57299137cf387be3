"""A serving config's CPU weight (``cpu_shares``): read back from Docker, kept by a rollout,
and hashed only when set (a config without it hashes as it did before faultkit knew it)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from faultkit.docker.containers import ContainerSpec, _spec_from_attrs, spec_from_json, spec_to_json
from faultkit.faults.registry import make_fault
from faultkit.faults.rollout import Rollout
from faultkit.inventory import ServingConfig, config_hash, parse_inventory
from tests.unit.inventory_text import one_node_inventory

#: the CLI tests' one-node inventory (node ``n``), with configs that set a weight or do not
INVENTORY = one_node_inventory() + (
    "  weighted: {image: img, command: [serve], cpu_shares: 8192}\n"
    "  plain: {image: img, command: [serve, --other]}\n"
    "  lighter: {image: img, command: [serve], cpu_shares: 512}\n"
)


def test_docker_inspect_output_gives_the_weight_and_zero_means_the_default() -> None:
    assert _spec_from_attrs({"HostConfig": {"CpuShares": 8192}}).cpu_shares == 8192
    assert _spec_from_attrs({"HostConfig": {"CpuShares": 0}}).cpu_shares is None
    assert _spec_from_attrs({"HostConfig": {}}).cpu_shares is None


def test_the_fault_journal_keeps_the_weight_and_reads_older_entries_without_it() -> None:
    spec = ContainerSpec(name="gw", image="img", cpu_shares=8192)
    assert spec_from_json(spec_to_json(spec)).cpu_shares == 8192
    older = spec_to_json(ContainerSpec(name="gw", image="img"))
    del older["cpu_shares"]
    assert spec_from_json(older).cpu_shares is None


@pytest.mark.parametrize(("config", "running", "expected"), [
    ("plain", 8192, 8192),     # a candidate that says nothing keeps the running weight
    ("lighter", 8192, 512),    # one that says runs with its own
    ("weighted", None, 8192),
])
def test_a_rollout_candidate_runs_with_its_configs_weight_else_the_running_one(
    config: str, running: int | None, expected: int
) -> None:
    inventory = parse_inventory(INVENTORY)
    rollout = make_fault("rollout", "n", inventory=inventory, config=config)
    assert isinstance(rollout, Rollout)
    rollout._previous = ContainerSpec(name="faultkit-test-n", image="img", command=("serve",),
                                      cpu_shares=running)
    assert rollout._candidate().cpu_shares == expected


def test_a_config_hashes_the_weight_only_when_it_sets_it() -> None:
    plain = ServingConfig(image="img", command=["serve"])
    # pinned: the hash run.json and the lab's containers carry for this config before
    # cpu_shares existed; a change here would recreate every lab container for nothing
    assert config_hash(plain) == "fb4fa1d3f0a0"
    weighted = plain.model_copy(update={"cpu_shares": 8192})
    assert config_hash(weighted) != config_hash(plain)
    assert config_hash(weighted) != config_hash(plain.model_copy(update={"cpu_shares": 512}))


def test_a_weight_outside_dockers_range_is_refused() -> None:
    with pytest.raises(ValidationError, match="cpu_shares"):
        ServingConfig(image="img", cpu_shares=1)
